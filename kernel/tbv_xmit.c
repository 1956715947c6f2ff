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
 * header's and *@payload, both or none. The header's is the QP's batch's
 * next entry when the batch is for @rail and has room (one frame and one
 * credit then), else a frame of its own, which starts a batch. As
 * tbv_xmit_get() otherwise.
 */
struct tbv_frame *tbv_xmit_get_pkt(struct tbv_qp *qp, struct tbv_rail *rail, enum tbv_tx_use use,
				   bool loopback, u8 flags, u32 payload_len,
				   struct tbv_frame **payload)
{
	struct tbv_split_batch *batch = &qp->tx.batch;

	*payload = NULL;
	if (!tbv_rdma_needs_split(flags, payload_len))
		return tbv_xmit_get(qp, rail, use, loopback);
	if (!loopback && batch->n && batch->rail == rail && batch->n < TBV_SPLIT_BATCH) {
		*payload = tbv_xmit_get(qp, rail, use, false);
		if (!*payload)
			return NULL;
		batch->entry.data = (u8 *)batch->hdr->data + batch->n * TBV_SPLIT_ENTRY_LEN;
		return &batch->entry;
	}
	if (!loopback)
		tbv_xmit_flush(qp);	/* another rail's */
	return tbv_pool_get(rail, use, !loopback, &qp->tx.waiter,
			    READ_ONCE(qp->state) != IB_QPS_ERR, payload);
}

/* A frame from tbv_xmit_get() or tbv_xmit_get_pkt() goes back unsent. */
void tbv_xmit_unget(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *frame,
		    bool loopback)
{
	if (frame == &qp->tx.batch.entry)
		return;	/* a batch's entry not taken: the batch holds what it did */
	tbv_pool_unget(rail, frame, !loopback);
}

/* The QP's batch of split packets, if it holds any, to its rail's ring. */
void tbv_xmit_flush(struct tbv_qp *qp)
{
	struct tbv_split_batch *batch = &qp->tx.batch;

	if (!batch->n)
		return;
	batch->hdr->size = batch->n * TBV_SPLIT_ENTRY_LEN;
	batch->hdr->sof = TBV_PDF_SOF;
	batch->hdr->eof = TBV_PDF_EOF;
	tbv_pool_send_batch(batch->rail, batch->hdr, batch->payload, batch->n);
	batch->n = 0;
	batch->hdr = NULL;
	batch->rail = NULL;
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
	/* the QP's packets leave in the order they were built (and numbered) */
	tbv_xmit_flush(qp);
	if (qp->stripe.rx)
		tbv_stripe_tx_sent(qp, frame);
	tbv_pool_send(rail, frame);
}

/*
 * Send a packet too long for one frame (tbv_rdma_needs_split(), a split link
 * only): @hdr holds it encoded as one (a frame, or the batch's next entry,
 * tbv_xmit_get_pkt()), @payload its payload, copied or naming an MR's page.
 * It joins the QP's batch. To our own device it goes as one frame, the header
 * beside the payload.
 */
void tbv_xmit_send_split(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *hdr,
			 struct tbv_frame *payload, bool loopback)
{
	struct tbv_split_batch *batch = &qp->tx.batch;

	if (loopback) {
		tbv_split_join(hdr, payload);
		tbv_xmit_unget(qp, rail, hdr, true);
		tbv_xmit_send(qp, rail, payload, true);
		return;
	}
	if (qp->stripe.rx)
		tbv_stripe_tx_sent(qp, hdr);	/* the TSN goes in the header */
	tbv_split_entry(hdr->data, payload);
	if (hdr != &batch->entry) {
		/* a frame of its own: a new batch (tbv_xmit_get_pkt() sent the last) */
		batch->rail = rail;
		batch->hdr = hdr;
	}
	batch->payload[batch->n++] = payload;
	if (batch->n == TBV_SPLIT_BATCH)
		tbv_xmit_flush(qp);
}
