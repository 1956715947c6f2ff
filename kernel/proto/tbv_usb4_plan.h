/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The USB4 backend's decisions that need no hardware: how many rails to offer, which of the
 * peer's HopIDs we can take as ours, how the controller's descriptor fields map to frames.
 * Kept here so userspace unit tests check exactly what tbv_usb4.c does.
 */
#ifndef TBV_USB4_PLAN_H
#define TBV_USB4_PLAN_H

#include "tbv_types.h"
#include "tbv_login.h"

/* RX descriptor flags as the NHI reports them (thunderbolt.h's ring_desc_flags). */
#define TBV_DESC_CRC_ERROR	0x1
#define TBV_DESC_BUFFER_OVERRUN	0x4

/* Rails to offer: the ring pairs free on the controller, at most @wanted and TBV_MAX_RAILS. */
unsigned int tbv_usb4_rails_offer(unsigned int free_pairs, unsigned int wanted);

/*
 * The peer's out-HopIDs become our in-HopIDs: each must lie in [TBV_MIN_HOPID, @max_hopid]
 * (our lane adapter's range) and be distinct. 0, or -EINVAL naming the first bad rail in *@rail.
 */
int tbv_usb4_check_peer_hopids(const u32 *hopids, unsigned int rails, unsigned int max_hopid,
			       unsigned int *rail);

/* The frame flags (TBV_FRAME_F_*) for an RX descriptor's flags: errors are dropped and counted. */
u16 tbv_usb4_rx_flags(u32 desc_flags);

/* Descriptor length fields are 12 bits: a full 4096-byte frame is 0. */
u32 tbv_usb4_desc_len(u32 size);
u32 tbv_usb4_frame_len(u32 desc_len);

#endif /* TBV_USB4_PLAN_H */
