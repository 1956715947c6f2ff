/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels we build for lives here, chosen by
 * feature detection (see Kbuild) rather than by version number.
 *
 * Today the module uses nothing that differs between 6.1 and 6.12. Known
 * differences that the data path will meet (kernel-api notes):
 *  - ib_device_ops.create_cq takes a uverbs_attr_bundle from 6.11;
 *  - the DMA block iterator lives in <rdma/iter.h> in 6.12.95 and 6.1.176+.
 */
#ifndef TBV_COMPAT_H
#define TBV_COMPAT_H

#endif /* TBV_COMPAT_H */
