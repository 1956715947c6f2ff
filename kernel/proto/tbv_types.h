/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one place where the portable protocol core meets its host: the kernel
 * module or a userspace test/fuzz/bench program. Every other file in proto/
 * includes only this header and its siblings, never <linux/...> or libc, so the
 * bytes the kernel parses are parsed by exactly the code the unit tests run.
 */
#ifndef TBV_TYPES_H
#define TBV_TYPES_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/string.h>
#include <linux/errno.h>
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
#endif

#define TBV_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TBV_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TBV_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Byte-wise little-endian access: correct on any host and any alignment. */
static inline void tbv_put_le16(u8 *p, u16 v)
{
	p[0] = v & 0xff;
	p[1] = v >> 8;
}

static inline void tbv_put_le32(u8 *p, u32 v)
{
	tbv_put_le16(p, v & 0xffff);
	tbv_put_le16(p + 2, v >> 16);
}

static inline u16 tbv_get_le16(const u8 *p)
{
	return (u16)(p[0] | (p[1] << 8));
}

static inline u32 tbv_get_le32(const u8 *p)
{
	return tbv_get_le16(p) | ((u32)tbv_get_le16(p + 2) << 16);
}

#endif /* TBV_TYPES_H */
