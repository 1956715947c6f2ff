// SPDX-License-Identifier: GPL-2.0
/*
 * The QP's transmitter. One function, tbv_qp_tx(), sends everything a QP has
 * to send: first what the responder owes (an ACK or NAK, READ and atomic
 * responses), then new or rewound requests, which the completer retires in
 * between where they need no packets. It runs from the kick (post_send, RX,
 * modify_qp), from the TX work once a rail's frames or credits came back, and
 * after the retransmission/RNR timer fired. The QP's way into the error state
 * is here too: the transmitter, RX and the verbs all end up in tbv_qp_error().
 */
#include "tbv.h"

static void tbv_qp_async_event(struct tbv_qp *qp, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = qp->ibqp.device,
		.element.qp = &qp->ibqp,
		.event = type,
	};

	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
}

/* The state becomes ERR under both of its locks, in their order: sq_lock, then resp_lock. */
void tbv_qp_enter_error(struct tbv_qp *qp)
{
	spin_lock_bh(&qp->sq_lock);
	spin_lock(&qp->resp_lock);
	qp->state = IB_QPS_ERR;
	spin_unlock(&qp->resp_lock);
	spin_unlock_bh(&qp->sq_lock);
}

/*
 * In the error state: both queues flushed. A QP on an SRQ reports Last WQE
 * Reached once (IBA 10.3.1: it takes no more SRQ WQEs), which a consumer
 * waits for before it destroys the QP (the kernel's ib_drain_qp() on an SRQ).
 */
void tbv_qp_flush(struct tbv_qp *qp)
{
	tbv_comp_flush(qp);
	if (tbv_rq_flush(qp))
		tbv_qp_async_event(qp, IB_EVENT_QP_LAST_WQE_REACHED);
}

/* Move to the error state: stop the transport, flush both queues. */
void tbv_qp_error(struct tbv_qp *qp)
{
	tbv_qp_enter_error(qp);
	tbv_qp_flush(qp);
}

/* The responder refused a request and its NAK is out: the QP fails, with the event it names. */
static void tbv_qp_tx_refused(struct tbv_qp *qp, u8 syndrome)
{
	syndrome = tbv_resp_fail_qp(qp, syndrome);
	if (syndrome == TBV_NAK_ACCESS)
		tbv_qp_async_event(qp, IB_EVENT_QP_ACCESS_ERR);
	else if (syndrome == TBV_NAK_INVALID)
		tbv_qp_async_event(qp, IB_EVENT_QP_REQ_ERR);
	else if (syndrome)
		tbv_qp_async_event(qp, IB_EVENT_QP_FATAL);
}

/*
 * What one pass of the transmitter does at most: TBV_TX_BUDGET requester
 * packets, and WQEs done without a packet (a UD SEND longer than the MTU,
 * a bind, an invalidation), and as many WQEs copied from a ring SQ. A pass
 * holds tx.lock with bottom halves off, and a process refilling its SQ ring
 * with packetless WQEs otherwise kept one pass going through the whole
 * shadow (8192 WQEs) and the next. 256 is more than a pass sends when it
 * is not that: RC is held to TBV_TX_WINDOW (192) PSNs, every QP to its
 * rail's TX frames (255 on a ring of 256) and to TBV_TX_TURN (16) in a row
 * while others wait; about the netdev's softirq budget (300 packets).
 */
#define TBV_TX_BUDGET		256
/*
 * Passes one kick runs in its caller's context (a verb's system call, NAPI,
 * the timer) before it hands the rest to tx.kick_work, which runs as many
 * at a time and queues itself again. A kick normally needs one or two (the
 * ACKs that came during the first); bounded, it never keeps a CPU: another
 * kicker that keeps setting TBV_TX_PENDING (a process ringing the doorbell
 * in a loop) costs the holder four passes, then the work queue's turns.
 */
#define TBV_KICK_PASSES		4

/* One pass; true if its budget ran out with more the QP could send now. */
static bool tbv_qp_tx(struct tbv_qp *qp)
{
	struct tbv_link *link = qp->dev->link;
	unsigned int budget = TBV_TX_BUDGET;
	unsigned int done;
	u8 fatal;

	if (!qp->rail || !READ_ONCE(link->data_up))
		return false;
	fatal = tbv_resp_output(qp);
	if (fatal)
		tbv_qp_tx_refused(qp, fatal);

	spin_lock(&qp->sq_lock);
	do {
		done = tbv_req_output(qp, &budget);
		if (done & TBV_REQ_SENT)
			tbv_comp_sent(qp);
		if (done & TBV_REQ_RETIRE)
			tbv_comp_retire(qp);
	} while ((done & TBV_REQ_RETIRE) && budget);
	spin_unlock(&qp->sq_lock);
	/* split packets built in this pass leave now: nothing waits for more traffic */
	tbv_xmit_flush(qp);
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		tbv_qp_error(qp);
	/* the loop above stops on RETIRE only with the budget spent */
	return done & (TBV_REQ_MORE | TBV_REQ_RETIRE);
}

