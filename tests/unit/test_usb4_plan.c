// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The USB4 backend's hardware-free decisions (kernel/proto/tbv_usb4_plan.c). */
#include "tbv_test.h"
#include "../../kernel/proto/tbv_frame.h"
#include "../../kernel/proto/tbv_usb4_plan.h"

TEST(usb4_rails_offer_is_what_is_free_capped_by_the_parameter)
{
	CHECK_EQ(tbv_usb4_rails_offer(7, 4), 4);	/* 16 rings: plenty */
	CHECK_EQ(tbv_usb4_rails_offer(7, 2), 2);	/* usb4_rails=2 */
	CHECK_EQ(tbv_usb4_rails_offer(3, 4), 3);	/* thunderbolt_net holds some */
	CHECK_EQ(tbv_usb4_rails_offer(1, 4), 1);
	CHECK_EQ(tbv_usb4_rails_offer(0, 4), 0);	/* none free: no link */
	CHECK_EQ(tbv_usb4_rails_offer(9, 9), TBV_MAX_RAILS);
	CHECK_EQ(tbv_usb4_rails_offer(4, 0), 1);	/* usb4_rails=0 still means one */
}

TEST(usb4_peer_hopids_must_be_ours_to_take)
{
	u32 good[TBV_MAX_RAILS] = { 8, 9, 10, 63 };
	u32 low[2] = { 8, 7 };
	u32 high[2] = { 8, 64 };
	u32 twice[3] = { 8, 9, 8 };
	unsigned int rail = 99;

	CHECK_EQ(tbv_usb4_check_peer_hopids(good, 4, 63, &rail), 0);
	CHECK_EQ(tbv_usb4_check_peer_hopids(good, 0, 63, &rail), 0);
	CHECK_EQ(tbv_usb4_check_peer_hopids(low, 2, 63, &rail), -EINVAL);
	CHECK_EQ(rail, 1);
	CHECK_EQ(tbv_usb4_check_peer_hopids(high, 2, 63, &rail), -EINVAL);
	CHECK_EQ(rail, 1);
	CHECK_EQ(tbv_usb4_check_peer_hopids(twice, 3, 63, &rail), -EINVAL);
	CHECK_EQ(rail, 2);
	/* a controller with fewer HopIDs than the peer chose */
	CHECK_EQ(tbv_usb4_check_peer_hopids(good, 4, 31, &rail), -EINVAL);
	CHECK_EQ(rail, 3);
}

TEST(usb4_controller_flags_classify_rx_frames)
{
	CHECK_EQ(tbv_usb4_rx_flags(0x2), 0);				/* completed, fine */
	CHECK_EQ(tbv_usb4_rx_flags(0x2 | TBV_DESC_CRC_ERROR), TBV_FRAME_F_CRC_ERROR);
	CHECK_EQ(tbv_usb4_rx_flags(0x2 | TBV_DESC_BUFFER_OVERRUN), TBV_FRAME_F_OVERRUN);
	CHECK_EQ(tbv_usb4_rx_flags(0xfff), TBV_FRAME_F_CRC_ERROR | TBV_FRAME_F_OVERRUN);
	CHECK_EQ(tbv_usb4_rx_flags(0x8), 0);				/* interrupt bit: not an error */
}

TEST(usb4_descriptor_lengths_are_12_bits)
{
	CHECK_EQ(tbv_usb4_desc_len(4096), 0);
	CHECK_EQ(tbv_usb4_desc_len(4095), 4095);
	CHECK_EQ(tbv_usb4_desc_len(1), 1);
	CHECK_EQ(tbv_usb4_frame_len(0), TBV_FRAME_SIZE);
	CHECK_EQ(tbv_usb4_frame_len(60), 60);
	CHECK_EQ(tbv_usb4_frame_len(tbv_usb4_desc_len(4096)), 4096);
}
