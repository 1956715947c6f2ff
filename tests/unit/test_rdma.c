// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* RDMA packet headers, segmentation arithmetic and PSN sequencing decisions. */
#include <stdlib.h>
#include "tbv_test.h"
#include "../../kernel/proto/tbv_rdma.h"
#include "../../kernel/proto/tbv_frame.h"

static u8 frame[TBV_FRAME_SIZE];

static int roundtrip(const struct tbv_rdma_hdr *in, struct tbv_rdma_hdr *out)
{
	u32 len = tbv_rdma_encode(frame, in);

	return tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, out);
}

static struct tbv_rdma_hdr write_first(u32 len)
{
	struct tbv_rdma_hdr h = {
		.kind = TBV_RK_WRITE, .flags = TBV_RF_FIRST, .dst_qpn = 0x123456,
		.src_qpn = 17, .psn = 0xfffffe, .va = 0x7f0000001000ull, .rkey = 0xdeadbeef,
		.len = len, .payload_len = TBV_RDMA_MAX_PAYLOAD,
	};
	return h;
}

TEST(rdma_header_roundtrip)
{
	struct tbv_rdma_hdr in = write_first(3 * TBV_RDMA_MAX_PAYLOAD), out;

	CHECK_EQ(TBV_RDMA_HDR_LEN + TBV_RDMA_MAX_PAYLOAD, TBV_FRAME_SIZE);
	CHECK_EQ(roundtrip(&in, &out), 0);
	CHECK_EQ(out.kind, TBV_RK_WRITE);
	CHECK_EQ(out.dst_qpn, 0x123456);
	CHECK_EQ(out.psn, 0xfffffe);
	CHECK(out.va == 0x7f0000001000ull);
	CHECK_EQ(out.rkey, 0xdeadbeef);
	CHECK_EQ(out.len, 3 * TBV_RDMA_MAX_PAYLOAD);
	CHECK_EQ(tbv_frame_type(frame, TBV_FRAME_SIZE), TBV_FT_RDMA);
}

TEST(rdma_ud_carries_gids)
{
	struct tbv_rdma_hdr in = {
		.kind = TBV_RK_UD_SEND, .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_GRH |
		TBV_RF_IMM, .dst_qpn = 1, .src_qpn = 1, .qkey = 0x80010000, .imm = 0x01020304,
		.payload_len = TBV_RDMA_UD_MAX_PAYLOAD,
	}, out;

	memset(in.sgid, 0xaa, 16);
	memset(in.dgid, 0x55, 16);
	CHECK_EQ(tbv_rdma_encode(frame, &in), TBV_FRAME_SIZE);
	CHECK_EQ(roundtrip(&in, &out), 0);
	CHECK(!memcmp(out.sgid, in.sgid, 16) && !memcmp(out.dgid, in.dgid, 16));
	CHECK_EQ(out.qkey, 0x80010000);
	CHECK_EQ(out.imm, 0x01020304);
	in.payload_len = TBV_RDMA_UD_MAX_PAYLOAD + 1;	/* would not fit one frame */
	CHECK_EQ(roundtrip(&in, &out), -EMSGSIZE);
	in.payload_len = 8;
	in.flags &= ~TBV_RF_GRH;			/* UD without its addresses */
	CHECK_EQ(roundtrip(&in, &out), -EPROTO);
}

