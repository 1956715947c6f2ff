// SPDX-License-Identifier: GPL-2.0
/*
 * Memory regions: user memory pinned with ib_umem, kernel DMA MRs for kernel
 * consumers (their addresses are kernel virtual addresses: the device uses
 * virt DMA). Keys are random, looked up per device, and only usable by QPs of
 * the MR's PD; every access is checked against the MR's range and rights.
 */
#include <linux/random.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "tbv.h"

#define TBV_MR_ACCESS_SUPPORTED (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |	\
				 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC |	\
				 IB_ACCESS_MW_BIND | IB_ACCESS_FLUSH_GLOBAL | IB_ACCESS_OPTIONAL)

/*
 * Memory user MRs may pin, all devices together (N links must not pin N times
 * as much), on top of RLIMIT_MEMLOCK: ib_umem_get() counts a registration's
 * pages in its process's pinned_vm and refuses beyond RLIMIT_MEMLOCK unless
 * the process has CAP_IPC_LOCK (drivers/infiniband/core/umem.c, read in 6.12 and 7.3).
 * That limit is per process and root has the capability, so without this one
 * a set of processes could pin all of RAM. A user may pin a share of it
 * (tbv_quota.c). Each device counts its own part, for its statistics.
 */
static unsigned int tbv_max_pinned_mb;
module_param_named(max_pinned_mb, tbv_max_pinned_mb, uint, 0644);
MODULE_PARM_DESC(max_pinned_mb,
		 "MiB of memory the MRs of all devices together may pin (default 0: half of RAM)");

static atomic64_t tbv_pinned_pages_all = ATOMIC64_INIT(0);

unsigned long tbv_pinned_pages_limit(void)
{
	unsigned int mb = READ_ONCE(tbv_max_pinned_mb);

	if (!mb)
		return totalram_pages() / 2;
	return min_t(u64, (u64)mb << (20 - PAGE_SHIFT), totalram_pages());
}

/*
 * Count the pages [start, start + length) spans against the limit of all
 * devices, and the user's share of it, in @mr's charge and pinned_pages.
 */
static int tbv_pinned_charge(struct tbv_dev *dev, struct tbv_mr *mr, u64 start, u64 length)
{
	unsigned long limit = tbv_pinned_pages_limit();
	u64 n = (ALIGN(start + length, PAGE_SIZE) - ALIGN_DOWN(start, PAGE_SIZE)) >> PAGE_SHIFT;
	int ret;

	if (n > limit || atomic64_add_return(n, &tbv_pinned_pages_all) > limit) {
		if (n <= limit)
			atomic64_sub(n, &tbv_pinned_pages_all);
		dev_notice_ratelimited(&dev->ibdev.dev,
				       "registering %llu KiB refused: %lld of %lu KiB pinned (max_pinned_mb)\n",
				       n << (PAGE_SHIFT - 10),
				       (s64)atomic64_read(&tbv_pinned_pages_all) << (PAGE_SHIFT - 10),
				       limit << (PAGE_SHIFT - 10));
		return -ENOMEM;
	}
	ret = tbv_quota_pin(&mr->charge, n, limit);
	if (ret) {
		atomic64_sub(n, &tbv_pinned_pages_all);
		return ret;
	}
	atomic64_add(n, &dev->pinned_pages);
	mr->charged_pages = n;
	return 0;
}

static void tbv_pinned_uncharge(struct tbv_dev *dev, struct tbv_mr *mr)
{
	atomic64_sub(mr->charged_pages, &dev->pinned_pages);
	atomic64_sub(mr->charged_pages, &tbv_pinned_pages_all);
	mr->charged_pages = 0;
}

