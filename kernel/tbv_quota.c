// SPDX-License-Identifier: GPL-2.0
/*
 * Per-user limits. /dev/infiniband/uverbs* is open to every local user, and the
 * device limits alone let one user take every QP or context of a device, or
 * gigabytes of kernel memory in queues. So what a user context creates is
 * charged to the user who opened the context (its real uid, as RLIMIT_NPROC
 * counts processes):
 *
 *  - per device, a user holds at most max_user_share percent of each object
 *    limit (contexts, PDs, CQs, QPs, SRQs, MRs, MWs, AHs);
 *  - over all devices, at most max_user_queue_mb of queue memory (QP, SRQ and
 *    CQ rings) and max_user_share percent of the memory MRs may pin.
 *
 * A refusal is -EDQUOT. Contexts opened with CAP_SYS_RESOURCE (the capability
 * that overrides resource limits) are counted but not limited: a root service
 * may use the whole device, within the device limits. Kernel consumers (no
 * udata) are not charged. Queue memory is also charged to the caller's memory
 * cgroup (__GFP_ACCOUNT), which memory.max bounds; the rdma cgroup (rdma.max)
 * bounds a cgroup's contexts and objects (docs/security.md, "Local limits").
 *
 * A ring shared with user space is charged apart from its object (struct
 * tbv_queue_charge): its pages live as long as the process maps them, and the
 * charge with them, so destroying or resizing an object while keeping its old
 * rings mapped does not take a user past its budget (tbv_uqueue.c).
 *
 * The records are small and few (one per user with a context or a ring, one
 * per device it has a context on), found by a walk when a context opens and by
 * pointer afterwards; one spinlock covers them all.
 */
#include <linux/cred.h>
#include <linux/capability.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "tbv.h"

static unsigned int tbv_max_user_share = 50;
module_param_named(max_user_share, tbv_max_user_share, uint, 0644);
MODULE_PARM_DESC(max_user_share,
		 "percent of each device object limit, and of the pinned-memory limit, one user may hold (1-100, default 50; CAP_SYS_RESOURCE is exempt)");

static unsigned int tbv_max_user_queue_mb;
module_param_named(max_user_queue_mb, tbv_max_user_queue_mb, uint, 0644);
MODULE_PARM_DESC(max_user_queue_mb,
		 "MiB of queue memory (QP, SRQ, CQ rings) one user may hold over all devices (default 0: an eighth of RAM; CAP_SYS_RESOURCE is exempt)");

/* One user with a context on any device. */
struct tbv_quota_user {
	struct list_head node;		/* in tbv_quota_users */
	struct list_head devices;	/* struct tbv_quota */
	kuid_t uid;
	u64 mem[TBV_QUOTA_MEM_NR];	/* bytes */
	unsigned int rings;		/* queue charges held apart from objects */
};

/* What one user holds on one device. */
struct tbv_quota {
	struct list_head node;		/* in user->devices */
	struct tbv_quota_user *user;
	struct ib_device *ibdev;
	unsigned int held[TBV_QUOTA_NR];
};

static DEFINE_SPINLOCK(tbv_quota_lock);
static LIST_HEAD(tbv_quota_users);

static const unsigned int tbv_quota_limit[TBV_QUOTA_NR] = {
	[TBV_QUOTA_UCONTEXT] = TBV_MAX_UCONTEXT,
	[TBV_QUOTA_PD] = TBV_MAX_PD,
	[TBV_QUOTA_CQ] = TBV_MAX_CQ,
	[TBV_QUOTA_QP] = TBV_MAX_QP,
	[TBV_QUOTA_SRQ] = TBV_MAX_SRQ,
	[TBV_QUOTA_MR] = TBV_MAX_MR,
	[TBV_QUOTA_MW] = TBV_MAX_MW,
	[TBV_QUOTA_AH] = TBV_MAX_AH,
};

/* What a refusal names: what was refused, in KiB for memory, and the parameter. */
static const char *const tbv_quota_mem_name[TBV_QUOTA_MEM_NR] = {
	[TBV_QUOTA_QUEUES] = "KiB of queues",
	[TBV_QUOTA_PINNED] = "KiB pinned",
};

