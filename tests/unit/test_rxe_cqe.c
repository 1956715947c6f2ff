// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The completions written into CQ rings shared with user space
 * (kernel/proto/tbv_rxe_cqe.c): struct ib_uverbs_wc's layout, user space's
 * flag values, and every byte of the slot written (docs/rxe-abi.md 4.3).
 */
#include "tbv_test.h"
#include "../../kernel/proto/tbv_rxe_cqe.h"

static u32 ld32(const u8 *s, u32 off)
{
	u32 v;

	memcpy(&v, s + off, sizeof(v));
	return v;
}

static u64 ld64(const u8 *s, u32 off)
{
	u64 v;

	memcpy(&v, s + off, sizeof(v));
	return v;
}

TEST(rxe_cqe_layout_is_ib_uverbs_wc)
{
	/* offsets of L include/uapi/rdma/ib_user_verbs.h (the module asserts them too) */
	CHECK_EQ(TBV_RXE_CQE_STATUS, 8);
	CHECK_EQ(TBV_RXE_CQE_BYTE_LEN, 20);
	CHECK_EQ(TBV_RXE_CQE_EX, 24);
	CHECK_EQ(TBV_RXE_CQE_QP_NUM, 28);
	CHECK_EQ(TBV_RXE_CQE_WC_FLAGS, 36);
	CHECK_EQ(TBV_RXE_CQE_PORT_NUM, 46);
	CHECK_EQ(TBV_RXE_CQE_SIZE, 48);
}

TEST(rxe_cqe_every_field_lands_in_place)
{
	const struct tbv_rxe_cqe c = {
		.wr_id = 0x1122334455667788ull, .status = 5, .opcode = 0x81,
		.byte_len = 4096, .ex = 0xa1b2c3d4, .qp_num = 0x123456, .src_qp = 0xabcdef,
		.wc_flags = TBV_RXE_KWC_GRH | TBV_RXE_KWC_WITH_IMM,
	};
	u8 s[64];

	memset(s, 0x5a, sizeof(s));
	tbv_rxe_cqe_write(s, &c);
	CHECK_EQ(ld64(s, TBV_RXE_CQE_WR_ID), 0x1122334455667788ull);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_STATUS), 5);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_OPCODE), 0x81);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_VENDOR_ERR), 0);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_BYTE_LEN), 4096);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_EX), 0xa1b2c3d4);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_QP_NUM), 0x123456);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_SRC_QP), 0xabcdef);
	CHECK_EQ(ld32(s, TBV_RXE_CQE_WC_FLAGS), TBV_RXE_UWC_GRH | TBV_RXE_UWC_WITH_IMM);
	/* pkey_index, slid, sl, dlid_path_bits: 0; port 1; reserved 0 */
	CHECK_EQ(ld32(s, TBV_RXE_CQE_PKEY_INDEX), 0);
	CHECK_EQ(s[TBV_RXE_CQE_SL], 0);
	CHECK_EQ(s[TBV_RXE_CQE_DLID_PATH_BITS], 0);
	CHECK_EQ(s[TBV_RXE_CQE_PORT_NUM], 1);
	CHECK_EQ(s[TBV_RXE_CQE_SIZE - 1], 0);
	/* nothing past the CQE: the rest of the slot is padding the writer leaves alone */
	CHECK_EQ(s[TBV_RXE_CQE_SIZE], 0x5a);
}

TEST(rxe_cqe_flags_are_user_space_values)
{
	u32 k;

	CHECK_EQ(tbv_rxe_cqe_flags(0), 0);
	CHECK_EQ(tbv_rxe_cqe_flags(TBV_RXE_KWC_GRH), 1);
	CHECK_EQ(tbv_rxe_cqe_flags(TBV_RXE_KWC_WITH_IMM), 2);
	/* IBV_WC_WITH_INV is 8; the kernel's 4 would read as IBV_WC_IP_CSUM_OK */
	CHECK_EQ(tbv_rxe_cqe_flags(TBV_RXE_KWC_WITH_INVALIDATE), 8);
	/* IB_WC_IP_CSUM_OK (8), WITH_SMAC, WITH_VLAN, WITH_NETWORK_HDR_TYPE ...: not passed on */
	for (k = 8; k; k <<= 1)
		CHECK_EQ(tbv_rxe_cqe_flags(k), 0);
	CHECK_EQ(tbv_rxe_cqe_flags(0xffffffffu), 1 | 2 | 8);
}

TEST(rxe_cqe_overwrites_an_earlier_cqe_whole)
{
	const struct tbv_rxe_cqe first = {
		.wr_id = ~0ull, .status = 0xffffffffu, .opcode = 0xffffffffu, .byte_len = ~0u,
		.ex = ~0u, .qp_num = ~0u, .src_qp = ~0u, .wc_flags = ~0u,
	};
	const struct tbv_rxe_cqe second = { .wr_id = 9, .opcode = 1 };
	u8 s[TBV_RXE_CQE_SIZE], want[TBV_RXE_CQE_SIZE];
	const u64 wr_id = 9;
	const u32 opcode = 1;

	memset(s, 0xff, sizeof(s));
	tbv_rxe_cqe_write(s, &first);
	tbv_rxe_cqe_write(s, &second);
	memset(want, 0, sizeof(want));
	memcpy(want + TBV_RXE_CQE_WR_ID, &wr_id, sizeof(wr_id));
	memcpy(want + TBV_RXE_CQE_OPCODE, &opcode, sizeof(opcode));
	want[TBV_RXE_CQE_PORT_NUM] = 1;
	CHECK(memcmp(s, want, sizeof(want)) == 0);
}
