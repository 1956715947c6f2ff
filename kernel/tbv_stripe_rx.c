// SPDX-License-Identifier: GPL-2.0
/*
 * Striping, the receiving side (tbv_stripe.c has the rest): a striped QP's
 * packets, which the RX dispatch hands here (tbv_recv.c), go on to the QP
 * (tbv_deliver()) in TSN order (kernel/proto/tbv_reseq.c). A packet ahead of
 * a gap is held: its RX buffer stays with the QP and the RX poll posts one of
 * the rail's spares in its place (TBV_RX_KEPT), so nothing is copied and the
 * credits stay exact; it goes back to its rail's spares once handed over. A
 * gap is given up on once the rail its chunk came on (or every rail) has
 * passed it, or after TBV_STRIPE_GIVE_UP_MS of this CPU's time (this file's
 * timer, counting only its ticks that came on time).
 *
 * Packets are handed over under the QP's resequencing lock, so two rails'
 * NAPI polls never hand one QP's packets over out of order.
 */
#include <linux/slab.h>

#include "tbv.h"

#define TBV_STRIPE_GIVE_UP_MS	500	/* a gap not known lost: how long to wait for it */
/*
 * The wait is counted in ticks of the give-up timer that came on time: a tick
 * that comes late means this CPU was away (a VM's vCPU descheduled, a long
 * stall), and the packets that arrived meanwhile have not been polled yet, so
 * that time does not count.
 */
#define TBV_STRIPE_TICK_MS	50

struct tbv_stripe_rx {
	struct tbv_qp *qp;
	spinlock_t lock;		/* everything below; RX (softirq) and the timer */
	struct timer_list timer;	/* gives up on a gap */
	bool gap_watched;		/* gap_next, gap_waited describe the gap at next */
	u32 gap_next;			/* the TSN a gap was first seen at */
	unsigned int gap_waited;	/* ms waited for it, in on-time ticks */
	struct tbv_reseq rs;
};

/* A held frame's turn: decode it again (it was valid), hand it over, free its buffer. */
static void tbv_stripe_deliver_held(struct tbv_qp *qp, struct tbv_frame *frame)
{
	struct tbv_rdma_hdr h;

	if (!tbv_frame_decode(qp->dev->link, frame, &h))
		tbv_deliver(qp, &h, tbv_frame_payload(frame, &h), false);
	tbv_pool_rx_release(qp->dev->link, frame);
}

/*
 * Hand over what is in order now; watch the gap that is left, if any, and
 * count the gaps given up on since @gaps (lock held).
 */
static void tbv_stripe_drain(struct tbv_stripe_rx *sr, u32 gaps)
{
	struct tbv_frame *frame;

	while ((frame = tbv_reseq_pop(&sr->rs)))
		tbv_stripe_deliver_held(sr->qp, frame);
	if (!sr->rs.held) {
		sr->gap_watched = false;
	} else {
		if (!sr->gap_watched || sr->rs.next != sr->gap_next) {
			sr->gap_watched = true;
			sr->gap_next = sr->rs.next;
			sr->gap_waited = 0;
		}
		if (!timer_pending(&sr->timer))
			mod_timer(&sr->timer, jiffies + msecs_to_jiffies(TBV_STRIPE_TICK_MS));
	}
	if (sr->rs.gaps_given_up != gaps)
		atomic64_add(sr->rs.gaps_given_up - gaps, &sr->qp->dev->rstats.stripe_gaps);
}

static void tbv_stripe_timer(struct timer_list *t)
{
	struct tbv_stripe_rx *sr = timer_container_of(sr, t, timer);
	u32 gaps;
	struct tbv_frame *frame;

	spin_lock(&sr->lock);
	gaps = sr->rs.gaps_given_up;
	if (sr->gap_watched && sr->rs.next == sr->gap_next &&
	    time_before_eq(jiffies, t->expires + msecs_to_jiffies(TBV_STRIPE_TICK_MS / 2)))
		sr->gap_waited += TBV_STRIPE_TICK_MS;
	if (sr->gap_watched && sr->rs.next == sr->gap_next &&
	    sr->gap_waited >= TBV_STRIPE_GIVE_UP_MS) {
		frame = tbv_reseq_pop_any(&sr->rs);
		if (frame)
			tbv_stripe_deliver_held(sr->qp, frame);
	}
	tbv_stripe_drain(sr, gaps);
	spin_unlock(&sr->lock);
}

/* Does @qp resequence @h (a sequenced packet)? Not if it is not the partner's or the QP does not stripe. */
bool tbv_stripe_rx_wanted(struct tbv_qp *qp, const struct tbv_rdma_hdr *h)
{
	enum ib_qp_state state = READ_ONCE(qp->state);

	if (!qp->stripe.rx || h->src_qpn != qp->dest_qpn || qp->loopback || !qp->rail)
		return false;
	/* a QP not connected (reset, not yet RTR, in error) drops it anyway: keep the state clean */
	return state == IB_QPS_RTR || state == IB_QPS_RTS || state == IB_QPS_SQD ||
	       state == IB_QPS_SQE;
}

