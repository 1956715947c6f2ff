// SPDX-License-Identifier: GPL-2.0
/*
 * Work requests taken from rings shared with user space (docs/rxe-abi.md 4.1,
 * 4.2, 6): the slot at the kernel's index is copied once into a private
 * buffer, parsed there by proto/tbv_rxe_wqe.c against the queue's limits, and
 * turned into the transport's own WQE; nothing is read from the ring again.
 * A WQE that fails parsing (or names an AH the QP may not use) still becomes
 * a WQE: one that carries its wr_id and the status it completes with.
 * The callers hold the lock of the queue they take from and the copy's lock
 * (the QP's sq_lock for send WQEs, its resp_lock for receive WQEs).
 */
#include <linux/slab.h>

#include "tbv.h"
#include "tbv_rxe_wqe.h"

/* The kernel's copy of one slot, and what the parser made of it. */
struct tbv_uwqe_buf {
	union {
		struct tbv_rxe_send send;
		struct tbv_rxe_recv recv;
	};
	u32 slot_size;
	u8 slot[];
};

/* A copy buffer for the slots of rings of @slot_size bytes (QP creation). */
struct tbv_uwqe_buf *tbv_uwqe_buf_alloc(u32 slot_size, gfp_t gfp)
{
	struct tbv_uwqe_buf *buf = kzalloc(struct_size(buf, slot, slot_size), gfp);

	if (buf)
		buf->slot_size = slot_size;
	return buf;
}

void tbv_uwqe_buf_free(struct tbv_uwqe_buf *buf)
{
	kfree(buf);
}

/* Copy slot @idx of @q into @buf (*@len bytes): the only read of the ring's bytes. */
static const u8 *tbv_uwqe_copy(const struct tbv_uqueue *q, u32 idx, struct tbv_uwqe_buf *buf,
			       u32 *len)
{
	*len = tbv_uq_slot_size(q);
	/* the buffer was made for this queue's slots; a smaller one would be a bug, not input */
	if (WARN_ON_ONCE(*len > buf->slot_size))
		*len = buf->slot_size;
	memcpy(buf->slot, tbv_uq_slot(q, idx), *len);
	return buf->slot;
}

/*
 * The receive WQE at @q's kernel index into @out (room for @max_sge SGEs),
 * checked against @max_sge. Returns IB_WC_SUCCESS, or the status it
 * completes with (out->wr_id set, no SGEs). The caller publishes the index.
 */
enum ib_wc_status tbv_uwqe_recv(const struct tbv_uqueue *q, struct tbv_uwqe_buf *buf,
				u32 max_sge, struct tbv_recv_wqe *out)
{
	const struct tbv_rxe_limits lim = { .max_sge = max_sge, .max_msg = TBV_MAX_MR_SIZE };
	enum tbv_rxe_status st;
	const u8 *slot;
	u32 i, len;

	slot = tbv_uwqe_copy(q, q->index, buf, &len);
	st = tbv_rxe_recv_parse(slot, len, &lim, &buf->recv);
	out->wr_id = buf->recv.wr_id;
	out->num_sge = st == TBV_RXE_OK ? buf->recv.num_sge : 0;
	out->length = st == TBV_RXE_OK ? buf->recv.length : 0;
	for (i = 0; i < out->num_sge; i++)
		out->sge[i] = (struct tbv_sge){ buf->recv.sge[i].addr, buf->recv.sge[i].length,
						buf->recv.sge[i].lkey };
	return (enum ib_wc_status)st;	/* the values are IB_WC_*'s (tbv_uqueue.c) */
}
/* A UD WQE's address: the AH numbered in it, if it is one of the QP's PD. */
static enum ib_wc_status tbv_uwqe_ud(struct tbv_qp *qp, const struct tbv_rxe_send *p,
				     struct tbv_send_wqe *wqe)
{
	struct tbv_ah *ah = tbv_ah_get(qp->dev, p->ah_num, qp->ibqp.pd);

	if (!ah)
		return IB_WC_LOC_QP_OP_ERR;
	wqe->ah = *ah;		/* copied: the AH may be destroyed before the WQE is sent */
	tbv_ah_put(ah);
	wqe->remote_qpn = p->remote_qpn;
	/* IBA 10.2.5: a Q_Key with the high bit set means "use the QP's". */
	wqe->remote_qkey = (p->remote_qkey & 0x80000000u) ? qp->qkey : p->remote_qkey;
	/* IBA C10-93.1.1: longer than the path MTU completes without being sent */
	wqe->unsent = p->length > 2048;
	return IB_WC_SUCCESS;
}

