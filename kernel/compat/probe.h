/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the compile tests in this directory. Each <name>.c compiles (with the target
 * kernel's own flags, run by Kbuild) only if that kernel has <name>; Kbuild then defines
 * TBV_HAVE_<NAME> in the generated tbv_have.h. A probe must fail by a compile error, never
 * by a warning: warnings are not errors here.
 */
#ifndef TBV_PROBE_H
#define TBV_PROBE_H

#include <linux/build_bug.h>

/* the type of an expression (a struct member, a function) is exactly this one */
#define TBV_PROBE_TYPE(actual, expected) \
	static_assert(__builtin_types_compatible_p(actual, expected), "different type")

/* the expression exists and is a constant (an enum value, a macro) */
#define TBV_PROBE_VALUE(expr) static_assert((expr) || 1, "constant")

#endif
