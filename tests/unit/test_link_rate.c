// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "tbv_test.h"
#include "../../kernel/proto/tbv_link_rate.h"

TEST(link_rate_table)
{
	static const struct { unsigned int lanes, gbps; u8 width, speed; u32 mbps; } cases[] = {
		{ 2, 20, TBV_IB_WIDTH_4X, TBV_IB_SPEED_QDR, 40000 },	/* USB4 Gen 2x2 / TB3 */
		{ 1, 10, TBV_IB_WIDTH_1X, TBV_IB_SPEED_QDR, 10000 },	/* degraded fallback */
		{ 2, 10, TBV_IB_WIDTH_2X, TBV_IB_SPEED_QDR, 20000 },
		{ 1, 20, TBV_IB_WIDTH_2X, TBV_IB_SPEED_QDR, 20000 },
		{ 2, 40, TBV_IB_WIDTH_8X, TBV_IB_SPEED_QDR, 80000 },	/* USB4 v2 / TB5 */
		{ 1, 40, TBV_IB_WIDTH_4X, TBV_IB_SPEED_QDR, 40000 },
	};
	unsigned int i;

	for (i = 0; i < TBV_ARRAY_SIZE(cases); i++) {
		struct tbv_ib_rate r;

		CHECK_EQ(tbv_link_rate(cases[i].lanes, cases[i].gbps, &r), 0);
		CHECK_EQ(r.width, cases[i].width);
		CHECK_EQ(r.speed, cases[i].speed);
		CHECK_EQ(r.mbps, cases[i].mbps);
	}
}

TEST(link_rate_rejects_nonsense)
{
	struct tbv_ib_rate r;

	CHECK_EQ(tbv_link_rate(0, 20, &r), -EINVAL);
	CHECK_EQ(tbv_link_rate(3, 20, &r), -EINVAL);
	CHECK_EQ(tbv_link_rate(2, 0, &r), -EINVAL);
	CHECK_EQ(tbv_link_rate(2, 15, &r), -EINVAL);
}
