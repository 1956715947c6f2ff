// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* NET fragmentation and reassembly, and the frame header checks. */
#include <stdlib.h>
#include "tbv_test.h"
#include "../../kernel/proto/tbv_frame.h"

TEST(frag_count)
{
	CHECK_EQ(tbv_net_frag_count(0), 1);
	CHECK_EQ(tbv_net_frag_count(1), 1);
	CHECK_EQ(tbv_net_frag_count(TBV_NET_FRAG_PAYLOAD), 1);
	CHECK_EQ(tbv_net_frag_count(TBV_NET_FRAG_PAYLOAD + 1), 2);
	CHECK_EQ(tbv_net_frag_count(TBV_NET_MAX_PACKET), TBV_NET_MAX_FRAGS);
	CHECK_EQ(TBV_NET_MAX_FRAGS, 17);
}

TEST(net_packet_room_is_what_the_netdev_allocates)
{
	struct tbv_net_frag f = { .len = 60, .count = 1 };

	CHECK_EQ(tbv_net_packet_room(&f), 60);		/* alone: no room for more */
	f = (struct tbv_net_frag){ .len = TBV_NET_FRAG_PAYLOAD, .count = 2 };
	CHECK_EQ(tbv_net_packet_room(&f), 2 * TBV_NET_FRAG_PAYLOAD);
	/* 17 full fragments would be 69428 bytes: the buffer is the largest packet's */
	f.count = TBV_NET_MAX_FRAGS;
	CHECK_EQ(tbv_net_packet_room(&f), TBV_NET_MAX_PACKET);
}

TEST(frag_roundtrip)
{
	static const u32 sizes[] = { 0, 1, 60, TBV_NET_FRAG_PAYLOAD, TBV_NET_FRAG_PAYLOAD + 1,
				     9000, TBV_NET_MAX_PACKET };
	u8 frame[TBV_FRAME_SIZE];
	unsigned int i;

	for (i = 0; i < TBV_ARRAY_SIZE(sizes); i++) {
		u32 total = 0, n = tbv_net_frag_count(sizes[i]);
		u16 idx;

		for (idx = 0; idx < n; idx++) {
			struct tbv_net_frag f;
			u16 len = tbv_net_frag_encode(frame, 0xabcd0000 + i, sizes[i], idx);

			CHECK_EQ(tbv_frame_type(frame, TBV_NET_HDR_LEN + len), TBV_FT_NET);
			CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + len, &f), 0);
			CHECK_EQ(f.len, len);
			CHECK_EQ(f.index, idx);
			CHECK_EQ(f.count, n);
			CHECK_EQ(f.packet_id, 0xabcd0000 + i);
			total += len;
		}
		CHECK_EQ(total, sizes[i]);
	}
}

TEST(frag_decode_rejects_lies)
{
	u8 frame[TBV_FRAME_SIZE];
	struct tbv_net_frag f;

	tbv_net_frag_encode(frame, 1, 100, 0);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 100, &f), 0);
	/* payload length beyond what was received */
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 99, &f), -EMSGSIZE);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN - 1, &f), -EMSGSIZE);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_FRAME_SIZE + 1, &f), -EMSGSIZE);
	CHECK_EQ(tbv_frame_type(frame, 3), -EMSGSIZE);
	/* index beyond count; absurd count; zero count */
	tbv_put_le16(frame + 4, 1);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 100, &f), -EPROTO);
	tbv_put_le16(frame + 4, 0);
	tbv_put_le16(frame + 6, TBV_NET_MAX_FRAGS + 1);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 100, &f), -EPROTO);
	tbv_put_le16(frame + 6, 0);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 100, &f), -EPROTO);
	/* a short fragment that is not the last */
	tbv_put_le16(frame + 6, 2);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 100, &f), -EPROTO);
	/* unknown flags or another frame type */
	tbv_net_frag_encode(frame, 1, 100, 0);
	frame[1] = 0x80;
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 100, &f), -EPROTO);
	frame[1] = 0;
	frame[0] = 0x7f;
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + 100, &f), -EPROTO);
	/* a last fragment that takes the packet past the largest one */
	tbv_net_frag_encode(frame, 1, TBV_NET_MAX_PACKET, TBV_NET_MAX_FRAGS - 1);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_FRAME_SIZE, &f), 0);
	CHECK_EQ((TBV_NET_MAX_FRAGS - 1) * TBV_NET_FRAG_PAYLOAD + f.len, TBV_NET_MAX_PACKET);
	tbv_put_le16(frame + 2, f.len + 1);
	CHECK_EQ(tbv_net_frag_decode(frame, TBV_FRAME_SIZE, &f), -EMSGSIZE);
}

