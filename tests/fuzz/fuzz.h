/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared by the libFuzzer harnesses and the seed generator (make_seeds.c): the
 * identities of the two ends, our login offer, the record format of the
 * harnesses that take a sequence of messages, and the invariant check.
 *
 * Multi-message inputs are cut into records; a record that runs past the end
 * of the input is cut short, so every byte string is a valid input.
 */
#ifndef TBV_FUZZ_H
#define TBV_FUZZ_H

#include <stdio.h>
#include <stdlib.h>
#include "tbv_types.h"
#include "tbv_login.h"

/* A violated invariant is a finding: say which, then die so libFuzzer saves the input. */
#define FUZZ_CHECK(cond)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: invariant violated: %s\n",	\
				__FILE__, __LINE__, #cond);		\
			abort();					\
		}							\
	} while (0)

/* Read @n bytes as their consumer would, so that ASan checks they lie inside the buffer. */
static inline void fuzz_touch(const u8 *p, size_t n)
{
	u8 sum = 0;

	while (n--)
		sum += *p++;
	__asm__ __volatile__("" : : "r"(sum));	/* keep the reads */
}

/* We are "local", the cable's other end is "peer"; the control route to the peer. */
static const u8 fuzz_local_uuid[TBV_UUID_LEN] = {
	0x10, 0xca, 0x1a, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
};

static const u8 fuzz_peer_uuid[TBV_UUID_LEN] = {
	0x9e, 0xe4, 0x9e, 0xe4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
};

#define FUZZ_ROUTE		0x301ull
#define FUZZ_FIRST_COMMAND_ID	100u

/*
 * fuzz_login input: one config byte choosing our offer, then records
 * { op u8, len u8, len bytes }. FUZZ_OP_PEER: a control packet from the peer
 * arrives (tbv_link_ctl_rx); FUZZ_OP_ANSWER: we send a LOGIN attempt (a new
 * command id) and the record is the answer to it (the login work).
 */
enum fuzz_login_op {
	FUZZ_OP_PEER = 0,
	FUZZ_OP_ANSWER = 1,
	FUZZ_OP_MASK = 1,
};

/* Our offer: rails 1..4 and the RX ring size 16..2048 from @cfg, like a module parameter. */
static inline void fuzz_local_params(struct tbv_login_params *p, u8 cfg)
{
	unsigned int i;

	memset(p, 0, sizeof(*p));
	p->version_min = TBV_PROTO_VERSION_MIN;
	p->version_max = TBV_PROTO_VERSION_MAX;
	p->caps = TBV_CAP_NONE;
	p->rails = 1 + (cfg & 3);
	p->ring_size = 16u << ((cfg >> 2) & 7);
	p->frame_size = TBV_FRAME_SIZE;
	for (i = 0; i < TBV_MAX_RAILS; i++)
		p->tx_hopid[i] = TBV_MIN_HOPID + i;
	p->session = 0x5e55;
}

/*
 * fuzz_net_reasm input: records of FUZZ_REASM_REC bytes, each one frame on a
 * rail: its first TBV_NET_HDR_LEN bytes, then the frame length le16 (clamped
 * to FUZZ_MAX_FRAME). The harness fills the payload with a pattern, so a
 * sequence of full 4 KiB fragments costs 14 bytes each.
 */
#define FUZZ_REASM_HDR		12	/* = TBV_NET_HDR_LEN */
#define FUZZ_REASM_REC		(FUZZ_REASM_HDR + 2)
#define FUZZ_MAX_FRAME		(TBV_FRAME_SIZE + 64)

/* A cursor over the fuzzer's input. */
struct fuzz_in {
	const u8 *p;
	size_t left;
};

/* Up to @n bytes into @dst; returns how many there were. */
static inline size_t fuzz_take(struct fuzz_in *in, void *dst, size_t n)
{
	n = TBV_MIN(n, in->left);
	memcpy(dst, in->p, n);
	in->p += n;
	in->left -= n;
	return n;
}

/* The next @n bytes (fewer at the end) as a heap block of exactly that size, for ASan. */
static inline u8 *fuzz_take_block(struct fuzz_in *in, size_t n, size_t *got)
{
	u8 *b;

	n = TBV_MIN(n, in->left);
	b = malloc(n);	/* malloc(0) is a valid, empty block under ASan and glibc */
	if (!b)
		abort();
	*got = fuzz_take(in, b, n);
	return b;
}

/*
 * fuzz_reseq input (fuzz_reseq.c): a config byte, then steps.
 * Free mode, a step: an op byte; an arrival then has a byte with its lane, the
 * form of its TSN and whether a spare buffer is left, then the TSN's bytes.
 * Sender mode: a le32 TSN to start near, then a step byte each.
 */
#define FUZZ_RESEQ_LANES	0x03	/* config: lanes - 1 */
#define FUZZ_RESEQ_CHUNKED	0x04	/* config: the receiver knows chunks stay on one lane */
#define FUZZ_RESEQ_SENDER	0x08	/* config: sender mode */

