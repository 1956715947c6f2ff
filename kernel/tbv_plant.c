// SPDX-License-Identifier: GPL-2.0
/* Planted bugs for the sanitizer lane's self-test; see tbv_plant.h. */
#include <linux/delay.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "tbv_plant.h"

#ifdef TBV_PLANT_BUG_OOB
void tbv_plant_bug(void)
{
	u8 *buf = kmalloc(16, GFP_KERNEL);
	volatile unsigned int i = 16;	/* hide the bound from the compiler */

	if (buf) {
		buf[i] = 0x5a;		/* one byte past the allocation */
		kfree(buf);
	}
}
#elif defined(TBV_PLANT_BUG_SLEEP)
static DEFINE_SPINLOCK(tbv_plant_lock);

void tbv_plant_bug(void)
{
	spin_lock(&tbv_plant_lock);
	msleep(1);			/* sleeping with a spinlock held */
	spin_unlock(&tbv_plant_lock);
}
#elif defined(TBV_PLANT_BUG_LEAK)
void tbv_plant_bug(void)
{
	/* No reference is kept: kmemleak must report the object as unreferenced. */
	kmalloc(128, GFP_KERNEL);
}
#endif