TEST(rdma_rejects_malformed)
{
	struct tbv_rdma_hdr h, out;
	u32 len;

	h = write_first(100);				/* first, not last: len must exceed payload */
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h = write_first(5000);
	h.flags = TBV_RF_FIRST | TBV_RF_IMM;		/* immediate only on the last packet */
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h = write_first(5000);
	h.payload_len = 100;				/* a non-last packet must be full */
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h = write_first(5000);
	h.psn = 0x1000000;				/* PSN beyond 24 bits */
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h = write_first(5000);
	h.dst_qpn = 0x1000000;
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h = write_first(5000);
	h.kind = 0;
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h.kind = TBV_RK_MAX + 1;
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);

	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_ACK, .syndrome = TBV_NAK_RNR, .aux = 14 };
	CHECK_EQ(roundtrip(&h, &out), 0);
	h.aux = 32;					/* no such RNR timer code */
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_ACK, .syndrome = TBV_ACK_MAX + 1 };
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);
	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_ACK, .payload_len = 4, .flags = TBV_RF_LAST };
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);		/* ACKs carry no flags or payload */

	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_READ_REQ, .flags = TBV_RF_FIRST,
				   .len = 10 };
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);		/* a READ request is one packet */
	h.flags |= TBV_RF_LAST;
	CHECK_EQ(roundtrip(&h, &out), 0);
	h.len = 0x80000001u;				/* beyond the largest message */
	CHECK_EQ(roundtrip(&h, &out), -EPROTO);

	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_SEND, .flags = TBV_RF_FIRST | TBV_RF_LAST,
				   .payload_len = 16 };
	len = tbv_rdma_encode(frame, &h);
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), 0);
	CHECK_EQ(tbv_rdma_decode(frame, len - 1, TBV_RDMA_MAX_PAYLOAD, &out), -EMSGSIZE);	/* truncated */
	/* a length rounded up to a dword by the controller, not more */
	CHECK_EQ(tbv_rdma_decode(frame, len + 1, TBV_RDMA_MAX_PAYLOAD, &out), 0);
	CHECK_EQ(tbv_rdma_decode(frame, len + TBV_RX_PAD_MAX, TBV_RDMA_MAX_PAYLOAD, &out), 0);
	CHECK_EQ(out.payload_len, 16);
	CHECK_EQ(tbv_rdma_decode(frame, len + TBV_RX_PAD_MAX + 1, TBV_RDMA_MAX_PAYLOAD, &out), -EMSGSIZE);
	CHECK_EQ(tbv_rdma_decode(frame, TBV_RDMA_HDR_LEN - 1, TBV_RDMA_MAX_PAYLOAD, &out), -EMSGSIZE);
	frame[7] = 1;					/* reserved byte */
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), -EPROTO);
	frame[7] = 0;
	frame[5] |= 0x40;				/* INV: only with an rkey... */
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), 0);	/* ...which may be 0 */
	frame[5] &= ~0x40;
	frame[24] = 1;					/* SEND carries no address */
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), -EPROTO);
	frame[24] = 0;
	frame[0] = TBV_FT_NET;
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), -EPROTO);
}

/* SEND with invalidate: the window's rkey rides on the last packet only. */
TEST(rdma_send_with_invalidate)
{
	struct tbv_rdma_hdr in = {
		.kind = TBV_RK_SEND, .flags = TBV_RF_LAST | TBV_RF_INV, .dst_qpn = 3,
		.src_qpn = 4, .psn = 5, .rkey = 0x80abcd12, .payload_len = 100,
	}, out;

	CHECK_EQ(roundtrip(&in, &out), 0);
	CHECK_EQ(out.rkey, 0x80abcd12);
	in.flags = TBV_RF_INV;				/* not the last packet */
	in.payload_len = TBV_RDMA_MAX_PAYLOAD;
	CHECK_EQ(roundtrip(&in, &out), -EPROTO);
	in.flags = TBV_RF_LAST | TBV_RF_INV | TBV_RF_IMM;	/* one or the other */
	in.payload_len = 100;
	CHECK_EQ(roundtrip(&in, &out), -EPROTO);
	in.flags = TBV_RF_LAST;				/* an rkey without INV */
	CHECK_EQ(roundtrip(&in, &out), -EPROTO);
	in.kind = TBV_RK_WRITE;				/* only SENDs invalidate */
	in.flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_INV;
	in.len = 100;
	CHECK_EQ(roundtrip(&in, &out), -EPROTO);
}

