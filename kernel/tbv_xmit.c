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
			    READ_ONCE(qp->state) != IB_QPS_ERR, NULL);
}

/*
 * The frames for a packet of @payload_len bytes with header @flags: one, or
 * for a packet that needs two (tbv_rdma_needs_split(), a split link only) the
 * header's and *@payload, both or none. As tbv_xmit_get() otherwise.
 */
struct tbv_frame *tbv_xmit_get_pkt(struct tbv_qp *qp, struct tbv_rail *rail, enum tbv_tx_use use,
				   bool loopback, u8 flags, u32 payload_len,
				   struct tbv_frame **payload)
{
	*payload = NULL;
	if (!tbv_rdma_needs_split(flags, payload_len))
		return tbv_xmit_get(qp, rail, use, loopback);
	return tbv_pool_get(rail, use, !loopback, &qp->tx.waiter,
			    READ_ONCE(qp->state) != IB_QPS_ERR, payload);
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

/*
 * Send a packet too long for one frame (tbv_rdma_needs_split(), a split link
 * only): @hdr holds it encoded as one, @payload (a second frame of the rail,
 * tbv_xmit_get()) its payload, copied or naming an MR's page. To our own
 * device it goes as one frame, the header beside the payload.
 */
void tbv_xmit_send_split(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *hdr,
			 struct tbv_frame *payload, bool loopback)
{
	if (loopback) {
		tbv_split_join(hdr, payload);
		tbv_xmit_unget(rail, hdr, true);
		tbv_xmit_send(qp, rail, payload, true);
		return;
	}
	if (qp->stripe.rx)
		tbv_stripe_tx_sent(qp, hdr);	/* the TSN goes in the header */
	tbv_split_frames(hdr, payload);
	tbv_pool_send_split(rail, hdr, payload);
}
