// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A sequence of frames on one rail through NET reassembly, the way the netdev
 * uses it (tbv_net_rx): decode the fragment header, ask tbv_net_reasm_push()
 * what to do, and copy the payload into a buffer of exactly the size the
 * netdev gives its skb when a packet starts (tbv_net_packet_room(): at most
 * the largest packet). ASan checks the copies; the checks below that a packet
 * is delivered only whole, in order, with the byte count the state machine
 * reports.
 */
#include "fuzz.h"
#include "tbv_frame.h"

/* The packet under construction as the netdev holds it, and what we know of it. */
struct fuzz_pkt {
	u8 *buf;		/* NULL: none */
	u32 cap;
	u32 used;
	u32 packet_id;
	u16 count;
	u16 next_index;
};

static void fuzz_pkt_drop(struct fuzz_pkt *pkt)
{
	free(pkt->buf);
	pkt->buf = NULL;
}

static void fuzz_frame(struct tbv_net_reasm *r, struct fuzz_pkt *pkt, const u8 *frame, u32 len)
{
	bool discarded, complete;
	struct tbv_net_frag f;
	bool had = pkt->buf != NULL;

	if (tbv_net_frag_decode(frame, len, &f))
		return;

	switch (tbv_net_reasm_push(r, &f, &discarded, &complete)) {
	case TBV_REASM_START:
		FUZZ_CHECK(f.index == 0);
		FUZZ_CHECK(discarded == had);
		fuzz_pkt_drop(pkt);
		pkt->cap = tbv_net_packet_room(&f);
		pkt->buf = malloc(pkt->cap);
		if (!pkt->buf)
			abort();
		pkt->used = 0;
		pkt->packet_id = f.packet_id;
		pkt->count = f.count;
		pkt->next_index = 0;
		break;
	case TBV_REASM_APPEND:
		FUZZ_CHECK(had && !discarded);
		FUZZ_CHECK(f.packet_id == pkt->packet_id && f.count == pkt->count);
		FUZZ_CHECK(f.index == pkt->next_index);
		break;
	case TBV_REASM_DROP:
		FUZZ_CHECK(f.index != 0);
		FUZZ_CHECK(discarded == had);
		FUZZ_CHECK(!complete && !r->active);
		fuzz_pkt_drop(pkt);
		return;
	default:
		FUZZ_CHECK(0);
	}

	/* skb_put_data(): must fit the buffer allocated at the start. */
	FUZZ_CHECK(pkt->used + f.len <= pkt->cap);
	memcpy(pkt->buf + pkt->used, frame + TBV_NET_HDR_LEN, f.len);
	pkt->used += f.len;
	pkt->next_index++;
	FUZZ_CHECK(r->received == pkt->used);
	FUZZ_CHECK(complete == (pkt->next_index == pkt->count));
	FUZZ_CHECK(r->active == !complete);
	if (complete) {
		/* Whole: every fragment but the last was full. */
		FUZZ_CHECK(pkt->used > (u32)(pkt->count - 1) * TBV_NET_FRAG_PAYLOAD ||
			   (pkt->count == 1 && pkt->used == 0));
		fuzz_pkt_drop(pkt);
	}
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct tbv_net_reasm r = { 0 };
	struct fuzz_pkt pkt = { 0 };
	u8 rec[FUZZ_REASM_REC];

	while (fuzz_take(&in, rec, sizeof(rec)) == sizeof(rec)) {
		u32 len = TBV_MIN(tbv_get_le16(rec + FUZZ_REASM_HDR), (u32)FUZZ_MAX_FRAME);
		u8 *frame = malloc(len);	/* exactly the frame: ASan sees any overread */

		if (!frame)
			abort();
		memset(frame, 0xa5, len);
		memcpy(frame, rec, TBV_MIN(len, (u32)FUZZ_REASM_HDR));
		fuzz_frame(&r, &pkt, frame, len);
		free(frame);
	}
	fuzz_pkt_drop(&pkt);
	return 0;
}
