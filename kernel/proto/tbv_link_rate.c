// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "tbv_link_rate.h"

static const struct { u8 code; u8 lanes; } tbv_widths[] = {
	{ TBV_IB_WIDTH_1X, 1 }, { TBV_IB_WIDTH_2X, 2 }, { TBV_IB_WIDTH_4X, 4 },
	{ TBV_IB_WIDTH_8X, 8 }, { TBV_IB_WIDTH_12X, 12 },
};

/* Per-lane rate as IB tools print it (QDR = 10 Gb/s); FDR10 is left out: QDR names it. */
static const struct { u8 code; u32 mbps; } tbv_speeds[] = {
	{ TBV_IB_SPEED_SDR, 2500 }, { TBV_IB_SPEED_DDR, 5000 }, { TBV_IB_SPEED_QDR, 10000 },
	{ TBV_IB_SPEED_FDR, 14000 }, { TBV_IB_SPEED_EDR, 25000 }, { TBV_IB_SPEED_HDR, 50000 },
};

int tbv_link_rate(unsigned int lanes, unsigned int lane_gbps, struct tbv_ib_rate *out)
{
	u32 link_mbps, best = 0;
	unsigned int w, s;

	if (lanes < 1 || lanes > 2 || (lane_gbps != 10 && lane_gbps != 20 && lane_gbps != 40))
		return -EINVAL;
	link_mbps = lanes * lane_gbps * 1000;

	/* Widths in increasing order, so a tie keeps the fewer lanes. */
	for (w = 0; w < TBV_ARRAY_SIZE(tbv_widths); w++) {
		for (s = 0; s < TBV_ARRAY_SIZE(tbv_speeds); s++) {
			u32 mbps = tbv_widths[w].lanes * tbv_speeds[s].mbps;

			if (mbps > link_mbps || mbps <= best)
				continue;
			best = mbps;
			out->width = tbv_widths[w].code;
			out->speed = tbv_speeds[s].code;
			out->mbps = mbps;
		}
	}
	return best ? 0 : -EINVAL;
}
