// SPDX-License-Identifier: GPL-2.0
/* RDMA FLUSH and atomic write in the verbs (6.2) */
#include <rdma/ib_verbs.h>
#include "probe.h"

TBV_PROBE_VALUE(IB_WR_FLUSH + IB_WR_ATOMIC_WRITE + IB_ACCESS_FLUSH_GLOBAL + IB_DEVICE_FLUSH_GLOBAL +
		IB_DEVICE_ATOMIC_WRITE + IB_WC_FLUSH);
