// SPDX-License-Identifier: GPL-2.0
/*
 * Striping: one RC QP's packets spread over all the rails of its link, so a
 * single large transfer uses every ring pair (docs/wire-protocol.md,
 * "Striping"). Agreed at login (TBV_CAP_STRIPE) when the link has more than
 * one rail. UC QPs do not stripe: a gap given up on loses a UC message, and a
 * rail that lags far enough behind the others makes one.
 *
 * The sender numbers every packet a QP sends with a TSN and every
 * TBV_STRIPE_CHUNK packets (a chunk: TSNs k * 16 to k * 16 + 15, all on one
 * rail) moves to the rail that can take most now (the next in turn on a tie),
 * so a rail that lags behind the others (a slower ring, a receiver short of
 * buffers) gets fewer packets. The receiver puts each QP's packets back into
 * TSN order before the responder and the completer see them
 * (kernel/proto/tbv_reseq.c): a packet ahead of a gap is held, its RX buffer
 * kept and a spare posted to the ring in its place, so nothing is copied and
 * the credits stay exact. A gap is lost once the rail its chunk came on (or,
 * not knowing that, every rail) has passed it. Others are given up only after
 * TBV_STRIPE_GIVE_UP_MS of this CPU's time: a rail can fall far behind the
 * others without losing anything (a receiver catching up after a stall, a
 * busy sender), and giving up early made late packets NAKed and resent for
 * nothing. Either way the QP's PSN check then does what it does for a frame
 * lost on one rail.
 *
 * This file: the capability, and the sending side (TSNs, the rail rotation),
 * which the QP's transmitter calls; the receiving side is tbv_stripe_rx.c.
 */
#include <linux/moduleparam.h>

#include "tbv.h"

static bool tbv_stripe = true;
module_param_named(stripe, tbv_stripe, bool, 0644);
MODULE_PARM_DESC(stripe,
		 "offer striping at login (links made later; both ends must offer it): one QP's packets use every rail of the link (default Y)");

#define TBV_STRIPE_CHUNK	TBV_RESEQ_CHUNK	/* packets on one rail before choosing again */

u32 tbv_stripe_caps(void)
{
	return READ_ONCE(tbv_stripe) ? TBV_CAP_STRIPE : 0;
}

bool tbv_stripe_agreed(const struct tbv_link *link)
{
	return (link->login.agreed.caps & TBV_CAP_STRIPE) && link->login.agreed.rails > 1;
}

/* ---- Transmit (the QP's transmitter, qp->tx.lock held) ---- */

struct tbv_rail *tbv_stripe_tx_rail(struct tbv_qp *qp)
{
	return &qp->dev->link->rails[qp->stripe.rail];
}

/*
 * The rail for the next chunk: the one with most room (free TX frames and
 * credits), the next in turn on a tie (equal rails take turns). A rail whose
 * frames leave slower than the others' keeps more of them queued, so it is
 * chosen less often, and a QP's packets do not pile up behind it. The rooms
 * are read without the rails' locks: a hint; the frame and credit are taken
 * under the lock as for any packet.
 */
static unsigned int tbv_stripe_next_rail(struct tbv_qp *qp)
{
	struct tbv_link *link = qp->dev->link;
	unsigned int n = min_t(unsigned int, link->nr_rails, TBV_MAX_RAILS), r;
	u32 room[TBV_MAX_RAILS];

	for (r = 0; r < n; r++)	/* unlocked: a hint, see above */
		room[r] = data_race(tbv_pool_room(&link->rails[r]));
	return tbv_stripe_pick_rail(room, n, qp->stripe.rail);
}

/*
 * The QP gave up on its packets in flight: the requester resends (a timeout, a
 * NAK, RNR), or the responder got a duplicate request, so the peer's requester
 * resends. The peer may hold packets behind a gap that will never fill: without
 * this, the resends, numbered after that gap, would wait behind it until the
 * peer's give-up timer (longer than an ACK timeout), and every resend in the
 * meantime would be held too until the QP ran out of retries. The next packet
 * takes a TSN a whole window ahead (tbv_reseq_restart_tsn()), on which the peer
 * gives up every gap at once; packets in flight before it are then late
 * duplicates for the PSN check. Any context: the transmitter reads it under
 * tx.lock.
 */
void tbv_stripe_tx_restart(struct tbv_qp *qp)
{
	if (qp->stripe.rx)
		WRITE_ONCE(qp->stripe.restart, true);
}

/* A packet of the QP goes on the wire now: number it; every chunk, choose a rail again. */
void tbv_stripe_tx_sent(struct tbv_qp *qp, struct tbv_frame *frame)
{
	if (READ_ONCE(qp->stripe.restart)) {
		WRITE_ONCE(qp->stripe.restart, false);
		/* a new chunk, on the rail this packet was given */
		qp->stripe.tsn = tbv_reseq_restart_tsn(qp->stripe.tsn);
		qp->stripe.sent = 0;
	}
	tbv_rdma_set_tsn(frame->data, qp->stripe.tsn++);
	if (++qp->stripe.sent < TBV_STRIPE_CHUNK)
		return;
	qp->stripe.sent = 0;
	qp->stripe.rail = tbv_stripe_next_rail(qp);
}

/* A new QP (numbered): QPs start spread over the rails. */
void tbv_stripe_tx_start(struct tbv_qp *qp)
{
	qp->stripe.rail = qp->ibqp.qp_num % qp->dev->link->nr_rails;
}

/* The QP is reset: its packets are numbered from TSN 0 again, from its first rail. */
void tbv_stripe_tx_reset(struct tbv_qp *qp)
{
	if (!qp->stripe.rx)
		return;
	spin_lock_bh(&qp->tx.lock);
	qp->stripe.tsn = 0;
	qp->stripe.sent = 0;
	WRITE_ONCE(qp->stripe.restart, false);
	qp->stripe.rail = qp->ibqp.qp_num % qp->dev->link->nr_rails;
	spin_unlock_bh(&qp->tx.lock);
}
