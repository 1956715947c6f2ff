// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The validation of user-written ring slots (kernel/proto/tbv_rxe_wqe.c): a
 * valid work request of every opcode, and the refusal of every field of
 * docs/rxe-abi.md's tables 6.1 and 6.2.
 */
#include "tbv_test.h"
#include "../../kernel/proto/tbv_rxe_wqe.h"

#define SLOT		512	/* a send slot: 208 + 16 SGEs of 16 bytes */
#define RSLOT		64	/* a receive slot: 40 + 1 SGE (a cache line) */
#define MAX_MSG		0x80000000u

static const struct tbv_rxe_limits rc = {
	.qp_type = TBV_RXE_QPT_RC, .flush_verbs = true, .max_sge = 4, .max_inline = 128,
	.max_msg = MAX_MSG,
};

static void st32(u8 *s, u32 off, u32 v)
{
	memcpy(s + off, &v, sizeof(v));
}

static void st64(u8 *s, u32 off, u64 v)
{
	memcpy(s + off, &v, sizeof(v));
}

/* A zeroed send slot with its wr_id, opcode and flags. */
static void swqe(u8 *s, u64 wr_id, u32 op, u32 flags)
{
	memset(s, 0, SLOT);
	st64(s, TBV_RXE_SWQE_WR_ID, wr_id);
	st32(s, TBV_RXE_SWQE_OPCODE, op);
	st32(s, TBV_RXE_SWQE_SEND_FLAGS, flags);
}

/* SGE @i at @at: length and dma.num_sge/length are the caller's to set. */
static void sge(u8 *s, u32 at, u32 i, u64 addr, u32 len, u32 lkey)
{
	u32 off = at + i * TBV_RXE_SGE_SIZE;

	st64(s, off + TBV_RXE_SGE_ADDR, addr);
	st32(s, off + TBV_RXE_SGE_LENGTH, len);
	st32(s, off + TBV_RXE_SGE_LKEY, lkey);
}

/* One SGE of @len bytes, as the provider posts it. */
static void one_sge(u8 *s, u32 len)
{
	sge(s, TBV_RXE_SWQE_DATA, 0, 0x1000, len, 0x77);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 1);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, len);
}

static enum tbv_rxe_status parse(const u8 *s, const struct tbv_rxe_limits *lim,
				 struct tbv_rxe_send *w)
{
	return tbv_rxe_send_parse(s, SLOT, lim, w);
}

/* A refused work request: its status, and nothing but its wr_id in the result. */
static void check_refused(const u8 *s, u32 len, const struct tbv_rxe_limits *lim,
			  enum tbv_rxe_status want, u64 wr_id, int line)
{
	struct tbv_rxe_send w, zero;

	memset(&zero, 0, sizeof(zero));
	zero.wr_id = wr_id;
	memset(&w, 0xa5, sizeof(w));
	if (tbv_rxe_send_parse(s, len, lim, &w) != want || memcmp(&w, &zero, sizeof(w))) {
		fprintf(stderr, "  line %d: not refused with %d and a bare wr_id\n", line, want);
		tbv_test_failures++;
	}
}

#define REFUSED(s, lim, want)	check_refused(s, SLOT, lim, want, 7, __LINE__)

TEST(rxe_wqe_layout_is_rxe_send_and_recv_wqe)
{
	/* the sizes the offsets add up to (the module checks each against the uapi header) */
	CHECK_EQ(TBV_RXE_SWQE_SIZE, 208);
	CHECK_EQ(TBV_RXE_RWQE_SIZE, 40);
	CHECK_EQ(TBV_RXE_SGE_SIZE, 16);
	CHECK_EQ(TBV_RXE_SWQE_DMA_NUM_SGE - TBV_RXE_SWQE_DMA_LENGTH,
		 TBV_RXE_RWQE_DMA_NUM_SGE - 16);
}

