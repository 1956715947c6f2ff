// SPDX-License-Identifier: GPL-2.0
/* Protection domains. */
#include "tbv.h"

int tbv_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct tbv_dev *dev = to_tbv_dev(ibpd->device);

	if (atomic_inc_return(&dev->nr_pds) > TBV_MAX_PD) {
		atomic_dec(&dev->nr_pds);
		return -ENOMEM;
	}
	return 0;
}

int tbv_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	atomic_dec(&to_tbv_dev(ibpd->device)->nr_pds);
	return 0;
}
