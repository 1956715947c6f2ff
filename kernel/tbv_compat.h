/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels we build for (6.1 and 6.12 so far) lives
 * here. Prefer feature tests (__has_include, symbols the Makefile detects) to
 * version numbers.
 */
#ifndef TBV_COMPAT_H
#define TBV_COMPAT_H

#include <linux/version.h>

/* ib_device_ops.create_cq takes the attr bundle from 6.11 (dd6d7f8574d7). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
#define TBV_CREATE_CQ_HAS_ATTRS 1
#endif

/* The DMA block iterator moved to <rdma/iter.h> (6.12.95, 6.1.176+). */
#if __has_include(<rdma/iter.h>)
#define TBV_HAVE_RDMA_ITER_H 1
#endif

#endif /* TBV_COMPAT_H */