TEST(rxe_wqe_send_with_sges_takes_their_sum_and_known_flags)
{
	u8 s[SLOT];
	struct tbv_rxe_send w;

	swqe(s, 0x1122334455667788ull, TBV_RXE_WR_SEND_WITH_IMM,
	     TBV_RXE_SEND_SIGNALED | TBV_RXE_SEND_SOLICITED | 0x10 | 0x80000000u);
	st32(s, TBV_RXE_SWQE_EX, 0xdeadbeef);
	sge(s, TBV_RXE_SWQE_DATA, 0, 0xa000, 100, 0x11);
	sge(s, TBV_RXE_SWQE_DATA, 1, 0xb000, 28, 0x22);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 2);
	/* rdma-core 44..59's ibv_wr_set_sge_list(): num_sge times the first length */
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 200);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK(w.wr_id == 0x1122334455667788ull);
	CHECK_EQ(w.opcode, TBV_RXE_WR_SEND_WITH_IMM);
	CHECK_EQ(w.send_flags, TBV_RXE_SEND_SIGNALED | TBV_RXE_SEND_SOLICITED);
	CHECK_EQ(w.ex, 0xdeadbeef);
	CHECK_EQ(w.length, 128);
	CHECK_EQ(w.num_sge, 2);
	CHECK_EQ(w.sge[0].addr, 0xa000);
	CHECK_EQ(w.sge[0].length, 100);
	CHECK_EQ(w.sge[0].lkey, 0x11);
	CHECK_EQ(w.sge[1].addr, 0xb000);
	CHECK_EQ(w.sge[1].length, 28);
	CHECK_EQ(w.sge[1].lkey, 0x22);
	CHECK(w.data == NULL);

	/* ibv_wr_set_sge() with length 0 writes nothing: an empty message */
	swqe(s, 1, TBV_RXE_WR_SEND, 0);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.length, 0);
	CHECK_EQ(w.num_sge, 0);
}

TEST(rxe_wqe_each_opcode_takes_its_union_fields)
{
	u8 s[SLOT];
	struct tbv_rxe_send w;

	swqe(s, 1, TBV_RXE_WR_RDMA_WRITE_WITH_IMM, 0);
	st64(s, TBV_RXE_SWQE_REMOTE_ADDR, 0x7f0000001000ull);
	st32(s, TBV_RXE_SWQE_RDMA_RKEY, 0x1234);
	st32(s, TBV_RXE_SWQE_EX, 99);
	one_sge(s, 64);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK(w.remote_addr == 0x7f0000001000ull);
	CHECK_EQ(w.rkey, 0x1234);
	CHECK_EQ(w.ex, 99);
	CHECK_EQ(w.length, 64);

	swqe(s, 1, TBV_RXE_WR_RDMA_READ, 0);
	st64(s, TBV_RXE_SWQE_REMOTE_ADDR, 0x2000);
	st32(s, TBV_RXE_SWQE_RDMA_RKEY, 0x55);
	one_sge(s, 4096);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.remote_addr, 0x2000);
	CHECK_EQ(w.rkey, 0x55);
	CHECK_EQ(w.length, 4096);

	swqe(s, 1, TBV_RXE_WR_ATOMIC_CMP_AND_SWP, 0);
	st64(s, TBV_RXE_SWQE_REMOTE_ADDR, 0x3008);
	st64(s, TBV_RXE_SWQE_ATOMIC_COMPARE_ADD, 5);
	st64(s, TBV_RXE_SWQE_ATOMIC_SWAP, 6);
	st32(s, TBV_RXE_SWQE_ATOMIC_RKEY, 0x66);
	one_sge(s, 8);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.remote_addr, 0x3008);
	CHECK_EQ(w.compare_add, 5);
	CHECK_EQ(w.swap, 6);
	CHECK_EQ(w.rkey, 0x66);
	CHECK_EQ(w.length, 8);

	swqe(s, 1, TBV_RXE_WR_ATOMIC_FETCH_AND_ADD, 0);
	st32(s, TBV_RXE_SWQE_ATOMIC_RKEY, 0x67);
	st64(s, TBV_RXE_SWQE_ATOMIC_COMPARE_ADD, 3);
	one_sge(s, 8);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.rkey, 0x67);
	CHECK_EQ(w.compare_add, 3);

	/* ibv_wr_atomic_write(): the value in the data area, dma.length 8, no SGEs */
	swqe(s, 1, TBV_RXE_WR_ATOMIC_WRITE, 0);
	st64(s, TBV_RXE_SWQE_REMOTE_ADDR, 0x4000);
	st32(s, TBV_RXE_SWQE_RDMA_RKEY, 0x68);
	st64(s, TBV_RXE_SWQE_DATA, 0x0102030405060708ull);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 8);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.rkey, 0x68);
	CHECK_EQ(w.length, 8);
	CHECK(w.data == s + TBV_RXE_SWQE_DATA);

	/* ibv_wr_flush(): the range's length in dma.length, wr.flush.length left 0 */
	swqe(s, 1, TBV_RXE_WR_FLUSH, 0);
	st64(s, TBV_RXE_SWQE_REMOTE_ADDR, 0x5000);
	st32(s, TBV_RXE_SWQE_FLUSH_RKEY, 0x69);
	s[TBV_RXE_SWQE_FLUSH_TYPE] = TBV_RXE_FLUSH_PERSISTENT;
	s[TBV_RXE_SWQE_FLUSH_LEVEL] = TBV_RXE_FLUSH_MR;
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 1 << 20);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.remote_addr, 0x5000);
	CHECK_EQ(w.rkey, 0x69);
	CHECK_EQ(w.flush_type, TBV_RXE_FLUSH_PERSISTENT);
	CHECK_EQ(w.flush_level, TBV_RXE_FLUSH_MR);
	CHECK_EQ(w.length, 1 << 20);
	CHECK_EQ(w.num_sge, 0);

	swqe(s, 1, TBV_RXE_WR_BIND_MW, TBV_RXE_SEND_SIGNALED);
	st64(s, TBV_RXE_SWQE_MW_ADDR, 0x6000);
	st64(s, TBV_RXE_SWQE_MW_LENGTH, 0x100000000ull);
	st32(s, TBV_RXE_SWQE_MW_MR_LKEY, 0x70);
	st32(s, TBV_RXE_SWQE_MW_MW_RKEY, 0x71);
	st32(s, TBV_RXE_SWQE_MW_RKEY, 0x72);
	st32(s, TBV_RXE_SWQE_MW_ACCESS, 0xf);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.mw_addr, 0x6000);
	CHECK(w.mw_length == 0x100000000ull);
	CHECK_EQ(w.mw_mr_lkey, 0x70);
	CHECK_EQ(w.mw_rkey, 0x71);
	CHECK_EQ(w.mw_new_rkey, 0x72);
	CHECK_EQ(w.mw_access, 0xf);
	CHECK_EQ(w.length, 0);

	swqe(s, 1, TBV_RXE_WR_LOCAL_INV, 0);
	st32(s, TBV_RXE_SWQE_EX, 0x7300);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.ex, 0x7300);

	swqe(s, 1, TBV_RXE_WR_SEND_WITH_INV, 0);
	st32(s, TBV_RXE_SWQE_EX, 0x7400);
	one_sge(s, 1);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.ex, 0x7400);
}

