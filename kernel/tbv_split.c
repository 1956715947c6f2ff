// SPDX-License-Identifier: GPL-2.0
/*
 * Split packets and zero-copy TX (TBV_CAP_SPLIT; docs/wire-protocol.md,
 * "Split packets"). On a link that agreed it, a full RDMA packet carries a
 * page of payload, which with its header does not fit one frame: it leaves as
 * two frames back to back on one rail, the header, then the payload. The
 * payload frame can then be a pinned page of the MR itself (the controller
 * reads it, as it reads a frame buffer), so the sender copies nothing.
 *
 * Why not a header in front of the page: a TX descriptor is one buffer, and
 * the controller gathers nothing. Why a page: packets cut at 4048 bytes from
 * the message's start straddle a page boundary almost every time.
 *
 * This file: the capability; the rail's ring_tx, which every frame takes, so
 * nothing slips between a split packet's two frames; and the receiving side,
 * which keeps a header frame's bytes until the payload frame after it, then
 * hands the payload frame on with the header beside it (frame->prefix): the
 * payload is not copied again before it reaches the MR. The pair check (a tag
 * in the payload frame's PDFs, samples of its bytes) keeps a header from
 * being paired with another packet's payload when frames were lost between.
 */
#include <linux/highmem.h>
#include <linux/moduleparam.h>

#include "tbv.h"

/*
 * Off by default: each full packet then costs two frames, and here (docs/performance.md,
 * "Zero-copy TX") the second frame's cost outweighs the copy it saves.
 */
static bool tbv_zero_copy;
module_param_named(zero_copy, tbv_zero_copy, bool, 0644);
MODULE_PARM_DESC(zero_copy,
		 "offer split packets at login (links made later; both ends must offer it): page-sized packets whose payload the controller reads from the MR's pages instead of a copy (default N)");

u32 tbv_split_caps(void)
{
	return READ_ONCE(tbv_zero_copy) ? TBV_CAP_SPLIT : 0;
}

bool tbv_split_agreed(const struct tbv_link *link)
{
	return link->login.agreed.caps & TBV_CAP_SPLIT;
}

/* ---- TX ---- */

/* Queue @frame on @rail's TX ring; never between the two frames of a split packet. */
int tbv_rail_ring_tx(struct tbv_rail *rail, struct tbv_frame *frame)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&rail->ring_lock, flags);
	ret = rail->link->info.ops->ring_tx(rail->tx, frame);
	spin_unlock_irqrestore(&rail->ring_lock, flags);
	return ret;
}

/*
 * Queue a split packet's header frame @hdr and payload frame @payload back to
 * back. Returns 0, or the ring's error (only while it stops) with *@queued
 * saying how many of the two it took: those complete as usual, the others
 * are the caller's again.
 */
int tbv_rail_ring_tx_split(struct tbv_rail *rail, struct tbv_frame *hdr,
			   struct tbv_frame *payload, unsigned int *queued)
{
	const struct tbv_link_ops *ops = rail->link->info.ops;
	unsigned long flags;
	int ret;

	*queued = 0;
	spin_lock_irqsave(&rail->ring_lock, flags);
	/* a tag for each pair, in the order pairs leave: neighbours never share one */
	tbv_split_set_tag(hdr->data, rail->split_tag);
	payload->sof = tbv_split_sof(rail->split_tag);
	payload->eof = tbv_split_eof(rail->split_tag);
	rail->split_tag = (rail->split_tag + 1) % TBV_SPLIT_TAGS;
	ret = ops->ring_tx(rail->tx, hdr);
	if (!ret) {
		*queued = 1;
		ret = ops->ring_tx(rail->tx, payload);
		if (!ret)
			*queued = 2;
	}
	spin_unlock_irqrestore(&rail->ring_lock, flags);
	return ret;
}

/*
 * Make @hdr, which holds a packet encoded as one (tbv_rdma_encode()), the
 * header frame of a split packet whose payload is in @payload. Tag 0 for now:
 * the tag is the rail's next when the pair is queued (tbv_rail_ring_tx_split()).
 */
