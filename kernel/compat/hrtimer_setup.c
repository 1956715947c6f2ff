// SPDX-License-Identifier: GPL-2.0
/* hrtimer_setup(): init and callback in one call; hrtimer_init() is gone */
#include <linux/hrtimer.h>
#include "probe.h"

TBV_PROBE_TYPE(typeof(&hrtimer_setup),
	       void (*)(struct hrtimer *, enum hrtimer_restart (*)(struct hrtimer *), clockid_t,
			enum hrtimer_mode));