/* Which QP types take each opcode: docs/rxe-abi.md 6.1 (and post_send today). */
static const char *const takes[] = {
	[TBV_RXE_WR_RDMA_WRITE] = "RC UC",
	[TBV_RXE_WR_RDMA_WRITE_WITH_IMM] = "RC UC",
	[TBV_RXE_WR_SEND] = "RC UC UD",
	[TBV_RXE_WR_SEND_WITH_IMM] = "RC UC UD",
	[TBV_RXE_WR_RDMA_READ] = "RC",
	[TBV_RXE_WR_ATOMIC_CMP_AND_SWP] = "RC",
	[TBV_RXE_WR_ATOMIC_FETCH_AND_ADD] = "RC",
	[TBV_RXE_WR_LOCAL_INV] = "RC UC",
	[TBV_RXE_WR_BIND_MW] = "RC UC",
	[TBV_RXE_WR_SEND_WITH_INV] = "RC UC",
	[TBV_RXE_WR_FLUSH] = "RC, with the FLUSH verbs",
	[TBV_RXE_WR_ATOMIC_WRITE] = "RC, with the FLUSH verbs",
};

static bool want_ok(u8 qpt, bool flush_verbs, u32 op)
{
	static const char *const name[] = { "RC", "UC", "UD" };
	const char *t = op < TBV_ARRAY_SIZE(takes) ? takes[op] : NULL;

	if (!t || !strstr(t, name[qpt]))
		return false;
	return flush_verbs || !strstr(t, "FLUSH");
}

/* A minimal valid work request of @op: refused only for its opcode. */
static void minimal(u8 *s, u32 op)
{
	swqe(s, 7, op, 0);
	st32(s, TBV_RXE_SWQE_UD_AH_NUM, 1);
	if (op == TBV_RXE_WR_ATOMIC_CMP_AND_SWP || op == TBV_RXE_WR_ATOMIC_FETCH_AND_ADD)
		one_sge(s, 8);
	if (op == TBV_RXE_WR_ATOMIC_WRITE)
		st32(s, TBV_RXE_SWQE_DMA_LENGTH, 8);
	if (op == TBV_RXE_WR_FLUSH)
		s[TBV_RXE_SWQE_FLUSH_TYPE] = TBV_RXE_FLUSH_GLOBAL;
}

