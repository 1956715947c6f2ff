// SPDX-License-Identifier: GPL-2.0
/* struct tb_nhi holds its struct device, not the PCI device */
#include <linux/thunderbolt.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(((struct tb_nhi *)0)->dev), struct device *);
