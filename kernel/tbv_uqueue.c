// SPDX-License-Identifier: GPL-2.0
/*
 * Queues shared with user space: one vmalloc buffer per ring, a struct
 * rxe_queue_buf header and power-of-two slots, mapped by the process at the
 * offset of an rdma_user_mmap_entry (docs/rxe-abi.md, section 2.2).
 *
 * The mmap entry owns the buffer and its charge: destroying a ring removes the
 * entry (no new mappings) and the buffer is freed with the entry's last
 * reference. Each mapping holds one (the core's vma tracking, as for
 * rdma_user_mmap_io(); copies made by fork() or a split take their own), and
 * so does an mmap() in progress. A process that keeps the old ring mapped
 * after a destroy or a resize keeps its memory, and that memory stays in its
 * budget until the last mapping goes: else a loop of resize_cq and mmap()
 * would grow without bound. A stale mapping writes only to memory the kernel
 * no longer reads.
 * Rings count against the user's queue budget (tbv_quota.c) and its memory
 * cgroup: allocated with the charge's GFP flags, so not with vmalloc_user(),
 * whose accounted variant is not exported to modules; its mapping is done page
 * by page, as remap_vmalloc_range() does for vmalloc_user()'s buffers. The
 * memory cgroup's charge is the pages' own and goes with them.
 *
 * Disassociation (unplug) drops every mapping's reference (the core's
 * uverbs_user_mmap_disassociate()) but leaves our pages mapped, as zap_vma_ptes()
 * zaps only VM_PFNMAP mappings: the buffer and its charge go then, before the
 * context, and the pages with the process's mappings.
 */
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "tbv.h"
#include "tbv_uqueue.h"
#include "tbv_rxe_wqe.h"
#include "tbv_rxe_cqe.h"

/*
 * The WQE layout the portable parser (proto/tbv_rxe_wqe.c) reads, against the
 * uapi header: the rings' layout is rdma_rxe's ABI, the same on every kernel
 * (6.1's header only lacks the FLUSH and ATOMIC_WRITE fields, tbv_compat.h).
 */
#define TBV_RXE_AT(type, field, off) static_assert(offsetof(type, field) == (off), #field)

TBV_RXE_AT(struct rxe_send_wqe, wr.wr_id, TBV_RXE_SWQE_WR_ID);
TBV_RXE_AT(struct rxe_send_wqe, wr.opcode, TBV_RXE_SWQE_OPCODE);
TBV_RXE_AT(struct rxe_send_wqe, wr.send_flags, TBV_RXE_SWQE_SEND_FLAGS);
TBV_RXE_AT(struct rxe_send_wqe, wr.ex.imm_data, TBV_RXE_SWQE_EX);
TBV_RXE_AT(struct rxe_send_wqe, wr.ex.invalidate_rkey, TBV_RXE_SWQE_EX);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.rdma.remote_addr, TBV_RXE_SWQE_REMOTE_ADDR);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.rdma.rkey, TBV_RXE_SWQE_RDMA_RKEY);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.atomic.remote_addr, TBV_RXE_SWQE_REMOTE_ADDR);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.atomic.compare_add, TBV_RXE_SWQE_ATOMIC_COMPARE_ADD);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.atomic.swap, TBV_RXE_SWQE_ATOMIC_SWAP);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.atomic.rkey, TBV_RXE_SWQE_ATOMIC_RKEY);
#ifdef TBV_HAVE_RXE_FLUSH
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.flush.remote_addr, TBV_RXE_SWQE_REMOTE_ADDR);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.flush.rkey, TBV_RXE_SWQE_FLUSH_RKEY);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.flush.type, TBV_RXE_SWQE_FLUSH_TYPE);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.flush.level, TBV_RXE_SWQE_FLUSH_LEVEL);
TBV_RXE_AT(struct rxe_send_wqe, dma.atomic_wr, TBV_RXE_SWQE_DATA);
#endif
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.ud.remote_qpn, TBV_RXE_SWQE_UD_REMOTE_QPN);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.ud.remote_qkey, TBV_RXE_SWQE_UD_REMOTE_QKEY);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.ud.ah_num, TBV_RXE_SWQE_UD_AH_NUM);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.mw.addr, TBV_RXE_SWQE_MW_ADDR);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.mw.length, TBV_RXE_SWQE_MW_LENGTH);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.mw.mr_lkey, TBV_RXE_SWQE_MW_MR_LKEY);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.mw.mw_rkey, TBV_RXE_SWQE_MW_MW_RKEY);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.mw.rkey, TBV_RXE_SWQE_MW_RKEY);
TBV_RXE_AT(struct rxe_send_wqe, wr.wr.mw.access, TBV_RXE_SWQE_MW_ACCESS);
TBV_RXE_AT(struct rxe_send_wqe, dma.length, TBV_RXE_SWQE_DMA_LENGTH);
TBV_RXE_AT(struct rxe_send_wqe, dma.num_sge, TBV_RXE_SWQE_DMA_NUM_SGE);
TBV_RXE_AT(struct rxe_send_wqe, dma.sge, TBV_RXE_SWQE_DATA);
TBV_RXE_AT(struct rxe_send_wqe, dma.inline_data, TBV_RXE_SWQE_DATA);
static_assert(sizeof(struct rxe_send_wqe) == TBV_RXE_SWQE_SIZE);
TBV_RXE_AT(struct rxe_recv_wqe, wr_id, TBV_RXE_RWQE_WR_ID);
TBV_RXE_AT(struct rxe_recv_wqe, dma.num_sge, TBV_RXE_RWQE_DMA_NUM_SGE);
TBV_RXE_AT(struct rxe_recv_wqe, dma.sge, TBV_RXE_RWQE_SGE);
static_assert(sizeof(struct rxe_recv_wqe) == TBV_RXE_RWQE_SIZE);
TBV_RXE_AT(struct rxe_sge, addr, TBV_RXE_SGE_ADDR);
TBV_RXE_AT(struct rxe_sge, length, TBV_RXE_SGE_LENGTH);
TBV_RXE_AT(struct rxe_sge, lkey, TBV_RXE_SGE_LKEY);
static_assert(sizeof(struct rxe_sge) == TBV_RXE_SGE_SIZE);

