// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The bring-up self-check: calibration frames and their judgement. */
#include "tbv_test.h"
#include "../../kernel/proto/tbv_calib.h"
#include "../../kernel/proto/tbv_rdma.h"

static u8 frame[TBV_FRAME_SIZE + 8];

/* Frame @index of a round from a peer with @seed, on @rail. */
static u32 calib_frame(unsigned int rail, unsigned int index, bool split, u32 seed, u8 round,
		       u8 flags, struct tbv_calib_spec *s)
{
	struct tbv_calib_hdr h = { .flags = flags, .rail = rail, .index = index, .round = round,
				   .count = tbv_calib_count(split), .seed = seed };

	tbv_calib_spec(index, s);
	h.size = s->size;
	return tbv_calib_encode(frame, &h);
}

/* A whole round into @r, each frame through @deliver's mangling. */
static void calib_round(struct tbv_calib_rx *r, bool split, u32 seed, u8 round, u32 cut)
{
	unsigned int i;

	for (i = 0; i < tbv_calib_count(split); i++) {
		struct tbv_calib_spec s;
		u32 len = calib_frame(r->rail, i, split, seed, round, 0, &s);

		if (cut && len > cut) {
			CHECK(tbv_calib_rx_frame(r, frame, cut, s.sof, s.eof, true));
			CHECK(tbv_calib_rx_frame(r, frame + cut, len - cut, s.sof, s.eof,
						 tbv_pdf_typed(s.sof, s.eof)));
		} else {
			CHECK(tbv_calib_rx_frame(r, frame, len, s.sof, s.eof, true));
		}
	}
}

/* A fresh judgement of one plain round cut at 256 bytes: judged, failed. */
static void cut_round(struct tbv_calib_rx *r, unsigned int rail, u32 seed, u8 round)
{
	tbv_calib_rx_init(r, rail, false);
	calib_round(r, false, seed, round, 256);
	CHECK(r->judged);
	CHECK(!r->plain_ok);
}

/* A fresh judgement that took frame 0 of seed 5's round 0, received with SOF @sof. */
static void first_frame(struct tbv_calib_rx *r, bool split, u8 sof)
{
	struct tbv_calib_spec s;
	u32 len;

	tbv_calib_rx_init(r, 0, split);
	len = calib_frame(0, 0, split, 5, 0, 0, &s);
	CHECK(tbv_calib_rx_frame(r, frame, len, sof, 2, true));
}

TEST(calib_sizes_and_pdfs)
{
	struct tbv_calib_spec s;

	tbv_calib_spec(0, &s);
	CHECK_EQ(s.size, TBV_CALIB_HDR_LEN);
	tbv_calib_spec(5, &s);
	CHECK_EQ(s.size, TBV_FRAME_SIZE);
	CHECK(tbv_pdf_typed(s.sof, s.eof));
	tbv_calib_spec(6, &s);
	CHECK(s.split);
	CHECK(tbv_split_tag(s.sof, s.eof) >= 0);
	CHECK(!tbv_pdf_typed(s.sof, s.eof));
	CHECK_EQ(tbv_calib_count(false), 6);
	CHECK_EQ(tbv_calib_count(true), 8);
}

TEST(calib_encode_decode)
{
	struct tbv_calib_hdr h;
	struct tbv_calib_spec s;
	u32 len = calib_frame(2, 4, false, 0x12345678, 9, TBV_CALIB_F_JUDGED, &s);

	CHECK_EQ(len, 4095);
	CHECK_EQ(tbv_calib_decode(frame, len, &h), 0);
	CHECK_EQ(h.rail, 2);
	CHECK_EQ(h.index, 4);
	CHECK_EQ(h.round, 9);
	CHECK_EQ(h.seed, 0x12345678);
	CHECK_EQ(h.size, 4095);
	CHECK_EQ(h.flags, TBV_CALIB_F_JUDGED);
	/* lies are refused */
	CHECK(tbv_calib_decode(frame, TBV_CALIB_HDR_LEN - 1, &h) < 0);
	frame[5] = 6;			/* index beyond the count */
	CHECK(tbv_calib_decode(frame, len, &h) < 0);
	frame[5] = 4;
	frame[7] = 7;			/* no round has 7 frames */
	CHECK(tbv_calib_decode(frame, len, &h) < 0);
	frame[7] = 6;
	frame[1] = 0x80;		/* unknown flags */
	CHECK(tbv_calib_decode(frame, len, &h) < 0);
	frame[1] = 0;
	tbv_put_le16(frame + 2, TBV_FRAME_SIZE);	/* longer than a frame */
	CHECK(tbv_calib_decode(frame, len, &h) < 0);
	frame[0] = TBV_FT_CREDIT;
	CHECK(tbv_calib_decode(frame, len, &h) < 0);
}

