// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The validation of user-written ring slots (kernel/proto/tbv_rxe_wqe.c): any
 * bytes as a send or receive slot of any length, under any limits, the slot a
 * heap block of exactly its length (so ASan sees any read past it). Checked
 * for every input:
 *
 *  - a validated work request never has more SGEs than the queue's max_sge,
 *    the device's maximum or the slot holds, nor more bytes than max_msg
 *    (send: the SGEs' sum, taken from the slot again here; receive: that sum
 *    saturated at max_msg), nor inline data beyond max_inline or the slot;
 *  - its opcode, flags, FLUSH type and level, UD address are ones the QP takes;
 *  - a refused one completes with a local length or QP operation error and
 *    carries nothing but its wr_id;
 *  - the same bytes give the same result twice.
 *
 * The input format is in fuzz.h (FUZZ_RXE_*).
 */
#include "fuzz.h"
#include "tbv_rxe_wqe.h"

static bool is_op(u32 op, const u32 *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ops[i] == op)
			return true;
	return false;
}

static const u32 rc_ops[] = {
	TBV_RXE_WR_SEND, TBV_RXE_WR_SEND_WITH_IMM, TBV_RXE_WR_SEND_WITH_INV,
	TBV_RXE_WR_RDMA_WRITE, TBV_RXE_WR_RDMA_WRITE_WITH_IMM, TBV_RXE_WR_RDMA_READ,
	TBV_RXE_WR_ATOMIC_CMP_AND_SWP, TBV_RXE_WR_ATOMIC_FETCH_AND_ADD, TBV_RXE_WR_LOCAL_INV,
	TBV_RXE_WR_BIND_MW,
};
static const u32 uc_ops[] = {
	TBV_RXE_WR_SEND, TBV_RXE_WR_SEND_WITH_IMM, TBV_RXE_WR_SEND_WITH_INV,
	TBV_RXE_WR_RDMA_WRITE, TBV_RXE_WR_RDMA_WRITE_WITH_IMM, TBV_RXE_WR_LOCAL_INV,
	TBV_RXE_WR_BIND_MW,
};
static const u32 ud_ops[] = { TBV_RXE_WR_SEND, TBV_RXE_WR_SEND_WITH_IMM };
static const u32 payload_ops[] = {
	TBV_RXE_WR_SEND, TBV_RXE_WR_SEND_WITH_IMM, TBV_RXE_WR_SEND_WITH_INV,
	TBV_RXE_WR_RDMA_WRITE, TBV_RXE_WR_RDMA_WRITE_WITH_IMM,
};

static bool op_allowed(const struct tbv_rxe_limits *lim, u32 op)
{
	if (op == TBV_RXE_WR_FLUSH || op == TBV_RXE_WR_ATOMIC_WRITE)
		return lim->qp_type == TBV_RXE_QPT_RC && lim->flush_verbs;
	if (lim->qp_type == TBV_RXE_QPT_RC)
		return is_op(op, rc_ops, TBV_ARRAY_SIZE(rc_ops));
	if (lim->qp_type == TBV_RXE_QPT_UC)
		return is_op(op, uc_ops, TBV_ARRAY_SIZE(uc_ops));
	return is_op(op, ud_ops, TBV_ARRAY_SIZE(ud_ops));
}

static u32 sge_room(u32 len, u32 at)
{
	return len < at ? 0 : (len - at) / TBV_RXE_SGE_SIZE;
}

static void check_sges(const struct tbv_rxe_sge *sge, u32 n, const u8 *slot, u32 len, u32 at,
		       const struct tbv_rxe_limits *lim, u64 *sum)
{
	u32 i;

	FUZZ_CHECK(n <= lim->max_sge && n <= TBV_RXE_MAX_SGE && n <= sge_room(len, at));
	*sum = 0;
	for (i = 0; i < TBV_RXE_MAX_SGE; i++) {
		const u8 *p = slot + at + i * TBV_RXE_SGE_SIZE;

		if (i >= n) {
			FUZZ_CHECK(!sge[i].addr && !sge[i].length && !sge[i].lkey);
			continue;
		}
		FUZZ_CHECK(sge[i].addr == tbv_rxe_ld64(p + TBV_RXE_SGE_ADDR));
		FUZZ_CHECK(sge[i].length == tbv_rxe_ld32(p + TBV_RXE_SGE_LENGTH));
		FUZZ_CHECK(sge[i].lkey == tbv_rxe_ld32(p + TBV_RXE_SGE_LKEY));
		*sum += sge[i].length;
	}
}

