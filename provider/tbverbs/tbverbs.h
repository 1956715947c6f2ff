/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rdma-core provider for thunderbolt_ibverbs (RDMA over USB4/Thunderbolt).
 *
 * Built inside an rdma-core tree by scripts/build-rdma-core.sh; this directory
 * is copied to providers/tbverbs/ there.
 */
#ifndef TBVERBS_H
#define TBVERBS_H

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>

/*
 * The shared ABI header (single source: include/uapi/tbverbs-abi.h in the
 * tbverbs repo) and the "_STRUCT_<name>" wrappers that CMakeLists.txt
 * generates from it with rdma-core's buildlib/make_abi_structs.py, as
 * rdma-core does for the in-tree providers' kernel headers.
 */
#include <tbverbs-abi.h>
#include <kernel-abi/tbverbs-abi.h>

/*
 * Command/response wrappers: core uverbs struct followed by our driver-private
 * part. Add one line per verb that carries driver data (CQ/QP/MR later).
 */
DECLARE_DRV_CMD(tbverbs_cmd_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT,
		empty, tbverbs_alloc_ucontext_resp);

struct tbverbs_device {
	struct verbs_device ibv_dev;
};

struct tbverbs_context {
	struct verbs_context ibv_ctx;
};

static inline struct tbverbs_device *to_tdev(struct ibv_device *ibdev)
{
	return container_of(ibdev, struct tbverbs_device, ibv_dev.device);
}

static inline struct tbverbs_context *to_tctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct tbverbs_context, ibv_ctx.context);
}

#endif /* TBVERBS_H */
