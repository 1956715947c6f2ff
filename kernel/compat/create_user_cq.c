// SPDX-License-Identifier: GPL-2.0
/* ib_device_ops.create_user_cq: user CQs apart from kernel CQs */
#include <rdma/ib_verbs.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(((const struct ib_device_ops *)0)->create_user_cq),
	       int (*)(struct ib_cq *, const struct ib_cq_init_attr *, struct uverbs_attr_bundle *));
