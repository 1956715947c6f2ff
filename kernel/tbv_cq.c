// SPDX-License-Identifier: GPL-2.0
/*
 * Completion queues. A kernel CQ is a ring of ib_wc filled by the transport
 * and drained by poll_cq, for kernel consumers. A user CQ is a
 * ring of ib_uverbs_wc shared with the process (docs/rxe-abi.md 4.3, 4.4): the
 * kernel produces, the process polls without a system call. Completions are
 * posted from process context, softirq (RX, timers) and with BH disabled, and
 * polled from anywhere a kernel consumer likes, hence the irqsave lock.
 */
#include <linux/slab.h>

#include "tbv.h"
#include "tbv_rxe_cqe.h"

static int tbv_cq_ring_create(struct tbv_cq *cq, struct ib_udata *udata, u32 cqe)
{
	struct rxe_create_cq_resp resp = {};
	int ret;

	ret = tbv_uq_init(&cq->ring, &cq->charge, udata, cqe, sizeof(struct ib_uverbs_wc),
			  TBV_UQ_KERNEL_PRODUCES, &resp.mi);
	if (ret)
		return ret;
	ret = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (ret) {
		tbv_uq_destroy(&cq->ring);
		return ret;
	}
	/* what the ring holds, as rxe reports it: the provider checks nothing else */
	cq->ibcq.cqe = tbv_uq_capacity(&cq->ring);
	return 0;
}

int tbv_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  tbv_create_cq_ctx_t ctx)
{
	struct ib_udata *udata = tbv_create_cq_udata(ctx);
	struct tbv_dev *dev = to_tbv_dev(ibcq->device);
	struct tbv_cq *cq = to_tbv_cq(ibcq);
	int ring, ret;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > TBV_MAX_CQE ||
	    attr->comp_vector >= ibcq->device->num_comp_vectors)
		return -EINVAL;
	ring = tbv_uq_wanted(udata, sizeof(struct rxe_create_cq_resp));
	if (ring < 0)
		return ring;
	ret = tbv_quota_charge(&cq->charge, udata, TBV_QUOTA_CQ);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_cqs) > TBV_MAX_CQ) {
		ret = -ENOMEM;
		goto err;
	}
	spin_lock_init(&cq->lock);
	if (ring) {
		ret = tbv_cq_ring_create(cq, udata, attr->cqe);
		if (ret)
			goto err;
		return 0;
	}
	ret = tbv_queue_alloc(&cq->charge, (void **)&cq->queue, attr->cqe, sizeof(*cq->queue));
	if (ret)
		goto err;
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
	if (tbv_cq_is_shared(cq))
		tbv_uq_destroy(&cq->ring);
	else
		kvfree(cq->queue);
	tbv_quota_uncharge(&cq->charge);	/* the ring's bytes go with its last mapping */
	atomic_dec(&to_tbv_dev(ibcq->device)->nr_cqs);
	return 0;
}

/*
 * A user CQ's new ring (docs/rxe-abi.md 3.1): its mapping is written to the
 * reply first, so that a fault leaves the old ring in place; then the CQEs the
 * process has not polled move to it, in order, unless they do not fit.
 */
