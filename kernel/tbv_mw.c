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
 *
 * What those lookups reach is the window's state (struct tbv_mw_state), not
 * the window: the core frees struct ib_mw as soon as dealloc_mw returns, while
 * a lookup under RCU may still hold the state. Deallocation erases the state
 * from the device's mws, marks it dead and unbinds it under its lock, and frees
 * it with kfree_rcu(): it never waits for a grace period, so tearing down a
 * device with tens of thousands of windows does not wait for as many. A lookup
 * that took the lock after that finds it dead and unbound, and refuses it.
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
	struct tbv_mw_state *st;
	int tries, ret;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	ret = tbv_quota_charge(&mw->charge, udata, TBV_QUOTA_MW);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_mws) > TBV_MAX_MW) {
		ret = -ENOMEM;
		goto err_count;
	}
	st = kzalloc(sizeof(*st), GFP_KERNEL_ACCOUNT);
	if (!st) {
		ret = -ENOMEM;
		goto err_count;
	}
	spin_lock_init(&st->lock);
	st->type = ibmw->type;
	st->pd = ibmw->pd;
	mw->dev = dev;
	mw->state = st;
	/* a random index, like MR keys: a peer cannot find windows by counting */
	ret = -EBUSY;
	for (tries = 0; tries < 16 && ret == -EBUSY; tries++) {
		u32 index = TBV_MW_INDEX(get_random_u32() | TBV_KEY_MW_BIT);

		ibmw->rkey = index << 8 | (get_random_u32() & 0xff);
		st->rkey = ibmw->rkey;	/* before RX can see it */
		ret = xa_insert_bh(&dev->mws, index, st, GFP_KERNEL);
	}
	if (ret) {
		kfree(st);	/* never reachable */
		goto err_count;
	}
	return 0;

err_count:
	atomic_dec(&dev->nr_mws);
	tbv_quota_uncharge(&mw->charge);
	return ret;
}

/* Drop the binding (st->lock held); returns the MR it held, to be released unlocked. */
static struct tbv_mr *tbv_mw_unbind_locked(struct tbv_mw_state *st)
{
	struct tbv_mr *mr = st->mr;

	st->mr = NULL;
	st->addr = 0;
	st->length = 0;
	st->access = 0;
	return mr;
}

static void tbv_mw_release_mr(struct tbv_mr *mr)
{
	if (mr)
		atomic_dec(&mr->nr_mws);
}

/*
 * No grace period per window: a lookup in flight may still hold the state, so
 * it is marked dead and unbound under its lock (after which no lookup uses its
 * MR, which may then be deregistered) and freed after a grace period, without
 * waiting for it.
 */
int tbv_dealloc_mw(struct ib_mw *ibmw)
{
	struct tbv_mw *mw = to_tbv_mw(ibmw);
	struct tbv_mw_state *st = mw->state;
	struct tbv_dev *dev = mw->dev;
	struct tbv_mr *mr;

	xa_erase_bh(&dev->mws, TBV_MW_INDEX(ibmw->rkey));
	spin_lock_bh(&st->lock);
	st->dead = true;
	mr = tbv_mw_unbind_locked(st);
	spin_unlock_bh(&st->lock);
	tbv_mw_release_mr(mr);
	kfree_rcu(st, rcu);
	atomic_dec(&dev->nr_mws);
	tbv_quota_uncharge(&mw->charge);
	return 0;
}

/* The window @rkey names may be used by @qp for [va, va + len) with @access (lock held). */
static int tbv_mw_check(struct tbv_mw_state *st, struct tbv_qp *qp, u32 rkey, u64 va, u64 len,
			int access)
{
	if (st->dead || st->rkey != rkey || !st->mr || st->pd != qp->ibqp.pd)
		return -EACCES;
	if (st->type == IB_MW_TYPE_2 && st->qpn != qp->ibqp.qp_num)
		return -EACCES;
	if ((st->access & access) != access)
		return -EACCES;
	if (!tbv_range_within(st->addr, st->length, va, len))
		return -EACCES;
	return 0;
}

