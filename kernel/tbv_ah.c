// SPDX-License-Identifier: GPL-2.0
/*
 * Address handles. A link has exactly one peer, so an address names either
 * that peer or one of our own GIDs (loopback); only the GIDs travel, in the
 * GRH extension of UD packets, so the receiver can report the source address.
 *
 * A user's AH also gets a number, rdma_rxe's ah_num (docs/rxe-abi.md, 4.8):
 * the rxe provider writes it into the UD work requests of its rings, where the
 * kernel finds the AH by it (tbv_ah_get()). Never 0, which would mean an
 * address vector inline in the work request.
 */
#include <rdma/ib_cache.h>
#include <rdma/rdma_user_rxe.h>

#include "tbv.h"

/* Source and destination GID of @attr, and whether the destination is us. */
int tbv_resolve_gids(struct tbv_dev *dev, const struct rdma_ah_attr *attr, u8 *sgid,
		     u8 *dgid, bool *loopback)
{
	const struct ib_global_route *grh;
	const struct ib_gid_attr *found;

	if (!(rdma_ah_get_ah_flags(attr) & IB_AH_GRH))
		return -EINVAL;		/* RoCE addresses always carry a GRH */
	grh = rdma_ah_read_grh(attr);
	if (!grh->sgid_attr)
		return -EINVAL;
	memcpy(sgid, grh->sgid_attr->gid.raw, 16);
	memcpy(dgid, grh->dgid.raw, 16);
	found = rdma_find_gid_by_port(&dev->ibdev, &grh->dgid, grh->sgid_attr->gid_type,
				      rdma_ah_get_port_num(attr), NULL);
	*loopback = !IS_ERR(found);
	if (!IS_ERR(found))
		rdma_put_gid_attr(found);
	return 0;
}

static struct tbv_ah_obj *to_tbv_ah_obj(struct ib_ah *ibah)
{
	return container_of(to_tbv_ah(ibah), struct tbv_ah_obj, ah);
}

/*
 * Number a user's AH and tell the provider its number, if it left room for it
 * (older rxe providers leave none: they never put a number in a WQE).
 */
static int tbv_ah_number(struct tbv_dev *dev, struct tbv_ah_obj *obj, struct ib_udata *udata)
{
	struct rxe_create_ah_resp resp = {};
	u32 num;
	int ret;

	refcount_set(&obj->ref, 1);
	init_completion(&obj->released);
	/* reserved, not yet found: a failed reply must not leave it to anyone */
	ret = xa_alloc_bh(&dev->ahs, &num, NULL, xa_limit_32b, GFP_KERNEL);
	if (ret)
		return ret;
	if (udata->outlen >= sizeof(resp)) {
		resp.ah_num = num;
		ret = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (ret)
			goto release;
	}
	ret = xa_err(xa_store_bh(&dev->ahs, num, obj, GFP_KERNEL));
	if (ret)
		goto release;
	obj->num = num;
	return 0;
release:
	xa_erase_bh(&dev->ahs, num);
	return ret;
}

int tbv_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init, struct ib_udata *udata)
{
	struct tbv_dev *dev = to_tbv_dev(ibah->device);
	struct tbv_ah_obj *obj = to_tbv_ah_obj(ibah);
	struct tbv_ah *ah = &obj->ah;
	int ret;

	/* a kernel consumer's AH (no udata) may be made in atomic context: not charged */
	ret = tbv_quota_charge(&obj->charge, udata, TBV_QUOTA_AH);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_ahs) > TBV_MAX_AH) {
		ret = -ENOMEM;
		goto err;
	}
	ret = tbv_resolve_gids(dev, init->ah_attr, ah->sgid, ah->dgid, &ah->loopback);
	if (ret)
		goto err;
	if (udata) {
		ret = tbv_ah_number(dev, obj, udata);
		if (ret)
			goto err;
	}
	return 0;
err:
	atomic_dec(&dev->nr_ahs);
	tbv_quota_uncharge(&obj->charge);
	return ret;
}

int tbv_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct tbv_ah_obj *obj = to_tbv_ah_obj(ibah);
	struct tbv_dev *dev = to_tbv_dev(ibah->device);

	if (obj->num) {
		/* no new holders; the core frees the AH when we return: wait for the old ones */
		xa_erase_bh(&dev->ahs, obj->num);
		tbv_ah_put(&obj->ah);
		wait_for_completion(&obj->released);
	}
	tbv_quota_uncharge(&obj->charge);
	atomic_dec(&dev->nr_ahs);
	return 0;
}

/*
 * The AH numbered @ah_num if it belongs to @pd, with a reference that keeps it
 * from being destroyed until tbv_ah_put(); NULL if there is none.
 */
struct tbv_ah *tbv_ah_get(struct tbv_dev *dev, u32 ah_num, struct ib_pd *pd)
{
	struct tbv_ah_obj *obj;

	xa_lock_bh(&dev->ahs);
	obj = xa_load(&dev->ahs, ah_num);
	if (obj && (obj->ah.ibah.pd != pd || !refcount_inc_not_zero(&obj->ref)))
		obj = NULL;
	xa_unlock_bh(&dev->ahs);
	return obj ? &obj->ah : NULL;
}

void tbv_ah_put(struct tbv_ah *ah)
{
	struct tbv_ah_obj *obj = container_of(ah, struct tbv_ah_obj, ah);

	if (refcount_dec_and_test(&obj->ref))
		complete(&obj->released);
}

int tbv_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	struct tbv_ah *ah = to_tbv_ah(ibah);

	memset(attr, 0, sizeof(*attr));
	attr->type = ibah->type;
	rdma_ah_set_port_num(attr, 1);
	rdma_ah_set_grh(attr, NULL, 0, 0, 1, 0);
	rdma_ah_set_dgid_raw(attr, ah->dgid);
	return 0;
}