/* Atomic requests carry their operation and operands; responses the old value. */
TEST(rdma_atomics)
{
	struct tbv_rdma_hdr in = {
		.kind = TBV_RK_ATOMIC, .flags = TBV_RF_FIRST | TBV_RF_LAST, .dst_qpn = 9,
		.src_qpn = 8, .psn = 77, .va = 0x7f0000001008ull, .rkey = 0x1234,
		.len = TBV_ATOMIC_LEN, .aux = TBV_ATOMIC_CMP_SWP,
		.payload_len = TBV_ATOMIC_REQ_PAYLOAD,
	}, out, bad;
	u8 *payload = frame + TBV_RDMA_HDR_LEN;

	CHECK_EQ(roundtrip(&in, &out), 0);
	CHECK_EQ(out.aux, TBV_ATOMIC_CMP_SWP);
	CHECK_EQ(out.len, 8);
	tbv_rdma_put_u64(payload, 0x0102030405060708ull);
	CHECK(tbv_rdma_get_u64(payload) == 0x0102030405060708ull);
	CHECK_EQ(payload[0], 0x08);			/* little endian like the header */
	in.va |= 4;					/* misaligned: the responder NAKs it */
	CHECK_EQ(roundtrip(&in, &out), 0);

	bad = in;
	bad.aux = 3;					/* no such operation */
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.len = 4;
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.payload_len = 8;				/* operands missing */
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.flags = TBV_RF_FIRST;			/* atomics are one packet */
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);

	in = (struct tbv_rdma_hdr){
		.kind = TBV_RK_ATOMIC_RESP, .flags = TBV_RF_FIRST | TBV_RF_LAST, .dst_qpn = 8,
		.src_qpn = 9, .psn = 77, .payload_len = TBV_ATOMIC_RESP_PAYLOAD,
	};
	CHECK_EQ(roundtrip(&in, &out), 0);
	bad = in;
	bad.aux = TBV_ATOMIC_CMP_SWP;			/* only requests name an operation */
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.rkey = 1;
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.payload_len = 16;
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
}

/* FLUSH names a type and a level; an atomic write carries exactly its 8 bytes. */
TEST(rdma_flush_and_atomic_write)
{
	struct tbv_rdma_hdr in = {
		.kind = TBV_RK_FLUSH, .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ,
		.dst_qpn = 9, .src_qpn = 8, .psn = 1, .va = 0x1000, .rkey = 7, .len = 12345678,
		.aux = TBV_FLUSH_AUX(TBV_FLUSH_GLOBAL, TBV_FLUSH_MR),
	}, out, bad;

	CHECK_EQ(roundtrip(&in, &out), 0);
	CHECK_EQ(out.aux, TBV_FLUSH_GLOBAL | TBV_FLUSH_MR << 8);
	bad = in;
	bad.aux = TBV_FLUSH_AUX(3, TBV_FLUSH_RANGE);	/* no such type */
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.aux = TBV_FLUSH_AUX(TBV_FLUSH_GLOBAL, 2);	/* no such level */
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.payload_len = 8;
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);

	in = (struct tbv_rdma_hdr){
		.kind = TBV_RK_ATOMIC_WRITE, .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ,
		.dst_qpn = 9, .src_qpn = 8, .psn = 2, .va = 0x1008, .rkey = 7, .len = 8,
		.payload_len = 8,
	};
	CHECK_EQ(roundtrip(&in, &out), 0);
	bad = in;
	bad.len = bad.payload_len = 16;
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
	bad = in;
	bad.aux = 1;
	CHECK_EQ(roundtrip(&bad, &out), -EPROTO);
}

/* Random bytes never crash the decoder, and whatever it accepts re-encodes identically. */
TEST(rdma_decode_random_frames)
{
	u8 copy[TBV_FRAME_SIZE];
	struct tbv_rdma_hdr h;
	unsigned int i, accepted = 0;

	srand(4242);
	for (i = 0; i < 200000; i++) {
		u32 len = TBV_RDMA_HDR_LEN + rand() % 64, k;

		for (k = 0; k < len; k++)
			frame[k] = rand();
		/* mostly-plausible headers so that some pass: fields zero 3 times in 4 */
		for (k = 8; k < TBV_RDMA_HDR_LEN; k += 4)
			if (rand() % 4)
				memset(frame + k, 0, 4);
		frame[4] = rand() % (TBV_RK_MAX + 2);
		frame[5] &= TBV_RF_ALL;
		frame[6] = rand() % 4 ? 0 : rand() % 7;
		frame[0] = TBV_FT_RDMA;
		frame[1] = 0;
		frame[7] = 0;
		tbv_put_le16(frame + 2, len - TBV_RDMA_HDR_LEN - ((frame[5] & TBV_RF_GRH) ? 32 : 0));
		if (tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &h))
			continue;
		accepted++;
		memcpy(copy, frame, len);
		CHECK_EQ(tbv_rdma_encode(frame, &h), len);
		CHECK(!memcmp(copy, frame, len));
	}
	CHECK(accepted > 0);
}

