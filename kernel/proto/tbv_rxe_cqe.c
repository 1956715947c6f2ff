// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completions written into CQ rings shared with user space
 * (docs/rxe-abi.md, section 4.3).
 */
#include "tbv_rxe_cqe.h"

/* Native-order stores at any alignment: the process reads the ring as its own structs. */
static void tbv_rxe_st32(u8 *slot, u32 off, u32 v)
{
	memcpy(slot + off, &v, sizeof(v));
}

static void tbv_rxe_st64(u8 *slot, u32 off, u64 v)
{
	memcpy(slot + off, &v, sizeof(v));
}

u32 tbv_rxe_cqe_flags(u32 kernel_flags)
{
	u32 flags = 0;

	if (kernel_flags & TBV_RXE_KWC_GRH)
		flags |= TBV_RXE_UWC_GRH;
	if (kernel_flags & TBV_RXE_KWC_WITH_IMM)
		flags |= TBV_RXE_UWC_WITH_IMM;
	if (kernel_flags & TBV_RXE_KWC_WITH_INVALIDATE)
		flags |= TBV_RXE_UWC_WITH_INV;
	return flags;
}

void tbv_rxe_cqe_write(u8 *slot, const struct tbv_rxe_cqe *c)
{
	/* vendor_err, pkey_index, slid, sl, dlid_path_bits, reserved: 0 */
	memset(slot, 0, TBV_RXE_CQE_SIZE);
	tbv_rxe_st64(slot, TBV_RXE_CQE_WR_ID, c->wr_id);
	tbv_rxe_st32(slot, TBV_RXE_CQE_STATUS, c->status);
	tbv_rxe_st32(slot, TBV_RXE_CQE_OPCODE, c->opcode);
	tbv_rxe_st32(slot, TBV_RXE_CQE_BYTE_LEN, c->byte_len);
	tbv_rxe_st32(slot, TBV_RXE_CQE_EX, c->ex);
	tbv_rxe_st32(slot, TBV_RXE_CQE_QP_NUM, c->qp_num);
	tbv_rxe_st32(slot, TBV_RXE_CQE_SRC_QP, c->src_qp);
	tbv_rxe_st32(slot, TBV_RXE_CQE_WC_FLAGS, tbv_rxe_cqe_flags(c->wc_flags));
	slot[TBV_RXE_CQE_PORT_NUM] = TBV_RXE_CQE_PORT;
}
