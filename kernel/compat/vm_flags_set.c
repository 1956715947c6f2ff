// SPDX-License-Identifier: GPL-2.0
/* vm_flags_set(): a VMA's flags are no longer written directly (6.3) */
#include <linux/mm.h>
#include "probe.h"

static inline void tbv_probe(struct vm_area_struct *vma)
{
	vm_flags_set(vma, VM_DONTEXPAND);
}
