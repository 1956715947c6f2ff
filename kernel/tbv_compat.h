/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels we build for (Debian's 6.1, 6.12 and 7.3;
 * docs/kernels.md) lives here. The code is written against the newest API; each
 * TBV_HAVE_<NAME> comes from a compile test, kernel/compat/<name>.c, run by Kbuild
 * against the target kernel (tbv_have.h), never from a version number.
 */
#ifndef TBV_COMPAT_H
#define TBV_COMPAT_H

#include "tbv_have.h"

/* from_timer() was renamed timer_container_of() */
#ifndef TBV_HAVE_TIMER_CONTAINER_OF
#define timer_container_of(var, timer, field)	from_timer(var, timer, field)
#endif

/* del_timer() and del_timer_sync() were renamed (6.2; Debian's 6.1 has the new names too) */
#ifndef TBV_HAVE_TIMER_DELETE
#define timer_delete(timer)		del_timer(timer)
#define timer_delete_sync(timer)	del_timer_sync(timer)
#endif

/* napi_gro_flush() moved to <net/gro.h> (an inline there in 7.x): tbv_rail.c includes it */

/* hrtimer_setup() replaced hrtimer_init() plus setting ->function */
#ifndef TBV_HAVE_HRTIMER_SETUP
#define hrtimer_setup(timer, fn, clock, mode) \
	do { hrtimer_init(timer, clock, mode); (timer)->function = (fn); } while (0)
#endif

/* a VMA's flags are set through vm_flags_set(), no longer written directly */
#ifndef TBV_HAVE_VM_FLAGS_SET
#define vm_flags_set(vma, flags)	((vma)->vm_flags |= (flags))
#endif

/* ib_umem_get() was renamed ib_umem_get_va() (same arguments) */
#ifndef TBV_HAVE_IB_UMEM_GET_VA
#define ib_umem_get_va(dev, addr, size, access)	ib_umem_get(dev, addr, size, access)
#endif

/* ib_device_ops.create_cq takes a uverbs_attr_bundle instead of the udata (NULL: kernel) */
#ifdef TBV_HAVE_CREATE_CQ_ATTRS
#define tbv_create_cq_ctx_t	struct uverbs_attr_bundle *
#define tbv_create_cq_udata(ctx)	((ctx) ? &(ctx)->driver_udata : NULL)
#else
#define tbv_create_cq_ctx_t	struct ib_udata *
#define tbv_create_cq_udata(ctx)	(ctx)
#endif

/* user CQs are created by ib_device_ops.create_user_cq, the same call for us */
#ifdef TBV_HAVE_CREATE_USER_CQ
#define TBV_OPS_CREATE_USER_CQ	.create_user_cq = tbv_create_cq,
#else
#define TBV_OPS_CREATE_USER_CQ
#endif

/* resize_cq became resize_user_cq, with an unsigned count */
#ifdef TBV_HAVE_RESIZE_USER_CQ
#define tbv_cqe_t		unsigned int
#define TBV_OPS_RESIZE_CQ	.resize_user_cq = tbv_resize_cq,
#else
#define tbv_cqe_t		int
#define TBV_OPS_RESIZE_CQ	.resize_cq = tbv_resize_cq,
#endif

/* reg_user_mr takes a DMA handle; we offer none (no alloc_dmah), so it is always NULL */
#ifdef TBV_HAVE_REG_USER_MR_DMAH
#define TBV_DMAH_PARAM		struct ib_dmah *dmah,
#else
#define TBV_DMAH_PARAM
#endif

/* struct tb_nhi keeps its struct device (dev), no longer the PCI device (pdev) */
#ifdef TBV_HAVE_TB_NHI_DEV
#define tbv_nhi_device(nhi)	((nhi)->dev)
#else
#define tbv_nhi_device(nhi)	(&(nhi)->pdev->dev)
#endif

/* tb_service_driver.probe no longer gets the matched id (we never used it) */
#ifdef TBV_HAVE_TB_SERVICE_PROBE_SVC_ONLY
#define TBV_SERVICE_PROBE_PARAMS	struct tb_service *svc
#else
#define TBV_SERVICE_PROBE_PARAMS	struct tb_service *svc, const struct tb_service_id *id
#endif

/* FLUSH and atomic write are verbs from 6.2: without them we post neither, no MR grants FLUSH */
#ifdef TBV_HAVE_FLUSH
#define TBV_DEVICE_FLUSH_GLOBAL	IB_DEVICE_FLUSH_GLOBAL
#define TBV_DEVICE_ATOMIC_WRITE	IB_DEVICE_ATOMIC_WRITE
#define TBV_FLUSH_VERBS		true	/* post_send takes FLUSH and atomic writes */
#define TBV_QP_ACCESS_SUPPORTED	IB_ACCESS_SUPPORTED
#else
#define TBV_FLUSH_VERBS		false
#define IB_WR_FLUSH		14
#define IB_WR_ATOMIC_WRITE	15
#define IB_WC_FLUSH		8
#define IB_WC_ATOMIC_WRITE	9
/* the uverbs bits from 6.2: never set on an older kernel, so every FLUSH is refused */
#define IB_ACCESS_FLUSH_GLOBAL	(1 << 8)
#define IB_ACCESS_FLUSH_PERSISTENT (1 << 9)
#define TBV_DEVICE_FLUSH_GLOBAL	0
#define TBV_DEVICE_ATOMIC_WRITE	0
/* rdma-core sets the FLUSH bits on every RC QP: accepted, and inert (no MR can grant FLUSH) */
#define TBV_QP_ACCESS_SUPPORTED	(IB_ACCESS_SUPPORTED | IB_ACCESS_FLUSH_GLOBAL | \
				 IB_ACCESS_FLUSH_PERSISTENT)
#endif

/* TBV_HAVE_RXE_FLUSH: rdma_user_rxe.h names the WQE's FLUSH fields (6.2), whose offsets tbv_uqueue.c checks */

/* the link API's export namespace is a string literal since 6.13, a bare token before */
#ifdef TBV_HAVE_IMPORT_NS_STRING
#define TBV_LINK_NS	"TBVERBS_LINK"
#else
#define TBV_LINK_NS	TBVERBS_LINK
#endif

#endif /* TBV_COMPAT_H */