TEST(calib_healthy_rail_passes)
{
	struct tbv_calib_rx r;
	unsigned int i;

	tbv_calib_rx_init(&r, 1, true);
	CHECK_EQ(tbv_calib_rx_flags(&r), 0);
	calib_round(&r, true, 0xabcdef01, 0, 0);
	CHECK(r.judged);
	CHECK(r.plain_ok);
	CHECK(r.split_ok);
	CHECK_EQ(tbv_calib_rx_first_bad(&r), -1);
	CHECK_EQ(tbv_calib_rx_flags(&r),
		 TBV_CALIB_F_JUDGED | TBV_CALIB_F_PLAIN_OK | TBV_CALIB_F_SPLIT_OK);
	for (i = 0; i < 8; i++) {
		CHECK_EQ(r.obs[i].npieces, 1);
		CHECK_EQ(r.obs[i].pieces[0], r.obs[i].sent);
	}
	/* a later round is taken (the peer did not hear our verdict yet) but changes nothing */
	calib_round(&r, true, 0xabcdef01, 1, 0);
	CHECK(r.plain_ok);
	CHECK_EQ(r.stray, 8);
}

TEST(calib_padding_passes_more_fails)
{
	struct tbv_calib_rx r;
	struct tbv_calib_spec s;
	unsigned int i;
	u32 len;

	for (i = 0; i < 2; i++) {
		tbv_calib_rx_init(&r, 0, false);
		len = calib_frame(0, 0, false, 7, 0, 0, &s);
		CHECK(tbv_calib_rx_frame(&r, frame, len, 1, 2, true));
		len = calib_frame(0, 1, false, 7, 0, 0, &s);	/* 255 */
		frame[255] = frame[256] = frame[257] = frame[258] = 0xee;
		CHECK(tbv_calib_rx_frame(&r, frame, len + (i ? 4 : 1), 1, 2, true));
		CHECK(r.obs[1].done);
		CHECK_EQ(r.obs[1].ok, !i);
	}
}

TEST(calib_cut_frames_fail_and_say_how)
{
	struct tbv_calib_rx r;

	cut_round(&r, 1, 99, 3);
	CHECK_EQ(tbv_calib_rx_first_bad(&r), 3);	/* 257 bytes: 256 + 1 */
	CHECK_EQ(r.obs[3].npieces, 2);
	CHECK_EQ(r.obs[3].pieces[0], 256);
	CHECK_EQ(r.obs[3].pieces[1], 1);
	CHECK(!r.obs[3].bytes_bad);		/* the bytes are right, the framing is not */
	CHECK(r.obs[2].ok);
	CHECK_EQ(r.obs[5].pieces[0], 256);
	CHECK_EQ(r.obs[5].pieces[1], 3840);
	CHECK_EQ(r.frames, 9);
}

TEST(calib_split_frames_cut_fail_only_split)
{
	struct tbv_calib_rx r;
	struct tbv_calib_spec s;
	unsigned int i;

	tbv_calib_rx_init(&r, 0, true);
	for (i = 0; i < 8; i++) {
		u32 len = calib_frame(0, i, true, 5, 0, 0, &s);

		if (s.split) {
			/* as a controller with the split PDFs in its EOF mask: 256-byte packets */
			u32 off;

			for (off = 0; off < len; off += 256)
				CHECK(tbv_calib_rx_frame(&r, frame + off, TBV_MIN(256u, len - off),
							 s.sof, s.eof, !off));
		} else {
			CHECK(tbv_calib_rx_frame(&r, frame, len, s.sof, s.eof, true));
		}
	}
	CHECK(r.judged);
	CHECK(r.plain_ok);
	CHECK(!r.split_ok);
	CHECK_EQ(r.obs[6].npieces, 16);
	CHECK_EQ(r.obs[6].total, 4096);
}

TEST(calib_split_pdfs_checked_only_where_read)
{
	struct tbv_calib_rx r;

	first_frame(&r, false, 0);	/* SOF 0: fine unread */
	CHECK(r.obs[0].ok);
	first_frame(&r, true, 0);
	CHECK(!r.obs[0].ok);
	CHECK(r.obs[0].pdf_bad);
}

