// SPDX-License-Identifier: GPL-2.0
/* Shared receive queues: one ring of receive WQEs that several QPs consume. */
#include <linux/log2.h>
#include <linux/slab.h>

#include "tbv.h"

int tbv_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init, struct ib_udata *udata)
{
	struct tbv_dev *dev = to_tbv_dev(ibsrq->device);
	struct tbv_srq *srq = to_tbv_srq(ibsrq);
	struct ib_srq_attr *attr = &init->attr;
	int ret;

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
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
 * Resize to @max_wr slots (lock held): the posted WQEs move, in order, into a
 * ring allocated beforehand (@buf); fewer slots than posted WQEs is EINVAL.
 * Returns the old ring to free, or an ERR_PTR.
 */
static void *tbv_srq_resize_locked(struct tbv_srq *srq, u32 max_wr, u32 limit, void *buf)
{
	struct tbv_wq *rq = &srq->rq;
	u32 posted = rq->prod - rq->cons, i;
	void *old = rq->buf;

	if (max_wr < posted || max_wr < limit)
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

int tbv_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);
	void *buf = NULL, *old = NULL;
	u32 new_size = 0, old_size = 0;
	int ret = 0;

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
	if (mask & IB_SRQ_LIMIT) {
		u32 size = (mask & IB_SRQ_MAX_WR) ? attr->max_wr : srq->rq.size;

		if (attr->srq_limit > size)
			ret = -EINVAL;
	}
	if (!ret && buf) {
		old = tbv_srq_resize_locked(srq, attr->max_wr, (mask & IB_SRQ_LIMIT) ?
					    attr->srq_limit : srq->limit, buf);
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
	attr->max_wr = srq->rq.size;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	spin_unlock_bh(&srq->lock);
	return 0;
}

int tbv_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);

	/* The core refuses while QPs use the SRQ. */
	kvfree(srq->rq.buf);
	tbv_quota_uncharge(&srq->charge);	/* and the ring's bytes */
	atomic_dec(&to_tbv_dev(ibsrq->device)->nr_srqs);
	return 0;
}

int tbv_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);
	int ret = 0;

	spin_lock_bh(&srq->lock);
	for (; wr && !ret; wr = wr->next) {
		ret = tbv_recv_wqe_fill(&srq->rq, wr);
		if (ret)
			*bad_wr = wr;
	}
	spin_unlock_bh(&srq->lock);
	return ret;
}

/* Take the oldest WQE into @out; raises SRQ_LIMIT_REACHED (once per arming). */
bool tbv_srq_take(struct tbv_srq *srq, struct tbv_recv_wqe *out)
{
	struct tbv_recv_wqe *wqe;
	bool limit = false;

	spin_lock_bh(&srq->lock);
	if (srq->rq.cons == srq->rq.prod) {
		spin_unlock_bh(&srq->lock);
		return false;
	}
	wqe = tbv_wq_slot(&srq->rq, srq->rq.cons);
	memcpy(out, wqe, struct_size(wqe, sge, wqe->num_sge));
	srq->rq.cons++;
	if (srq->limit && srq->rq.prod - srq->rq.cons < srq->limit) {
		srq->limit = 0;	/* disarmed until modify_srq sets it again */
		limit = true;
	}
	spin_unlock_bh(&srq->lock);

	if (limit && srq->ibsrq.event_handler) {
		struct ib_event ev = {
			.device = srq->ibsrq.device,
			.element.srq = &srq->ibsrq,
			.event = IB_EVENT_SRQ_LIMIT_REACHED,
		};

		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
	}
	return true;
}
