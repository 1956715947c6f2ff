/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The RC/UC responder's acceptance rules for the packets of a message, as pure
 * functions of a small state, so that the same code the kernel runs is unit
 * tested and fuzzed in user space.
 *
 * IBA's opcode sequence (9.8.3, "opcode sequence check"): while a SEND is in
 * progress only its middle and last packets may come, while a WRITE is, only
 * its middle and last; any other request (a new first or only packet of any
 * kind, a READ, an atomic, a FLUSH) only when none is. The bytes of the message
 * in progress are counted here, never more than its room: for a SEND the
 * length of the receive WQE it fills, for a WRITE the length its first packet
 * announced, which its last packet must then complete exactly.
 */
#ifndef TBV_RESP_RULES_H
#define TBV_RESP_RULES_H

#include "tbv_types.h"
#include "tbv_rdma.h"

enum tbv_resp_msg_kind {
	TBV_MSG_NONE = 0,
	TBV_MSG_SEND,
	TBV_MSG_WRITE,
};

/* The message in progress. */
struct tbv_resp_msg {
	u8 kind;		/* enum tbv_resp_msg_kind */
	u32 room;		/* SEND: the receive WQE's length; WRITE: the announced length */
	u32 placed;		/* bytes placed so far, never more than room */
};

enum tbv_resp_verdict {
	TBV_RESP_OK = 0,
	TBV_RESP_BAD_SEQ,	/* out of sequence: RC NAKs it as invalid, UC drops it */
	TBV_RESP_TOO_LONG,	/* SEND: more than the receive WQE holds (local length error) */
	TBV_RESP_BAD_LEN,	/* WRITE: more or, at its last packet, less than announced */
};

/* May a request of @kind with @flags (TBV_RF_FIRST, TBV_RF_LAST) come now? */
enum tbv_resp_verdict tbv_resp_seq_check(const struct tbv_resp_msg *m, u8 kind, u8 flags);

/*
 * May this SEND or WRITE packet be placed? The sequence, then its bytes
 * against the room; @recv_len is the length of the receive WQE a SEND's first
 * packet starts to fill (unused otherwise).
 */
enum tbv_resp_verdict tbv_resp_accept(const struct tbv_resp_msg *m,
				      const struct tbv_rdma_hdr *h, u32 recv_len);

/*
 * The packet tbv_resp_accept() accepted was placed: count it; after a last
 * packet no message is in progress. Returns the message's bytes so far (on a
 * last packet, the byte_len of its completion).
 */
u32 tbv_resp_placed(struct tbv_resp_msg *m, const struct tbv_rdma_hdr *h, u32 recv_len);

/* The message in progress is lost or refused: none is in progress any more. */
static inline void tbv_resp_abandon(struct tbv_resp_msg *m)
{
	m->kind = TBV_MSG_NONE;
	m->room = 0;
	m->placed = 0;
}

#endif /* TBV_RESP_RULES_H */
