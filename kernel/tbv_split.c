// SPDX-License-Identifier: GPL-2.0
/*
 * Split packets and zero-copy TX (TBV_CAP_SPLIT; docs/wire-protocol.md,
 * "Split packets"). On a link that agreed it, a full RDMA packet carries a
 * page of payload, which with its header does not fit one frame: its header
 * travels as an entry of a header frame, its payload in a frame of its own.
 * The payload frame can then be a pinned page of the MR itself (the
 * controller reads it, as it reads a frame buffer), so the sender copies
 * nothing. A header frame carries the headers of up to TBV_SPLIT_BATCH
 * packets that leave in a row on the rail (a QP's transmitter gathers them,
 * tbv_xmit.c): a frame costs more than the copy of a page, so one header
 * frame per packet would cost more than it saves (docs/performance.md).
 *
 * Why not a header in front of the page: a TX descriptor is one buffer, and
 * the controller gathers nothing. Why a page: packets cut at 4048 bytes from
 * the message's start straddle a page boundary almost every time.
 *
 * This file: the capability; the rail's ring_tx, which every frame takes, so
 * nothing slips between a header frame and its payload frames; and the
 * receiving side, which keeps a header frame's entries until the payload
 * frames after it came, then hands each payload frame on with its header
 * beside it (frame->prefix): the payload is not copied again before it
 * reaches the MR. The pair check (a tag in the payload frame's PDFs, samples
 * of its bytes) keeps a header from being paired with another packet's
 * payload when frames were lost between.
 */
#include <linux/highmem.h>
#include <linux/moduleparam.h>

#include "tbv.h"

/*
 * Off by default until a controller has carried it: payload frames are told
 * apart by PDFs (3..15) that only the emulated NHI has received so far, and a
 * controller whose RX ring dropped them would lose every full packet. Here it
 * pays since headers are batched (docs/performance.md, "Zero-copy TX").
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

/* Queue @frame on @rail's TX ring; never between a header frame and its payload frames. */
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
 * Queue a header frame @hdr and the payload frames of its @n entries back to
 * back, each pair with the rail's next tag (neighbours never share one).
 * Returns how many of the n + 1 frames the ring took, in order: fewer only
 * while the ring stops; those complete as usual, the others are the caller's.
 */
unsigned int tbv_rail_ring_tx_batch(struct tbv_rail *rail, struct tbv_frame *hdr,
				    struct tbv_frame **payload, unsigned int n)
{
	const struct tbv_link_ops *ops = rail->link->info.ops;
	unsigned int i, queued = 0;
	unsigned long flags;

	spin_lock_irqsave(&rail->ring_lock, flags);
	for (i = 0; i < n; i++) {
		tbv_split_set_tag((u8 *)hdr->data + i * TBV_SPLIT_ENTRY_LEN, rail->split_tag);
		payload[i]->sof = tbv_split_sof(rail->split_tag);
		payload[i]->eof = tbv_split_eof(rail->split_tag);
		rail->split_tag = (rail->split_tag + 1) % TBV_SPLIT_TAGS;
	}
	if (!ops->ring_tx(rail->tx, hdr))
		for (queued = 1; queued <= n; queued++)
			if (ops->ring_tx(rail->tx, payload[queued - 1]))
				break;
	spin_unlock_irqrestore(&rail->ring_lock, flags);
	return queued;
}

/*
 * Make @entry, which holds a packet encoded as one (tbv_rdma_encode()), an
 * entry of a header frame for the payload in @payload. Tag 0 for now: each
 * pair takes the rail's next when it is queued (tbv_rail_ring_tx_batch()).
 */
void tbv_split_entry(u8 *entry, const struct tbv_frame *payload)
{
	const u8 *bytes = payload->page ? kmap_local_page(payload->page) + payload->page_off :
					  payload->data;

	tbv_split_encode(entry, 0, bytes, bytes + payload->size - TBV_SPLIT_SAMPLE);
	if (payload->page)
		kunmap_local(bytes);
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

/* Entries held without their payload: a typed frame came first (frames are lost, not reordered) */
static void tbv_split_rx_drop_held(struct tbv_rail *rail)
{
	rail->stats.rx_split_dropped += rail->split_count - rail->split_next;
	rail->split_count = 0;
	rail->split_next = 0;
}

/*
 * A payload frame: its header is the held entry with its tag (entries before
 * it lost their payloads); it must pass the pair check too. The header is
 * checked whole, on the kept copy, once its payload's length is known
 * (tbv_rdma_decode_split()).
 */
static enum tbv_split_rx tbv_split_rx_payload(struct tbv_rail *rail, struct tbv_frame *frame)
{
	int tag = tbv_split_tag(frame->sof, frame->eof);
	unsigned int i = rail->split_next;
	const u8 *hdr;

	while (i < rail->split_count && rail->split_hdrs[i][TBV_RDMA_HDR_LEN] != tag)
		i++;
	if (tag < 0 || i == rail->split_count) {
		rail->stats.rx_split_dropped++;	/* no header for it */
		return TBV_SPLIT_CONSUMED;
	}
	rail->stats.rx_split_dropped += i - rail->split_next;
	rail->split_next = i + 1;
	hdr = rail->split_hdrs[i];
	if (!tbv_split_pairs(hdr, frame->data, frame->size, frame->sof, frame->eof)) {
		rail->stats.rx_split_dropped++;
		return TBV_SPLIT_CONSUMED;
	}
	memcpy(frame->prefix, hdr, TBV_RDMA_HDR_LEN);
	frame->has_prefix = true;
	return TBV_SPLIT_PACKET;
}

/*
 * Look at @frame before its type: a header frame's entries are kept aside
 * (TBV_SPLIT_CONSUMED), a payload frame becomes the packet, with its header
 * as its prefix (TBV_SPLIT_PACKET). A payload frame with no header held for
 * it or that fails the pair check, or held headers whose payload never came
 * (another typed frame came first), are dropped and counted; RC resends.
 */
enum tbv_split_rx tbv_split_rx(struct tbv_rail *rail, struct tbv_frame *frame)
{
	const u8 *data = frame->data;
	u32 n;

	/*
	 * A link that did not agree split packets reads no PDF: a frame's type
	 * is its first byte. Silicon may report a one-packet frame's SOF as 0
	 * (docs/hardware.md), and a frame of ours must not be mistaken then.
	 */
	if (!rail->link->split)
		return TBV_SPLIT_NONE;
	/* never read as a typed frame: its bytes are someone's payload */
	if (!tbv_pdf_typed(frame->sof, frame->eof))
		return tbv_split_rx_payload(rail, frame);
	tbv_split_rx_drop_held(rail);
	if (frame->size && data[0] == TBV_FT_RDMA_SPLIT) {
		n = tbv_split_entries(frame->size);
		if (!n) {
			rail->stats.rx_malformed++;
			return TBV_SPLIT_CONSUMED;
		}
		memcpy(rail->split_hdrs, data, frame->size);
		rail->split_count = n;
		return TBV_SPLIT_CONSUMED;
	}
	return TBV_SPLIT_NONE;
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