/* the values in the ring are user space's, equal to the kernel's (so passed on as they are) */
#define TBV_RXE_SAME(ours, theirs) static_assert((int)(ours) == (int)(theirs), #theirs)

TBV_RXE_SAME(TBV_RXE_WR_RDMA_WRITE, IB_WR_RDMA_WRITE);
TBV_RXE_SAME(TBV_RXE_WR_RDMA_WRITE_WITH_IMM, IB_WR_RDMA_WRITE_WITH_IMM);
TBV_RXE_SAME(TBV_RXE_WR_SEND, IB_WR_SEND);
TBV_RXE_SAME(TBV_RXE_WR_SEND_WITH_IMM, IB_WR_SEND_WITH_IMM);
TBV_RXE_SAME(TBV_RXE_WR_RDMA_READ, IB_WR_RDMA_READ);
TBV_RXE_SAME(TBV_RXE_WR_ATOMIC_CMP_AND_SWP, IB_WR_ATOMIC_CMP_AND_SWP);
TBV_RXE_SAME(TBV_RXE_WR_ATOMIC_FETCH_AND_ADD, IB_WR_ATOMIC_FETCH_AND_ADD);
TBV_RXE_SAME(TBV_RXE_WR_LOCAL_INV, IB_WR_LOCAL_INV);
TBV_RXE_SAME(TBV_RXE_WR_BIND_MW, IB_WR_BIND_MW);
TBV_RXE_SAME(TBV_RXE_WR_SEND_WITH_INV, IB_WR_SEND_WITH_INV);
TBV_RXE_SAME(TBV_RXE_WR_FLUSH, IB_WR_FLUSH);
TBV_RXE_SAME(TBV_RXE_WR_ATOMIC_WRITE, IB_WR_ATOMIC_WRITE);
TBV_RXE_SAME(TBV_RXE_WR_LOCAL_INV, IB_UVERBS_WR_LOCAL_INV);
TBV_RXE_SAME(TBV_RXE_WR_BIND_MW, IB_UVERBS_WR_BIND_MW);
TBV_RXE_SAME(TBV_RXE_WR_SEND_WITH_INV, IB_UVERBS_WR_SEND_WITH_INV);
TBV_RXE_SAME(TBV_RXE_SEND_FENCE, IB_SEND_FENCE);
TBV_RXE_SAME(TBV_RXE_SEND_SIGNALED, IB_SEND_SIGNALED);
TBV_RXE_SAME(TBV_RXE_SEND_SOLICITED, IB_SEND_SOLICITED);
TBV_RXE_SAME(TBV_RXE_SEND_INLINE, IB_SEND_INLINE);
TBV_RXE_SAME(TBV_RXE_OK, IB_WC_SUCCESS);
TBV_RXE_SAME(TBV_RXE_LOC_LEN_ERR, IB_WC_LOC_LEN_ERR);
TBV_RXE_SAME(TBV_RXE_LOC_QP_OP_ERR, IB_WC_LOC_QP_OP_ERR);
TBV_RXE_SAME(TBV_RXE_FLUSH_GLOBAL, TBV_FLUSH_GLOBAL);
TBV_RXE_SAME(TBV_RXE_FLUSH_PERSISTENT, TBV_FLUSH_PERSISTENT);
TBV_RXE_SAME(TBV_RXE_FLUSH_RANGE, TBV_FLUSH_RANGE);
TBV_RXE_SAME(TBV_RXE_FLUSH_MR, TBV_FLUSH_MR);
static_assert(TBV_MAX_SGE <= TBV_RXE_MAX_SGE && TBV_MAX_MR_SIZE <= U32_MAX);

