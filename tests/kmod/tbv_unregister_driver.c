// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only: at load, does to the RDMA devices of one driver id what
 * rdma_rxe's module exit does to its own, ib_unregister_driver(), so that a
 * test sees our devices taken away by another module (docs/rxe-abi.md, R2).
 * Our devices have RDMA_DRIVER_UNKNOWN, the default here, until they take
 * rdma_rxe's id.
 */
#include <linux/module.h>
#include <rdma/ib_verbs.h>

static int driver_id = RDMA_DRIVER_UNKNOWN;
module_param(driver_id, int, 0444);
MODULE_PARM_DESC(driver_id, "the enum rdma_driver_id whose devices to unregister");

static int __init tbv_unregister_driver_init(void)
{
	ib_unregister_driver(driver_id);
	return 0;
}

static void __exit tbv_unregister_driver_exit(void)
{
}

module_init(tbv_unregister_driver_init);
module_exit(tbv_unregister_driver_exit);
MODULE_DESCRIPTION("tbverbs test: ib_unregister_driver() from another module");
MODULE_LICENSE("GPL");