/* The validated request @p as the requester's WQE @wqe (zeroed). */
static enum ib_wc_status tbv_uwqe_fill_send(struct tbv_qp *qp, const struct tbv_rxe_send *p,
					    struct tbv_send_wqe *wqe)
{
	enum ib_qp_type type = qp->ibqp.qp_type;
	u32 i;

	wqe->opcode = p->opcode;	/* IB_WR_* equal the ring's values (tbv_uqueue.c) */
	wqe->send_flags = p->send_flags;
	wqe->signaled = qp->sig_all || (p->send_flags & IB_SEND_SIGNALED);
	wqe->length = p->length;
	wqe->remote_addr = p->remote_addr;
	wqe->rkey = p->rkey;
	wqe->swap = p->swap;
	wqe->compare_add = p->compare_add;
	switch (p->opcode) {
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		/* stored as the process's __be32: a number on the wire, as post_send's */
		wqe->imm = be32_to_cpu((__force __be32)p->ex);
		break;
	case IB_WR_SEND_WITH_INV:
	case IB_WR_LOCAL_INV:
		wqe->inv_rkey = p->ex;
		break;
	case IB_WR_FLUSH:
		wqe->length = 0;		/* a range, no bytes travel */
		wqe->flush_len = p->length;
		wqe->flush_aux = TBV_FLUSH_AUX(p->flush_type, p->flush_level);
		break;
	case IB_WR_BIND_MW:
		/* IB_ACCESS_* equal the user's values; tbv_mw_bind() checks everything */
		wqe->bind = (struct tbv_bind){
			.mw_rkey = p->mw_rkey, .new_rkey = p->mw_new_rkey,
			.mr_lkey = p->mw_mr_lkey, .access = p->mw_access,
			.addr = p->mw_addr, .length = p->mw_length,
		};
		break;
	default:
		break;
	}
	if (type == IB_QPT_UD) {
		enum ib_wc_status st = tbv_uwqe_ud(qp, p, wqe);

		if (st != IB_WC_SUCCESS)
			return st;
	}
	if (p->data) {
		/* inline bytes or an atomic write's 8, within the copy; the shadow slot holds them */
		wqe->is_inline = true;
		memcpy(wqe->sge, p->data, p->length);
		return IB_WC_SUCCESS;
	}
	wqe->num_sge = p->num_sge;
	for (i = 0; i < p->num_sge; i++)
		wqe->sge[i] = (struct tbv_sge){ p->sge[i].addr, p->sge[i].length, p->sge[i].lkey };
	return IB_WC_SUCCESS;
}

/*
 * The send WQE at the SQ ring's index @idx into the requester's shadow slot
 * @wqe, checked against the QP's reported caps. A refused one keeps only its
 * wr_id and the status it fails with (wqe->error): the requester fails it in
 * order (sq_lock held).
 */
void tbv_uwqe_send(struct tbv_qp *qp, u32 idx, struct tbv_send_wqe *wqe)
{
	enum ib_qp_type type = qp->ibqp.qp_type;
	struct tbv_uwqe_buf *buf = qp->sq_copy;
	const struct tbv_rxe_limits lim = {
		.qp_type = type == IB_QPT_RC ? TBV_RXE_QPT_RC :
			   type == IB_QPT_UC ? TBV_RXE_QPT_UC : TBV_RXE_QPT_UD,
		.flush_verbs = TBV_FLUSH_VERBS,
		.max_sge = qp->sq.max_sge,
		.max_inline = qp->max_inline,
		.max_msg = TBV_MAX_MR_SIZE,
	};
	enum ib_wc_status st;
	const u8 *slot;
	u32 len;

	slot = tbv_uwqe_copy(&qp->sq_ring, idx, buf, &len);
	memset(wqe, 0, sizeof(*wqe));
	st = (enum ib_wc_status)tbv_rxe_send_parse(slot, len, &lim, &buf->send);
	wqe->wr_id = buf->send.wr_id;
	if (st == IB_WC_SUCCESS)
		st = tbv_uwqe_fill_send(qp, &buf->send, wqe);
	if (st != IB_WC_SUCCESS) {
		memset(wqe, 0, sizeof(*wqe));
		wqe->wr_id = buf->send.wr_id;
		wqe->error = st;
	}
}
