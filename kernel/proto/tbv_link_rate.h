/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Expressing a USB4 link's trained rate as an InfiniBand width x speed. */
#ifndef TBV_LINK_RATE_H
#define TBV_LINK_RATE_H

#include "tbv_types.h"

/* Values of the IB spec's PortInfo encodings (= enum ib_port_width / ib_port_speed). */
enum tbv_ib_width {
	TBV_IB_WIDTH_1X = 1, TBV_IB_WIDTH_2X = 16, TBV_IB_WIDTH_4X = 2,
	TBV_IB_WIDTH_8X = 4, TBV_IB_WIDTH_12X = 8,
};

enum tbv_ib_speed {
	TBV_IB_SPEED_SDR = 1, TBV_IB_SPEED_DDR = 2, TBV_IB_SPEED_QDR = 4,
	TBV_IB_SPEED_FDR10 = 8, TBV_IB_SPEED_FDR = 16, TBV_IB_SPEED_EDR = 32,
	TBV_IB_SPEED_HDR = 64,
};

struct tbv_ib_rate {
	u8 width;		/* enum tbv_ib_width */
	u8 speed;		/* enum tbv_ib_speed */
	u32 mbps;		/* width x per-lane rate as IB tools print it */
};

/*
 * The IB width x speed that best describes @lanes lanes of @lane_gbps each:
 * the largest rate not above the link's, preferring fewer lanes on a tie.
 * Returns -EINVAL for a link that is down or not a USB4/Thunderbolt rate.
 */
int tbv_link_rate(unsigned int lanes, unsigned int lane_gbps, struct tbv_ib_rate *out);

#endif /* TBV_LINK_RATE_H */