static const char *const tbv_quota_mem_param[TBV_QUOTA_MEM_NR] = {
	[TBV_QUOTA_QUEUES] = "max_user_queue_mb",
	[TBV_QUOTA_PINNED] = "max_user_share",
};

static const char *const tbv_quota_name[TBV_QUOTA_NR] = {
	[TBV_QUOTA_UCONTEXT] = "contexts",
	[TBV_QUOTA_PD] = "PDs",
	[TBV_QUOTA_CQ] = "CQs",
	[TBV_QUOTA_QP] = "QPs",
	[TBV_QUOTA_SRQ] = "SRQs",
	[TBV_QUOTA_MR] = "MRs",
	[TBV_QUOTA_MW] = "MWs",
	[TBV_QUOTA_AH] = "AHs",
};

/* A user's share of @limit: at least 1. */
static unsigned long tbv_quota_share(unsigned long limit)
{
	unsigned int pct = clamp(READ_ONCE(tbv_max_user_share), 1u, 100u);

	return max_t(unsigned long, 1, mult_frac(limit, pct, 100));
}

static u64 tbv_quota_queue_budget(void)
{
	unsigned int mb = READ_ONCE(tbv_max_user_queue_mb);

	if (!mb)
		return (u64)totalram_pages() / 8 << PAGE_SHIFT;
	return (u64)mb << 20;
}

static struct tbv_quota_user *tbv_quota_find_user(kuid_t uid)
{
	struct tbv_quota_user *user;

	list_for_each_entry(user, &tbv_quota_users, node)
		if (uid_eq(user->uid, uid))
			return user;
	return NULL;
}

static struct tbv_quota *tbv_quota_find(struct tbv_quota_user *user, struct ib_device *ibdev)
{
	struct tbv_quota *q;

	list_for_each_entry(q, &user->devices, node)
		if (q->ibdev == ibdev)
			return q;
	return NULL;
}

/* Free @user once nothing is left of it: no device record, no ring (lock held). */
static void tbv_quota_user_put_locked(struct tbv_quota_user *user)
{
	if (!list_empty(&user->devices) || user->rings)
		return;
	WARN_ON_ONCE(user->mem[TBV_QUOTA_QUEUES] || user->mem[TBV_QUOTA_PINNED]);
	list_del(&user->node);
	kfree(user);
}

/* Free @q once it holds nothing, and its user once nothing is left of it (lock held). */
static void tbv_quota_put_locked(struct tbv_quota *q)
{
	struct tbv_quota_user *user = q->user;
	unsigned int i;

	for (i = 0; i < TBV_QUOTA_NR; i++)
		if (q->held[i])
			return;
	list_del(&q->node);
	kfree(q);
	tbv_quota_user_put_locked(user);
}

static void tbv_quota_refused(const struct tbv_quota *q, u64 want, const char *what, u64 limit,
			      const char *param)
{
	dev_notice_ratelimited(&q->ibdev->dev, "uid %u refused: %llu %s, more than its %llu (%s)\n",
			       from_kuid(&init_user_ns, q->user->uid), want, what, limit, param);
}

/* One more @obj for @q, unless it reached its share (lock held). */
static int tbv_quota_take_locked(struct tbv_quota *q, enum tbv_quota_obj obj, bool exempt)
{
	unsigned long share = tbv_quota_share(tbv_quota_limit[obj]);

	if (!exempt && q->held[obj] >= share) {
		tbv_quota_refused(q, q->held[obj] + 1ull, tbv_quota_name[obj], share,
				  "max_user_share");
		return -EDQUOT;
	}
	q->held[obj]++;
	return 0;
}

