/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Queues shared with user space (tbv_uqueue.c): rings laid out as rdma_rxe's
 * struct rxe_queue_buf, mapped by the process through an rdma_user_mmap_entry
 * (docs/rxe-abi.md, section 2). The process owns one index, the kernel the
 * other; the kernel keeps its own index, mask and slot size and never reads
 * them back from the shared header.
 */
#ifndef TBV_UQUEUE_H
#define TBV_UQUEUE_H

#include <linux/types.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_user_rxe.h>

#include "tbv_quota.h"

/*
 * The core's record of a mapping (drivers/infiniband/core/core_priv.h, not
 * exported as a type): rdma_umap_priv_init() links it to the VMA and takes a
 * reference on the entry; ib_uverbs's vm_ops (set before ops.mmap is called)
 * copy it for copies of the VMA, drop the reference and free it (kfree) when
 * the VMA goes, and drop it at disassociation. The same three fields since
 * 5.4 (the entry added by "RDMA: Connect between the mmap entry and the
 * umap_priv structure"); checked in the 6.1, 6.12 and 7.3 ib_core.ko we build
 * for: rdma_umap_priv_init() stores vma at 0, the list at 8, the entry at 24.
 */
struct rdma_umap_priv {
	struct vm_area_struct *vma;
	struct list_head list;
	struct rdma_user_mmap_entry *entry;
};

/* What we allocate for one: twice the known size, for a field a later kernel may add. */
#define TBV_UMAP_PRIV_SIZE	(2 * sizeof(struct rdma_umap_priv))

void rdma_umap_priv_init(struct rdma_umap_priv *priv, struct vm_area_struct *vma,
			 struct rdma_user_mmap_entry *entry);

/* Which index of the ring is the kernel's. */
enum tbv_uq_side {
	TBV_UQ_KERNEL_PRODUCES,		/* CQ: the kernel writes, the process polls */
	TBV_UQ_KERNEL_CONSUMES,		/* SQ, RQ, SRQ: the process posts, the kernel takes */
};

/*
 * The mapping of one ring: it owns the buffer and its charge, both given back
 * with the last reference, which the last mapping of the ring may hold.
 */
struct tbv_uq_mmap {
	struct rdma_user_mmap_entry rdma;
	void *buf;
	struct tbv_queue_charge charge;	/* the buffer's bytes, to its creator's queue budget */
};

struct tbv_uqueue {
	struct rxe_queue_buf *buf;	/* shared: everything in it is the process's to change */
	struct tbv_uq_mmap *mmap;
	size_t size;			/* page-aligned: mapped and charged (in mmap->charge) */
	u32 mask;			/* slots - 1 */
	u32 index;			/* the kernel's index, in [0, mask] */
	u8 log2_slot;
	u8 side;			/* enum tbv_uq_side */
};

/*
 * Whether an object gets a shared ring: every user object does (1), and its
 * creator must leave room for rdma_rxe's reply of @resp_len bytes, as
 * rdma_rxe's provider does (-EINVAL otherwise, as rdma_rxe answers); a kernel
 * consumer's object keeps a kernel queue (0).
 */
static inline int tbv_uq_wanted(const struct ib_udata *udata, size_t resp_len)
{
	if (!udata)
		return 0;
	return udata->outlen >= resp_len ? 1 : -EINVAL;
}

/*
 * A ring of at least @entries elements of @elem_size bytes for an object of the
 * user context of @udata, charged to the user of @c (to its queue budget and
 * memory cgroup) until the ring's memory is freed; @mi says where the process
 * maps it. Holds roundup_pow_of_two(@entries + 1) slots, so
 * tbv_uq_capacity() >= @entries.
 */
int tbv_uq_init(struct tbv_uqueue *q, struct tbv_charge *c, struct ib_udata *udata,
		u32 entries, size_t elem_size, enum tbv_uq_side side, struct mminfo *mi);
/*
 * Remove the mapping: no new mappings. The memory and its charge stay while
 * the process maps the ring, and go with its last mapping (tbv_uq_mmap_free()).
 */
void tbv_uq_destroy(struct tbv_uqueue *q);

/*
 * Move what @q holds, in order, to the fresh ring @new (of the same side and
 * element size) and swap them: @q then has the new ring and @new the old one,
 * to be destroyed. -EINVAL (nothing changed) if it does not fit. The caller
 * excludes the kernel's other users of @q.
 */
int tbv_uq_replace(struct tbv_uqueue *q, struct tbv_uqueue *new);

static inline u32 tbv_uq_capacity(const struct tbv_uqueue *q)
{
	return q->mask;
}

static inline u32 tbv_uq_slot_size(const struct tbv_uqueue *q)
{
	return 1u << q->log2_slot;
}

/* The process's index: read once (acquire: what it wrote before is visible), masked. */
static inline u32 tbv_uq_user_index(const struct tbv_uqueue *q)
{
	const u32 *idx = q->side == TBV_UQ_KERNEL_PRODUCES ? &q->buf->consumer_index :
							     &q->buf->producer_index;

	/* pairs with the process's release store of its index after its slot writes */
	return smp_load_acquire(idx) & q->mask;
}

/* Elements between producer and consumer, given the process's index @user. */
static inline u32 tbv_uq_count(const struct tbv_uqueue *q, u32 user)
{
	if (q->side == TBV_UQ_KERNEL_PRODUCES)
		return (q->index - user) & q->mask;
	return (user - q->index) & q->mask;
}

/* Slot @i (masked) in the shared buffer: copy from it once, never read it twice. */
static inline void *tbv_uq_slot(const struct tbv_uqueue *q, u32 i)
{
	return q->buf->data + ((size_t)(i & q->mask) << q->log2_slot);
}

/* Set the kernel's index and publish it (release: the slots written before are visible). */
static inline void tbv_uq_publish(struct tbv_uqueue *q, u32 index)
{
	u32 *idx = q->side == TBV_UQ_KERNEL_PRODUCES ? &q->buf->producer_index :
						       &q->buf->consumer_index;

	q->index = index & q->mask;
	/* pairs with the process's acquire load before it reads (or reuses) the slots */
	smp_store_release(idx, q->index);
}

/* ib_device_ops.mmap and .mmap_free */
int tbv_uq_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma);
void tbv_uq_mmap_free(struct rdma_user_mmap_entry *entry);

#endif /* TBV_UQUEUE_H */
