// SPDX-License-Identifier: GPL-2.0
/*
 * Address handles. A link has exactly one peer, so an address names either
 * that peer or one of our own GIDs (loopback); only the GIDs travel, in the
 * GRH extension of UD packets, so the receiver can report the source address.
 */
#include <rdma/ib_cache.h>

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
	return 0;
err:
	atomic_dec(&dev->nr_ahs);
	tbv_quota_uncharge(&obj->charge);
	return ret;
}

int tbv_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	tbv_quota_uncharge(&to_tbv_ah_obj(ibah)->charge);
	atomic_dec(&to_tbv_dev(ibah->device)->nr_ahs);
	return 0;
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
