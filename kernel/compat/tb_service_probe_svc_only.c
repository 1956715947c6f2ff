// SPDX-License-Identifier: GPL-2.0
/* tb_service_driver.probe takes only the service, no matched id */
#include <linux/thunderbolt.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(((struct tb_service_driver *)0)->probe), int (*)(struct tb_service *));
