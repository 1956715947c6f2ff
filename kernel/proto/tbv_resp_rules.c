// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The responder's opcode sequence and message byte count (tbv_resp_rules.h).
 * Peer input: every decision is made before a byte is placed, and the byte
 * count is compared by addition in 64 bits, never by a subtraction that could
 * wrap.
 */
#include "tbv_resp_rules.h"

static u8 tbv_resp_msg_kind_of(u8 kind)
{
	switch (kind) {
	case TBV_RK_SEND:
		return TBV_MSG_SEND;
	case TBV_RK_WRITE:
		return TBV_MSG_WRITE;
	default:
		return TBV_MSG_NONE;
	}
}

enum tbv_resp_verdict tbv_resp_seq_check(const struct tbv_resp_msg *m, u8 kind, u8 flags)
{
	switch (kind) {
	case TBV_RK_SEND:
	case TBV_RK_WRITE:
		if (m->kind == TBV_MSG_NONE)
			return (flags & TBV_RF_FIRST) ? TBV_RESP_OK : TBV_RESP_BAD_SEQ;
		if (m->kind != tbv_resp_msg_kind_of(kind) || (flags & TBV_RF_FIRST))
			return TBV_RESP_BAD_SEQ;
		return TBV_RESP_OK;
	case TBV_RK_READ_REQ:
	case TBV_RK_ATOMIC:
	case TBV_RK_FLUSH:
	case TBV_RK_ATOMIC_WRITE:
		/* single-packet requests: never inside another message */
		return m->kind == TBV_MSG_NONE ? TBV_RESP_OK : TBV_RESP_BAD_SEQ;
	default:
		return TBV_RESP_BAD_SEQ;	/* not a request */
	}
}

enum tbv_resp_verdict tbv_resp_accept(const struct tbv_resp_msg *m,
				      const struct tbv_rdma_hdr *h, u32 recv_len)
{
	bool first = h->flags & TBV_RF_FIRST, last = h->flags & TBV_RF_LAST;
	enum tbv_resp_verdict v = tbv_resp_seq_check(m, h->kind, h->flags);
	u64 placed, room;

	if (v != TBV_RESP_OK)
		return v;
	placed = first ? 0 : m->placed;
	placed += h->payload_len;
	if (h->kind == TBV_RK_SEND) {
		room = first ? recv_len : m->room;
		return placed > room ? TBV_RESP_TOO_LONG : TBV_RESP_OK;
	}
	if (h->kind != TBV_RK_WRITE)
		return TBV_RESP_OK;
	room = first ? h->len : m->room;
	/* a packet before the last leaves bytes for it; the last completes the WRITE */
	if (last ? placed != room : placed >= room)
		return TBV_RESP_BAD_LEN;
	return TBV_RESP_OK;
}

u32 tbv_resp_placed(struct tbv_resp_msg *m, const struct tbv_rdma_hdr *h, u32 recv_len)
{
	u32 total;

	if (h->kind != TBV_RK_SEND && h->kind != TBV_RK_WRITE)
		return 0;
	if (h->flags & TBV_RF_FIRST) {
		m->kind = tbv_resp_msg_kind_of(h->kind);
		m->room = h->kind == TBV_RK_SEND ? recv_len : h->len;
		m->placed = 0;
	}
	m->placed += h->payload_len;
	total = m->placed;
	if (h->flags & TBV_RF_LAST)
		tbv_resp_abandon(m);
	return total;
}
