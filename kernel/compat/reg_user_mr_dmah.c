// SPDX-License-Identifier: GPL-2.0
/* ib_device_ops.reg_user_mr takes a DMA handle, struct ib_dmah */
#include <rdma/ib_verbs.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(((const struct ib_device_ops *)0)->reg_user_mr),
	       struct ib_mr *(*)(struct ib_pd *, u64, u64, u64, int, struct ib_dmah *,
				 struct ib_udata *));
