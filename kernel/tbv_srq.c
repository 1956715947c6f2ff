// SPDX-License-Identifier: GPL-2.0
/*
 * Shared receive queues: one ring of receive WQEs that several QPs consume.
 * A kernel SRQ is a queue of tbv_recv_wqe filled by post_srq_recv. A user SRQ
 * whose creator left room for rdma_rxe's reply is a ring of rxe_recv_wqe
 * shared with the process (docs/rxe-abi.md 3.4, 4.2): the process posts
 * without a system call, the responder takes (a copy, parsed by
 * proto/tbv_rxe_wqe.c through tbv_uwqe.c). RX takes WQEs in softirq context,
 * hence the _bh lock.
 */
#include <linux/log2.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "tbv.h"
#include "tbv_rxe_wqe.h"

/* A ring of rxe_recv_wqe sized as rdma_rxe sizes it: room for the requested SGEs. */
static int tbv_srq_ring_init(struct tbv_srq *srq, struct tbv_uqueue *ring,
			     struct ib_udata *udata, u32 max_wr, struct mminfo *mi)
{
	return tbv_uq_init(ring, &srq->charge, udata, max_wr, tbv_rxe_recv_elem(srq->rq.max_sge),
			   TBV_UQ_KERNEL_CONSUMES, mi);
}

static int tbv_srq_ring_create(struct tbv_srq *srq, struct ib_udata *udata,
			       struct ib_srq_attr *attr)
{
	/* srq_num: we have no SRQ numbers (no XRC); the provider never reads it */
	struct rxe_create_srq_resp resp = {};
	int ret;

	srq->rq.max_sge = attr->max_sge;
	ret = tbv_srq_ring_init(srq, &srq->ring, udata, attr->max_wr, &resp.mi);
	if (ret)
		return ret;
	ret = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (ret) {
		tbv_uq_destroy(&srq->ring);
		return ret;
	}
	/* what the ring holds, as rxe reports it: the provider checks nothing else */
	srq->rq.max_sge = tbv_rxe_recv_caps(tbv_uq_slot_size(&srq->ring), TBV_MAX_SGE);
	attr->max_sge = srq->rq.max_sge;
	attr->max_wr = tbv_uq_capacity(&srq->ring);
	return 0;
}

int tbv_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init, struct ib_udata *udata)
{
	struct tbv_dev *dev = to_tbv_dev(ibsrq->device);
	struct tbv_srq *srq = to_tbv_srq(ibsrq);
	struct ib_srq_attr *attr = &init->attr;
	int ring, ret;

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (udata && udata->inlen)
		return -EINVAL;
	ring = tbv_uq_wanted(udata, sizeof(struct rxe_create_srq_resp));
	if (ring < 0)
		return ring;
	if (!attr->max_wr || attr->max_wr > TBV_MAX_SRQ_WR || attr->max_sge > TBV_MAX_SGE ||
	    attr->srq_limit > attr->max_wr)
		return -EINVAL;
	ret = tbv_quota_charge(&srq->charge, udata, TBV_QUOTA_SRQ);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_srqs) > TBV_MAX_SRQ) {
		ret = -ENOMEM;
		goto err;
	}
	spin_lock_init(&srq->lock);
	srq->limit = attr->srq_limit;
	if (ring) {
		ret = tbv_srq_ring_create(srq, udata, attr);
		if (ret)
			goto err;
		return 0;
	}
	ret = tbv_wq_init(&srq->charge, &srq->rq, attr->max_wr, sizeof(struct tbv_recv_wqe) +
			  attr->max_sge * sizeof(struct tbv_sge), attr->max_sge);
	if (ret)
		goto err;
	attr->max_wr = srq->rq.size;	/* rounded up to a power of two */
	return 0;
err:
	atomic_dec(&dev->nr_srqs);
	tbv_quota_uncharge(&srq->charge);
	return ret;
}

/*
 * The limit in force after a modify_srq of @mask (lock held) must not exceed
 * the WQEs the SRQ is to hold: @size now, or the requested max_wr.
 */
static int tbv_srq_check_limit(struct tbv_srq *srq, const struct ib_srq_attr *attr,
			       enum ib_srq_attr_mask mask, u32 size)
{
	u32 limit = (mask & IB_SRQ_LIMIT) ? attr->srq_limit : srq->limit;

	if (mask & IB_SRQ_MAX_WR)
		size = attr->max_wr;
	return limit > size ? -EINVAL : 0;
}

/*
 * Resize to @max_wr slots (lock held): the posted WQEs move, in order, into a
 * ring allocated beforehand (@buf); fewer slots than posted WQEs is EINVAL.
 * Returns the old ring to free, or an ERR_PTR.
 */