TEST(rxe_wqe_opcodes_by_qp_type_and_kernel_only_ones_refused)
{
	static const u32 extra[] = { 0x20, 0x21, 0x22, 0xf0, 0x80000002u, 0xffffffffu };
	struct tbv_rxe_limits lim = rc;
	u8 s[SLOT];
	struct tbv_rxe_send w;
	u8 qpt;
	u32 op;
	int fv;

	for (fv = 0; fv <= 1; fv++) {
		for (qpt = TBV_RXE_QPT_RC; qpt <= TBV_RXE_QPT_UD; qpt++) {
			lim.qp_type = qpt;
			lim.flush_verbs = fv;
			for (op = 0; op < 0x40 + TBV_ARRAY_SIZE(extra); op++) {
				u32 code = op < 0x40 ? op : extra[op - 0x40];

				/* the rule post_send applies to the kernel's own work requests too */
				CHECK_EQ(tbv_rxe_opcode_ok(qpt, code, fv), want_ok(qpt, fv, code));
				minimal(s, code);
				if (want_ok(qpt, fv, code)) {
					if (parse(s, &lim, &w) != TBV_RXE_OK) {
						fprintf(stderr, "  qpt %u op %#x refused\n", qpt, code);
						tbv_test_failures++;
					}
				} else {
					REFUSED(s, &lim, TBV_RXE_LOC_QP_OP_ERR);
				}
			}
		}
	}
	/* the kernel's IB_WR_REG_MR would dereference a pointer from the ring (rxe: 6.4 item 2) */
	minimal(s, 0x20);
	REFUSED(s, &rc, TBV_RXE_LOC_QP_OP_ERR);
}

TEST(rxe_wqe_inline_is_bounded_by_max_inline_and_the_slot)
{
	static const u32 no_payload[] = {
		TBV_RXE_WR_RDMA_READ, TBV_RXE_WR_ATOMIC_CMP_AND_SWP,
		TBV_RXE_WR_ATOMIC_FETCH_AND_ADD, TBV_RXE_WR_ATOMIC_WRITE, TBV_RXE_WR_FLUSH,
		TBV_RXE_WR_LOCAL_INV, TBV_RXE_WR_BIND_MW,
	};
	struct tbv_rxe_limits lim = rc;
	u8 s[SLOT];
	struct tbv_rxe_send w;
	u32 i;

	/* a classic post keeps the number of buffers it copied in num_sge: ignored */
	swqe(s, 7, TBV_RXE_WR_SEND, TBV_RXE_SEND_INLINE);
	memset(s + TBV_RXE_SWQE_DATA, 0xcd, 128);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 128);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 99);
	CHECK_EQ(parse(s, &lim, &w), TBV_RXE_OK);
	CHECK_EQ(w.length, 128);
	CHECK_EQ(w.num_sge, 0);
	CHECK(w.data == s + TBV_RXE_SWQE_DATA);
	CHECK_EQ(w.send_flags, TBV_RXE_SEND_INLINE);

	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 129);		/* more than max_inline */
	REFUSED(s, &lim, TBV_RXE_LOC_LEN_ERR);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 0xffffffffu);
	REFUSED(s, &lim, TBV_RXE_LOC_LEN_ERR);

	/* a max_inline above what the slot holds does not let the data leave the slot */
	lim.max_inline = 4096;
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, SLOT - TBV_RXE_SWQE_DATA);
	CHECK_EQ(parse(s, &lim, &w), TBV_RXE_OK);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, SLOT - TBV_RXE_SWQE_DATA + 1);
	REFUSED(s, &lim, TBV_RXE_LOC_LEN_ERR);

	/* INLINE only where the requester sends its own data */
	for (i = 0; i < TBV_ARRAY_SIZE(no_payload); i++) {
		minimal(s, no_payload[i]);
		st32(s, TBV_RXE_SWQE_SEND_FLAGS, TBV_RXE_SEND_INLINE);
		REFUSED(s, &rc, TBV_RXE_LOC_QP_OP_ERR);
	}
}

