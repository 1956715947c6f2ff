/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels we build for (6.1 and 6.12) lives here,
 * chosen by feature detection in Kbuild (TBV_HAVE_*), not by version number.
 *
 *  - ib_device_ops.create_cq takes a uverbs_attr_bundle instead of the udata
 *    from 6.11; we use neither, so only the prototype differs.
 *  - RDMA FLUSH and atomic write exist in the verbs from 6.2. Without them
 *    post_send refuses both (also through our own method), the device reports
 *    neither, and a peer's FLUSH finds no MR granting it (the access flags do
 *    not exist); a peer's atomic write is still executed, as a write.
 */
#ifndef TBV_COMPAT_H
#define TBV_COMPAT_H

#ifdef TBV_HAVE_CREATE_CQ_ATTRS
#define tbv_create_cq_ctx_t	struct uverbs_attr_bundle *
#else
#define tbv_create_cq_ctx_t	struct ib_udata *
#endif

#ifdef TBV_HAVE_FLUSH
#define TBV_DEVICE_FLUSH_GLOBAL	IB_DEVICE_FLUSH_GLOBAL
#define TBV_DEVICE_ATOMIC_WRITE	IB_DEVICE_ATOMIC_WRITE
#define TBV_FLUSH_VERBS		true	/* post_send takes FLUSH and atomic writes */
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
#endif

#endif /* TBV_COMPAT_H */