/* The CQE the portable writer (proto/tbv_rxe_cqe.c) fills: struct ib_uverbs_wc. */
TBV_RXE_AT(struct ib_uverbs_wc, wr_id, TBV_RXE_CQE_WR_ID);
TBV_RXE_AT(struct ib_uverbs_wc, status, TBV_RXE_CQE_STATUS);
TBV_RXE_AT(struct ib_uverbs_wc, opcode, TBV_RXE_CQE_OPCODE);
TBV_RXE_AT(struct ib_uverbs_wc, vendor_err, TBV_RXE_CQE_VENDOR_ERR);
TBV_RXE_AT(struct ib_uverbs_wc, byte_len, TBV_RXE_CQE_BYTE_LEN);
TBV_RXE_AT(struct ib_uverbs_wc, ex.imm_data, TBV_RXE_CQE_EX);
TBV_RXE_AT(struct ib_uverbs_wc, ex.invalidate_rkey, TBV_RXE_CQE_EX);
TBV_RXE_AT(struct ib_uverbs_wc, qp_num, TBV_RXE_CQE_QP_NUM);
TBV_RXE_AT(struct ib_uverbs_wc, src_qp, TBV_RXE_CQE_SRC_QP);
TBV_RXE_AT(struct ib_uverbs_wc, wc_flags, TBV_RXE_CQE_WC_FLAGS);
TBV_RXE_AT(struct ib_uverbs_wc, pkey_index, TBV_RXE_CQE_PKEY_INDEX);
TBV_RXE_AT(struct ib_uverbs_wc, slid, TBV_RXE_CQE_SLID);
TBV_RXE_AT(struct ib_uverbs_wc, sl, TBV_RXE_CQE_SL);
TBV_RXE_AT(struct ib_uverbs_wc, dlid_path_bits, TBV_RXE_CQE_DLID_PATH_BITS);
TBV_RXE_AT(struct ib_uverbs_wc, port_num, TBV_RXE_CQE_PORT_NUM);
static_assert(sizeof(struct ib_uverbs_wc) == TBV_RXE_CQE_SIZE);
TBV_RXE_SAME(TBV_RXE_KWC_GRH, IB_WC_GRH);
TBV_RXE_SAME(TBV_RXE_KWC_WITH_IMM, IB_WC_WITH_IMM);
TBV_RXE_SAME(TBV_RXE_KWC_WITH_INVALIDATE, IB_WC_WITH_INVALIDATE);

/* Far above every device maximum; refused before any size arithmetic. */
#define TBV_UQ_MAX_ENTRIES	(1u << 20)
#define TBV_UQ_MAX_ELEM		(1u << 16)

static struct tbv_uq_mmap *to_tbv_uq_mmap(struct rdma_user_mmap_entry *entry)
{
	return container_of(entry, struct tbv_uq_mmap, rdma);
}