TEST(rxe_wqe_num_sge_is_bounded_by_the_queue_and_the_slot)
{
	struct tbv_rxe_limits lim = rc;
	u8 s[SLOT];
	struct tbv_rxe_send w;
	u32 i;

	swqe(s, 7, TBV_RXE_WR_SEND, 0);
	for (i = 0; i < 16; i++)
		sge(s, TBV_RXE_SWQE_DATA, i, 0x1000 * i, 1, 1);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 4);
	CHECK_EQ(parse(s, &lim, &w), TBV_RXE_OK);
	CHECK_EQ(w.num_sge, 4);
	CHECK_EQ(w.length, 4);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 5);		/* more than max_send_sge */
	REFUSED(s, &lim, TBV_RXE_LOC_QP_OP_ERR);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 0xffffffffu);
	REFUSED(s, &lim, TBV_RXE_LOC_QP_OP_ERR);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 0x10000001u);	/* times 16 wraps 32 bits */
	REFUSED(s, &lim, TBV_RXE_LOC_QP_OP_ERR);

	/* a max_sge larger than the slot: the slot still bounds them */
	lim.max_sge = 1000;
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 3);
	CHECK_EQ(tbv_rxe_send_parse(s, 256, &lim, &w), TBV_RXE_OK);
	CHECK_EQ(w.num_sge, 3);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 4);
	check_refused(s, 256, &lim, TBV_RXE_LOC_QP_OP_ERR, 7, __LINE__);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 17);		/* beyond the device's maximum too */
	REFUSED(s, &lim, TBV_RXE_LOC_QP_OP_ERR);

	/* local operations, FLUSH and ATOMIC_WRITE carry no SGEs */
	minimal(s, TBV_RXE_WR_LOCAL_INV);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 1);
	REFUSED(s, &rc, TBV_RXE_LOC_QP_OP_ERR);
	minimal(s, TBV_RXE_WR_BIND_MW);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 1);
	REFUSED(s, &rc, TBV_RXE_LOC_QP_OP_ERR);
	minimal(s, TBV_RXE_WR_FLUSH);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 1);
	REFUSED(s, &rc, TBV_RXE_LOC_QP_OP_ERR);
	minimal(s, TBV_RXE_WR_ATOMIC_WRITE);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 1);
	REFUSED(s, &rc, TBV_RXE_LOC_QP_OP_ERR);
}

TEST(rxe_wqe_lengths_refused)
{
	u8 s[SLOT];
	struct tbv_rxe_send w;

	/* the SGEs' sum: at most max_msg, computed without wrapping */
	swqe(s, 7, TBV_RXE_WR_RDMA_WRITE, 0);
	sge(s, TBV_RXE_SWQE_DATA, 0, 0, 0x40000000u, 1);
	sge(s, TBV_RXE_SWQE_DATA, 1, 0, 0x40000000u, 1);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 2);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK(w.length == MAX_MSG);
	sge(s, TBV_RXE_SWQE_DATA, 1, 0, 0x40000001u, 1);
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);
	sge(s, TBV_RXE_SWQE_DATA, 0, 0, 0xffffffffu, 1);
	sge(s, TBV_RXE_SWQE_DATA, 1, 0, 0x00000002u, 1);	/* 32-bit sum: 1 */
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);

	/* a length without SGEs: ibv_wr_set_inline_data() without IBV_SEND_INLINE */
	swqe(s, 7, TBV_RXE_WR_SEND, 0);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 16);
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);

	/* atomics: one SGE of 8 bytes */
	minimal(s, TBV_RXE_WR_ATOMIC_FETCH_AND_ADD);
	one_sge(s, 4);
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);
	one_sge(s, 16);
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);
	minimal(s, TBV_RXE_WR_ATOMIC_CMP_AND_SWP);
	sge(s, TBV_RXE_SWQE_DATA, 1, 0, 0, 1);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 2);		/* 8 + 0 bytes, but two SGEs */
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);
	st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, 0);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 0);
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);

	/* ATOMIC_WRITE: exactly 8 bytes */
	minimal(s, TBV_RXE_WR_ATOMIC_WRITE);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 7);
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 9);
	REFUSED(s, &rc, TBV_RXE_LOC_LEN_ERR);
}

TEST(rxe_wqe_flush_type_and_level_refused)
{
	u8 s[SLOT];
	struct tbv_rxe_send w;
	u32 t, l;

	for (t = 0; t < 256; t++) {
		for (l = 0; l < 256; l += (l < 4 ? 1 : 63)) {
			bool ok = (t == TBV_RXE_FLUSH_GLOBAL || t == TBV_RXE_FLUSH_PERSISTENT) &&
				  (l == TBV_RXE_FLUSH_RANGE || l == TBV_RXE_FLUSH_MR);

			minimal(s, TBV_RXE_WR_FLUSH);
			s[TBV_RXE_SWQE_FLUSH_TYPE] = t;
			s[TBV_RXE_SWQE_FLUSH_LEVEL] = l;
			if (ok)
				CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
			else
				REFUSED(s, &rc, TBV_RXE_LOC_QP_OP_ERR);
		}
	}
	/* wr.flush.length is not where the length is (the provider leaves it 0) */
	minimal(s, TBV_RXE_WR_FLUSH);
	st32(s, 32, 0xffffffffu);
	st32(s, TBV_RXE_SWQE_DMA_LENGTH, 4096);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.length, 4096);
}