int tbv_quota_open(struct tbv_ucontext *uc)
{
	struct tbv_quota_user *new_user, *user;
	struct tbv_quota *new_q, *q;
	kuid_t uid = current_uid();
	int ret;

	new_user = kzalloc(sizeof(*new_user), GFP_KERNEL_ACCOUNT);
	new_q = kzalloc(sizeof(*new_q), GFP_KERNEL_ACCOUNT);
	if (!new_user || !new_q) {
		ret = -ENOMEM;
		goto out;
	}
	uc->exempt = capable(CAP_SYS_RESOURCE);

	spin_lock(&tbv_quota_lock);
	user = tbv_quota_find_user(uid);
	if (!user) {
		user = new_user;
		new_user = NULL;
		user->uid = uid;
		INIT_LIST_HEAD(&user->devices);
		list_add(&user->node, &tbv_quota_users);
	}
	q = tbv_quota_find(user, uc->ibuc.device);
	if (!q) {
		q = new_q;
		new_q = NULL;
		q->user = user;
		q->ibdev = uc->ibuc.device;
		list_add(&q->node, &user->devices);
	}
	ret = tbv_quota_take_locked(q, TBV_QUOTA_UCONTEXT, uc->exempt);
	if (ret)
		tbv_quota_put_locked(q);	/* frees what was made for this context */
	else
		uc->quota = q;
	spin_unlock(&tbv_quota_lock);
out:
	kfree(new_user);
	kfree(new_q);
	return ret;
}

/* After the core destroyed every object of the context. */
void tbv_quota_close(struct tbv_ucontext *uc)
{
	spin_lock(&tbv_quota_lock);
	uc->quota->held[TBV_QUOTA_UCONTEXT]--;
	tbv_quota_put_locked(uc->quota);
	spin_unlock(&tbv_quota_lock);
	uc->quota = NULL;
}

int tbv_quota_charge(struct tbv_charge *c, struct ib_udata *udata, enum tbv_quota_obj obj)
{
	struct tbv_ucontext *uc = rdma_udata_to_drv_context(udata, struct tbv_ucontext, ibuc);
	int ret;

	*c = (struct tbv_charge){ .obj = obj };
	if (!udata)
		return 0;
	/* every uverbs object is made through a context; refuse rather than not count */
	if (!uc || !uc->quota)
		return -EINVAL;
	spin_lock(&tbv_quota_lock);
	ret = tbv_quota_take_locked(uc->quota, obj, uc->exempt);
	spin_unlock(&tbv_quota_lock);
	if (ret)
		return ret;
	c->quota = uc->quota;
	c->exempt = uc->exempt;
	return 0;
}

void tbv_quota_uncharge(struct tbv_charge *c)
{
	struct tbv_quota *q = c->quota;
	unsigned int i;

	if (!q)
		return;
	spin_lock(&tbv_quota_lock);
	for (i = 0; i < TBV_QUOTA_MEM_NR; i++)
		q->user->mem[i] -= c->mem[i];
	q->held[c->obj]--;
	tbv_quota_put_locked(q);
	spin_unlock(&tbv_quota_lock);
	memset(c->mem, 0, sizeof(c->mem));
	c->quota = NULL;
}

/* @bytes more of @mem for the user of @c, up to @limit unless exempt (lock held). */
static int tbv_quota_mem_take_locked(const struct tbv_charge *c, enum tbv_quota_mem mem,
				     u64 bytes, u64 limit)
{
	struct tbv_quota_user *user = c->quota->user;

	if (!c->exempt && (bytes > limit || user->mem[mem] > limit - bytes)) {
		tbv_quota_refused(c->quota, (user->mem[mem] + bytes) >> 10, tbv_quota_mem_name[mem],
				  limit >> 10, tbv_quota_mem_param[mem]);
		return -EDQUOT;
	}
	user->mem[mem] += bytes;
	return 0;
}

/* @bytes more of @mem for the object of @c, up to @limit for its user; or, !@more, less. */
static int tbv_quota_mem(struct tbv_charge *c, enum tbv_quota_mem mem, u64 bytes, bool more,
			 u64 limit)
{
	int ret = 0;

	if (!c->quota)
		return 0;
	spin_lock(&tbv_quota_lock);
	if (!more) {
		c->quota->user->mem[mem] -= bytes;
		c->mem[mem] -= bytes;
	} else {
		ret = tbv_quota_mem_take_locked(c, mem, bytes, limit);
		if (!ret)
			c->mem[mem] += bytes;
	}
	spin_unlock(&tbv_quota_lock);
	return ret;
}

