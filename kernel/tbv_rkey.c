// SPDX-License-Identifier: GPL-2.0
/*
 * Remote access through an rkey, for the responder: the key names an MR of
 * the QP's PD (tbv_mr.c) or a memory window bound for the QP (tbv_mw.c), and
 * the access is checked against its range and rights before a byte moves.
 */
#include <linux/highmem.h>

#include "tbv.h"

/*
 * A remote access through @rkey to [va, va + len) with @access rights: through
 * an MR of the QP's PD, or a memory window bound for the QP (tbv_mw.c). @fn,
 * if given, then works on the MR at @va. The MR is looked up for every packet
 * and never held between packets, so deregistering it never waits for a peer.
 */
static int tbv_remote_access(struct tbv_qp *qp, u32 rkey, u64 va, u64 len, int access,
			     tbv_remote_fn fn, void *arg)
{
	struct tbv_mr *mr;
	int ret;

	if (rkey & TBV_KEY_MW_BIT)
		return tbv_mw_remote(qp, rkey, va, len, access, fn, arg);
	mr = tbv_mr_get(qp->dev, rkey);
	if (!mr)
		return -EACCES;
	ret = tbv_mr_check(mr, qp->ibqp.pd, va, len, access);
	if (!ret && !mr->umem)
		ret = -EACCES;	/* DMA MRs are never remote (they are never granted remote rights) */
	if (!ret && fn)
		ret = fn(mr, va, arg);
	tbv_mr_put(mr);
	return ret;
}

struct tbv_copy_args {
	void *buf;
	u32 n;
	bool to_mr;
};

static int tbv_remote_copy(struct tbv_mr *mr, u64 va, void *arg)
{
	struct tbv_copy_args *c = arg;

	tbv_mr_copy(mr, va, c->buf, c->n, c->to_mr);
	return 0;
}

/*
 * With @buf, @n bytes at @va are copied to (@to_mr) or from the memory @rkey
 * names; with a NULL @buf only the whole range is checked.
 */
int tbv_mr_remote(struct tbv_qp *qp, u32 rkey, u64 va, u64 len, int access, void *buf, u32 n,
		  bool to_mr)
{
	struct tbv_copy_args c = { .buf = buf, .n = n, .to_mr = to_mr };

	return tbv_remote_access(qp, rkey, va, len, access, buf ? tbv_remote_copy : NULL, &c);
}

static int tbv_remote_page(struct tbv_mr *mr, u64 va, void *arg)
{
	return tbv_mr_page(mr, va, arg);
}

/*
 * Zero-copy TX of a READ response: @frame names the page that holds its
 * @frame->size bytes at @va, if @rkey grants @access there and they lie in
 * one page (tbv_mr_page()). An error says only: copy them instead.
 */
int tbv_mr_remote_page(struct tbv_qp *qp, u32 rkey, u64 va, int access, struct tbv_frame *frame)
{
	return tbv_remote_access(qp, rkey, va, frame->size, access, tbv_remote_page, frame);
}

struct tbv_atomic_args {
	u32 op;				/* enum tbv_atomic_op, or 0: store swap_add */
	u64 swap_add;
	u64 compare;
	u64 orig;
};

/*
 * The 8 bytes at @va, aligned (so they never straddle a page), on the pinned
 * page: a CPU atomic (atomic against other atomics from any QP and against
 * local CPU atomics on the same memory) or one untearable store.
 */
static int tbv_remote_u64(struct tbv_mr *mr, u64 va, void *arg)
{
	struct tbv_atomic_args *a = arg;
	u64 off = va - mr->iova + mr->page_offset;
	struct page *page;
	atomic64_t *target;
	void *p;

	if (off % TBV_ATOMIC_LEN)
		return -EINVAL;	/* an iova aligned differently from the memory it names */
	page = mr->pages[off >> PAGE_SHIFT];
	p = kmap_local_page(page);
	target = p + offset_in_page(off);
	if (a->op == TBV_ATOMIC_CMP_SWP)
		a->orig = atomic64_cmpxchg(target, a->compare, a->swap_add);
	else if (a->op == TBV_ATOMIC_FETCH_ADD)
		a->orig = atomic64_fetch_add(a->swap_add, target);
	else
		atomic64_set(target, a->swap_add);
	kunmap_local(p);
	flush_dcache_page(page);
	return 0;
}

/* An atomic write through @rkey: the 8 aligned bytes at @va stored at once, never torn. */
int tbv_mr_atomic_write(struct tbv_qp *qp, u32 rkey, u64 va, u64 value)
{
	struct tbv_atomic_args a = { .swap_add = value };

	return tbv_remote_access(qp, rkey, va, TBV_ATOMIC_LEN, IB_ACCESS_REMOTE_WRITE,
				 tbv_remote_u64, &a);
}

/*
 * A remote atomic through @rkey on the 8 bytes at @va (the caller checked the
 * alignment of @va); *@orig receives the value before it.
 */
int tbv_mr_atomic(struct tbv_qp *qp, u32 rkey, u64 va, u32 op, u64 swap_add, u64 compare,
		  u64 *orig)
{
	struct tbv_atomic_args a = { .op = op, .swap_add = swap_add, .compare = compare };
	int ret;

	ret = tbv_remote_access(qp, rkey, va, TBV_ATOMIC_LEN, IB_ACCESS_REMOTE_ATOMIC,
				tbv_remote_u64, &a);
	if (!ret)
		*orig = a.orig;
	return ret;
}
