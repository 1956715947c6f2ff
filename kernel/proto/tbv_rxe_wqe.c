// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Validation of the work requests user space writes into rdma_rxe-layout rings
 * (docs/rxe-abi.md, sections 6.1 and 6.2). Everything here reads the kernel's
 * private copy of one slot: the process can no longer change it, but it chose
 * every byte of it.
 */
#include "tbv_rxe_wqe.h"

bool tbv_rxe_opcode_ok(u32 qp_type, u32 op, bool flush_verbs)
{
	switch (op) {
	case TBV_RXE_WR_SEND:
	case TBV_RXE_WR_SEND_WITH_IMM:
		return true;
	case TBV_RXE_WR_RDMA_WRITE:
	case TBV_RXE_WR_RDMA_WRITE_WITH_IMM:
	case TBV_RXE_WR_SEND_WITH_INV:
	case TBV_RXE_WR_LOCAL_INV:
	case TBV_RXE_WR_BIND_MW:
		return qp_type == TBV_RXE_QPT_RC || qp_type == TBV_RXE_QPT_UC;
	case TBV_RXE_WR_RDMA_READ:
	case TBV_RXE_WR_ATOMIC_CMP_AND_SWP:
	case TBV_RXE_WR_ATOMIC_FETCH_AND_ADD:
		return qp_type == TBV_RXE_QPT_RC;
	case TBV_RXE_WR_FLUSH:
	case TBV_RXE_WR_ATOMIC_WRITE:
		return qp_type == TBV_RXE_QPT_RC && flush_verbs;
	default:
		/* kernel-only (REG_MR: a kernel pointer in the union), masked atomics, LSO */
		return false;
	}
}

/* Opcodes whose message carries data from the requester: the only ones that may be inline. */
static bool tbv_rxe_has_payload(u32 op)
{
	return op == TBV_RXE_WR_SEND || op == TBV_RXE_WR_SEND_WITH_IMM ||
	       op == TBV_RXE_WR_SEND_WITH_INV || op == TBV_RXE_WR_RDMA_WRITE ||
	       op == TBV_RXE_WR_RDMA_WRITE_WITH_IMM;
}

/* Opcodes whose SGE area holds no SGEs: their num_sge must be 0. */
static bool tbv_rxe_no_sges(u32 op)
{
	return op == TBV_RXE_WR_LOCAL_INV || op == TBV_RXE_WR_BIND_MW ||
	       op == TBV_RXE_WR_FLUSH || op == TBV_RXE_WR_ATOMIC_WRITE;
}

/* Both work requests start with their wr_id: a refusal reports it if the slot holds it. */
static u64 tbv_rxe_wr_id(const u8 *slot, u32 len)
{
	return len >= sizeof(u64) ? tbv_rxe_ld64(slot) : 0;
}

/*
 * @n SGEs at @at in @slot (@len bytes), at most @max of them, into @sge; their
 * byte sum, computed without overflow, in @sum.
 */
static bool tbv_rxe_sges(const u8 *slot, u32 len, u32 at, u32 n, u32 max,
			 struct tbv_rxe_sge *sge, u64 *sum)
{
	u32 i;

	*sum = 0;
	if (n > TBV_MIN(max, (u32)TBV_RXE_MAX_SGE) || at > len ||
	    n > (len - at) / TBV_RXE_SGE_SIZE)
		return false;
	for (i = 0; i < n; i++) {
		const u8 *p = slot + at + i * TBV_RXE_SGE_SIZE;

		sge[i].addr = tbv_rxe_ld64(p + TBV_RXE_SGE_ADDR);
		sge[i].length = tbv_rxe_ld32(p + TBV_RXE_SGE_LENGTH);
		sge[i].lkey = tbv_rxe_ld32(p + TBV_RXE_SGE_LKEY);
		*sum += sge[i].length;
	}
	return true;
}

