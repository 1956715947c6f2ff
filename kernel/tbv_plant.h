/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Deliberate bugs for the sanitizer lane's self-test, compiled in only with
 * `make TBV_PLANT_BUG=oob|sleep|leak` (never in a normal build). Each fires
 * when a virtual cable is plugged, so a test can prove that KASAN, the
 * atomic-sleep check and kmemleak catch it and fail the run.
 */
#ifndef TBV_PLANT_H
#define TBV_PLANT_H

#include <linux/compiler.h>

#ifdef TBV_PLANT_BUG
noinline void tbv_plant_bug(void);	/* named in the reports */
#else
static inline void tbv_plant_bug(void)
{
}
#endif

#endif /* TBV_PLANT_H */