TEST(rxe_wqe_ud_address_refused)
{
	struct tbv_rxe_limits ud = rc;
	u8 s[SLOT];
	struct tbv_rxe_send w;

	ud.qp_type = TBV_RXE_QPT_UD;
	swqe(s, 7, TBV_RXE_WR_SEND, 0);
	st32(s, TBV_RXE_SWQE_UD_REMOTE_QPN, 0xffffff);
	st32(s, TBV_RXE_SWQE_UD_REMOTE_QKEY, 0x80000000u);	/* the QP's own qkey */
	st32(s, TBV_RXE_SWQE_UD_AH_NUM, 42);
	one_sge(s, 100);
	CHECK_EQ(parse(s, &ud, &w), TBV_RXE_OK);
	CHECK_EQ(w.remote_qpn, 0xffffff);
	CHECK(w.remote_qkey == 0x80000000u);
	CHECK_EQ(w.ah_num, 42);
	CHECK_EQ(w.length, 100);

	st32(s, TBV_RXE_SWQE_UD_REMOTE_QPN, 0x1000000);
	REFUSED(s, &ud, TBV_RXE_LOC_QP_OP_ERR);
	st32(s, TBV_RXE_SWQE_UD_REMOTE_QPN, 0xffffffffu);
	REFUSED(s, &ud, TBV_RXE_LOC_QP_OP_ERR);
	st32(s, TBV_RXE_SWQE_UD_REMOTE_QPN, 1);
	st32(s, TBV_RXE_SWQE_UD_AH_NUM, 0);	/* an inline address vector: not taken */
	REFUSED(s, &ud, TBV_RXE_LOC_QP_OP_ERR);

	/* on RC the same bytes are something else, and not a UD address */
	st32(s, TBV_RXE_SWQE_UD_REMOTE_QPN, 0xffffffffu);
	CHECK_EQ(parse(s, &rc, &w), TBV_RXE_OK);
	CHECK_EQ(w.remote_qpn, 0);
	CHECK_EQ(w.ah_num, 0);
}

TEST(rxe_wqe_ignored_fields_change_nothing)
{
	static const u32 ignored[][2] = {
		{ 8, 4 },		/* wr.reserved */
		{ 144, 40 },		/* status .. has_rd_atomic: rxe's own state */
		{ 188, 8 },		/* dma.resid, cur_sge */
		{ 200, 8 },		/* dma.sge_offset, reserved */
	};
	u8 s[SLOT];
	struct tbv_rxe_send a, b;
	u32 i;

	swqe(s, 7, TBV_RXE_WR_RDMA_WRITE, TBV_RXE_SEND_SIGNALED);
	st64(s, TBV_RXE_SWQE_REMOTE_ADDR, 0x9000);
	st32(s, TBV_RXE_SWQE_RDMA_RKEY, 3);
	one_sge(s, 10);
	CHECK_EQ(parse(s, &rc, &a), TBV_RXE_OK);
	for (i = 0; i < TBV_ARRAY_SIZE(ignored); i++)
		memset(s + ignored[i][0], 0xff, ignored[i][1]);
	/* and send flags nobody honours */
	st32(s, TBV_RXE_SWQE_SEND_FLAGS, TBV_RXE_SEND_SIGNALED | 0xfffffff0u);
	CHECK_EQ(parse(s, &rc, &b), TBV_RXE_OK);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0);
}

TEST(rxe_wqe_short_slot_refused_with_what_it_holds)
{
	u8 s[SLOT];

	minimal(s, TBV_RXE_WR_SEND);
	check_refused(s, TBV_RXE_SWQE_SIZE - 1, &rc, TBV_RXE_LOC_QP_OP_ERR, 7, __LINE__);
	check_refused(s, 8, &rc, TBV_RXE_LOC_QP_OP_ERR, 7, __LINE__);
	check_refused(s, 7, &rc, TBV_RXE_LOC_QP_OP_ERR, 0, __LINE__);
	check_refused(s, 0, &rc, TBV_RXE_LOC_QP_OP_ERR, 0, __LINE__);
}

/* A receive slot of @n SGEs of @len bytes each. */
static void rwqe(u8 *s, u32 size, u64 wr_id, u32 n, u32 len)
{
	u32 i;

	memset(s, 0, size);
	st64(s, TBV_RXE_RWQE_WR_ID, wr_id);
	st32(s, TBV_RXE_RWQE_DMA_NUM_SGE, n);
	for (i = 0; i < n && TBV_RXE_RWQE_SGE + (i + 1) * TBV_RXE_SGE_SIZE <= size; i++)
		sge(s, TBV_RXE_RWQE_SGE, i, 0x1000 * (i + 1), len, 0x40 + i);
}

static void check_recv_refused(const u8 *s, u32 len, const struct tbv_rxe_limits *lim,
			       u64 wr_id, int line)
{
	struct tbv_rxe_recv r, zero;

	memset(&zero, 0, sizeof(zero));
	zero.wr_id = wr_id;
	memset(&r, 0xa5, sizeof(r));
	if (tbv_rxe_recv_parse(s, len, lim, &r) != TBV_RXE_LOC_QP_OP_ERR ||
	    memcmp(&r, &zero, sizeof(r))) {
		fprintf(stderr, "  line %d: receive not refused with a bare wr_id\n", line);
		tbv_test_failures++;
	}
}