static void *tbv_srq_resize_locked(struct tbv_srq *srq, u32 max_wr, void *buf)
{
	struct tbv_wq *rq = &srq->rq;
	u32 posted = rq->prod - rq->cons, i;
	void *old = rq->buf;

	if (max_wr < posted)
		return ERR_PTR(-EINVAL);
	max_wr = roundup_pow_of_two(max_wr);	/* as tbv_wq_init() */
	for (i = 0; i < posted; i++)
		memcpy(buf + (size_t)i * rq->slot, tbv_wq_slot(rq, rq->cons + i), rq->slot);
	rq->buf = buf;
	rq->size = max_wr;
	rq->cons = 0;
	rq->prod = posted;
	return old;
}

/*
 * modify_srq of a ring SRQ, rdma_rxe's way (docs/rxe-abi.md 3.4): the command
 * carries a user address, mmap_info_addr, where the new ring's mminfo goes
 * (not the response), written before the rings switch, so that a fault
 * leaves the old one. The provider holds its SRQ lock meanwhile; under ours
 * the WQEs not yet taken move to the new ring, in order, unless they do not fit.
 */
static int tbv_srq_ring_modify(struct tbv_srq *srq, struct ib_srq_attr *attr,
			       enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct rxe_modify_srq_cmd cmd = {};
	struct tbv_uqueue ring = {};
	struct mminfo mi;
	int ret;

	/* rxe's provider sends the command with every modify_srq */
	if (!udata || udata->inlen < sizeof(cmd))
		return -EINVAL;
	if (ib_copy_from_udata(&cmd, udata, sizeof(cmd)))
		return -EFAULT;
	if (mask & IB_SRQ_MAX_WR) {
		if (!attr->max_wr || attr->max_wr > TBV_MAX_SRQ_WR)
			return -EINVAL;
		/* the new ring is charged before the old is given back (when unmapped) */
		ret = tbv_srq_ring_init(srq, &ring, udata, attr->max_wr, &mi);
		if (ret)
			return ret;
		if (copy_to_user(u64_to_user_ptr(cmd.mmap_info_addr), &mi, sizeof(mi))) {
			ret = -EFAULT;
			goto out;
		}
	}
	spin_lock_bh(&srq->lock);
	ret = tbv_srq_check_limit(srq, attr, mask, tbv_uq_capacity(&srq->ring));
	if (!ret && ring.buf)
		ret = tbv_uq_replace(&srq->ring, &ring);	/* -EINVAL: more posted than fit */
	if (!ret && (mask & IB_SRQ_LIMIT))
		srq->limit = attr->srq_limit;
	spin_unlock_bh(&srq->lock);
out:
	tbv_uq_destroy(&ring);		/* the old one, or the unused new one */
	return ret;
}

int tbv_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);
	void *buf = NULL, *old = NULL;
	u32 new_size = 0, old_size = 0;
	int ret = 0;

	if (tbv_srq_is_shared(srq))
		return tbv_srq_ring_modify(srq, attr, mask, udata);
	if (udata && udata->inlen)
		return -EINVAL;
	if (mask & IB_SRQ_MAX_WR) {
		if (!attr->max_wr || attr->max_wr > TBV_MAX_SRQ_WR)
			return -EINVAL;
		/* allocated outside the lock: RX takes it in softirq context */
		new_size = roundup_pow_of_two(attr->max_wr);
		ret = tbv_queue_alloc(&srq->charge, &buf, new_size, srq->rq.slot);
		if (ret)
			return ret;
	}
	spin_lock_bh(&srq->lock);
	old_size = srq->rq.size;
	ret = tbv_srq_check_limit(srq, attr, mask, srq->rq.size);
	if (!ret && buf) {
		old = tbv_srq_resize_locked(srq, attr->max_wr, buf);
		if (IS_ERR(old)) {
			ret = PTR_ERR(old);
			old = NULL;
		} else {
			buf = NULL;	/* the ring now */
		}
	}
	if (!ret && (mask & IB_SRQ_LIMIT))
		srq->limit = attr->srq_limit;
	spin_unlock_bh(&srq->lock);
	tbv_queue_free(&srq->charge, buf, new_size, srq->rq.slot);	/* not used */
	tbv_queue_free(&srq->charge, old, old_size, srq->rq.slot);	/* the replaced ring */
	return ret;
}

int tbv_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);

	spin_lock_bh(&srq->lock);
	attr->max_wr = tbv_srq_is_shared(srq) ? tbv_uq_capacity(&srq->ring) : srq->rq.size;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	spin_unlock_bh(&srq->lock);
	return 0;
}

