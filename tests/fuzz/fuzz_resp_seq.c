// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The responder's opcode sequence and message byte count
 * (kernel/proto/tbv_resp_rules.c), driven as tbv_resp.c drives them: each
 * packet is judged by tbv_resp_accept(); an accepted one is placed into the
 * buffer of the message in progress (a heap block of exactly the receive
 * WQE's or the WRITE's length, so ASan sees a byte placed outside it) and
 * counted by tbv_resp_placed(); a refused one abandons the message (the
 * kernel's RC NAK or UC drop), or, if the input's first byte says so, leaves
 * it as it was (every refusal must leave the state safe either way). A step
 * may also abandon the message as a UC gap does. A model kept here checks
 * after every step:
 *
 *  - a middle or last packet is accepted only inside a message of its own
 *    kind, a first or single-packet request only when none is in progress;
 *  - the bytes counted are the bytes accepted since the first packet, never
 *    more than the room (the receive WQE's length, the WRITE's announced one);
 *  - a WRITE completes with exactly the bytes it announced, a SEND with what
 *    was placed;
 *  - the state is bounded: a known kind, and none in progress after a last.
 *
 * The input format is in fuzz.h (FUZZ_RESP_*).
 */
#include "fuzz.h"
#include "tbv_resp_rules.h"

struct model {
	u8 kind;		/* message in progress, as the accepted packets say */
	u32 room;
	u32 placed;
	u8 *buf;		/* room bytes */
};

static void model_end(struct model *mo)
{
	free(mo->buf);
	*mo = (struct model){};
}

static u8 kind_of(u8 kind)
{
	return kind == TBV_RK_SEND ? TBV_MSG_SEND : kind == TBV_RK_WRITE ? TBV_MSG_WRITE :
		TBV_MSG_NONE;
}

static void fuzz_step(struct tbv_resp_msg *m, struct model *mo, const u8 *rec, bool keep)
{
	struct tbv_rdma_hdr h = {
		.kind = rec[0] % (TBV_RK_MAX + 2),
		.flags = rec[1] & (TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_IMM),
		.payload_len = tbv_get_le16(rec + 2),
	};
	u32 size = tbv_get_le32(rec + 4) & FUZZ_RESP_SIZE_MASK;
	bool first = h.flags & TBV_RF_FIRST, last = h.flags & TBV_RF_LAST;
	enum tbv_resp_verdict v;
	u32 total;

	if (rec[1] & FUZZ_RESP_ABANDON) {
		tbv_resp_abandon(m);
		model_end(mo);
		return;
	}
	h.len = size;		/* a WRITE's announced length; a SEND's WQE length below */
	v = tbv_resp_accept(m, &h, size);
	if (h.kind != TBV_RK_SEND && h.kind != TBV_RK_WRITE) {
		bool request = h.kind == TBV_RK_READ_REQ || h.kind == TBV_RK_ATOMIC ||
			       h.kind == TBV_RK_FLUSH || h.kind == TBV_RK_ATOMIC_WRITE;

		FUZZ_CHECK((v == TBV_RESP_OK) == (request && mo->kind == TBV_MSG_NONE));
		FUZZ_CHECK(tbv_resp_placed(m, &h, size) == 0);
		return;
	}
	if (v == TBV_RESP_OK) {
		/* the sequence rule */
		FUZZ_CHECK(first ? mo->kind == TBV_MSG_NONE : mo->kind == kind_of(h.kind));
		if (first) {
			mo->kind = kind_of(h.kind);
			mo->room = size;
			mo->placed = 0;
			mo->buf = malloc(size);
			if (!mo->buf)
				abort();
		}
		/* place the bytes where the kernel would: ASan checks the block's end */
		memset(mo->buf + mo->placed, 0xa5, h.payload_len);
		mo->placed += h.payload_len;
		total = tbv_resp_placed(m, &h, size);
		FUZZ_CHECK(total == mo->placed);
		FUZZ_CHECK(total <= mo->room);
		if (last) {
			FUZZ_CHECK(h.kind != TBV_RK_WRITE || total == mo->room);
			FUZZ_CHECK(m->kind == TBV_MSG_NONE);
			model_end(mo);
		}
	} else {
		FUZZ_CHECK(v == TBV_RESP_BAD_SEQ || v == TBV_RESP_TOO_LONG ||
			   v == TBV_RESP_BAD_LEN);
		/* in sequence, but its bytes do not fit: the model would overflow */
		if (v != TBV_RESP_BAD_SEQ)
			FUZZ_CHECK(first ? mo->kind == TBV_MSG_NONE : mo->kind == kind_of(h.kind));
		if (!keep) {
			tbv_resp_abandon(m);
			model_end(mo);
		}
	}
	FUZZ_CHECK(m->kind == mo->kind);
	FUZZ_CHECK(m->kind == TBV_MSG_NONE || (m->placed == mo->placed && m->room == mo->room));
	FUZZ_CHECK(m->placed <= m->room);
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct tbv_resp_msg m = {};
	struct model mo = {};
	struct fuzz_in in = { data, size };
	u8 cfg = 0, rec[FUZZ_RESP_REC];

	fuzz_take(&in, &cfg, 1);
	while (in.left) {
		memset(rec, 0, sizeof(rec));
		fuzz_take(&in, rec, sizeof(rec));
		fuzz_step(&m, &mo, rec, cfg & FUZZ_RESP_KEEP);
	}
	model_end(&mo);
	return 0;
}
