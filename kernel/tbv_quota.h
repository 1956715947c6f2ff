/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-user limits (tbv_quota.c): what the objects of user contexts are charged
 * to, and the allocation of queues whose size a user chooses.
 */
#ifndef TBV_QUOTA_H
#define TBV_QUOTA_H

#include <linux/types.h>
#include <rdma/ib_verbs.h>

/* What a user holds per device, each limited to a share of the device's limit. */
enum tbv_quota_obj {
	TBV_QUOTA_UCONTEXT,
	TBV_QUOTA_PD,
	TBV_QUOTA_CQ,
	TBV_QUOTA_QP,
	TBV_QUOTA_SRQ,
	TBV_QUOTA_MR,
	TBV_QUOTA_MW,
	TBV_QUOTA_AH,
	TBV_QUOTA_NR
};

/* Memory a user holds over all devices, in bytes. */
enum tbv_quota_mem {
	TBV_QUOTA_QUEUES,		/* QP, SRQ and CQ rings: max_user_queue_mb */
	TBV_QUOTA_PINNED,		/* pinned by MRs: max_user_share of max_pinned_mb */
	TBV_QUOTA_MEM_NR
};

struct tbv_quota;
struct tbv_quota_user;

/* A user context: the user it was opened by pays for every object made through it. */
struct tbv_ucontext {
	struct ib_ucontext ibuc;	/* first: a NULL context is a NULL tbv_ucontext */
	struct tbv_quota *quota;
	bool exempt;			/* opened with CAP_SYS_RESOURCE: counted, not limited */
};

/* What one object was charged; all zero for kernel consumers' objects. */
struct tbv_charge {
	struct tbv_quota *quota;	/* NULL: not charged (a kernel consumer's) */
	u64 mem[TBV_QUOTA_MEM_NR];	/* bytes */
	u8 obj;				/* enum tbv_quota_obj */
	bool exempt;
};

/*
 * Queue memory charged apart from any object: a ring shared with user space,
 * whose pages live as long as a mapping of them, which may be longer than the
 * object, its context or the device. It holds its user's record (the one
 * over all devices), which stays until every such charge is given back.
 */
struct tbv_queue_charge {
	struct tbv_quota_user *user;	/* NULL: not charged */
	u64 bytes;
};

int tbv_quota_open(struct tbv_ucontext *uc);
void tbv_quota_close(struct tbv_ucontext *uc);

/* Charge one object of kind @obj made through @udata (NULL: a kernel consumer's, free). */
int tbv_quota_charge(struct tbv_charge *c, struct ib_udata *udata, enum tbv_quota_obj obj);
/* Give back the object, its queue memory and its pinned pages. */
void tbv_quota_uncharge(struct tbv_charge *c);
/* @pages more pinned by the object; limited to a share of @limit over all devices. */
int tbv_quota_pin(struct tbv_charge *c, unsigned long pages, unsigned long limit);

/*
 * @bytes of queue memory for a ring of the object of @c (allocated elsewhere),
 * held in @qc (not in @c) until tbv_quota_queue_release(), which needs
 * neither the object nor its context.
 */
int tbv_quota_queue_hold(struct tbv_charge *c, struct tbv_queue_charge *qc, u64 bytes);
void tbv_quota_queue_release(struct tbv_queue_charge *qc);

/* GFP flags for memory of a charged object: in its user's memory cgroup. */
gfp_t tbv_quota_gfp(const struct tbv_charge *c);

/*
 * A zeroed queue of @n entries of @size bytes for the object of @c: charged to
 * its user's queue memory and memory cgroup; freed with kvfree() or
 * tbv_queue_free() (when the object lives on), or with the object's charge.
 */
int tbv_queue_alloc(struct tbv_charge *c, void **buf, size_t n, size_t size);
void tbv_queue_free(struct tbv_charge *c, void *buf, size_t n, size_t size);

#endif /* TBV_QUOTA_H */