TEST(rdma_segmentation)
{
	u32 len, i, total;

	CHECK_EQ(tbv_rdma_npkts(0, TBV_RDMA_MAX_PAYLOAD), 1);
	CHECK_EQ(tbv_rdma_npkts(1, TBV_RDMA_MAX_PAYLOAD), 1);
	CHECK_EQ(tbv_rdma_npkts(TBV_RDMA_MAX_PAYLOAD, TBV_RDMA_MAX_PAYLOAD), 1);
	CHECK_EQ(tbv_rdma_npkts(TBV_RDMA_MAX_PAYLOAD + 1, TBV_RDMA_MAX_PAYLOAD), 2);
	CHECK_EQ(tbv_rdma_npkts(0x80000000u, TBV_RDMA_MAX_PAYLOAD), (0x80000000u + TBV_RDMA_MAX_PAYLOAD - 1) /
		 TBV_RDMA_MAX_PAYLOAD);
	CHECK(tbv_rdma_npkts(0x80000000u, TBV_RDMA_MAX_PAYLOAD) < TBV_PSN_MASK / 2);	/* fits the PSN window */
	for (len = 0; len < 5 * TBV_RDMA_MAX_PAYLOAD; len += 997) {
		for (i = 0, total = 0; i < tbv_rdma_npkts(len, TBV_RDMA_MAX_PAYLOAD); i++) {
			u32 p = tbv_rdma_pkt_payload(len, i, TBV_RDMA_MAX_PAYLOAD);

			if (i + 1 < tbv_rdma_npkts(len, TBV_RDMA_MAX_PAYLOAD))
				CHECK_EQ(p, TBV_RDMA_MAX_PAYLOAD);	/* full-packet rule */
			total += p;
		}
		CHECK_EQ(total, len);
	}
}

TEST(psn_arithmetic_wraps)
{
	CHECK_EQ(tbv_psn_add(0xffffff, 1), 0);
	CHECK_EQ(tbv_psn_add(0xfffff0, 0x20), 0x10);
	CHECK_EQ(tbv_psn_diff(0x10, 0xfffff0), 0x20);
	CHECK_EQ(tbv_psn_diff(0xfffff0, 0x10), -0x20);
	CHECK_EQ(tbv_psn_classify(5, 5), TBV_PSN_EXPECTED);
	CHECK_EQ(tbv_psn_classify(0xffffff, 0), TBV_PSN_DUPLICATE);
	CHECK_EQ(tbv_psn_classify(1, 0xffffff), TBV_PSN_AHEAD);
	CHECK_EQ(tbv_psn_classify(0x7fffff, 0), TBV_PSN_AHEAD);
	CHECK_EQ(tbv_psn_classify(0x800000, 0), TBV_PSN_DUPLICATE);
}

TEST(timers)
{
	CHECK_EQ(tbv_rnr_timer_usec(0), 655360);
	CHECK_EQ(tbv_rnr_timer_usec(12), 640);
	CHECK_EQ(tbv_rnr_timer_usec(31), 491520);
	CHECK_EQ(tbv_rnr_timer_usec(200), 655360);
	CHECK_EQ(tbv_ack_timeout_usec(0), 0);
	CHECK_EQ(tbv_ack_timeout_usec(14), 67108);
	CHECK(tbv_ack_timeout_usec(31) > 0);
}

/* The ACK wait and its ticks: how many ticks, late or not, a requester waits before it resends. */
static u32 ticks_to_resend(u8 code)
{
	u32 wait = tbv_ack_wait_ms(code), tick = tbv_ack_tick_ms(wait), waited = 0, n = 0;

	while (waited < wait) {
		waited += tick;
		n++;
	}
	return n;
}

TEST(ack_wait_is_counted_in_ticks)
{
	/* timeout code -> wait (ms), its tick (ms), ticks before a resend, late or not */
	static const struct { u8 code; u32 wait, tick, ticks; } cases[] = {
		{ 14, 100, 25, 4 },		/* 67 ms, raised to the minimum */
		{ 1, 100, 25, 4 },
		{ 15, 135, 33, 5 },		/* 134.2 ms, rounded up */
		{ 20, 4295, 1000, 5 },		/* a quarter is over 1 s */
		{ 0, 10000, 1000, 10 },		/* infinite: a probe every 10 s */
		{ 31, 8796094, 1000, 8797 },	/* 2.4 hours, no overflow */
		{ 200, 8796094, 1000, 8797 },	/* codes above 31 read as 31 */
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		u32 wait = tbv_ack_wait_ms(cases[i].code);

		CHECK_EQ(wait, cases[i].wait);
		CHECK_EQ(tbv_ack_tick_ms(wait), cases[i].tick);
		CHECK_EQ(ticks_to_resend(cases[i].code), cases[i].ticks);
	}
	CHECK_EQ(tbv_ack_tick_ms(10), 25);
}