/* The fields of the wr union that @out->opcode uses, on a QP of @lim->qp_type. */
static enum tbv_rxe_status tbv_rxe_send_fields(const u8 *s, const struct tbv_rxe_limits *lim,
					       struct tbv_rxe_send *out)
{
	switch (out->opcode) {
	case TBV_RXE_WR_RDMA_WRITE:
	case TBV_RXE_WR_RDMA_WRITE_WITH_IMM:
	case TBV_RXE_WR_RDMA_READ:
	case TBV_RXE_WR_ATOMIC_WRITE:
		out->remote_addr = tbv_rxe_ld64(s + TBV_RXE_SWQE_REMOTE_ADDR);
		out->rkey = tbv_rxe_ld32(s + TBV_RXE_SWQE_RDMA_RKEY);
		break;
	case TBV_RXE_WR_ATOMIC_CMP_AND_SWP:
	case TBV_RXE_WR_ATOMIC_FETCH_AND_ADD:
		out->remote_addr = tbv_rxe_ld64(s + TBV_RXE_SWQE_REMOTE_ADDR);
		out->compare_add = tbv_rxe_ld64(s + TBV_RXE_SWQE_ATOMIC_COMPARE_ADD);
		out->swap = tbv_rxe_ld64(s + TBV_RXE_SWQE_ATOMIC_SWAP);
		out->rkey = tbv_rxe_ld32(s + TBV_RXE_SWQE_ATOMIC_RKEY);
		break;
	case TBV_RXE_WR_FLUSH:
		out->remote_addr = tbv_rxe_ld64(s + TBV_RXE_SWQE_REMOTE_ADDR);
		out->rkey = tbv_rxe_ld32(s + TBV_RXE_SWQE_FLUSH_RKEY);
		out->flush_type = s[TBV_RXE_SWQE_FLUSH_TYPE];
		out->flush_level = s[TBV_RXE_SWQE_FLUSH_LEVEL];
		if ((out->flush_type != TBV_RXE_FLUSH_GLOBAL &&
		     out->flush_type != TBV_RXE_FLUSH_PERSISTENT) ||
		    (out->flush_level != TBV_RXE_FLUSH_RANGE &&
		     out->flush_level != TBV_RXE_FLUSH_MR))
			return TBV_RXE_LOC_QP_OP_ERR;
		break;
	case TBV_RXE_WR_BIND_MW:
		out->mw_addr = tbv_rxe_ld64(s + TBV_RXE_SWQE_MW_ADDR);
		out->mw_length = tbv_rxe_ld64(s + TBV_RXE_SWQE_MW_LENGTH);
		out->mw_mr_lkey = tbv_rxe_ld32(s + TBV_RXE_SWQE_MW_MR_LKEY);
		out->mw_rkey = tbv_rxe_ld32(s + TBV_RXE_SWQE_MW_MW_RKEY);
		out->mw_new_rkey = tbv_rxe_ld32(s + TBV_RXE_SWQE_MW_RKEY);
		out->mw_access = tbv_rxe_ld32(s + TBV_RXE_SWQE_MW_ACCESS);
		break;
	default:
		break;
	}
	if (lim->qp_type == TBV_RXE_QPT_UD) {
		out->remote_qpn = tbv_rxe_ld32(s + TBV_RXE_SWQE_UD_REMOTE_QPN);
		out->remote_qkey = tbv_rxe_ld32(s + TBV_RXE_SWQE_UD_REMOTE_QKEY);
		out->ah_num = tbv_rxe_ld32(s + TBV_RXE_SWQE_UD_AH_NUM);
		/* 0 would be an inline address vector (old providers): never ours to read */
		if (out->remote_qpn > TBV_RXE_MAX_QPN || !out->ah_num)
			return TBV_RXE_LOC_QP_OP_ERR;
	}
	return TBV_RXE_OK;
}

/* The payload: inline bytes, the 8 bytes of an ATOMIC_WRITE, a FLUSH's range, or SGEs. */
static enum tbv_rxe_status tbv_rxe_send_payload(const u8 *s, u32 len,
						const struct tbv_rxe_limits *lim,
						struct tbv_rxe_send *out)
{
	u32 dma_len = tbv_rxe_ld32(s + TBV_RXE_SWQE_DMA_LENGTH);
	u32 num_sge = tbv_rxe_ld32(s + TBV_RXE_SWQE_DMA_NUM_SGE);
	u32 room = len - TBV_RXE_SWQE_DATA;
	u64 sum;

	if (out->send_flags & TBV_RXE_SEND_INLINE) {
		/* num_sge counts the caller's buffers the provider copied: no SGEs here */
		if (dma_len > lim->max_inline || dma_len > room)
			return TBV_RXE_LOC_LEN_ERR;
		out->length = dma_len;
		out->data = s + TBV_RXE_SWQE_DATA;
		return TBV_RXE_OK;
	}
	if (tbv_rxe_no_sges(out->opcode) && num_sge)
		return TBV_RXE_LOC_QP_OP_ERR;
	if (out->opcode == TBV_RXE_WR_ATOMIC_WRITE) {
		if (dma_len != TBV_RXE_ATOMIC_LEN || room < TBV_RXE_ATOMIC_LEN)
			return TBV_RXE_LOC_LEN_ERR;
		out->length = dma_len;
		out->data = s + TBV_RXE_SWQE_DATA;
		return TBV_RXE_OK;
	}
	if (out->opcode == TBV_RXE_WR_FLUSH) {
		out->length = dma_len;	/* a range, not bytes that travel */
		return TBV_RXE_OK;
	}
	if (!tbv_rxe_sges(s, len, TBV_RXE_SWQE_DATA, num_sge, lim->max_sge, out->sge, &sum))
		return TBV_RXE_LOC_QP_OP_ERR;
	/*
	 * The length is what the SGEs add up to, whatever dma.length says (old
	 * providers' ibv_wr_set_sge_list() writes num_sge times the first length);
	 * but a length without SGEs is inline data posted without the flag.
	 */
	if (sum > lim->max_msg || (!num_sge && dma_len))
		return TBV_RXE_LOC_LEN_ERR;
	if ((out->opcode == TBV_RXE_WR_ATOMIC_CMP_AND_SWP ||
	     out->opcode == TBV_RXE_WR_ATOMIC_FETCH_AND_ADD) &&
	    (num_sge != 1 || sum != TBV_RXE_ATOMIC_LEN))
		return TBV_RXE_LOC_LEN_ERR;
	out->num_sge = num_sge;
	out->length = (u32)sum;
	return TBV_RXE_OK;
}

