// SPDX-License-Identifier: GPL-2.0
/*
 * Memory windows, type 1 and type 2: remote access to part of an MR, granted
 * by a bind WQE and withdrawn by rebinding (type 1, a zero length unbinds), by
 * a local or remote invalidation (type 2) or by deallocation. A remote access
 * through a window is checked against the window (rkey, PD, type 2: the QP it
 * was bound through, rights, range) and done under the window's lock, so a
 * bind or an invalidation is never half seen. A bound window counts in its
 * MR's nr_mws, and an MR with windows bound cannot be deregistered, so the MR
 * a window points to is always alive.
 */
#include <linux/random.h>

#include "tbv.h"

#define TBV_MW_INDEX(rkey)	((rkey) >> 8)

/* Rights a window can grant; a window granting remote write or atomics needs a writable MR. */
#define TBV_MW_ACCESS		(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | \
				 IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)

int tbv_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct tbv_dev *dev = to_tbv_dev(ibmw->device);
	struct tbv_mw *mw = to_tbv_mw(ibmw);
	int tries, ret;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	ret = tbv_quota_charge(&mw->charge, udata, TBV_QUOTA_MW);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_mws) > TBV_MAX_MW) {
		atomic_dec(&dev->nr_mws);
		tbv_quota_uncharge(&mw->charge);
		return -ENOMEM;
	}
	mw->dev = dev;
	spin_lock_init(&mw->lock);
	/* a random index, like MR keys: a peer cannot find windows by counting */
	ret = -EBUSY;
	for (tries = 0; tries < 16 && ret == -EBUSY; tries++) {
		u32 index = TBV_MW_INDEX(get_random_u32() | TBV_KEY_MW_BIT);

		ret = xa_insert_bh(&dev->mws, index, mw, GFP_KERNEL);
		if (!ret)
			ibmw->rkey = index << 8 | (get_random_u32() & 0xff);
	}
	if (ret) {
		atomic_dec(&dev->nr_mws);
		tbv_quota_uncharge(&mw->charge);
	}
	return ret;
}

/* Drop the binding (mw->lock held); returns the MR it held, to be released unlocked. */
static struct tbv_mr *tbv_mw_unbind_locked(struct tbv_mw *mw)
{
	struct tbv_mr *mr = mw->mr;

	mw->mr = NULL;
	mw->addr = 0;
	mw->length = 0;
	mw->access = 0;
	return mr;
}

static void tbv_mw_release_mr(struct tbv_mr *mr)
{
	if (mr)
		atomic_dec(&mr->nr_mws);
}

int tbv_dealloc_mw(struct ib_mw *ibmw)
{
	struct tbv_mw *mw = to_tbv_mw(ibmw);
	struct tbv_dev *dev = mw->dev;
	struct tbv_mr *mr;

	xa_erase_bh(&dev->mws, TBV_MW_INDEX(ibmw->rkey));
	/* RX finds windows under RCU and uses them under their lock: wait those out */
	synchronize_rcu();
	spin_lock_bh(&mw->lock);
	mr = tbv_mw_unbind_locked(mw);
	spin_unlock_bh(&mw->lock);
	tbv_mw_release_mr(mr);
	atomic_dec(&dev->nr_mws);
	tbv_quota_uncharge(&mw->charge);
	return 0;
}

/* The window @rkey names may be used by @qp for [va, va + len) with @access (lock held). */
static int tbv_mw_check(struct tbv_mw *mw, struct tbv_qp *qp, u32 rkey, u64 va, u64 len,
			int access)
{
	if (mw->ibmw.rkey != rkey || !mw->mr || mw->ibmw.pd != qp->ibqp.pd)
		return -EACCES;
	if (mw->ibmw.type == IB_MW_TYPE_2 && mw->qpn != qp->ibqp.qp_num)
		return -EACCES;
	if ((mw->access & access) != access)
		return -EACCES;
	if (!tbv_range_within(mw->addr, mw->length, va, len))
		return -EACCES;
	return 0;
}

/* A remote access through a window; called by tbv_rkey.c for keys with TBV_KEY_MW_BIT. */
int tbv_mw_remote(struct tbv_qp *qp, u32 rkey, u64 va, u64 len, int access, tbv_remote_fn fn,
		  void *arg)
{
	struct tbv_mw *mw;
	int ret = -EACCES;

	rcu_read_lock();
	mw = xa_load(&qp->dev->mws, TBV_MW_INDEX(rkey));
	if (mw) {
		spin_lock_bh(&mw->lock);
		ret = tbv_mw_check(mw, qp, rkey, va, len, access);
		if (!ret && fn)
			ret = fn(mw->mr, va, arg);
		spin_unlock_bh(&mw->lock);
	}
	rcu_read_unlock();
	return ret;
}

/* The MR a bind WQE names, checked for the bind; referenced, or NULL. */
static struct tbv_mr *tbv_mw_bind_mr(struct tbv_qp *qp, const struct tbv_send_wqe *wqe)
{
	int access = wqe->bind.access;
	struct tbv_mr *mr;