int tbv_uq_init(struct tbv_uqueue *q, struct tbv_charge *c, struct ib_udata *udata,
		u32 entries, size_t elem_size, enum tbv_uq_side side, struct mminfo *mi)
{
	struct tbv_ucontext *uc = rdma_udata_to_drv_context(udata, struct tbv_ucontext, ibuc);
	struct tbv_queue_charge charge;
	u32 slots;
	u8 log2_slot;
	u64 size;
	int ret;

	memset(q, 0, sizeof(*q));
	memset(mi, 0, sizeof(*mi));
	if (!uc || !entries || entries >= TBV_UQ_MAX_ENTRIES || !elem_size ||
	    elem_size > TBV_UQ_MAX_ELEM)
		return -EINVAL;
	/* one slot stays empty: prod == cons is empty, prod + 1 == cons full */
	slots = roundup_pow_of_two(entries + 1);
	/* a slot never shares a cache line with another */
	log2_slot = order_base_2(max_t(size_t, elem_size, SMP_CACHE_BYTES));
	size = PAGE_ALIGN(sizeof(struct rxe_queue_buf) + ((u64)slots << log2_slot));
	if (size > U32_MAX)		/* mminfo.size */
		return -EINVAL;

	ret = tbv_quota_queue_hold(c, &charge, size);
	if (ret)
		return ret;
	ret = -ENOMEM;
	q->mmap = kzalloc(sizeof(*q->mmap), tbv_quota_gfp(c));
	if (!q->mmap)
		goto err;
	q->buf = __vmalloc(size, tbv_quota_gfp(c) | __GFP_ZERO);	/* both indexes 0 */
	if (!q->buf)
		goto err;
	q->buf->log2_elem_size = log2_slot;
	q->buf->index_mask = slots - 1;
	q->mmap->buf = q->buf;
	q->mmap->charge = charge;
	ret = rdma_user_mmap_entry_insert(&uc->ibuc, &q->mmap->rdma, size);
	if (ret)
		goto err;

	q->size = size;
	q->mask = slots - 1;
	q->log2_slot = log2_slot;
	q->side = side;
	mi->offset = rdma_user_mmap_get_offset(&q->mmap->rdma);
	mi->size = size;
	return 0;
err:
	vfree(q->buf);
	kfree(q->mmap);
	memset(q, 0, sizeof(*q));
	tbv_quota_queue_release(&charge);	/* no entry inserted: no mmap_free */
	return ret;
}

void tbv_uq_destroy(struct tbv_uqueue *q)
{
	if (!q->mmap)
		return;
	/* frees the buffer and gives back its charge now, unless mapped (or being mapped) */
	rdma_user_mmap_entry_remove(&q->mmap->rdma);
	memset(q, 0, sizeof(*q));
}

int tbv_uq_replace(struct tbv_uqueue *q, struct tbv_uqueue *new)
{
	u32 user = tbv_uq_user_index(q);
	u32 n = tbv_uq_count(q, user);
	u32 oldest = q->side == TBV_UQ_KERNEL_PRODUCES ? user : q->index;
	u32 i;

	if (new->side != q->side || new->log2_slot != q->log2_slot ||
	    n > tbv_uq_capacity(new))
		return -EINVAL;
	/* the process may write the old slots meanwhile: what it reads is its own business */
	for (i = 0; i < n; i++)
		memcpy(tbv_uq_slot(new, i), tbv_uq_slot(q, oldest + i), 1u << q->log2_slot);
	/* the new ring holds them in slots 0..n-1 */
	WRITE_ONCE(new->buf->consumer_index, 0);
	WRITE_ONCE(new->buf->producer_index, n);
	new->index = q->side == TBV_UQ_KERNEL_PRODUCES ? n : 0;
	swap(*q, *new);
	return 0;
}

int tbv_uq_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *entry;
	struct rdma_umap_priv *priv;
	unsigned long off;
	void *buf;
	int ret = 0;

	/* a shared mapping of exactly the ring's pages (the entry's size), at one of its offsets */
	entry = rdma_user_mmap_entry_get(ibuc, vma);
	if (!entry)
		return -EINVAL;
	/*
	 * Freed by the core (kfree). Room to spare: the type is the core's own,
	 * and a field it grows in a kernel not checked yet must not land past
	 * our allocation (tbv_uqueue.h).
	 */
	priv = kzalloc(TBV_UMAP_PRIV_SIZE, GFP_KERNEL_ACCOUNT);
	if (!priv) {
		ret = -ENOMEM;
		goto out;
	}
	buf = to_tbv_uq_mmap(entry)->buf;
	for (off = 0; off < vma->vm_end - vma->vm_start && !ret; off += PAGE_SIZE)
		ret = vm_insert_page(vma, vma->vm_start + off, vmalloc_to_page(buf + off));
	if (ret) {
		kfree(priv);
		goto out;
	}
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	/* the mapping holds the entry, so the buffer and its charge, until it goes */
	rdma_umap_priv_init(priv, vma, entry);
out:
	rdma_user_mmap_entry_put(entry);
	return ret;
}

/*
 * Every mmap entry of ours is a ring's; its last reference went: the ring's
 * object destroyed or resized, and no mapping left (or the device
 * disassociated). Before the context's dealloc: the core frees the context
 * right after, with the entries' xarray.
 */
void tbv_uq_mmap_free(struct rdma_user_mmap_entry *entry)
{
	struct tbv_uq_mmap *mmap = to_tbv_uq_mmap(entry);

	vfree(mmap->buf);
	tbv_quota_queue_release(&mmap->charge);
	kfree(mmap);
}
