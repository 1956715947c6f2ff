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
