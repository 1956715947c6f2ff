// SPDX-License-Identifier: GPL-2.0
/* ib_device_ops.resize_user_cq (unsigned count) in place of resize_cq */
#include <rdma/ib_verbs.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(((const struct ib_device_ops *)0)->resize_user_cq),
	       int (*)(struct ib_cq *, unsigned int, struct ib_udata *));
