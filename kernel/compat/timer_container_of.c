// SPDX-License-Identifier: GPL-2.0
/* timer_container_of(), from_timer()'s new name */
#include <linux/timer.h>
#include "probe.h"

struct tbv_probe {
	struct timer_list t;
};

static inline struct tbv_probe *tbv_probe_of(struct timer_list *t)
{
	struct tbv_probe *p = timer_container_of(p, t, t);

	return p;
}
