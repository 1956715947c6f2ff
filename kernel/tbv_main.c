// SPDX-License-Identifier: GPL-2.0
/*
 * thunderbolt_ibverbs: RDMA (InfiniBand verbs, RoCE v2 addressing) over
 * USB4/Thunderbolt host-to-host links.
 */
#include <linux/module.h>

#include "tbv.h"

static int __init tbv_init(void)
{
	int ret;

	ret = tbv_shared_init();
	if (ret)
		return ret;
	ret = tbv_usb4_init();
	if (ret) {
		pr_err("%s: cannot register the USB4 service with thunderbolt (%d)\n",
		       TBV_DRV_NAME, ret);
		goto err_wq;
	}
	pr_info("%s: loaded (protocol %u-%u)\n", TBV_DRV_NAME,
		TBV_PROTO_VERSION_MIN, TBV_PROTO_VERSION_MAX);
	return 0;

err_wq:
	tbv_shared_exit();
	return ret;
}

static void __exit tbv_exit(void)
{
	tbv_usb4_exit();
	tbv_shared_exit();
	pr_info("%s: unloaded\n", TBV_DRV_NAME);
}

module_init(tbv_init);
module_exit(tbv_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("RDMA (InfiniBand verbs) over USB4/Thunderbolt host-to-host links");
MODULE_AUTHOR("The tbverbs developers");
