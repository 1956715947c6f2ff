// SPDX-License-Identifier: GPL-2.0
/* Shared receive queues: one ring of receive WQEs that several QPs consume. */
#include <linux/vmalloc.h>

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
	if (atomic_inc_return(&dev->nr_srqs) > TBV_MAX_SRQ) {
		ret = -ENOMEM;
		goto err;
	}
	spin_lock_init(&srq->lock);
	srq->limit = attr->srq_limit;
	ret = tbv_wq_init(&srq->rq, attr->max_wr, sizeof(struct tbv_recv_wqe) +
			  attr->max_sge * sizeof(struct tbv_sge), attr->max_sge);
	if (ret)
		goto err;
	return 0;
err:
	atomic_dec(&dev->nr_srqs);
	return ret;
}

int tbv_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct tbv_srq *srq = to_tbv_srq(ibsrq);
	int ret = 0;

	if (udata && udata->inlen)
		return -EINVAL;
	if (mask & IB_SRQ_MAX_WR)
		return -EOPNOTSUPP;	/* resizing is not supported */
	spin_lock_bh(&srq->lock);
	if (mask & IB_SRQ_LIMIT) {
		if (attr->srq_limit > srq->rq.size)
			ret = -EINVAL;
		else
			srq->limit = attr->srq_limit;
	}
	spin_unlock_bh(&srq->lock);
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
	vfree(srq->rq.buf);
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