enum tbv_rxe_status tbv_rxe_send_parse(const u8 *slot, u32 len, const struct tbv_rxe_limits *lim,
				       struct tbv_rxe_send *out)
{
	u64 wr_id = tbv_rxe_wr_id(slot, len);
	enum tbv_rxe_status st;

	memset(out, 0, sizeof(*out));
	out->wr_id = wr_id;
	if (len < TBV_RXE_SWQE_SIZE)
		return TBV_RXE_LOC_QP_OP_ERR;
	out->opcode = tbv_rxe_ld32(slot + TBV_RXE_SWQE_OPCODE);
	out->send_flags = tbv_rxe_ld32(slot + TBV_RXE_SWQE_SEND_FLAGS) & TBV_RXE_SEND_FLAGS_KEPT;
	out->ex = tbv_rxe_ld32(slot + TBV_RXE_SWQE_EX);

	st = TBV_RXE_LOC_QP_OP_ERR;
	if (!tbv_rxe_opcode_ok(lim->qp_type, out->opcode, lim->flush_verbs))
		goto err;
	if ((out->send_flags & TBV_RXE_SEND_INLINE) && !tbv_rxe_has_payload(out->opcode))
		goto err;
	st = tbv_rxe_send_fields(slot, lim, out);
	if (st)
		goto err;
	st = tbv_rxe_send_payload(slot, len, lim, out);
	if (st)
		goto err;
	return TBV_RXE_OK;
err:
	/* a refused work request carries nothing but its wr_id into its completion */
	memset(out, 0, sizeof(*out));
	out->wr_id = wr_id;
	return st;
}

enum tbv_rxe_status tbv_rxe_recv_parse(const u8 *slot, u32 len, const struct tbv_rxe_limits *lim,
				       struct tbv_rxe_recv *out)
{
	u64 wr_id = tbv_rxe_wr_id(slot, len);
	u32 num_sge;
	u64 sum;

	memset(out, 0, sizeof(*out));
	out->wr_id = wr_id;
	if (len < TBV_RXE_RWQE_SIZE)
		return TBV_RXE_LOC_QP_OP_ERR;
	num_sge = tbv_rxe_ld32(slot + TBV_RXE_RWQE_DMA_NUM_SGE);
	if (!tbv_rxe_sges(slot, len, TBV_RXE_RWQE_SGE, num_sge, lim->max_sge, out->sge, &sum)) {
		memset(out, 0, sizeof(*out));
		out->wr_id = wr_id;
		return TBV_RXE_LOC_QP_OP_ERR;
	}
	out->wr_id = wr_id;
	out->num_sge = num_sge;
	/* no message is longer than max_msg: more room than that is room for any */
	out->length = (u32)TBV_MIN(sum, (u64)lim->max_msg);
	return TBV_RXE_OK;
}

u32 tbv_rxe_send_elem(u32 max_sge, u32 max_inline)
{
	/* the data area holds the SGEs or the inline bytes (or an atomic write's 8) */
	return TBV_RXE_SWQE_SIZE + TBV_MAX(max_sge * TBV_RXE_SGE_SIZE, max_inline);
}

u32 tbv_rxe_recv_elem(u32 max_sge)
{
	return TBV_RXE_RWQE_SIZE + max_sge * TBV_RXE_SGE_SIZE;
}

/* SGEs in @room bytes, at most @dev_max and what a parsed WQE carries. */
static u32 tbv_rxe_room_sges(u32 room, u32 dev_max)
{
	return TBV_MIN(room / TBV_RXE_SGE_SIZE, TBV_MIN(dev_max, (u32)TBV_RXE_MAX_SGE));
}

void tbv_rxe_send_caps(u32 slot, u32 dev_max_sge, u32 dev_max_inline, struct tbv_rxe_caps *caps)
{
	u32 room = slot > TBV_RXE_SWQE_SIZE ? slot - TBV_RXE_SWQE_SIZE : 0;

	caps->max_sge = tbv_rxe_room_sges(room, dev_max_sge);
	caps->max_inline = TBV_MIN(room, dev_max_inline);
}

u32 tbv_rxe_recv_caps(u32 slot, u32 dev_max_sge)
{
	u32 room = slot > TBV_RXE_RWQE_SIZE ? slot - TBV_RXE_RWQE_SIZE : 0;

	return tbv_rxe_room_sges(room, dev_max_sge);
}
