/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Completions the kernel writes into a CQ ring shared with user space, in
 * rdma_rxe's layout: struct ib_uverbs_wc of <rdma/ib_user_verbs.h>, which the
 * rxe provider reads in place (docs/rxe-abi.md, section 4.3). The module
 * checks these offsets and flag values against the uapi headers at build time
 * (tbv_cq.c). The ring is in the host's byte order.
 */
#ifndef TBV_RXE_CQE_H
#define TBV_RXE_CQE_H

#include "tbv_types.h"

/* struct ib_uverbs_wc */
#define TBV_RXE_CQE_WR_ID		0
#define TBV_RXE_CQE_STATUS		8
#define TBV_RXE_CQE_OPCODE		12
#define TBV_RXE_CQE_VENDOR_ERR		16
#define TBV_RXE_CQE_BYTE_LEN		20
#define TBV_RXE_CQE_EX			24	/* imm_data or invalidate_rkey */
#define TBV_RXE_CQE_QP_NUM		28
#define TBV_RXE_CQE_SRC_QP		32
#define TBV_RXE_CQE_WC_FLAGS		36
#define TBV_RXE_CQE_PKEY_INDEX		40	/* u16 */
#define TBV_RXE_CQE_SLID		42	/* u16 */
#define TBV_RXE_CQE_SL			44	/* u8 */
#define TBV_RXE_CQE_DLID_PATH_BITS	45	/* u8 */
#define TBV_RXE_CQE_PORT_NUM		46	/* u8 */
#define TBV_RXE_CQE_SIZE		48

/* The kernel's completion flags (enum ib_wc_flags) that a user CQE can carry. */
#define TBV_RXE_KWC_GRH			1u
#define TBV_RXE_KWC_WITH_IMM		2u
#define TBV_RXE_KWC_WITH_INVALIDATE	4u

/*
 * The same in user space's values (enum ibv_wc_flags): WITH_INV is 8 there;
 * the kernel's 4 would read as IBV_WC_IP_CSUM_OK (rxe writes it so).
 */
#define TBV_RXE_UWC_GRH			1u
#define TBV_RXE_UWC_WITH_IMM		2u
#define TBV_RXE_UWC_WITH_INV		8u

/* The port every completion names: the device has one. */
#define TBV_RXE_CQE_PORT		1

/* One completion, as the kernel knows it (struct ib_wc's fields a user CQE has). */
struct tbv_rxe_cqe {
	u64 wr_id;
	u32 status;			/* enum ib_wc_status: the same values in user space */
	u32 opcode;			/* enum ib_wc_opcode: likewise */
	u32 byte_len;
	u32 ex;				/* imm_data as carried (network order), or an rkey */
	u32 qp_num;
	u32 src_qp;			/* UD receives */
	u32 wc_flags;			/* TBV_RXE_KWC_*: other bits are not passed on */
};

/* The user-space wc_flags for the kernel's @kernel_flags; flags user CQEs lack are dropped. */
u32 tbv_rxe_cqe_flags(u32 kernel_flags);

/*
 * Write @c into @slot (at least TBV_RXE_CQE_SIZE bytes of the ring): every byte
 * of the CQE, so nothing of an earlier one or of the process's writes stays.
 */
void tbv_rxe_cqe_write(u8 *slot, const struct tbv_rxe_cqe *c);

#endif /* TBV_RXE_CQE_H */