	if (access & ~TBV_MW_ACCESS)
		return NULL;	/* zero-based windows and other flags are not supported */
	mr = tbv_mr_get(qp->dev, wqe->bind.mr_lkey);
	if (!mr)
		return NULL;
	if (!mr->umem ||
	    tbv_mr_check(mr, qp->ibqp.pd, wqe->bind.addr, wqe->bind.length, IB_ACCESS_MW_BIND) ||
	    ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	     !(mr->access & IB_ACCESS_LOCAL_WRITE))) {
		tbv_mr_put(mr);
		return NULL;
	}
	return mr;
}

/*
 * Execute a BIND_MW WQE (sq_lock held): the window gets the WQE's new rkey and
 * the range and rights it names, or, type 1 with length 0, is unbound.
 * Returns IB_WC_SUCCESS or IB_WC_MW_BIND_ERR.
 */
enum ib_wc_status tbv_mw_bind(struct tbv_qp *qp, const struct tbv_send_wqe *wqe)
{
	u32 index = TBV_MW_INDEX(wqe->bind.mw_rkey);
	struct tbv_mr *mr = NULL, *old = NULL;
	enum ib_wc_status status = IB_WC_MW_BIND_ERR;
	bool unbind = false;
	struct tbv_mw *mw;

	if (!(wqe->bind.mw_rkey & TBV_KEY_MW_BIT) || TBV_MW_INDEX(wqe->bind.new_rkey) != index)
		return status;
	rcu_read_lock();
	mw = xa_load(&qp->dev->mws, index);
	if (!mw || mw->ibmw.pd != qp->ibqp.pd)
		goto out;
	if (mw->ibmw.type == IB_MW_TYPE_2 && qp->ibqp.qp_type != IB_QPT_RC &&
	    qp->ibqp.qp_type != IB_QPT_UC)
		goto out;
	unbind = mw->ibmw.type == IB_MW_TYPE_1 && !wqe->bind.length;
	if (!unbind) {
		mr = tbv_mw_bind_mr(qp, wqe);
		if (!mr)
			goto out;
		if (!atomic_inc_unless_negative(&mr->nr_mws)) {
			tbv_mr_put(mr);	/* being deregistered */
			goto out;
		}
	}
	spin_lock_bh(&mw->lock);
	if (mw->ibmw.type == IB_MW_TYPE_2 && mw->mr) {
		/* a bound type 2 window must be invalidated before it is bound again */
		spin_unlock_bh(&mw->lock);
		tbv_mw_release_mr(mr);
		tbv_mr_put(mr);
		goto out;
	}
	old = tbv_mw_unbind_locked(mw);
	if (mr) {
		mw->mr = mr;
		mw->addr = wqe->bind.addr;
		mw->length = wqe->bind.length;
		mw->access = wqe->bind.access;
		mw->qpn = qp->ibqp.qp_num;
	}
	mw->ibmw.rkey = wqe->bind.new_rkey;
	spin_unlock_bh(&mw->lock);
	tbv_mw_release_mr(old);
	if (mr)
		tbv_mr_put(mr);	/* the binding keeps it alive through nr_mws */
	status = IB_WC_SUCCESS;
out:
	rcu_read_unlock();
	return status;
}

/*
 * Invalidate the type 2 window @rkey names: locally (LOCAL_INV on a QP of its
 * PD) or by the peer (SEND_WITH_INV, only through the QP it was bound to).
 * Returns 0 or -EINVAL. MRs cannot be invalidated: we have no fast-registration
 * MRs.
 */
int tbv_mw_invalidate(struct tbv_qp *qp, u32 rkey, bool remote)
{
	struct tbv_mr *old = NULL;
	struct tbv_mw *mw;
	int ret = -EINVAL;

	if (!(rkey & TBV_KEY_MW_BIT))
		return ret;
	rcu_read_lock();
	mw = xa_load(&qp->dev->mws, TBV_MW_INDEX(rkey));
	if (mw) {
		spin_lock_bh(&mw->lock);
		if (mw->ibmw.rkey == rkey && mw->mr && mw->ibmw.type == IB_MW_TYPE_2 &&
		    mw->ibmw.pd == qp->ibqp.pd && (!remote || mw->qpn == qp->ibqp.qp_num)) {
			old = tbv_mw_unbind_locked(mw);
			ret = 0;
		}
		spin_unlock_bh(&mw->lock);
	}
	rcu_read_unlock();
	tbv_mw_release_mr(old);
	return ret;
}

/*
 * @qp is being destroyed: the type 2 windows bound through it are invalidated,
 * so a later QP that gets the same number never inherits them.
 */
void tbv_mw_qp_gone(struct tbv_qp *qp)
{
	unsigned long index;
	struct tbv_mw *mw;

	rcu_read_lock();
	xa_for_each(&qp->dev->mws, index, mw) {
		struct tbv_mr *old = NULL;

		spin_lock_bh(&mw->lock);
		if (mw->ibmw.type == IB_MW_TYPE_2 && mw->mr && mw->qpn == qp->ibqp.qp_num &&
		    mw->ibmw.pd == qp->ibqp.pd)
			old = tbv_mw_unbind_locked(mw);
		spin_unlock_bh(&mw->lock);
		tbv_mw_release_mr(old);
	}
	rcu_read_unlock();
}
