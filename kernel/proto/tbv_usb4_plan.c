// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "tbv_frame.h"
#include "tbv_usb4_plan.h"

unsigned int tbv_usb4_rails_offer(unsigned int free_pairs, unsigned int wanted)
{
	unsigned int rails = TBV_MIN(free_pairs, TBV_MAX_RAILS);

	return TBV_MIN(rails, TBV_MAX(wanted, 1u));
}

int tbv_usb4_check_peer_hopids(const u32 *hopids, unsigned int rails, unsigned int max_hopid,
			       unsigned int *rail)
{
	unsigned int i, j;

	for (i = 0; i < rails; i++) {
		*rail = i;
		if (hopids[i] < TBV_MIN_HOPID || hopids[i] > max_hopid)
			return -EINVAL;
		for (j = 0; j < i; j++) {
			if (hopids[j] == hopids[i])
				return -EINVAL;
		}
	}
	return 0;
}

u16 tbv_usb4_rx_flags(u32 desc_flags)
{
	return (desc_flags & TBV_DESC_CRC_ERROR ? TBV_FRAME_F_CRC_ERROR : 0) |
	       (desc_flags & TBV_DESC_BUFFER_OVERRUN ? TBV_FRAME_F_OVERRUN : 0);
}

u32 tbv_usb4_desc_len(u32 size)
{
	return size & 0xfff;
}

u32 tbv_usb4_frame_len(u32 desc_len)
{
	return desc_len ? desc_len : TBV_FRAME_SIZE;
}
