/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * Shared between the thunderbolt_ibverbs kernel module and the rdma-core provider:
 * the uverbs ABI version and the driver-private parts of uverbs responses.
 */
#ifndef TBVERBS_ABI_H
#define TBVERBS_ABI_H

#include <linux/types.h>

#define TBVERBS_UVERBS_ABI_VERSION 1

/* Parent-device modaliases the provider matches on (device names may be renamed by udev). */
#define TBVERBS_VCABLE_DRV_NAME "tbverbs_vcable"
#define TBVERBS_SERVICE_KEY "tbverbs"

struct tbverbs_alloc_ucontext_resp {
	__u32 abi_version;	/* TBVERBS_UVERBS_ABI_VERSION */
	__u32 reserved;
};

#endif /* TBVERBS_ABI_H */