/*
 * A sequenced packet for @qp arrived on @rail (NAPI; tbv_stripe_rx_wanted()
 * said yes): handed over in TSN order. TBV_RX_KEPT: @frame is held for its
 * turn, and the poll posts one of the rail's spares in its place.
 */
enum tbv_rx_fate tbv_stripe_rx(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *frame,
			       const struct tbv_rdma_hdr *h)
{
	struct tbv_stripe_rx *sr = qp->stripe.rx;
	enum tbv_rx_fate fate = TBV_RX_REPOST;
	struct tbv_frame *held;
	u32 gaps;

	spin_lock(&sr->lock);
	gaps = sr->rs.gaps_given_up;
	switch (tbv_reseq_arrive(&sr->rs, h->tsn, rail->idx)) {
	case TBV_RESEQ_NOW:
		/* rails neither duplicate nor reorder and resends get new TSNs: one given up on */
		if (h->tsn != sr->rs.next)
			atomic64_inc(&qp->dev->rstats.stripe_late);
		tbv_reseq_taken(&sr->rs, h->tsn);
		tbv_deliver(qp, h, tbv_frame_payload(frame, h), false);
		break;
	case TBV_RESEQ_HOLD:
		if (tbv_pool_rx_spare_ready(rail)) {
			tbv_reseq_hold(&sr->rs, h->tsn, frame);
			atomic64_inc(&qp->dev->rstats.stripe_held);
			fate = TBV_RX_KEPT;
		} else {
			/* no spare buffer: as if lost on the way */
			atomic64_inc(&qp->dev->rstats.stripe_dropped);
		}
		break;
	case TBV_RESEQ_DUP:
		atomic64_inc(&qp->dev->rstats.stripe_dropped);
		break;
	case TBV_RESEQ_FAR:
		while ((held = tbv_reseq_skip_to(&sr->rs, h->tsn)))
			tbv_stripe_deliver_held(qp, held);
		tbv_reseq_taken(&sr->rs, h->tsn);
		tbv_deliver(qp, h, tbv_frame_payload(frame, h), false);
		break;
	}
	tbv_stripe_drain(sr, gaps);
	spin_unlock(&sr->lock);
	return fate;
}

/* ---- The QP's life ---- */

int tbv_qp_stripe_create(struct tbv_qp *qp)
{
	struct tbv_stripe_rx *sr;

	BUILD_BUG_ON(TBV_RESEQ_MAX_LANES < TBV_MAX_RAILS);
	if (!qp->dev->link->stripe || qp->ibqp.qp_type != IB_QPT_RC)
		return 0;
	sr = kzalloc(sizeof(*sr), GFP_KERNEL);
	if (!sr)
		return -ENOMEM;
	sr->qp = qp;
	spin_lock_init(&sr->lock);
	timer_setup(&sr->timer, tbv_stripe_timer, 0);
	tbv_reseq_init(&sr->rs, qp->dev->link->nr_rails, true);
	qp->stripe.rx = sr;
	return 0;
}

/* Held frames go back to their rails' spares; TSNs start again from 0. */
static void tbv_stripe_rx_reset(struct tbv_stripe_rx *sr)
{
	struct tbv_frame *frame;

	spin_lock_bh(&sr->lock);
	while ((frame = tbv_reseq_pop_any(&sr->rs)))
		tbv_pool_rx_release(sr->qp->dev->link, frame);
	tbv_reseq_init(&sr->rs, sr->qp->dev->link->nr_rails, true);
	sr->gap_watched = false;
	spin_unlock_bh(&sr->lock);
}

/* The QP is reset: the peer's packets are expected from TSN 0 again. */
void tbv_qp_stripe_reset(struct tbv_qp *qp)
{
	if (qp->stripe.rx)
		tbv_stripe_rx_reset(qp->stripe.rx);
}

/* Destroy, once no RX path can reach the QP any more: nothing is handed over after this. */
void tbv_qp_stripe_stop(struct tbv_qp *qp)
{
	struct tbv_stripe_rx *sr = qp->stripe.rx;

	if (!sr)
		return;
	tbv_stripe_rx_reset(sr);	/* nothing held: the timer does not re-arm itself */
	timer_delete_sync(&sr->timer);
}

/* Destroy, after tbv_qp_stripe_stop() and once the QP's transmitter is quiet. */
void tbv_qp_stripe_free(struct tbv_qp *qp)
{
	kfree(qp->stripe.rx);
	qp->stripe.rx = NULL;
}