int tbv_quota_pin(struct tbv_charge *c, unsigned long pages, unsigned long limit)
{
	return tbv_quota_mem(c, TBV_QUOTA_PINNED, (u64)pages << PAGE_SHIFT, true,
			     (u64)tbv_quota_share(limit) << PAGE_SHIFT);
}

/*
 * A user's queues go to its memory cgroup, and are refused rather than waited
 * for when memory is short: no retrying reclaim, no OOM killer (in the cgroup
 * or outside it) for a request a user chose the size of, and no allocation
 * failure report in the log. A kernel consumer's memory is nobody's cgroup's.
 */
gfp_t tbv_quota_gfp(const struct tbv_charge *c)
{
	return c->quota ? GFP_KERNEL_ACCOUNT | __GFP_NORETRY | __GFP_NOWARN : GFP_KERNEL;
}

/*
 * What kvzalloc() may take for @bytes: up to KMALLOC_MAX_SIZE it tries the
 * page allocator first, in power-of-two blocks; beyond, or failing that, whole
 * pages of vmalloc.
 */
static size_t tbv_queue_footprint(size_t bytes)
{
	return bytes > KMALLOC_MAX_SIZE ? PAGE_ALIGN(bytes) : kmalloc_size_roundup(bytes);
}

static int tbv_quota_queue(struct tbv_charge *c, u64 bytes)
{
	return tbv_quota_mem(c, TBV_QUOTA_QUEUES, bytes, true, tbv_quota_queue_budget());
}

static void tbv_quota_unqueue(struct tbv_charge *c, u64 bytes)
{
	tbv_quota_mem(c, TBV_QUOTA_QUEUES, bytes, false, 0);
}

int tbv_quota_queue_hold(struct tbv_charge *c, struct tbv_queue_charge *qc, u64 bytes)
{
	u64 limit = tbv_quota_queue_budget();
	int ret;

	*qc = (struct tbv_queue_charge){};
	if (!c->quota)
		return 0;
	spin_lock(&tbv_quota_lock);
	ret = tbv_quota_mem_take_locked(c, TBV_QUOTA_QUEUES, bytes, limit);
	if (!ret) {
		/* the user record, not c->quota: that one goes with the user's last context here */
		qc->user = c->quota->user;
		qc->user->rings++;
		qc->bytes = bytes;
	}
	spin_unlock(&tbv_quota_lock);
	return ret;
}

void tbv_quota_queue_release(struct tbv_queue_charge *qc)
{
	struct tbv_quota_user *user = qc->user;

	if (!user)
		return;
	spin_lock(&tbv_quota_lock);
	user->mem[TBV_QUOTA_QUEUES] -= qc->bytes;
	user->rings--;
	tbv_quota_user_put_locked(user);
	spin_unlock(&tbv_quota_lock);
	*qc = (struct tbv_queue_charge){};
}

int tbv_queue_alloc(struct tbv_charge *c, void **buf, size_t n, size_t size)
{
	size_t bytes = array_size(n, size);
	int ret;

	*buf = NULL;
	if (bytes == SIZE_MAX)
		return -ENOMEM;
	ret = tbv_quota_queue(c, tbv_queue_footprint(bytes));
	if (ret)
		return ret;
	/* kvzalloc: __vmalloc() warns about __GFP_NOWARN on newer kernels (7.x) */
	*buf = kvzalloc(bytes, tbv_quota_gfp(c));
	if (!*buf) {
		tbv_quota_unqueue(c, tbv_queue_footprint(bytes));
		return -ENOMEM;
	}
	return 0;
}

void tbv_queue_free(struct tbv_charge *c, void *buf, size_t n, size_t size)
{
	if (!buf)
		return;
	kvfree(buf);
	tbv_quota_unqueue(c, tbv_queue_footprint(array_size(n, size)));
}