TEST(a_read_longer_than_the_window_is_asked_for_in_parts)
{
	const u32 mib = tbv_rdma_npkts(1u << 20, TBV_RDMA_MAX_PAYLOAD);	/* 260 response packets */
	u32 part = tbv_read_part_pkts(mib, true);

	/* two parts fit the window: one streams while the next is asked for */
	CHECK_EQ(mib, 260);
	CHECK_EQ(part, 96);
	CHECK(2 * part <= TBV_TX_WINDOW);
	/* parts of 96, 96 and 68 packets; a rewind into one asks for the rest of it */
	CHECK_EQ(tbv_read_part_end(mib, part, 0), 96);
	CHECK_EQ(tbv_read_part_end(mib, part, 95), 96);
	CHECK_EQ(tbv_read_part_end(mib, part, 96), 192);
	CHECK_EQ(tbv_read_part_end(mib, part, 150), 192);
	CHECK_EQ(tbv_read_part_end(mib, part, 192), 260);
	CHECK_EQ(tbv_read_part_end(mib, part, 259), 260);

	/* a READ the window holds, or one QP that may have one READ out: one part */
	CHECK_EQ(tbv_read_part_pkts(TBV_TX_WINDOW, true), TBV_TX_WINDOW);
	CHECK_EQ(tbv_read_part_pkts(TBV_TX_WINDOW + 1, true), TBV_READ_PART_PKTS);
	CHECK_EQ(tbv_read_part_pkts(mib, false), mib);
	CHECK_EQ(tbv_read_part_end(mib, mib, 150), mib);
	CHECK_EQ(tbv_read_part_end(1, 1, 0), 1);		/* a READ of 0 bytes: one packet */

	/* the largest READ, 2 GiB: no part runs past its end */
	part = tbv_read_part_pkts(tbv_rdma_npkts(0x80000000u, TBV_RDMA_MAX_PAYLOAD), true);
	CHECK_EQ(tbv_read_part_end(tbv_rdma_npkts(0x80000000u, TBV_RDMA_MAX_PAYLOAD), part, 530504), 530505);
}

TEST(rdma_striped_packets_carry_a_tsn_in_the_qkey_field)
{
	u8 frame[TBV_FRAME_SIZE];
	struct tbv_rdma_hdr h = { .kind = TBV_RK_WRITE, .flags = TBV_RF_FIRST | TBV_RF_LAST,
				  .dst_qpn = 7, .src_qpn = 9, .psn = 3, .va = 0x1000,
				  .rkey = 5, .len = 8, .payload_len = 8 }, out;
	u32 len = tbv_rdma_encode(frame, &h);

	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), 0);
	CHECK_EQ(out.flags & TBV_RF_SEQ, 0);
	tbv_rdma_set_tsn(frame, 0xfedcba98u);		/* numbered as it is sent */
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), 0);
	CHECK(out.flags & TBV_RF_SEQ);
	CHECK_EQ(out.tsn, 0xfedcba98u);
	CHECK_EQ(out.qkey, 0);				/* the same bytes: not a Q_Key */

	/* every RC/UC kind may be numbered, an ACK included; UD never */
	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_ACK, .flags = TBV_RF_SEQ, .tsn = 1 };
	len = tbv_rdma_encode(frame, &h);
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), 0);
	CHECK_EQ(out.tsn, 1);
	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_UD_SEND, .qkey = 0x11,
				   .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_GRH };
	len = tbv_rdma_encode(frame, &h);
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), 0);
	frame[5] |= TBV_RF_SEQ;
	CHECK_EQ(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &out), -EPROTO);
}