int tbv_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);

	/* The core refuses while QPs use the SRQ. */
	if (tbv_srq_is_shared(srq))
		tbv_uq_destroy(&srq->ring);
	else
		kvfree(srq->rq.buf);
	tbv_quota_uncharge(&srq->charge);	/* the ring's bytes go with its last mapping */
	atomic_dec(&to_tbv_dev(ibsrq->device)->nr_srqs);
	return 0;
}

int tbv_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);
	int ret = 0;

	/* the process posts into a shared ring itself; rxe offers no command either */
	if (tbv_srq_is_shared(srq)) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	spin_lock_bh(&srq->lock);
	for (; wr && !ret; wr = wr->next) {
		ret = tbv_recv_wqe_fill(&srq->rq, wr);
		if (ret)
			*bad_wr = wr;
	}
	spin_unlock_bh(&srq->lock);
	return ret;
}

/*
 * Whether @left WQEs are fewer than the armed limit (lock held); if so the
 * limit is disarmed until modify_srq arms it again, and the caller raises
 * the event with tbv_srq_limit_event() once it has unlocked.
 */
static bool tbv_srq_limit_hit(struct tbv_srq *srq, u32 left)
{
	if (!srq->limit || left >= srq->limit)
		return false;
	srq->limit = 0;
	return true;
}

static void tbv_srq_limit_event(struct tbv_srq *srq)
{
	struct ib_event ev = {
		.device = srq->ibsrq.device,
		.element.srq = &srq->ibsrq,
		.event = IB_EVENT_SRQ_LIMIT_REACHED,
	};

	if (srq->ibsrq.event_handler)
		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
}

/*
 * The limit of a ring SRQ, checked after a WQE was taken and the consumer
 * index published, without srq->lock: the count is the
 * process's producer (acquire, masked) against our consumer, as rxe counts it
 * (docs/rxe-abi.md 3.4); below the armed limit the event is raised once.
 */
static void tbv_srq_ring_check_limit(struct tbv_srq *srq)
{
	bool limit;

	spin_lock_bh(&srq->lock);
	limit = tbv_srq_limit_hit(srq, tbv_uq_count(&srq->ring, tbv_uq_user_index(&srq->ring)));
	spin_unlock_bh(&srq->lock);

	if (limit)
		tbv_srq_limit_event(srq);
}

/*
 * The oldest WQE of a ring SRQ, copied once into @copy and parsed into @out
 * (docs/rxe-abi.md 4.2, 6.2), its slot given back to the process at once:
 * other QPs take from the SRQ too (lock held). False if there is none.
 */
static bool tbv_srq_ring_take(struct tbv_srq *srq, struct tbv_recv_wqe *out,
			      struct tbv_uwqe_buf *copy, enum ib_wc_status *status)
{
	struct tbv_uqueue *q = &srq->ring;

	if (!tbv_uq_count(q, tbv_uq_user_index(q)))
		return false;
	*status = tbv_uwqe_recv(q, copy, srq->rq.max_sge, out);
	tbv_uq_publish(q, q->index + 1);
	return true;
}

/*
 * Take the oldest WQE into @out (room for the SRQ's max_sge SGEs); raises
 * SRQ_LIMIT_REACHED (once per arming). From a ring, through @copy (the
 * taker's buffer for the ring's slots); *@status is then what the WQE
 * completes with if it is malformed, else IB_WC_SUCCESS, as always for a
 * kernel SRQ. The taker holds its QP's resp_lock: the SRQ's lock nests in it.
 */
bool tbv_srq_take(struct tbv_srq *srq, struct tbv_recv_wqe *out, struct tbv_uwqe_buf *copy,
		  enum ib_wc_status *status)
{
	struct tbv_recv_wqe *wqe;
	bool taken, limit;

	*status = IB_WC_SUCCESS;
	if (tbv_srq_is_shared(srq)) {
		spin_lock_bh(&srq->lock);
		taken = tbv_srq_ring_take(srq, out, copy, status);
		spin_unlock_bh(&srq->lock);
		if (taken)
			tbv_srq_ring_check_limit(srq);
		return taken;
	}
	spin_lock_bh(&srq->lock);
	if (srq->rq.cons == srq->rq.prod) {
		spin_unlock_bh(&srq->lock);
		return false;
	}
	wqe = tbv_wq_slot(&srq->rq, srq->rq.cons);
	memcpy(out, wqe, struct_size(wqe, sge, wqe->num_sge));
	srq->rq.cons++;
	limit = tbv_srq_limit_hit(srq, srq->rq.prod - srq->rq.cons);
	spin_unlock_bh(&srq->lock);

	if (limit)
		tbv_srq_limit_event(srq);
	return true;
}