TEST(calib_missing_merged_and_wrong_bytes)
{
	struct tbv_calib_rx r;
	struct tbv_calib_spec s;
	u32 len;

	first_frame(&r, false, 1);
	/* frame 1 lost; frame 2 merged with frame 3 */
	len = calib_frame(0, 2, false, 5, 0, 0, &s);
	CHECK(tbv_calib_rx_frame(&r, frame, len + 257, 1, 2, true));
	len = calib_frame(0, 4, false, 5, 0, 0, &s);
	frame[1000] ^= 1;
	CHECK(tbv_calib_rx_frame(&r, frame, len, 1, 2, true));
	tbv_calib_rx_finish(&r);	/* frame 5 never came */
	CHECK(r.judged);
	CHECK(!r.plain_ok);
	CHECK(r.obs[0].ok);
	CHECK_EQ(r.obs[1].npieces, 0);
	CHECK_EQ(r.obs[2].pieces[0], 256 + 257);
	CHECK(!r.obs[2].ok);
	CHECK_EQ(r.obs[3].npieces, 0);
	CHECK(r.obs[4].bytes_bad);
	CHECK_EQ(r.obs[5].npieces, 0);
}

TEST(calib_round_joined_late_and_garbage)
{
	struct tbv_calib_rx r;
	struct tbv_calib_spec s;
	u32 len;
	unsigned int i;

	tbv_calib_rx_init(&r, 0, false);
	/* the tail of a round we missed the start of, then garbage: not judged */
	len = calib_frame(0, 3, false, 5, 0, 0, &s);
	CHECK(tbv_calib_rx_frame(&r, frame, 100, 1, 2, true));
	CHECK(tbv_calib_rx_frame(&r, frame + 100, len - 100, 1, 2, false));	/* its tail */
	CHECK(!tbv_calib_rx_frame(&r, frame, 50, 1, 2, false));		/* someone else's */
	frame[0] = TBV_FT_NET;
	CHECK(!tbv_calib_rx_frame(&r, frame, len, 1, 2, true));
	for (i = 0; i < 1000; i++) {
		u32 j;

		for (j = 0; j < 64; j++)
			frame[j] = (u8)(i * 31 + j * 7);
		frame[0] = TBV_FT_CALIB;
		tbv_calib_rx_frame(&r, frame, 64, 1, 2, true);
	}
	CHECK(!r.judged);
	/* the next whole round is judged */
	calib_round(&r, false, 6, 1, 0);
	CHECK(r.judged);
	CHECK(r.plain_ok);
	tbv_calib_rx_finish(&r);
	CHECK(r.plain_ok);
}

TEST(calib_peer_verdict_from_flags)
{
	struct tbv_calib_rx r;
	struct tbv_calib_spec s;
	u32 len;

	tbv_calib_rx_init(&r, 0, false);
	len = calib_frame(0, 0, false, 5, 0, TBV_CALIB_F_JUDGED | TBV_CALIB_F_SPLIT_OK, &s);
	CHECK(tbv_calib_rx_frame(&r, frame, len, 1, 2, true));
	CHECK(r.peer_judged);
	CHECK(!r.peer_plain_ok);
	CHECK(r.peer_split_ok);
	/* nothing came at all: not judged, so not passed */
	tbv_calib_rx_init(&r, 0, false);
	tbv_calib_rx_finish(&r);
	CHECK(!r.judged);
	CHECK_EQ(tbv_calib_rx_flags(&r), 0);
}

TEST(calib_a_new_seed_is_judged_afresh)
{
	struct tbv_calib_rx r;

	cut_round(&r, 0, 5, 0);
	CHECK_EQ(r.rounds_judged, 1);
	/* the same peer's later rounds change nothing */
	calib_round(&r, false, 5, 1, 0);
	CHECK(!r.plain_ok);
	CHECK_EQ(r.rounds_judged, 1);
	/* a new bring-up of the peer's (a new seed): its round is judged */
	calib_round(&r, false, 6, 0, 0);
	CHECK(r.judged);
	CHECK(r.plain_ok);
	CHECK_EQ(r.rounds_judged, 2);
	CHECK_EQ(r.stray, 6);
	CHECK_EQ(r.frames, 6 + 3 + 6 + 6);
}

TEST(calib_a_peer_waiting_for_our_verdict_is_seen)
{
	struct tbv_calib_rx r;
	struct tbv_calib_spec s;
	u32 len;

	tbv_calib_rx_init(&r, 0, false);
	calib_round(&r, false, 5, 0, 0);
	CHECK(!r.peer_waiting);		/* the round that was judged */
	len = calib_frame(0, 0, false, 5, 1, 0, &s);
	CHECK(tbv_calib_rx_frame(&r, frame, len, 1, 2, true));
	CHECK(r.peer_waiting);		/* it sends again: it did not hear us */
	len = calib_frame(0, 0, false, 5, 2, TBV_CALIB_F_JUDGED | TBV_CALIB_F_PLAIN_OK, &s);
	CHECK(tbv_calib_rx_frame(&r, frame, len, 1, 2, true));
	CHECK(!r.peer_waiting);
	CHECK(r.peer_judged && r.peer_plain_ok);
}
