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

#endif /* TBV_FUZZ_H */