static void check_send(const u8 *slot, u32 len, const struct tbv_rxe_limits *lim)
{
	struct tbv_rxe_send w, again;
	enum tbv_rxe_status st = tbv_rxe_send_parse(slot, len, lim, &w);
	u64 sum;

	FUZZ_CHECK(tbv_rxe_send_parse(slot, len, lim, &again) == st);
	FUZZ_CHECK(!memcmp(&w, &again, sizeof(w)));
	FUZZ_CHECK(w.wr_id == (len >= 8 ? tbv_rxe_ld64(slot) : 0));
	if (st != TBV_RXE_OK) {
		struct tbv_rxe_send zero = { .wr_id = w.wr_id };

		FUZZ_CHECK(st == TBV_RXE_LOC_LEN_ERR || st == TBV_RXE_LOC_QP_OP_ERR);
		FUZZ_CHECK(!memcmp(&w, &zero, sizeof(w)));
		return;
	}
	FUZZ_CHECK(len >= TBV_RXE_SWQE_SIZE);
	FUZZ_CHECK(op_allowed(lim, w.opcode));
	FUZZ_CHECK(!(w.send_flags & ~TBV_RXE_SEND_FLAGS_KEPT));
	check_sges(w.sge, w.num_sge, slot, len, TBV_RXE_SWQE_DATA, lim, &sum);
	if (w.data) {
		/* inline or an atomic write's value: within the slot, and touched here */
		FUZZ_CHECK(w.data == slot + TBV_RXE_SWQE_DATA && !w.num_sge);
		FUZZ_CHECK(w.length <= len - TBV_RXE_SWQE_DATA);
		fuzz_touch(w.data, w.length);
		if (w.send_flags & TBV_RXE_SEND_INLINE)
			FUZZ_CHECK(w.length <= lim->max_inline &&
				   is_op(w.opcode, payload_ops, TBV_ARRAY_SIZE(payload_ops)));
		else
			FUZZ_CHECK(w.opcode == TBV_RXE_WR_ATOMIC_WRITE &&
				   w.length == TBV_RXE_ATOMIC_LEN);
	} else if (w.opcode == TBV_RXE_WR_FLUSH) {
		FUZZ_CHECK(!w.num_sge);
		FUZZ_CHECK((w.flush_type == TBV_RXE_FLUSH_GLOBAL ||
			    w.flush_type == TBV_RXE_FLUSH_PERSISTENT) &&
			   (w.flush_level == TBV_RXE_FLUSH_RANGE ||
			    w.flush_level == TBV_RXE_FLUSH_MR));
	} else {
		FUZZ_CHECK(!(w.send_flags & TBV_RXE_SEND_INLINE));
		FUZZ_CHECK(w.opcode != TBV_RXE_WR_ATOMIC_WRITE);
		FUZZ_CHECK(sum <= lim->max_msg && w.length == sum);
		if (w.opcode == TBV_RXE_WR_ATOMIC_CMP_AND_SWP ||
		    w.opcode == TBV_RXE_WR_ATOMIC_FETCH_AND_ADD)
			FUZZ_CHECK(w.num_sge == 1 && w.length == TBV_RXE_ATOMIC_LEN);
		if (w.opcode == TBV_RXE_WR_LOCAL_INV || w.opcode == TBV_RXE_WR_BIND_MW)
			FUZZ_CHECK(!w.num_sge);
	}
	if (lim->qp_type == TBV_RXE_QPT_UD)
		FUZZ_CHECK(w.ah_num && w.remote_qpn <= TBV_RXE_MAX_QPN);
	else
		FUZZ_CHECK(!w.ah_num && !w.remote_qpn && !w.remote_qkey);
}

static void check_recv(const u8 *slot, u32 len, const struct tbv_rxe_limits *lim)
{
	struct tbv_rxe_recv r, again;
	enum tbv_rxe_status st = tbv_rxe_recv_parse(slot, len, lim, &r);
	u64 sum;

	FUZZ_CHECK(tbv_rxe_recv_parse(slot, len, lim, &again) == st);
	FUZZ_CHECK(!memcmp(&r, &again, sizeof(r)));
	FUZZ_CHECK(r.wr_id == (len >= 8 ? tbv_rxe_ld64(slot) : 0));
	if (st != TBV_RXE_OK) {
		struct tbv_rxe_recv zero = { .wr_id = r.wr_id };

		FUZZ_CHECK(st == TBV_RXE_LOC_QP_OP_ERR);
		FUZZ_CHECK(!memcmp(&r, &zero, sizeof(r)));
		return;
	}
	FUZZ_CHECK(len >= TBV_RXE_RWQE_SIZE);
	check_sges(r.sge, r.num_sge, slot, len, TBV_RXE_RWQE_SGE, lim, &sum);
	FUZZ_CHECK(r.length == (sum < lim->max_msg ? sum : lim->max_msg));
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct fuzz_in in = { data, size };
	u8 hdr[FUZZ_RXE_HDR] = { 0 };
	struct tbv_rxe_limits lim;
	size_t len;
	u8 *slot;

	fuzz_take(&in, hdr, sizeof(hdr));
	lim = (struct tbv_rxe_limits){
		.qp_type = ((hdr[0] >> FUZZ_RXE_QPT_SHIFT) & 3) % 3,
		.flush_verbs = hdr[0] & FUZZ_RXE_FLUSH_VERBS,
		.max_sge = hdr[1],
		.max_inline = tbv_get_le16(hdr + 2),
		.max_msg = tbv_get_le32(hdr + 4) ? tbv_get_le32(hdr + 4) : 0x80000000u,
	};
	slot = fuzz_take_block(&in, in.left, &len);
	if (hdr[0] & FUZZ_RXE_RECV)
		check_recv(slot, len, &lim);
	else
		check_send(slot, len, &lim);
	free(slot);
	return 0;
}