/* A remote access through a window; called by tbv_rkey.c for keys with TBV_KEY_MW_BIT. */
int tbv_mw_remote(struct tbv_qp *qp, u32 rkey, u64 va, u64 len, int access, tbv_remote_fn fn,
		  void *arg)
{
	struct tbv_mw_state *st;
	int ret = -EACCES;

	rcu_read_lock();
	st = xa_load(&qp->dev->mws, TBV_MW_INDEX(rkey));
	if (st) {
		spin_lock_bh(&st->lock);
		ret = tbv_mw_check(st, qp, rkey, va, len, access);
		if (!ret && fn)
			ret = fn(st->mr, va, arg);
		spin_unlock_bh(&st->lock);
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
	struct tbv_mw_state *st;
	bool unbind = false;

	if (!(wqe->bind.mw_rkey & TBV_KEY_MW_BIT) || TBV_MW_INDEX(wqe->bind.new_rkey) != index)
		return status;
	rcu_read_lock();
	st = xa_load(&qp->dev->mws, index);
	if (!st || st->pd != qp->ibqp.pd)
		goto out;
	if (st->type == IB_MW_TYPE_2 && qp->ibqp.qp_type != IB_QPT_RC &&
	    qp->ibqp.qp_type != IB_QPT_UC)
		goto out;
	unbind = st->type == IB_MW_TYPE_1 && !wqe->bind.length;
	if (!unbind) {
		mr = tbv_mw_bind_mr(qp, wqe);
		if (!mr)
			goto out;
		if (!atomic_inc_unless_negative(&mr->nr_mws)) {
			tbv_mr_put(mr);	/* being deregistered */
			goto out;
		}
	}
	spin_lock_bh(&st->lock);
	/*
	 * Deallocated since the lookup: binding it would leave the MR counted for
	 * good. A bound type 2 window must be invalidated before it is bound again.
	 */
	if (st->dead || (st->type == IB_MW_TYPE_2 && st->mr)) {
		spin_unlock_bh(&st->lock);
		tbv_mw_release_mr(mr);
		if (mr)
			tbv_mr_put(mr);
		goto out;
	}
	old = tbv_mw_unbind_locked(st);
	if (mr) {
		st->mr = mr;
		st->addr = wqe->bind.addr;
		st->length = wqe->bind.length;
		st->access = wqe->bind.access;
		st->qpn = qp->ibqp.qp_num;
	}
	st->rkey = wqe->bind.new_rkey;
	spin_unlock_bh(&st->lock);
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
	struct tbv_mw_state *st;
	struct tbv_mr *old = NULL;
	int ret = -EINVAL;

	if (!(rkey & TBV_KEY_MW_BIT))
		return ret;
	rcu_read_lock();
	st = xa_load(&qp->dev->mws, TBV_MW_INDEX(rkey));
	if (st) {
		spin_lock_bh(&st->lock);
		if (!st->dead && st->rkey == rkey && st->mr && st->type == IB_MW_TYPE_2 &&
		    st->pd == qp->ibqp.pd && (!remote || st->qpn == qp->ibqp.qp_num)) {
			old = tbv_mw_unbind_locked(st);
			ret = 0;
		}
		spin_unlock_bh(&st->lock);
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
	struct tbv_mw_state *st;
	unsigned long index;

	rcu_read_lock();
	xa_for_each(&qp->dev->mws, index, st) {
		struct tbv_mr *old = NULL;

		spin_lock_bh(&st->lock);
		if (!st->dead && st->type == IB_MW_TYPE_2 && st->mr &&
		    st->qpn == qp->ibqp.qp_num && st->pd == qp->ibqp.pd)
			old = tbv_mw_unbind_locked(st);
		spin_unlock_bh(&st->lock);
		tbv_mw_release_mr(old);
	}
	rcu_read_unlock();
}
