// SPDX-License-Identifier: GPL-2.0
/*
 * A symbol namespace is a string literal (6.13); before, it was a token that
 * the export and import macros stringified, and "TBV" became "\"TBV\"".
 */
#include <linux/module.h>
#include "probe.h"

#undef MODULE_INFO
#define MODULE_INFO(tag, info) \
	static_assert(sizeof(#tag) && sizeof(info) == sizeof("TBV"), "a stringified namespace")

MODULE_IMPORT_NS("TBV");