TEST(a_split_packet_is_a_header_frame_and_a_page_of_payload)
{
	u8 hdr[TBV_FRAME_SIZE];
	struct tbv_rdma_hdr h = { .kind = TBV_RK_WRITE, .flags = TBV_RF_FIRST, .dst_qpn = 7,
				  .src_qpn = 9, .psn = 3, .va = 0x1000, .rkey = 5,
				  .len = 3 * TBV_RDMA_SPLIT_PAYLOAD,
				  .payload_len = TBV_RDMA_SPLIT_PAYLOAD }, out;
	const u32 full = TBV_RDMA_SPLIT_PAYLOAD;

	/* a page per packet: 1 MiB is 256 packets, and only the header's frame is not a page */
	CHECK_EQ(tbv_rdma_npkts(1u << 20, full), 256);
	CHECK_EQ(tbv_rdma_pkt_payload(full + 1, 1, full), 1);
	CHECK(!tbv_rdma_needs_split(0, TBV_RDMA_MAX_PAYLOAD));
	CHECK(tbv_rdma_needs_split(0, TBV_RDMA_MAX_PAYLOAD + 1));
	CHECK(tbv_rdma_needs_split(0, full));

	CHECK_EQ(tbv_rdma_encode(hdr, &h), TBV_RDMA_HDR_LEN + full);
	hdr[0] = TBV_FT_RDMA_SPLIT;
	CHECK_EQ(tbv_rdma_decode_split(hdr, full, full, &out), 0);
	CHECK_EQ(out.payload_len, full);
	CHECK_EQ(out.len, 3 * full);
	CHECK_EQ(out.psn, 3);

	/* the payload frame that came must be the length the header says */
	CHECK_EQ(tbv_rdma_decode_split(hdr, full - 1, full, &out), -EMSGSIZE);
	CHECK_EQ(tbv_rdma_decode_split(hdr, 0, full, &out), -EMSGSIZE);
	/* a link that does not split: a page is more than a full packet */
	CHECK_EQ(tbv_rdma_decode_split(hdr, full, TBV_RDMA_MAX_PAYLOAD, &out), -EMSGSIZE);
	/* a split header is no one-frame packet, nor the other way round */
	CHECK_EQ(tbv_rdma_decode(hdr, TBV_RDMA_HDR_LEN + full, full, &out), -EMSGSIZE);
	CHECK_EQ(tbv_rdma_decode(hdr, TBV_RDMA_HDR_LEN, full, &out), -EPROTO);
	hdr[0] = TBV_FT_RDMA;
	CHECK_EQ(tbv_rdma_decode_split(hdr, full, full, &out), -EPROTO);

	/* the full-packet rule is the link's: not a whole page, not last */
	h.payload_len = TBV_RDMA_MAX_PAYLOAD + 1;
	tbv_rdma_encode(hdr, &h);
	hdr[0] = TBV_FT_RDMA_SPLIT;
	CHECK_EQ(tbv_rdma_decode_split(hdr, h.payload_len, full, &out), -EPROTO);
	/* ...unless last */
	h = (struct tbv_rdma_hdr){ .kind = TBV_RK_READ_RESP, .flags = TBV_RF_LAST, .dst_qpn = 7,
				   .payload_len = 4050 };
	tbv_rdma_encode(hdr, &h);
	hdr[0] = TBV_FT_RDMA_SPLIT;
	CHECK_EQ(tbv_rdma_decode_split(hdr, 4050, full, &out), 0);
	/* no GID extension: the header frame is the bare header */
	hdr[5] |= TBV_RF_GRH;
	CHECK_EQ(tbv_rdma_decode_split(hdr, 4050, full, &out), -EPROTO);
	/* a payload that fits one frame with its header is never split */
	h.payload_len = TBV_RDMA_MAX_PAYLOAD;
	tbv_rdma_encode(hdr, &h);
	hdr[0] = TBV_FT_RDMA_SPLIT;
	CHECK_EQ(tbv_rdma_decode_split(hdr, TBV_RDMA_MAX_PAYLOAD, full, &out), -EMSGSIZE);
}

