// SPDX-License-Identifier: GPL-2.0
/* Planted bugs for the sanitizer lane's self-test; see tbv_plant.h. */
#include <linux/compiler.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "tbv_plant.h"

#ifdef TBV_PLANT_BUG_OOB
void tbv_plant_bug(void)
{
	u8 *buf = kmalloc(16, GFP_KERNEL);
	unsigned int i = 16;

	OPTIMIZER_HIDE_VAR(i);		/* keep the compiler from seeing the bound */
	if (buf) {
		buf[i] = 0x5a;		/* one byte past the allocation */
		kfree(buf);
	}
}
#elif defined(TBV_PLANT_BUG_SLEEP)
static DEFINE_SPINLOCK(tbv_plant_lock);
static DEFINE_MUTEX(tbv_plant_mutex);

void tbv_plant_bug(void)
{
	spin_lock(&tbv_plant_lock);
	mutex_lock(&tbv_plant_mutex);	/* may sleep, with a spinlock held */
	mutex_unlock(&tbv_plant_mutex);
	spin_unlock(&tbv_plant_lock);
}
#elif defined(TBV_PLANT_BUG_LEAK)
void tbv_plant_bug(void)
{
	void *p = kmalloc(128, GFP_KERNEL);

	/*
	 * No reference is kept: kmemleak must report the object as unreferenced.
	 * Hiding p also keeps kmalloc() from becoming a tail call, so the report's
	 * backtrace names this function.
	 */
	OPTIMIZER_HIDE_VAR(p);
}
#endif
