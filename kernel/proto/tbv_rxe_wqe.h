/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Work requests that user space writes into the rings it shares with the
 * kernel, in rdma_rxe's layout (struct rxe_send_wqe, struct rxe_recv_wqe of
 * <rdma/rdma_user_rxe.h>; docs/rxe-abi.md, section 6). The kernel copies a
 * slot once into its own memory; these functions take that copy and the
 * queue's limits and return a validated work request or the completion status
 * the work request fails with. They read only the bytes of the copy, each
 * field once, and nothing of the result comes from a field they did not check.
 *
 * The ring is in the host's byte order (the process writes native integers);
 * the layout is fixed by the uapi header, which the module checks these
 * offsets against at build time (tbv_uqueue.c).
 */
#ifndef TBV_RXE_WQE_H
#define TBV_RXE_WQE_H

#include "tbv_types.h"

/* Native-order loads at any alignment: the process wrote the ring as its own structs. */
static inline u32 tbv_rxe_ld32(const u8 *p)
{
	u32 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline u64 tbv_rxe_ld64(const u8 *p)
{
	u64 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* struct rxe_send_wqe: its wr (struct rxe_send_wr), then rxe's state, then its dma info */
#define TBV_RXE_SWQE_WR_ID		0
#define TBV_RXE_SWQE_OPCODE		12
#define TBV_RXE_SWQE_SEND_FLAGS		16
#define TBV_RXE_SWQE_EX			20	/* imm_data or invalidate_rkey */
#define TBV_RXE_SWQE_REMOTE_ADDR	24	/* wr.rdma, wr.atomic, wr.flush */
#define TBV_RXE_SWQE_RDMA_RKEY		32
#define TBV_RXE_SWQE_ATOMIC_COMPARE_ADD	32
#define TBV_RXE_SWQE_ATOMIC_SWAP	40
#define TBV_RXE_SWQE_ATOMIC_RKEY	48
#define TBV_RXE_SWQE_FLUSH_RKEY		36
#define TBV_RXE_SWQE_FLUSH_TYPE		40
#define TBV_RXE_SWQE_FLUSH_LEVEL	41
#define TBV_RXE_SWQE_UD_REMOTE_QPN	24
#define TBV_RXE_SWQE_UD_REMOTE_QKEY	28
#define TBV_RXE_SWQE_UD_AH_NUM		36
#define TBV_RXE_SWQE_MW_ADDR		24
#define TBV_RXE_SWQE_MW_LENGTH		32
#define TBV_RXE_SWQE_MW_MR_LKEY		40
#define TBV_RXE_SWQE_MW_MW_RKEY		44
#define TBV_RXE_SWQE_MW_RKEY		48
#define TBV_RXE_SWQE_MW_ACCESS		52
#define TBV_RXE_SWQE_DMA_LENGTH		184
#define TBV_RXE_SWQE_DMA_NUM_SGE	196
#define TBV_RXE_SWQE_DATA		208	/* SGEs, inline data or atomic_wr */
#define TBV_RXE_SWQE_SIZE		208

/* struct rxe_recv_wqe */
#define TBV_RXE_RWQE_WR_ID		0	/* as the send WQE's */
#define TBV_RXE_RWQE_DMA_NUM_SGE	28
#define TBV_RXE_RWQE_SGE		40
#define TBV_RXE_RWQE_SIZE		40

/* struct rxe_sge */
#define TBV_RXE_SGE_ADDR		0
#define TBV_RXE_SGE_LENGTH		8
#define TBV_RXE_SGE_LKEY		12
#define TBV_RXE_SGE_SIZE		16

/* Opcodes in the ring: user space's (ib_uverbs_wr_opcode), equal to the kernel's IB_WR_*. */
enum tbv_rxe_wr_opcode {
	TBV_RXE_WR_RDMA_WRITE = 0,
	TBV_RXE_WR_RDMA_WRITE_WITH_IMM = 1,
	TBV_RXE_WR_SEND = 2,
	TBV_RXE_WR_SEND_WITH_IMM = 3,
	TBV_RXE_WR_RDMA_READ = 4,
	TBV_RXE_WR_ATOMIC_CMP_AND_SWP = 5,
	TBV_RXE_WR_ATOMIC_FETCH_AND_ADD = 6,
	TBV_RXE_WR_LOCAL_INV = 7,
	TBV_RXE_WR_BIND_MW = 8,
	TBV_RXE_WR_SEND_WITH_INV = 9,
	TBV_RXE_WR_FLUSH = 14,
	TBV_RXE_WR_ATOMIC_WRITE = 15,
};

/* The send flags that mean something here (IB_SEND_*); the others are dropped. */
#define TBV_RXE_SEND_FENCE		1u
#define TBV_RXE_SEND_SIGNALED		2u
#define TBV_RXE_SEND_SOLICITED		4u
#define TBV_RXE_SEND_INLINE		8u
#define TBV_RXE_SEND_FLAGS_KEPT		(TBV_RXE_SEND_FENCE | TBV_RXE_SEND_SIGNALED | \
					 TBV_RXE_SEND_SOLICITED | TBV_RXE_SEND_INLINE)

/* FLUSH type (a bit mask on the wire, one value here) and level (ib_uverbs_flush_*) */
#define TBV_RXE_FLUSH_GLOBAL		1
#define TBV_RXE_FLUSH_PERSISTENT	2
#define TBV_RXE_FLUSH_RANGE		0
#define TBV_RXE_FLUSH_MR		1

/* What a refused work request completes with (enum ib_wc_status). */
enum tbv_rxe_status {
	TBV_RXE_OK = 0,			/* IB_WC_SUCCESS: validated */
	TBV_RXE_LOC_LEN_ERR = 1,
	TBV_RXE_LOC_QP_OP_ERR = 2,
};

enum tbv_rxe_qp_type {
	TBV_RXE_QPT_RC,
	TBV_RXE_QPT_UC,
	TBV_RXE_QPT_UD,
};

/* The most SGEs any queue has: the device's max_send_sge, max_recv_sge, max_srq_sge. */
#define TBV_RXE_MAX_SGE			16
#define TBV_RXE_ATOMIC_LEN		8
#define TBV_RXE_MAX_QPN			0xffffff

/* What the queue promised user space when it was made, and what it holds. */
struct tbv_rxe_limits {
	u8 qp_type;			/* enum tbv_rxe_qp_type (receive queues: unused) */
	bool flush_verbs;		/* the kernel has FLUSH and ATOMIC_WRITE */
	u32 max_sge;			/* reported max_send_sge / max_recv_sge */
	u32 max_inline;			/* reported max_inline_data (send queues) */
	u32 max_msg;			/* the port's max_msg_sz */
};

struct tbv_rxe_sge {
	u64 addr;
	u32 length;
	u32 lkey;
};

/* A validated send work request. Fields its opcode does not use are 0. */
struct tbv_rxe_send {
	u64 wr_id;
	u32 opcode;			/* enum tbv_rxe_wr_opcode */
	u32 send_flags;			/* TBV_RXE_SEND_FLAGS_KEPT only */
	u32 ex;				/* imm_data as stored (network order), or an rkey to invalidate */
	u32 length;			/* the message's bytes (FLUSH: the range's) */
	u64 remote_addr;		/* RDMA, atomics, FLUSH */
	u32 rkey;
	u64 compare_add;		/* atomics */
	u64 swap;
	u8 flush_type;
	u8 flush_level;
	u32 remote_qpn;			/* UD */
	u32 remote_qkey;
	u32 ah_num;			/* UD: non-zero; whose AH it is the caller checks */
	u64 mw_addr;			/* BIND_MW */
	u64 mw_length;
	u32 mw_mr_lkey;
	u32 mw_rkey;			/* the window's rkey now */
	u32 mw_new_rkey;
	u32 mw_access;
	/* the payload: SGEs, or (inline, ATOMIC_WRITE) @length bytes of the slot copy */
	u32 num_sge;
	struct tbv_rxe_sge sge[TBV_RXE_MAX_SGE];
	const u8 *data;			/* within the copy: data + length <= its end */
};

/* A validated receive work request. */
struct tbv_rxe_recv {
	u64 wr_id;
	u32 num_sge;
	u32 length;			/* the SGEs' sum, at most max_msg (room for any message) */
	struct tbv_rxe_sge sge[TBV_RXE_MAX_SGE];
};

/*
 * Whether a QP of @qp_type (enum tbv_rxe_qp_type) may post @op, whether it
 * comes from a ring or from the kernel's post_send (the opcode values are the
 * same, tbv_uqueue.c checks it). @flush_verbs: the kernel has FLUSH and
 * ATOMIC_WRITE. Kernel-only opcodes (fast registration), masked atomics and
 * LSO are refused.
 */
bool tbv_rxe_opcode_ok(u32 qp_type, u32 op, bool flush_verbs);

/*
 * The send work request in @slot (@len bytes, the kernel's copy). Returns
 * TBV_RXE_OK and fills @out, or the status it completes with; out->wr_id is
 * set either way (when @len holds it).
 */
enum tbv_rxe_status tbv_rxe_send_parse(const u8 *slot, u32 len, const struct tbv_rxe_limits *lim,
				       struct tbv_rxe_send *out);

/* The receive work request in @slot, likewise. */
enum tbv_rxe_status tbv_rxe_recv_parse(const u8 *slot, u32 len, const struct tbv_rxe_limits *lim,
				       struct tbv_rxe_recv *out);

/*
 * Ring sizing, as rdma_rxe sizes its rings: the element a queue asking for
 * @max_sge SGEs (and @max_inline inline bytes: send queues) is made for; its
 * slots are that rounded up to a power of two of at least a cache line
 * (tbv_uqueue.c). The arguments are within the device's maxima.
 */
u32 tbv_rxe_send_elem(u32 max_sge, u32 max_inline);
u32 tbv_rxe_recv_elem(u32 max_sge);

/*
 * What a slot of @slot bytes holds, at most the device's @dev_max_sge and
 * @dev_max_inline: the caps the queue reports, so every WQE the process may
 * post within them fits its slot (and is checked against them, as the limits).
 */
struct tbv_rxe_caps {
	u32 max_sge;
	u32 max_inline;			/* send queues */
};

void tbv_rxe_send_caps(u32 slot, u32 dev_max_sge, u32 dev_max_inline, struct tbv_rxe_caps *caps);
u32 tbv_rxe_recv_caps(u32 slot, u32 dev_max_sge);

#endif /* TBV_RXE_WQE_H */