void tbv_split_frames(struct tbv_frame *hdr, struct tbv_frame *payload)
{
	const u8 *bytes = payload->page ? kmap_local_page(payload->page) + payload->page_off :
					  payload->data;

	hdr->size = tbv_split_encode(hdr->data, 0, bytes,
				     bytes + payload->size - TBV_SPLIT_SAMPLE);
	if (payload->page)
		kunmap_local(bytes);
	hdr->sof = TBV_PDF_SOF;
	hdr->eof = TBV_PDF_EOF;
}

/*
 * The same packet for our own RX (loopback): one frame, the payload with the
 * header beside it, as the rail's RX hands a split packet on. @hdr is free.
 */
void tbv_split_join(struct tbv_frame *hdr, struct tbv_frame *payload)
{
	BUILD_BUG_ON(TBV_RDMA_HDR_LEN > TBV_FRAME_PREFIX_MAX);
	memcpy(payload->prefix, hdr->data, TBV_RDMA_HDR_LEN);
	payload->prefix[0] = TBV_FT_RDMA_SPLIT;
	payload->has_prefix = true;
}

/* ---- RX (the rail's NAPI poll) ---- */

/*
 * Look at @frame before its type: a split packet's header frame is kept
 * aside (TBV_SPLIT_CONSUMED), its payload frame becomes the packet, with the
 * header as its prefix (TBV_SPLIT_PACKET). A payload frame with no header
 * right before it on the rail or that fails the pair check, or a header whose
 * payload never came (another frame came first: frames are lost, never
 * reordered, on a rail), is dropped and counted; RC resends the packet. The
 * header is checked whole, on the kept copy, once its payload's length is
 * known (tbv_rdma_decode_split()). Frames the controller flagged break a
 * pending pair too (tbv_split_rx_lost()).
 */
enum tbv_split_rx tbv_split_rx(struct tbv_rail *rail, struct tbv_frame *frame)
{
	const u8 *data = frame->data;

	if (!tbv_pdf_typed(frame->sof, frame->eof)) {
		/* never read as a typed frame: its bytes are someone's payload */
		if (!rail->split_pending ||
		    !tbv_split_pairs(rail->split_hdr, data, frame->size, frame->sof, frame->eof)) {
			rail->split_pending = false;
			rail->stats.rx_split_dropped++;
			return TBV_SPLIT_CONSUMED;
		}
		rail->split_pending = false;
		memcpy(frame->prefix, rail->split_hdr, TBV_RDMA_HDR_LEN);
		frame->has_prefix = true;
		return TBV_SPLIT_PACKET;
	}
	if (rail->split_pending) {
		rail->split_pending = false;
		rail->stats.rx_split_dropped++;
	}
	if (frame->size && data[0] == TBV_FT_RDMA_SPLIT) {
		/* the header and the pair check; a link that did not agree splits sends none */
		if (!rail->link->split || frame->size != TBV_SPLIT_FRAME_LEN) {
			rail->stats.rx_malformed++;
			return TBV_SPLIT_CONSUMED;
		}
		memcpy(rail->split_hdr, data, TBV_SPLIT_FRAME_LEN);
		rail->split_pending = true;
		return TBV_SPLIT_CONSUMED;
	}
	return TBV_SPLIT_NONE;
}

/* A frame of the rail was lost in the controller (flagged): a pending header's payload may be it. */
void tbv_split_rx_lost(struct tbv_rail *rail)
{
	if (rail->split_pending) {
		rail->split_pending = false;
		rail->stats.rx_split_dropped++;
	}
}

/* ---- The packet in a received frame, split or not ---- */

int tbv_frame_decode(const struct tbv_link *link, const struct tbv_frame *frame,
		     struct tbv_rdma_hdr *h)
{
	if (frame->has_prefix)
		return tbv_rdma_decode_split(frame->prefix, frame->size, link->rdma_full, h);
	return tbv_rdma_decode(frame->data, frame->size, link->rdma_full, h);
}

const u8 *tbv_frame_payload(const struct tbv_frame *frame, const struct tbv_rdma_hdr *h)
{
	if (frame->has_prefix)
		return frame->data;
	return (const u8 *)frame->data + tbv_rdma_hdr_len(h->flags);
}