static int tbv_mr_insert(struct tbv_dev *dev, struct tbv_mr *mr)
{
	int tries, ret = -EBUSY;

	if (atomic_inc_return(&dev->nr_mrs) > TBV_MAX_MR) {
		atomic_dec(&dev->nr_mrs);
		return -ENOMEM;
	}
	refcount_set(&mr->ref, 1);
	init_completion(&mr->released);
	mr->dev = dev;
	/* Random keys: a peer cannot guess another registration's rkey by counting. */
	for (tries = 0; tries < 16 && ret == -EBUSY; tries++) {
		u32 key = get_random_u32() & ~TBV_KEY_MW_BIT;

		if (!key)
			continue;
		ret = xa_insert_bh(&dev->mrs, key, mr, GFP_KERNEL);
		if (!ret) {
			mr->ibmr.lkey = key;
			mr->ibmr.rkey = key;
		}
	}
	if (ret)
		atomic_dec(&dev->nr_mrs);
	return ret;
}

struct ib_mr *tbv_get_dma_mr(struct ib_pd *pd, int access)
{
	struct tbv_dev *dev = to_tbv_dev(pd->device);
	struct tbv_mr *mr;
	int ret;

	/* Remote access to all of kernel memory is never granted. */
	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_OPTIONAL))
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->access = access;
	mr->length = U64_MAX;
	ret = tbv_mr_insert(dev, mr);
	if (ret) {
		kfree(mr);
		return ERR_PTR(ret);
	}
	return &mr->ibmr;
}

static int tbv_mr_pin_pages(struct tbv_mr *mr)
{
	struct sg_page_iter iter;
	unsigned long i = 0;

	mr->npages = ib_umem_num_pages(mr->umem);
	mr->pages = kvmalloc_array(mr->npages, sizeof(*mr->pages), tbv_quota_gfp(&mr->charge));
	if (!mr->pages)
		return -ENOMEM;
	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &iter, 0) {
		if (i == mr->npages)
			break;
		mr->pages[i++] = sg_page_iter_page(&iter);
	}
	if (i != mr->npages)
		return -EFAULT;
	mr->page_offset = ib_umem_offset(mr->umem);
	return 0;
}

static struct ib_mr *tbv_reg_mr(struct ib_pd *pd, u64 start, u64 length, u64 iova, int access,
			       struct ib_udata *udata)
{
	struct tbv_dev *dev = to_tbv_dev(pd->device);
	struct tbv_mr *mr;
	int ret;

	if (access & ~TBV_MR_ACCESS_SUPPORTED)
		return ERR_PTR(-EOPNOTSUPP);	/* e.g. on-demand paging */
	if (!length || length > TBV_MAX_MR_SIZE || iova + length < iova)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL_ACCOUNT);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	ret = tbv_quota_charge(&mr->charge, udata, TBV_QUOTA_MR);
	if (ret)
		goto err_free;
	ret = tbv_pinned_charge(dev, mr, start, length);
	if (ret)
		goto err_quota;
	mr->umem = ib_umem_get_va(pd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		mr->umem = NULL;
		goto err_uncharge;
	}
	ret = tbv_mr_pin_pages(mr);
	if (ret)
		goto err_release;
	mr->iova = iova;
	mr->length = length;
	mr->access = access;
	ret = tbv_mr_insert(dev, mr);
	if (ret)
		goto err_release;
	return &mr->ibmr;

err_release:
	kvfree(mr->pages);
	ib_umem_release(mr->umem);
err_uncharge:
	tbv_pinned_uncharge(dev, mr);
err_quota:
	tbv_quota_uncharge(&mr->charge);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

struct ib_mr *tbv_reg_user_mr(struct ib_pd *pd, u64 start, u64 length, u64 iova,
			      int access, TBV_DMAH_PARAM struct ib_udata *udata)
{
	return tbv_reg_mr(pd, start, length, iova, access, udata);
}

/*
 * rereg_mr: a new PD or new rights take effect in place (the next packet sees
 * them; the core switches ibmr.pd). A new translation, or write rights on
 * pages pinned read-only, is a new registration with new keys, which the core
 * puts in place of this one. Refused while memory windows are bound.
 */
