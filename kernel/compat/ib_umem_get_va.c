// SPDX-License-Identifier: GPL-2.0
/* ib_umem_get_va(), ib_umem_get()'s new name */
#include <rdma/ib_umem.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(&ib_umem_get_va),
	       struct ib_umem *(*)(struct ib_device *, unsigned long, size_t, int));
