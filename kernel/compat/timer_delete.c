// SPDX-License-Identifier: GPL-2.0
/* timer_delete() and timer_delete_sync(), del_timer()'s and del_timer_sync()'s new names */
#include <linux/timer.h>
#include "probe.h"

static inline void tbv_probe_stop(struct timer_list *t)
{
	timer_delete(t);
	timer_delete_sync(t);
}
