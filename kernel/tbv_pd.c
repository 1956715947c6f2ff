// SPDX-License-Identifier: GPL-2.0
/* Protection domains. */
#include "tbv.h"

int tbv_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct tbv_pd *pd = container_of(ibpd, struct tbv_pd, ibpd);
	struct tbv_dev *dev = to_tbv_dev(ibpd->device);
	int ret;

	ret = tbv_quota_charge(&pd->charge, udata, TBV_QUOTA_PD);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_pds) > TBV_MAX_PD) {
		atomic_dec(&dev->nr_pds);
		tbv_quota_uncharge(&pd->charge);
		return -ENOMEM;
	}
	return 0;
}

int tbv_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	tbv_quota_uncharge(&container_of(ibpd, struct tbv_pd, ibpd)->charge);
	atomic_dec(&to_tbv_dev(ibpd->device)->nr_pds);
	return 0;
}
