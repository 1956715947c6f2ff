/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels we build for (6.1 and 6.12) lives here,
 * chosen by feature detection in Kbuild (TBV_HAVE_*), not by version number.
 *
 *  - ib_device_ops.create_cq takes a uverbs_attr_bundle instead of the udata
 *    from 6.11; we use neither, so only the prototype differs.
 */
#ifndef TBV_COMPAT_H
#define TBV_COMPAT_H

#ifdef TBV_HAVE_CREATE_CQ_ATTRS
#define tbv_create_cq_ctx_t	struct uverbs_attr_bundle *
#else
#define tbv_create_cq_ctx_t	struct ib_udata *
#endif

#endif /* TBV_COMPAT_H */