TEST(a_split_header_pairs_only_with_its_own_payload)
{
	static u8 a[TBV_RDMA_SPLIT_PAYLOAD], b[TBV_RDMA_SPLIT_PAYLOAD];
	u8 hdr[TBV_SPLIT_ENTRY_LEN] = { 0 };
	u32 tag, other, n = TBV_RDMA_SPLIT_PAYLOAD;

	memset(a, 'a', n);
	memset(b, 'a', n);
	b[n - 1] = 'b';				/* differs only in its last byte */
	/* every tag has payload PDFs of its own, none a typed frame's */
	for (tag = 0; tag < TBV_SPLIT_TAGS; tag++) {
		CHECK(!tbv_pdf_typed(tbv_split_sof(tag), tbv_split_eof(tag)));
		CHECK(tbv_split_sof(tag) <= 15 && tbv_split_eof(tag) <= 15);
		for (other = 0; other < tag; other++)
			CHECK(tbv_split_sof(tag) != tbv_split_sof(other) ||
			      tbv_split_eof(tag) != tbv_split_eof(other));
	}
	CHECK(tbv_pdf_typed(TBV_PDF_SOF, TBV_PDF_EOF));

	tag = 100;
	CHECK_EQ(tbv_split_encode(hdr, 0, a, a + n - TBV_SPLIT_SAMPLE), TBV_SPLIT_ENTRY_LEN);
	tbv_split_set_tag(hdr, tag);
	CHECK_EQ(hdr[0], TBV_FT_RDMA_SPLIT);
	CHECK(tbv_split_pairs(hdr, a, n, tbv_split_sof(tag), tbv_split_eof(tag)));
	/* another pair's tag, another payload (by its samples), a typed frame's PDFs */
	CHECK(!tbv_split_pairs(hdr, a, n, tbv_split_sof(tag + 1), tbv_split_eof(tag + 1)));
	CHECK(!tbv_split_pairs(hdr, b, n, tbv_split_sof(tag), tbv_split_eof(tag)));
	CHECK(!tbv_split_pairs(hdr, a, n, TBV_PDF_SOF, TBV_PDF_EOF));
	CHECK(!tbv_split_pairs(hdr, a, TBV_SPLIT_SAMPLE - 1, tbv_split_sof(tag), tbv_split_eof(tag)));
	/* a tag no sender writes */
	hdr[TBV_RDMA_HDR_LEN] = TBV_SPLIT_TAGS;
	CHECK(!tbv_split_pairs(hdr, a, n, tbv_split_sof(0), tbv_split_eof(0)));
	/* tags wrap: the one after the last is the first */
	tbv_split_set_tag(hdr, TBV_SPLIT_TAGS);
	CHECK(tbv_split_pairs(hdr, a, n, tbv_split_sof(0), tbv_split_eof(0)));
}

TEST(a_header_frame_holds_one_to_a_batch_of_entries_and_payload_pdfs_name_their_tag)
{
	u32 tag, n;

	CHECK_EQ(tbv_split_entries(0), 0);
	for (n = 1; n <= TBV_SPLIT_BATCH; n++)
		CHECK_EQ(tbv_split_entries(n * TBV_SPLIT_ENTRY_LEN), n);
	CHECK_EQ(tbv_split_entries((TBV_SPLIT_BATCH + 1) * TBV_SPLIT_ENTRY_LEN), 0);
	CHECK_EQ(tbv_split_entries(TBV_SPLIT_ENTRY_LEN - 1), 0);
	CHECK_EQ(tbv_split_entries(TBV_SPLIT_ENTRY_LEN + 1), 0);
	CHECK_EQ(tbv_split_entries(TBV_RDMA_HDR_LEN), 0);
	/* a batch fits a frame, and a held batch's tags are all different */
	CHECK(TBV_SPLIT_BATCH * TBV_SPLIT_ENTRY_LEN <= TBV_FRAME_SIZE);
	CHECK(TBV_SPLIT_TAGS > 2 * TBV_SPLIT_BATCH);
	for (tag = 0; tag < TBV_SPLIT_TAGS; tag++)
		CHECK_EQ(tbv_split_tag(tbv_split_sof(tag), tbv_split_eof(tag)), (int)tag);
	CHECK_EQ(tbv_split_tag(TBV_PDF_SOF, TBV_PDF_EOF), -1);
	CHECK_EQ(tbv_split_tag(3, 2), -1);
	CHECK_EQ(tbv_split_tag(16, 3), -1);
	CHECK_EQ(tbv_split_tag(3, 16), -1);
	CHECK_EQ(tbv_split_tag(0, 0), -1);
}