/*
 * Run the transmitter now, in this context, unless it runs elsewhere: then
 * that run sees TBV_TX_PENDING and goes round once more. A pass whose
 * budget ran out sets the bit itself. After TBV_KICK_PASSES passes with the
 * bit still set the holder leaves it set and queues tx.kick_work, which
 * kicks again: the kick is handed over, never dropped.
 *
 * The barriers make that hand-over safe: the work asked for is visible before
 * the bit, the bit is cleared before the queues are read, and the holder's
 * unlock is visible before it tests the bit. Without the last, a kicker could
 * set the bit after that test yet still find the lock held (an unlock may sit
 * in the store buffer, even on x86): the kick lost and the QP stalled.
 */
void tbv_qp_kick(struct tbv_qp *qp)
{
	unsigned int passes = 0;

	/* the work asked for, then the bit */
	smp_mb__before_atomic();
	set_bit(TBV_TX_PENDING, &qp->tx.bits);
	/* the bit, then the look at the lock */
	smp_mb__after_atomic();
	do {
		if (passes++ == TBV_KICK_PASSES) {
			/* the bit stays set: the work's kick finds it, or the holder by then */
			if (queue_work(tbv_wq, &qp->tx.kick_work))
				atomic64_inc(&qp->dev->rstats.kicks_deferred);
			return;
		}
		if (!spin_trylock_bh(&qp->tx.lock))
			return;
		clear_bit(TBV_TX_PENDING, &qp->tx.bits);
		/* cleared before the queues are read */
		smp_mb__after_atomic();
		if (tbv_qp_tx(qp))
			set_bit(TBV_TX_PENDING, &qp->tx.bits);
		spin_unlock_bh(&qp->tx.lock);
		/* unlocked before the bit is tested */
		smp_mb();
	} while (test_bit(TBV_TX_PENDING, &qp->tx.bits));
}

/* The passes a kick left: as many again, then queued again if still more (tbv_qp_kick()). */
static void tbv_qp_kick_work(struct work_struct *work)
{
	tbv_qp_kick(container_of(work, struct tbv_qp, tx.kick_work));
}

/* A rail the QP waited on has frames or credits again (tbv_pool_wake()). */
static void tbv_qp_tx_work(struct work_struct *work)
{
	struct tbv_qp *qp = container_of(work, struct tbv_qp, tx.waiter.work);

	tbv_pool_woken_runs(&qp->tx.waiter);
	tbv_qp_kick(qp);
}

/*
 * After a post: start the transmitter, or in the error state complete what was
 * posted, flushed. A caller with interrupts off (the MAD layer posts to QP1
 * under an irqsave lock) leaves that to a work item: the transmitter's
 * bottom-half locks would re-enable bottom halves there, which may run
 * softirqs inside the caller's critical section.
 */
void tbv_qp_run(struct tbv_qp *qp)
{
	if (irqs_disabled())
		queue_work(tbv_wq, &qp->tx.post_work);
	else if (READ_ONCE(qp->state) == IB_QPS_ERR)
		tbv_comp_flush(qp);
	else
		tbv_qp_kick(qp);
}

static void tbv_qp_post_work(struct work_struct *work)
{
	tbv_qp_run(container_of(work, struct tbv_qp, tx.post_work));
}

/* The completer's retransmission/RNR timer expired (softirq). */
static void tbv_tx_timer(struct timer_list *t)
{
	struct tbv_qp *qp = timer_container_of(qp, t, comp.timer);

	switch (tbv_comp_timeout(qp)) {
	case TBV_EXPIRY_IGNORED:
		return;
	case TBV_EXPIRY_FATAL:
		tbv_qp_async_event(qp, IB_EVENT_QP_FATAL);
		tbv_qp_error(qp);
		return;
	case TBV_EXPIRY_KICK:
		tbv_qp_kick(qp);
		return;
	}
}

/* At QP creation: the transmitter's lock, its wait for frames, and the timer it serves. */
void tbv_tx_init(struct tbv_qp *qp)
{
	spin_lock_init(&qp->tx.lock);
	INIT_LIST_HEAD(&qp->tx.waiter.node);
	INIT_WORK(&qp->tx.waiter.work, tbv_qp_tx_work);
	INIT_WORK(&qp->tx.post_work, tbv_qp_post_work);
	INIT_WORK(&qp->tx.kick_work, tbv_qp_kick_work);
	tbv_comp_init(qp, tbv_tx_timer);
}

/*
 * Destroy, once RX cannot reach the QP and it is in error: the timer and the
 * TX work only re-arm while the QP is not in error, so after this nothing
 * runs the transmitter any more. The kick's work goes last: the others kick,
 * so they may queue it; it queues only itself (cancel_work_sync() stops that).
 */
void tbv_tx_stop(struct tbv_qp *qp)
{
	tbv_comp_stop(qp);
	tbv_pool_unwait(&qp->tx.waiter);
	cancel_work_sync(&qp->tx.waiter.work);
	cancel_work_sync(&qp->tx.post_work);
	cancel_work_sync(&qp->tx.kick_work);
	WARN_ON_ONCE(qp->tx.batch.n);	/* tbv_qp_tx() leaves none behind */
}