struct ib_mr *tbv_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length, u64 iova,
				int access, struct ib_pd *pd, struct ib_udata *udata)
{
	struct tbv_mr *mr = to_tbv_mr(ibmr);
	struct ib_pd *new_pd = (flags & IB_MR_REREG_PD) ? pd : ibmr->pd;
	struct ib_mr *new = NULL;
	int new_access = (flags & IB_MR_REREG_ACCESS) ? access : mr->access;

	if (flags & ~(IB_MR_REREG_TRANS | IB_MR_REREG_PD | IB_MR_REREG_ACCESS))
		return ERR_PTR(-EOPNOTSUPP);
	if (!mr->umem)
		return ERR_PTR(-EINVAL);
	if (new_access & ~TBV_MR_ACCESS_SUPPORTED)
		return ERR_PTR(-EOPNOTSUPP);
	/* no window binds to it meanwhile (binds refuse a negative count) */
	if (atomic_cmpxchg(&mr->nr_mws, 0, -1))
		return ERR_PTR(-EBUSY);
	if (flags & IB_MR_REREG_TRANS)
		new = tbv_reg_mr(new_pd, start, length, iova, new_access, udata);
	else if (ib_access_writable(new_access) && !mr->umem->writable)
		new = tbv_reg_mr(new_pd, mr->umem->address, mr->length, mr->iova, new_access,
				 udata);
	else
		WRITE_ONCE(mr->access, new_access);
	/* a replaced MR stays closed to binds: the core deregisters it next */
	if (!new || IS_ERR(new))
		atomic_set(&mr->nr_mws, 0);
	return new;
}

int tbv_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct tbv_mr *mr = to_tbv_mr(ibmr);
	struct tbv_dev *dev = mr->dev;

	/*
	 * -1: dying, no window binds to it any more (already so if rereg replaced
	 * it); refused while windows are bound.
	 */
	if (atomic_cmpxchg(&mr->nr_mws, 0, -1) > 0)
		return -EBUSY;
	xa_erase_bh(&dev->mrs, ibmr->lkey);
	/* References are held only while one packet is copied: a short wait. */
	if (!refcount_dec_and_test(&mr->ref))
		wait_for_completion(&mr->released);
	kvfree(mr->pages);
	if (mr->umem)
		ib_umem_release(mr->umem);
	tbv_pinned_uncharge(dev, mr);
	tbv_quota_uncharge(&mr->charge);
	atomic_dec(&dev->nr_mrs);
	kfree_rcu(mr, rcu);
	return 0;
}

struct tbv_mr *tbv_mr_get(struct tbv_dev *dev, u32 key)
{
	struct tbv_mr *mr;

	rcu_read_lock();
	mr = xa_load(&dev->mrs, key);
	if (mr && !refcount_inc_not_zero(&mr->ref))
		mr = NULL;
	rcu_read_unlock();
	return mr;
}

void tbv_mr_put(struct tbv_mr *mr)
{
	if (refcount_dec_and_test(&mr->ref))
		complete(&mr->released);
}

/* 0 if [va, va + len) lies in @mr, @mr belongs to @pd and grants @access. */
int tbv_mr_check(struct tbv_mr *mr, struct ib_pd *pd, u64 va, u64 len, int access)
{
	if (mr->ibmr.pd != pd)
		return -EACCES;
	if ((mr->access & access) != access)
		return -EACCES;
	if (!mr->umem)
		return 0;	/* kernel DMA MR: the kernel consumer owns the addresses */
	if (!tbv_range_within(mr->iova, mr->length, va, len))
		return -EFAULT;
	return 0;
}

/* Copy between @buf and [va, va + len) of @mr, already checked by tbv_mr_check(). */
void tbv_mr_copy(struct tbv_mr *mr, u64 va, void *buf, u32 len, bool to_mr)
{
	u64 off;

	if (!mr->umem) {
		if (to_mr)
			memcpy((void *)(uintptr_t)va, buf, len);
		else
			memcpy(buf, (void *)(uintptr_t)va, len);
		return;
	}
	off = va - mr->iova + mr->page_offset;
	while (len) {
		struct page *page = mr->pages[off >> PAGE_SHIFT];
		u32 in_page = offset_in_page(off);
		u32 n = min_t(u32, len, PAGE_SIZE - in_page);
		void *p = kmap_local_page(page);

		if (to_mr)
			memcpy(p + in_page, buf, n);
		else
			memcpy(buf, p + in_page, n);
		kunmap_local(p);
		if (to_mr)
			flush_dcache_page(page);
		buf += n;
		off += n;
		len -= n;
	}
}