enum fuzz_reseq_op {		/* free mode: op & 7 */
	FUZZ_RESEQ_ARRIVE = 0,	/* 0 to 3 */
	FUZZ_RESEQ_GIVE_UP = 4,	/* the give-up timer */
	FUZZ_RESEQ_RESET = 5,
	FUZZ_RESEQ_DRAIN = 6,	/* and 7 */
};

#define FUZZ_RESEQ_LANE		0x07	/* arrival: the lane (may be beyond the lanes) */
#define FUZZ_RESEQ_FORM_SHIFT	3	/* arrival: the TSN's form, 2 bits: */
enum fuzz_reseq_form {
	FUZZ_RESEQ_NEAR,	/* next + s8 */
	FUZZ_RESEQ_AHEAD,	/* next + le16 */
	FUZZ_RESEQ_ANY,		/* le32 */
	FUZZ_RESEQ_BEHIND,	/* next - le16 */
};
#define FUZZ_RESEQ_NO_SPARE	0x20	/* arrival: no spare buffer, a packet to hold is dropped */

#define FUZZ_SEND_LANE		0x03	/* sender step: deliver the head of this lane */
#define FUZZ_SEND_LOSE		0x04	/* sender step: lose it instead */
#define FUZZ_SEND_EMIT		0x08	/* sender step: first send one more packet */
#define FUZZ_SEND_CHUNK_SHIFT	4	/* sender step: 2 bits, the lane of a new chunk */

/*
 * fuzz_credit input (fuzz_credit.c): a config byte, then steps: a byte with
 * the end (FUZZ_CREDIT_END), the op (low 4 bits) and its argument (bits
 * 4-6); a made-up frame takes FUZZ_CREDIT_FORGED_LEN more bytes.
 */
#define FUZZ_CREDIT_RING_BITS	2	/* config: each end's ring size, 2 bits each: */
#define FUZZ_CREDIT_LOSSY	0x10	/* config: frames may be lost on the way */
#define FUZZ_CREDIT_DUPS	0x20	/* config: frames may be delivered twice */
#define FUZZ_CREDIT_FORGING	0x40	/* config: the peer may make credit frames up */
#define FUZZ_CREDIT_END		0x80
#define FUZZ_CREDIT_ARG_SHIFT	4

enum fuzz_credit_op {
	FUZZ_CREDIT_PRODUCE_ONE,	/* the requester: one frame */
	FUZZ_CREDIT_PRODUCE_MANY,	/* the netdev: a packet's 1 + 2 * arg fragments */
	FUZZ_CREDIT_QUEUE,		/* producer arg queues what it counted */
	FUZZ_CREDIT_GIVE_BACK,		/* or gives its one frame back */
	FUZZ_CREDIT_DELIVER,		/* 1 + 4 * arg frames reach the peer's controller */
	FUZZ_CREDIT_NAPI = 7,		/* reap up to 1 + 8 * arg frames, then advertise */
	FUZZ_CREDIT_TICK = 9,		/* the request timer */
	FUZZ_CREDIT_LOSE,		/* the frame at the head of the wire is lost */
	FUZZ_CREDIT_DUPLICATE,		/* it reaches the peer twice */
	FUZZ_CREDIT_FORGE,		/* the peer makes one up: flags, le32 seq, le32 limit */
	FUZZ_CREDIT_SETTLE,		/* and above: everything on the wire arrives and is reaped */
};
#define FUZZ_CREDIT_FORGED_LEN	9

/*
 * fuzz_resp_seq input (fuzz_resp_seq.c): a config byte, then records of
 * FUZZ_RESP_REC bytes, one packet each: kind, flags (FIRST, LAST, IMM; or
 * FUZZ_RESP_ABANDON: the message is lost, as at a UC gap), payload_len le16,
 * then le32 whose low bits are the first packet's room: the receive WQE's
 * length for a SEND, the announced length for a WRITE.
 */
#define FUZZ_RESP_KEEP		0x01	/* config: a refusal leaves the message in progress */
#define FUZZ_RESP_REC		8
#define FUZZ_RESP_ABANDON	0x80
#define FUZZ_RESP_SIZE_MASK	0x3ffff	/* up to 256 KiB: a few dozen packets */

/*
 * fuzz_rxe_wqe input (fuzz_rxe_wqe.c): FUZZ_RXE_HDR bytes of limits, then the
 * slot: every byte left, as a heap block of exactly that size. The limits: a
 * config byte (FUZZ_RXE_*), max_sge, max_inline le16, max_msg le32 (0: 2 GiB).
 */
#define FUZZ_RXE_HDR		8
#define FUZZ_RXE_RECV		0x01	/* config: a receive slot, else a send slot */
#define FUZZ_RXE_QPT_SHIFT	1	/* config: 2 bits, the QP type (3: UD too) */
#define FUZZ_RXE_FLUSH_VERBS	0x08	/* config: the kernel has FLUSH and ATOMIC_WRITE */

#endif /* TBV_FUZZ_H */
