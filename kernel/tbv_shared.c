// SPDX-License-Identifier: GPL-2.0
/*
 * What every layer of the module shares: its workqueue and the device numbers.
 * Below everything else (tbv_main.c sets it up first and tears it down last),
 * so using it never calls back up.
 */
#include <linux/idr.h>

#include "tbv.h"

/* Device numbers: usb4_rdmaN and usb4_netN of one link share N. */
static DEFINE_IDA(tbv_index_ida);

/* Login, bring-up and teardown work of all links, and QPs' TX work; ordered per item by design. */
struct workqueue_struct *tbv_wq;

int tbv_index_alloc(void)
{
	return ida_alloc(&tbv_index_ida, GFP_KERNEL);
}

void tbv_index_free(unsigned int index)
{
	ida_free(&tbv_index_ida, index);
}

int tbv_shared_init(void)
{
	tbv_wq = alloc_workqueue("tbverbs", WQ_UNBOUND, 0);
	return tbv_wq ? 0 : -ENOMEM;
}

void tbv_shared_exit(void)
{
	destroy_workqueue(tbv_wq);
	ida_destroy(&tbv_index_ida);
}
