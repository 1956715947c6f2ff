// SPDX-License-Identifier: GPL-2.0
/*
 * thunderbolt_ibverbs: RDMA (InfiniBand verbs, RoCE v2 addressing) over
 * USB4/Thunderbolt host-to-host links.
 */
#include <linux/idr.h>
#include <linux/module.h>

#include "tbv.h"

/* Device numbers: usb4_rdmaN and usb4_netN of one link share N. */
static DEFINE_IDA(tbv_index_ida);

/* Login, bring-up and teardown work of all links; ordered per item by design. */
struct workqueue_struct *tbv_wq;

int tbv_index_alloc(void)
{
	return ida_alloc(&tbv_index_ida, GFP_KERNEL);
}

void tbv_index_free(unsigned int index)
{
	ida_free(&tbv_index_ida, index);
}

static int __init tbv_init(void)
{
	int ret;

	tbv_wq = alloc_workqueue("tbverbs", WQ_UNBOUND, 0);
	if (!tbv_wq)
		return -ENOMEM;
	ret = tbv_vcable_init();
	if (ret)
		goto err_wq;
	ret = tbv_usb4_init();
	if (ret) {
		pr_err("%s: cannot register the USB4 service with thunderbolt (%d)\n",
		       TBV_DRV_NAME, ret);
		goto err_vcable;
	}
	pr_info("%s: loaded (protocol %u-%u)\n", TBV_DRV_NAME,
		TBV_PROTO_VERSION_MIN, TBV_PROTO_VERSION_MAX);
	return 0;

err_vcable:
	tbv_vcable_exit();
err_wq:
	destroy_workqueue(tbv_wq);
	return ret;
}

static void __exit tbv_exit(void)
{
	tbv_usb4_exit();
	tbv_vcable_exit();
	destroy_workqueue(tbv_wq);
	ida_destroy(&tbv_index_ida);
	pr_info("%s: unloaded\n", TBV_DRV_NAME);
}

module_init(tbv_init);
module_exit(tbv_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("RDMA (InfiniBand verbs) over USB4/Thunderbolt host-to-host links");
MODULE_AUTHOR("The tbverbs developers");