/*
 * Zero-copy TX: if the @frame->size bytes at @va (checked by tbv_mr_check())
 * lie in one page of @mr, a user MR, @frame names that page, with a reference
 * of its own: the MR may be deregistered before the controller is done with
 * it (tbv_pool_put() drops the reference). Else -EXDEV: copy them instead.
 */
int tbv_mr_page(struct tbv_mr *mr, u64 va, struct tbv_frame *frame)
{
	u64 off;

	if (!mr->umem)
		return -EXDEV;
	off = va - mr->iova + mr->page_offset;
	if (offset_in_page(off) + frame->size > PAGE_SIZE)
		return -EXDEV;
	frame->page = mr->pages[off >> PAGE_SHIFT];
	frame->page_off = offset_in_page(off);
	get_page(frame->page);
	return 0;
}

/*
 * Zero-copy TX of the @frame->size bytes @offset bytes into the scatter list
 * @sge, if they lie in one SGE and one page (tbv_mr_page()); the SGE is
 * checked as tbv_sge_copy() checks it. An error says only: copy them instead
 * (tbv_sge_copy() then reports what is wrong).
 */
int tbv_sge_page(struct tbv_qp *qp, const struct tbv_sge *sge, u32 num_sge, u32 offset,
		 struct tbv_frame *frame)
{
	u32 i;

	for (i = 0; i < num_sge; i++) {
		struct tbv_mr *mr;
		int ret;

		if (offset >= sge[i].length) {
			offset -= sge[i].length;
			continue;
		}
		if (frame->size > sge[i].length - offset)
			return -EXDEV;
		mr = tbv_mr_get(qp->dev, sge[i].lkey);
		if (!mr)
			return -EACCES;
		ret = tbv_mr_check(mr, qp->ibqp.pd, sge[i].addr, sge[i].length, 0);
		if (!ret)
			ret = tbv_mr_page(mr, sge[i].addr + offset, frame);
		tbv_mr_put(mr);
		return ret;
	}
	return -EINVAL;
}

/*
 * Copy @len bytes between @buf and the scatter list @sge starting @offset bytes
 * into it. Each SGE's lkey must name an MR of the QP's PD covering the SGE with
 * local write access when written. Returns 0, -EINVAL if the list is too short
 * or -EACCES/-EFAULT on a protection error.
 */
int tbv_sge_copy(struct tbv_qp *qp, const struct tbv_sge *sge, u32 num_sge, u32 offset,
		 void *buf, u32 len, bool to_sge)
{
	u32 i;

	for (i = 0; i < num_sge && len; i++) {
		struct tbv_mr *mr;
		u32 n;
		int ret;

		if (offset >= sge[i].length) {
			offset -= sge[i].length;
			continue;
		}
		n = min(len, sge[i].length - offset);
		mr = tbv_mr_get(qp->dev, sge[i].lkey);
		if (!mr)
			return -EACCES;
		ret = tbv_mr_check(mr, qp->ibqp.pd, sge[i].addr, sge[i].length,
				   to_sge ? IB_ACCESS_LOCAL_WRITE : 0);
		/* a user QP never reaches kernel memory through a DMA MR */
		if (!ret && !mr->umem && qp->ibqp.uobject)
			ret = -EACCES;
		if (!ret)
			tbv_mr_copy(mr, sge[i].addr + offset, buf, n, to_sge);
		tbv_mr_put(mr);
		if (ret)
			return ret;
		buf += n;
		len -= n;
		offset = 0;
	}
	return len ? -EINVAL : 0;
}