TEST(rxe_wqe_recv_valid_and_refused)
{
	struct tbv_rxe_limits lim = { .max_sge = 4, .max_msg = MAX_MSG };
	u8 s[256];
	struct tbv_rxe_recv r;

	rwqe(s, sizeof(s), 0xabc, 3, 100);
	/* dma.length, resid, cur_sge, sge_offset: the provider's, ignored */
	st32(s, 16, 1);
	st32(s, 20, 0xffffffffu);
	st32(s, 24, 0xffffffffu);
	st32(s, 32, 0xffffffffu);
	memset(s + 8, 0xff, 8);		/* reserved, padding */
	CHECK_EQ(tbv_rxe_recv_parse(s, sizeof(s), &lim, &r), TBV_RXE_OK);
	CHECK_EQ(r.wr_id, 0xabc);
	CHECK_EQ(r.num_sge, 3);
	CHECK_EQ(r.length, 300);
	CHECK_EQ(r.sge[2].addr, 0x3000);
	CHECK_EQ(r.sge[2].length, 100);
	CHECK_EQ(r.sge[2].lkey, 0x42);

	rwqe(s, sizeof(s), 0xabc, 0, 0);
	CHECK_EQ(tbv_rxe_recv_parse(s, sizeof(s), &lim, &r), TBV_RXE_OK);
	CHECK_EQ(r.length, 0);

	rwqe(s, sizeof(s), 0xabc, 5, 1);		/* more than max_recv_sge */
	check_recv_refused(s, sizeof(s), &lim, 0xabc, __LINE__);
	st32(s, TBV_RXE_RWQE_DMA_NUM_SGE, 0xffffffffu);
	check_recv_refused(s, sizeof(s), &lim, 0xabc, __LINE__);
	st32(s, TBV_RXE_RWQE_DMA_NUM_SGE, 0x10000001u);
	check_recv_refused(s, sizeof(s), &lim, 0xabc, __LINE__);

	/* the slot bounds them whatever max_sge says: one SGE in a 64-byte slot */
	lim.max_sge = 100;
	rwqe(s, RSLOT, 0xabc, 1, 1);
	CHECK_EQ(tbv_rxe_recv_parse(s, RSLOT, &lim, &r), TBV_RXE_OK);
	st32(s, TBV_RXE_RWQE_DMA_NUM_SGE, 2);
	check_recv_refused(s, RSLOT, &lim, 0xabc, __LINE__);
	check_recv_refused(s, TBV_RXE_RWQE_SIZE - 1, &lim, 0xabc, __LINE__);
	check_recv_refused(s, 4, &lim, 0, __LINE__);

	/* 16 SGEs of 4 GiB - 1: room for any message, the length saturates */
	lim.max_sge = 16;
	{
		u8 big[TBV_RXE_RWQE_SIZE + 16 * TBV_RXE_SGE_SIZE];

		rwqe(big, sizeof(big), 1, 16, 0xffffffffu);
		CHECK_EQ(tbv_rxe_recv_parse(big, sizeof(big), &lim, &r), TBV_RXE_OK);
		CHECK_EQ(r.num_sge, 16);
		CHECK(r.length == MAX_MSG);
	}
}

/* The slot a ring gets for an element (tbv_uqueue.c): a power of two, at least a cache line. */
static u32 ring_slot(u32 elem)
{
	u32 slot = 64;

	while (slot < elem)
		slot <<= 1;
	return slot;
}

/*
 * The caps a send ring reports hold what was asked, within the device's
 * maxima, and exactly what the slot holds: the most the parser takes in that
 * slot, never one more (unless the device's maximum is what bounds them).
 */
