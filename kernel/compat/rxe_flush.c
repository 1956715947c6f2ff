// SPDX-License-Identifier: GPL-2.0
/* rdma_rxe's uapi header has the FLUSH and ATOMIC_WRITE fields of the send WQE (6.2) */
#include <linux/stddef.h>
#include <rdma/rdma_user_rxe.h>
#include "probe.h"

TBV_PROBE_VALUE(offsetof(struct rxe_send_wr, wr.flush.level) +
		offsetof(struct rxe_dma_info, atomic_wr));