TEST(reasm_gaps_discard_whole_packets)
{
	struct tbv_net_reasm r = { 0 };
	struct tbv_net_frag f = { .len = TBV_NET_FRAG_PAYLOAD, .count = 3, .packet_id = 5 };
	bool discarded, complete;

	f.index = 0;
	CHECK_EQ(tbv_net_reasm_push(&r, &f, &discarded, &complete), TBV_REASM_START);
	CHECK(!discarded && !complete);
	f.index = 2;	/* fragment 1 was lost */
	CHECK_EQ(tbv_net_reasm_push(&r, &f, &discarded, &complete), TBV_REASM_DROP);
	CHECK(discarded && !complete);
	/* a stray middle fragment with nothing under construction */
	f.index = 1;
	CHECK_EQ(tbv_net_reasm_push(&r, &f, &discarded, &complete), TBV_REASM_DROP);
	CHECK(!discarded);
	/* a new packet while one is under construction */
	f.index = 0;
	tbv_net_reasm_push(&r, &f, &discarded, &complete);
	f.packet_id = 6;
	CHECK_EQ(tbv_net_reasm_push(&r, &f, &discarded, &complete), TBV_REASM_START);
	CHECK(discarded);
	/* a fragment of another packet id */
	f.index = 1;
	f.packet_id = 7;
	CHECK_EQ(tbv_net_reasm_push(&r, &f, &discarded, &complete), TBV_REASM_DROP);
	/* single-fragment packet completes at once */
	f.index = 0;
	f.count = 1;
	f.len = 10;
	CHECK_EQ(tbv_net_reasm_push(&r, &f, &discarded, &complete), TBV_REASM_START);
	CHECK(complete);
}

/* A lossy in-order rail: delivered packets are exactly the ones sent, never partial. */
TEST(reasm_lossy_rail_delivers_only_whole_packets)
{
	static u8 sent[TBV_NET_MAX_PACKET], got[TBV_NET_MAX_PACKET];
	struct tbv_net_reasm r = { 0 };
	u8 frame[TBV_FRAME_SIZE];
	int pkt, delivered = 0, lost = 0;
	u32 got_len = 0;

	srand(7);
	for (pkt = 0; pkt < 400; pkt++) {
		u32 len = (u32)rand() % (TBV_NET_MAX_PACKET + 1);
		u32 n = tbv_net_frag_count(len), i, j;
		bool pkt_lost = false;

		for (j = 0; j < len; j++)
			sent[j] = (u8)(pkt * 31 + j);
		for (i = 0; i < n; i++) {
			struct tbv_net_frag f;
			enum tbv_reasm_action act;
			bool discarded, complete;
			u16 flen = tbv_net_frag_encode(frame, (u32)pkt, len, (u16)i);

			memcpy(frame + TBV_NET_HDR_LEN, sent + i * TBV_NET_FRAG_PAYLOAD, flen);
			if (rand() % 50 == 0) {	/* 2% of frames dropped */
				pkt_lost = true;
				continue;
			}
			CHECK_EQ(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + flen, &f), 0);
			act = tbv_net_reasm_push(&r, &f, &discarded, &complete);
			if (act == TBV_REASM_START)
				got_len = 0;
			if (act != TBV_REASM_DROP) {
				memcpy(got + got_len, frame + TBV_NET_HDR_LEN, f.len);
				got_len += f.len;
			}
			if (complete) {
				CHECK(!pkt_lost);
				CHECK_EQ(got_len, len);
				CHECK(memcmp(got, sent, len) == 0);
				delivered++;
			}
		}
		lost += pkt_lost;
	}
	CHECK_EQ(delivered + lost, 400);
	CHECK(lost > 0 && delivered > 0);
}