TEST(rxe_ring_send_caps_hold_the_request_and_only_the_slot)
{
	struct tbv_rxe_limits lim = rc;
	struct tbv_rxe_caps caps;
	struct tbv_rxe_send w;
	u32 sges, inl, slot, i;
	u8 s[2 * SLOT];

	for (sges = 0; sges <= 16; sges++) {
		for (inl = 0; inl <= 512; inl += 8) {
			slot = ring_slot(tbv_rxe_send_elem(sges, inl));
			CHECK(slot <= sizeof(s));
			tbv_rxe_send_caps(slot, 16, 512, &caps);
			CHECK(caps.max_sge >= sges && caps.max_sge <= 16);
			CHECK(caps.max_inline >= inl && caps.max_inline <= 512);
			lim.max_sge = caps.max_sge;
			lim.max_inline = caps.max_inline;

			memset(s, 0, sizeof(s));
			swqe(s, 7, TBV_RXE_WR_SEND, 0);
			for (i = 0; i <= caps.max_sge; i++)
				sge(s, TBV_RXE_SWQE_DATA, i, 0x1000 * (i + 1), 1, 1);
			st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, caps.max_sge);
			CHECK_EQ(tbv_rxe_send_parse(s, slot, &lim, &w), TBV_RXE_OK);
			CHECK_EQ(w.num_sge, caps.max_sge);
			if (caps.max_sge < 16) {
				lim.max_sge = caps.max_sge + 1;
				st32(s, TBV_RXE_SWQE_DMA_NUM_SGE, caps.max_sge + 1);
				CHECK_EQ(tbv_rxe_send_parse(s, slot, &lim, &w),
					 TBV_RXE_LOC_QP_OP_ERR);
				lim.max_sge = caps.max_sge;
			}

			memset(s, 0, sizeof(s));
			swqe(s, 7, TBV_RXE_WR_SEND, TBV_RXE_SEND_INLINE);
			st32(s, TBV_RXE_SWQE_DMA_LENGTH, caps.max_inline);
			CHECK_EQ(tbv_rxe_send_parse(s, slot, &lim, &w), TBV_RXE_OK);
			CHECK_EQ(w.length, caps.max_inline);
			if (caps.max_inline < 512) {
				lim.max_inline = caps.max_inline + 1;
				st32(s, TBV_RXE_SWQE_DMA_LENGTH, caps.max_inline + 1);
				CHECK_EQ(tbv_rxe_send_parse(s, slot, &lim, &w),
					 TBV_RXE_LOC_LEN_ERR);
			}
		}
	}

	/* rxe's element: the header and the larger of the SGEs and the inline bytes */
	CHECK_EQ(tbv_rxe_send_elem(0, 0), 208);
	CHECK_EQ(tbv_rxe_send_elem(2, 64), 272);
	CHECK_EQ(tbv_rxe_send_elem(16, 0), 464);
	CHECK_EQ(tbv_rxe_send_elem(1, 512), 720);
	tbv_rxe_send_caps(256, 16, 512, &caps);		/* 48 bytes of room */
	CHECK_EQ(caps.max_sge, 3);
	CHECK_EQ(caps.max_inline, 48);
	tbv_rxe_send_caps(4096, 16, 512, &caps);	/* the device bounds them */
	CHECK_EQ(caps.max_sge, 16);
	CHECK_EQ(caps.max_inline, 512);
	tbv_rxe_send_caps(4096, 100, 100000, &caps);	/* and so does what a WQE carries */
	CHECK_EQ(caps.max_sge, TBV_RXE_MAX_SGE);
	tbv_rxe_send_caps(64, 16, 512, &caps);		/* no room at all */
	CHECK_EQ(caps.max_sge, 0);
	CHECK_EQ(caps.max_inline, 0);
}

TEST(rxe_ring_recv_caps_hold_the_request_and_only_the_slot)
{
	struct tbv_rxe_limits lim = { .max_sge = 0, .max_msg = MAX_MSG };
	struct tbv_rxe_recv r;
	u32 sges, slot, n;
	u8 s[512];

	for (sges = 0; sges <= 16; sges++) {
		slot = ring_slot(tbv_rxe_recv_elem(sges));
		CHECK(slot <= sizeof(s));
		n = tbv_rxe_recv_caps(slot, 16);
		CHECK(n >= sges && n >= 1 && n <= 16);
		lim.max_sge = n;
		rwqe(s, slot, 1, n, 1);
		CHECK_EQ(tbv_rxe_recv_parse(s, slot, &lim, &r), TBV_RXE_OK);
		CHECK_EQ(r.num_sge, n);
		if (n < 16) {
			lim.max_sge = n + 1;
			rwqe(s, slot, 1, n + 1, 1);
			check_recv_refused(s, slot, &lim, 1, __LINE__);
		}
	}
	CHECK_EQ(tbv_rxe_recv_elem(0), 40);
	CHECK_EQ(tbv_rxe_recv_elem(1), 56);
	CHECK_EQ(tbv_rxe_recv_caps(64, 16), 1);
	CHECK_EQ(tbv_rxe_recv_caps(128, 16), 5);
	CHECK_EQ(tbv_rxe_recv_caps(1024, 16), 16);
	CHECK_EQ(tbv_rxe_recv_caps(1024, 4), 4);
	CHECK_EQ(tbv_rxe_recv_caps(32, 16), 0);
}
