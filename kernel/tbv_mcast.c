// SPDX-License-Identifier: GPL-2.0
/*
 * UD multicast groups: QPs attach to multicast GIDs. A UD packet to a
 * multicast GID (destination QPN 0xffffff) goes to the peer and to our own
 * attached QPs (tbv_req.c), and every attached QP of the receiving device gets
 * a copy (tbv_recv.c).
 */
#include <linux/slab.h>
#include <net/ipv6.h>

#include "tbv.h"

/* A multicast GID: ff00::/8, or for RoCE v2 over IPv4 a v4-mapped 224.0.0.0/4 address. */
bool tbv_gid_is_multicast(const u8 *gid)
{
	const struct in6_addr *a = (const struct in6_addr *)gid;

	if (ipv6_addr_v4mapped(a))
		return ipv4_is_multicast(a->s6_addr32[3]);
	return ipv6_addr_is_multicast(a);
}

static unsigned int tbv_mcast_group_members(struct tbv_dev *dev, const u8 *mgid)
{
	struct tbv_mcast_attach *a;
	unsigned int n = 0;

	list_for_each_entry(a, &dev->mcast_list, list)
		n += !memcmp(a->mgid, mgid, 16);
	return n;
}

int tbv_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	struct tbv_dev *dev = qp->dev;
	struct tbv_mcast_attach *a, *new;
	int ret = 0;

	if (ibqp->qp_type != IB_QPT_UD || !tbv_gid_is_multicast(gid->raw))
		return -EINVAL;
	new = kzalloc(sizeof(*new), GFP_KERNEL);
	if (!new)
		return -ENOMEM;
	memcpy(new->mgid, gid->raw, 16);
	new->qp = qp;

	spin_lock_bh(&dev->mcast_lock);
	list_for_each_entry(a, &dev->mcast_list, list) {
		if (a->qp == qp && !memcmp(a->mgid, gid->raw, 16))
			goto out;	/* attaching twice is not an error */
	}
	if (dev->nr_mcast_attach >= TBV_MAX_MCAST_ATTACH ||
	    tbv_mcast_group_members(dev, gid->raw) >= TBV_MAX_MCAST_QP_ATTACH) {
		ret = -ENOMEM;
		goto out;
	}
	list_add_tail(&new->list, &dev->mcast_list);
	dev->nr_mcast_attach++;
	new = NULL;
out:
	spin_unlock_bh(&dev->mcast_lock);
	kfree(new);
	return ret;
}

int tbv_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	struct tbv_dev *dev = qp->dev;
	struct tbv_mcast_attach *a, *found = NULL;

	spin_lock_bh(&dev->mcast_lock);
	list_for_each_entry(a, &dev->mcast_list, list) {
		if (a->qp == qp && !memcmp(a->mgid, gid->raw, 16)) {
			found = a;
			list_del(&a->list);
			dev->nr_mcast_attach--;
			break;
		}
	}
	spin_unlock_bh(&dev->mcast_lock);
	kfree(found);
	return found ? 0 : -EINVAL;
}

/* A destroyed QP leaves every group it is still in. */
void tbv_mcast_detach_all(struct tbv_qp *qp)
{
	struct tbv_dev *dev = qp->dev;
	struct tbv_mcast_attach *a, *tmp;
	LIST_HEAD(gone);

	spin_lock_bh(&dev->mcast_lock);
	list_for_each_entry_safe(a, tmp, &dev->mcast_list, list) {
		if (a->qp == qp) {
			list_move(&a->list, &gone);
			dev->nr_mcast_attach--;
		}
	}
	spin_unlock_bh(&dev->mcast_lock);
	list_for_each_entry_safe(a, tmp, &gone, list)
		kfree(a);
}
