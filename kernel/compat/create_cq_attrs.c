// SPDX-License-Identifier: GPL-2.0
/* ib_device_ops.create_cq takes a uverbs_attr_bundle, not the udata */
#include <rdma/ib_verbs.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(((const struct ib_device_ops *)0)->create_cq),
	       int (*)(struct ib_cq *, const struct ib_cq_init_attr *, struct uverbs_attr_bundle *));
