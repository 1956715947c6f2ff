// SPDX-License-Identifier: GPL-2.0
/*
 * Work queues: rings of fixed-size WQE slots (struct tbv_wq), the send and
 * receive queues of QPs and the queues of SRQs.
 */
#include <linux/log2.h>

#include "tbv.h"

int tbv_wq_init(struct tbv_charge *c, struct tbv_wq *wq, u32 size, u32 slot, u32 max_sge)
{
	/* a power of two: slot = index % size stays one-to-one when the u32 indexes wrap */
	wq->size = roundup_pow_of_two(max(size, 1u));
	wq->slot = ALIGN(slot, 8);
	wq->max_sge = max_sge;
	wq->prod = 0;
	wq->cons = 0;
	return tbv_queue_alloc(c, &wq->buf, wq->size, wq->slot);
}

/* Copy @wr into the next slot of @wq; the caller holds the queue's lock. */
int tbv_recv_wqe_fill(struct tbv_wq *wq, const struct ib_recv_wr *wr)
{
	struct tbv_recv_wqe *wqe;
	u64 total = 0;
	int i;

	if (wq->prod - wq->cons >= wq->size)
		return -ENOMEM;
	if (wr->num_sge < 0 || wr->num_sge > wq->max_sge)
		return -EINVAL;
	wqe = tbv_wq_slot(wq, wq->prod);
	wqe->wr_id = wr->wr_id;
	wqe->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		wqe->sge[i] = (struct tbv_sge){ wr->sg_list[i].addr, wr->sg_list[i].length,
						wr->sg_list[i].lkey };
		total += wr->sg_list[i].length;
	}
	wqe->length = min_t(u64, total, U32_MAX);
	wq->prod++;
	return 0;
}
