// SPDX-License-Identifier: GPL-2.0
/*
 * A QP's packets onto the wire, for the requester and the responder: the rail
 * a packet leaves on (its QP's, a striped QP's next, rail 0 for loopback), a
 * frame from that rail's pool (tbv_pool.c), and the frame's way out: the TX
 * ring, or the device's loopback queue for packets to our own GIDs, which the
 * loopback work delivers (tbv_recv.c) so RX is never entered from TX.
 */
#include "tbv.h"

/*
 * The rail a QP's next packet leaves on: loopback frames all come from rail 0;
 * a striped QP's move from rail to rail (the transmitter, tx_lock held).
 */
struct tbv_rail *tbv_xmit_rail(struct tbv_qp *qp, bool loopback)
{
	if (loopback)
		return &qp->dev->link->rails[0];
	return qp->stripe.rx ? tbv_stripe_tx_rail(qp) : qp->rail;
}

/*
 * A free TX frame, or NULL with the QP queued to be kicked when one frees up
 * (unless it is in error). A frame for the wire (not @loopback) also needs a credit.
 */
struct tbv_frame *tbv_xmit_get(struct tbv_qp *qp, struct tbv_rail *rail, enum tbv_tx_use use,
			       bool loopback)
{
	return tbv_pool_get(rail, use, !loopback, &qp->tx.waiter,
			    READ_ONCE(qp->state) != IB_QPS_ERR);
}

/* A frame from tbv_xmit_get() goes back unsent. */
void tbv_xmit_unget(struct tbv_rail *rail, struct tbv_frame *frame, bool loopback)
{
	tbv_pool_unget(rail, frame, !loopback);
}

/* Send the packet in @frame: on @rail's ring, or to our own device. */
void tbv_xmit_send(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *frame,
		   bool loopback)
{
	struct tbv_dev *dev = qp->dev;

	frame->sof = TBV_PDF_SOF;
	frame->eof = TBV_PDF_EOF;
	if (loopback) {
		spin_lock_bh(&dev->loop_lock);
		list_add_tail(&frame->list, &dev->loop_frames);
		spin_unlock_bh(&dev->loop_lock);
		queue_work(tbv_wq, &dev->loop_work);
		return;
	}
	if (qp->stripe.rx)
		tbv_stripe_tx_sent(qp, frame);
	tbv_pool_send(rail, frame);
}
