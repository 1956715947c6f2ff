// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The allowed-peers list: parsing and matching. */
#include "tbv_test.h"
#include "../../kernel/proto/tbv_policy.h"

static const u8 peer_a[TBV_UUID_LEN] = {
	0x5d, 0x0b, 0xef, 0x8d, 0xe8, 0x97, 0x4c, 0x4e,
	0x8b, 0x56, 0xfd, 0x14, 0xbd, 0xd0, 0x6e, 0x04,
};
static const u8 peer_b[TBV_UUID_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

TEST(peer_policy)
{
	CHECK_EQ(tbv_peer_allowed("", peer_a), 1);		/* empty: everyone */
	CHECK_EQ(tbv_peer_allowed(" \n", peer_a), 1);
	CHECK_EQ(tbv_peer_allowed("5d0bef8d-e897-4c4e-8b56-fd14bdd06e04", peer_a), 1);
	CHECK_EQ(tbv_peer_allowed("5D0BEF8D-E897-4C4E-8B56-FD14BDD06E04\n", peer_a), 1);
	CHECK_EQ(tbv_peer_allowed("5d0bef8d-e897-4c4e-8b56-fd14bdd06e04", peer_b), 0);
	CHECK_EQ(tbv_peer_allowed("01020304-0506-0708-090a-0b0c0d0e0f10,"
				  "5d0bef8d-e897-4c4e-8b56-fd14bdd06e04", peer_a), 1);
	CHECK_EQ(tbv_peer_allowed("01020304-0506-0708-090a-0b0c0d0e0f10 "
				  "5d0bef8d-e897-4c4e-8b56-fd14bdd06e04", peer_b), 1);
	/* malformed lists allow nobody and are refused when set */
	CHECK_EQ(tbv_peer_allowed("5d0bef8d-e897-4c4e-8b56-fd14bdd06e0", peer_a), -EINVAL);
	CHECK_EQ(tbv_peer_allowed("5d0bef8d-e897-4c4e-8b56-fd14bdd06e044", peer_a), -EINVAL);
	CHECK_EQ(tbv_peer_allowed("5d0bef8de8974c4e8b56fd14bdd06e04abcd", peer_a), -EINVAL);
	CHECK_EQ(tbv_peer_allowed("5d0bef8d-e897-4c4e-8b56-fd14bdd06e0g", peer_a), -EINVAL);
	CHECK_EQ(tbv_peer_allowed("5d0bef8d-e897-4c4e-8b56-fd14bdd06e04;x", peer_a), -EINVAL);
	CHECK_EQ(tbv_peer_list_check("5d0bef8d-e897-4c4e-8b56-fd14bdd06e04, "), 0);
	CHECK_EQ(tbv_peer_list_check("nonsense"), -EINVAL);
}