static int tbv_cq_ring_resize(struct tbv_cq *cq, u32 cqe, struct ib_udata *udata)
{
	struct rxe_resize_cq_resp resp = {};
	struct tbv_uqueue ring;
	unsigned long flags;
	u32 pending;
	int ret;

	/* as rdma_rxe: the size asked for, not just the new ring, holds what is not polled */
	spin_lock_irqsave(&cq->lock, flags);
	pending = tbv_uq_count(&cq->ring, tbv_uq_user_index(&cq->ring));
	spin_unlock_irqrestore(&cq->lock, flags);
	if (pending > cqe)
		return -EINVAL;
	/*
	 * both rings exist for a moment: the new one is charged before the old is
	 * given back, which is when the process unmaps it (rxe's provider does at once)
	 */
	ret = tbv_uq_init(&ring, &cq->charge, udata, cqe, sizeof(struct ib_uverbs_wc),
			  TBV_UQ_KERNEL_PRODUCES, &resp.mi);
	if (ret)
		return ret;
	ret = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (!ret) {
		spin_lock_irqsave(&cq->lock, flags);
		ret = tbv_uq_replace(&cq->ring, &ring);	/* -EINVAL: would lose completions */
		if (!ret)
			cq->ibcq.cqe = tbv_uq_capacity(&cq->ring);
		spin_unlock_irqrestore(&cq->lock, flags);
	}
	tbv_uq_destroy(&ring);		/* the old one, or the unused new one */
	return ret;
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
	if (tbv_cq_is_shared(cq)) {
		if (tbv_uq_wanted(udata, sizeof(struct rxe_resize_cq_resp)) != 1)
			return -EINVAL;	/* the process could not map the new ring */
		return tbv_cq_ring_resize(cq, cqe, udata);
	}
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

	/* the process polls a shared ring itself; rxe offers no poll command either */
	if (tbv_cq_is_shared(cq))
		return -EOPNOTSUPP;
	spin_lock_irqsave(&cq->lock, flags);
	while (n < num && cq->count) {
		wc[n++] = cq->queue[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

/* Completions the consumer has not polled yet (under cq->lock). */
static u32 tbv_cq_pending(const struct tbv_cq *cq)
{
	if (tbv_cq_is_shared(cq))
		return tbv_uq_count(&cq->ring, tbv_uq_user_index(&cq->ring));
	return cq->count;
}

/* Whether a ring CQ holds completions its process has not polled yet. */
bool tbv_cq_ring_unpolled(struct tbv_cq *cq)
{
	unsigned long flags;
	bool unpolled;

	if (!tbv_cq_is_shared(cq))
		return false;
	spin_lock_irqsave(&cq->lock, flags);
	unpolled = tbv_cq_pending(cq);
	spin_unlock_irqrestore(&cq->lock, flags);
	return unpolled;
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
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && tbv_cq_pending(cq))
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return ret;
}

/*
 * Drop the completions of @qp not polled yet: the QP was reset (a reused QP
 * must not report its old life) or is being destroyed (nothing may point at
 * it). The order of the others is kept. Not for a shared ring: its consumer is
 * the process, and its CQEs name a QP number, not a pointer (rxe-abi.md 3.3).
 */
void tbv_cq_clean(struct tbv_cq *cq, struct ib_qp *qp)
{
	unsigned long flags;
	u32 i, kept = 0;

	if (tbv_cq_is_shared(cq))
		return;
	spin_lock_irqsave(&cq->lock, flags);
	for (i = 0; i < cq->count; i++) {
		const struct ib_wc *wc = &cq->queue[(cq->head + i) % cq->size];

		if (wc->qp != qp)
			cq->queue[(cq->head + kept++) % cq->size] = *wc;
	}
	cq->count = kept;
	spin_unlock_irqrestore(&cq->lock, flags);
}

/* @wc into a kernel CQ's ring (under cq->lock); false if it is full. */
static bool tbv_cq_queue_add(struct tbv_cq *cq, const struct ib_wc *wc)
{
	if (cq->count == cq->size)
		return false;
	cq->queue[(cq->head + cq->count) % cq->size] = *wc;
	cq->count++;
	return true;
}

/*
 * @wc into a shared ring (under cq->lock): never past the process's consumer
 * index, which it may have set to anything; false if the ring is full. The
 * CQE is written whole, then the producer published (release).
 */
static bool tbv_cq_ring_add(struct tbv_cq *cq, const struct ib_wc *wc)
{
	struct tbv_uqueue *q = &cq->ring;
	struct tbv_rxe_cqe cqe = {
		.wr_id = wc->wr_id,
		.status = wc->status,
		.opcode = wc->opcode,
		.byte_len = wc->byte_len,
		.ex = (__force u32)wc->ex.imm_data,	/* or invalidate_rkey: one union */
		.qp_num = wc->qp->qp_num,
		.src_qp = wc->src_qp,
		.wc_flags = wc->wc_flags,
	};

	if (tbv_uq_count(q, tbv_uq_user_index(q)) >= tbv_uq_capacity(q))
		return false;
	tbv_rxe_cqe_write(tbv_uq_slot(q, q->index), &cqe);
	tbv_uq_publish(q, q->index + 1);
	return true;
}

/*
 * Add a completion. A full CQ is an overrun: the completion is lost, counted
 * in cq_overflows, and the consumer gets IB_EVENT_CQ_ERR: once for a kernel
 * CQ, as the spec asks of a CQ overflow; for a shared ring once per episode
 * (again only after a CQE was written since, rxe-abi.md 4.4). Returns false
 * when the completion was lost: the caller's QP is then to enter ERR.
 */
bool tbv_cq_post(struct tbv_cq *cq, const struct ib_wc *wc, bool solicited)
{
	bool notify = false, overflow = false, added;
	unsigned long flags;

	spin_lock_irqsave(&cq->lock, flags);
	if (tbv_cq_is_shared(cq))
		added = tbv_cq_ring_add(cq, wc);
	else
		added = tbv_cq_queue_add(cq, wc);
	if (!added) {
		overflow = !cq->overflowed;
		cq->overflowed = true;
	} else {
		if (tbv_cq_is_shared(cq))
			cq->overflowed = false;
		if (cq->notify == IB_CQ_NEXT_COMP ||
		    (cq->notify == IB_CQ_SOLICITED && (solicited || wc->status != IB_WC_SUCCESS))) {
			cq->notify = 0;
			notify = true;
		}
	}
	spin_unlock_irqrestore(&cq->lock, flags);

	if (!added)
		atomic64_inc(&to_tbv_dev(cq->ibcq.device)->rstats.cq_overflows);
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
	return added;
}
