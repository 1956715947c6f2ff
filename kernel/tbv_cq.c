// SPDX-License-Identifier: GPL-2.0
/*
 * Completion queues: a ring of ib_wc filled by the transport and drained by
 * poll_cq (the uverbs poll command for user CQs). Completions are posted from
 * process context, softirq (RX, timers) and with BH disabled, and polled from
 * anywhere a kernel consumer likes, hence the irqsave lock.
 */
#include <linux/slab.h>

#include "tbv.h"

int tbv_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  tbv_create_cq_ctx_t ctx)
{
	struct tbv_dev *dev = to_tbv_dev(ibcq->device);
	struct tbv_cq *cq = to_tbv_cq(ibcq);
	int ret;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > TBV_MAX_CQE ||
	    attr->comp_vector >= ibcq->device->num_comp_vectors)
		return -EINVAL;
	ret = tbv_quota_charge(&cq->charge, tbv_create_cq_udata(ctx), TBV_QUOTA_CQ);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_cqs) > TBV_MAX_CQ) {
		ret = -ENOMEM;
		goto err;
	}
	ret = tbv_queue_alloc(&cq->charge, (void **)&cq->queue, attr->cqe, sizeof(*cq->queue));
	if (ret)
		goto err;
	spin_lock_init(&cq->lock);
	cq->size = attr->cqe;
	ibcq->cqe = attr->cqe;
	return 0;
err:
	atomic_dec(&dev->nr_cqs);
	tbv_quota_uncharge(&cq->charge);
	return ret;
}

int tbv_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct tbv_cq *cq = to_tbv_cq(ibcq);

	/* The core refuses while QPs still use the CQ, so nothing posts to it now. */
	kvfree(cq->queue);
	tbv_quota_uncharge(&cq->charge);	/* and the ring's bytes */
	atomic_dec(&to_tbv_dev(ibcq->device)->nr_cqs);
	return 0;
}

/* A new ring, filled with the completions waiting in the old one, in order. */
int tbv_resize_cq(struct ib_cq *ibcq, tbv_cqe_t cqe, struct ib_udata *udata)
{
	struct tbv_cq *cq = to_tbv_cq(ibcq);
	struct ib_wc *queue, *old;
	unsigned long flags;
	u32 i, old_size;
	int ret;

	if (udata && udata->inlen)
		return -EINVAL;
	if (cqe < 1 || cqe > TBV_MAX_CQE)
		return -EINVAL;
	/* both rings exist for a moment: the new one is charged before the old is freed */
	ret = tbv_queue_alloc(&cq->charge, (void **)&queue, cqe, sizeof(*queue));
	if (ret)
		return ret;
	spin_lock_irqsave(&cq->lock, flags);
	if (cq->count > cqe) {
		spin_unlock_irqrestore(&cq->lock, flags);
		tbv_queue_free(&cq->charge, queue, cqe, sizeof(*queue));
		return -EINVAL;	/* would lose completions */
	}
	for (i = 0; i < cq->count; i++)
		queue[i] = cq->queue[(cq->head + i) % cq->size];
	old = cq->queue;
	old_size = cq->size;
	cq->queue = queue;
	cq->head = 0;
	cq->size = cqe;
	ibcq->cqe = cqe;
	spin_unlock_irqrestore(&cq->lock, flags);
	tbv_queue_free(&cq->charge, old, old_size, sizeof(*old));
	return 0;
}

int tbv_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc)
{
	struct tbv_cq *cq = to_tbv_cq(ibcq);
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	while (n < num && cq->count) {
		wc[n++] = cq->queue[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

int tbv_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct tbv_cq *cq = to_tbv_cq(ibcq);
	unsigned long irqflags;
	int ret = 0;

	spin_lock_irqsave(&cq->lock, irqflags);
	/* NEXT_COMP overrides SOLICITED; an armed CQ stays armed until it fires. */
	if (cq->notify != IB_CQ_NEXT_COMP)
		cq->notify = flags & IB_CQ_SOLICITED_MASK;
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && cq->count)
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return ret;
}

/*
 * Drop the completions of @qp not polled yet: the QP was reset (a reused QP
 * must not report its old life) or is being destroyed (nothing may point at
 * it). The order of the others is kept.
 */
void tbv_cq_clean(struct tbv_cq *cq, struct ib_qp *qp)
{
	unsigned long flags;
	u32 i, kept = 0;

	spin_lock_irqsave(&cq->lock, flags);
	for (i = 0; i < cq->count; i++) {
		const struct ib_wc *wc = &cq->queue[(cq->head + i) % cq->size];

		if (wc->qp != qp)
			cq->queue[(cq->head + kept++) % cq->size] = *wc;
	}
	cq->count = kept;
	spin_unlock_irqrestore(&cq->lock, flags);
}

/*
 * Add a completion. A full CQ is an overrun: the completion is lost and the
 * consumer gets IB_EVENT_CQ_ERR once, as the spec asks of a CQ overflow.
 */
void tbv_cq_post(struct tbv_cq *cq, const struct ib_wc *wc, bool solicited)
{
	bool notify = false, overflow = false;
	unsigned long flags;

	spin_lock_irqsave(&cq->lock, flags);
	if (cq->count == cq->size) {
		overflow = !cq->overflowed;
		cq->overflowed = true;
	} else {
		cq->queue[(cq->head + cq->count) % cq->size] = *wc;
		cq->count++;
		if (cq->notify == IB_CQ_NEXT_COMP ||
		    (cq->notify == IB_CQ_SOLICITED && (solicited || wc->status != IB_WC_SUCCESS))) {
			cq->notify = 0;
			notify = true;
		}
	}
	spin_unlock_irqrestore(&cq->lock, flags);

	if (overflow && cq->ibcq.event_handler) {
		struct ib_event ev = {
			.device = cq->ibcq.device,
			.element.cq = &cq->ibcq,
			.event = IB_EVENT_CQ_ERR,
		};

		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
	}
	if (notify && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}
