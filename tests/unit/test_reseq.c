// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Resequencing a striped QP's packets (kernel/proto/tbv_reseq.c). */
#include <stdint.h>
#include <stdlib.h>
#include "tbv_test.h"
#include "../../kernel/proto/tbv_reseq.h"

/* Packets are their TSN + 1 cast to a pointer (never NULL). */
#define PKT(tsn)	((void *)((uintptr_t)(tsn) + 1))
#define TSN(pkt)	((u32)((uintptr_t)(pkt) - 1u))

static struct tbv_reseq rs;

/* Everything the resequencer hands over after @tsn arrives on @lane, as in the kernel. */
static int arrive(u32 tsn, unsigned int lane, u32 *out, int n)
{
	void *p;

	switch (tbv_reseq_arrive(&rs, tsn, lane)) {
	case TBV_RESEQ_NOW:
		out[n++] = tsn;
		tbv_reseq_taken(&rs, tsn);
		break;
	case TBV_RESEQ_HOLD:
		tbv_reseq_hold(&rs, tsn, PKT(tsn));
		break;
	case TBV_RESEQ_DUP:
		return n;
	case TBV_RESEQ_FAR:
		while ((p = tbv_reseq_skip_to(&rs, tsn)))
			out[n++] = TSN(p);
		out[n++] = tsn;
		tbv_reseq_taken(&rs, tsn);
		break;
	}
	while ((p = tbv_reseq_pop(&rs)))
		out[n++] = TSN(p);
	return n;
}

TEST(reseq_in_order_packets_pass_straight_through)
{
	u32 out[8];
	int n = 0;
	u32 t;

	tbv_reseq_init(&rs, 2, false);
	for (t = 0; t < 5; t++)
		n = arrive(t, t % 2, out, n);
	CHECK_EQ(n, 5);
	for (t = 0; t < 5; t++)
		CHECK_EQ(out[t], t);
	CHECK_EQ(rs.held, 0);
	CHECK_EQ(rs.next, 5);
}

TEST(reseq_a_rail_overtaking_another_is_put_back_in_order)
{
	u32 out[16];
	int n = 0;

	tbv_reseq_init(&rs, 2, false);
	/* lane 1 carries 2, 3 and arrives before lane 0's 0, 1 */
	n = arrive(2, 1, out, n);
	n = arrive(3, 1, out, n);
	CHECK_EQ(n, 0);
	CHECK_EQ(rs.held, 2);
	n = arrive(0, 0, out, n);
	CHECK_EQ(n, 1);
	n = arrive(1, 0, out, n);
	CHECK_EQ(n, 4);
	CHECK_EQ(out[0], 0);
	CHECK_EQ(out[1], 1);
	CHECK_EQ(out[2], 2);
	CHECK_EQ(out[3], 3);
	CHECK_EQ(rs.held, 0);
	CHECK_EQ(rs.gaps_given_up, 0);
}

TEST(reseq_a_duplicate_of_a_held_packet_is_dropped)
{
	u32 out[8];
	int n = 0;

	tbv_reseq_init(&rs, 2, false);
	n = arrive(1, 1, out, n);
	CHECK_EQ(tbv_reseq_arrive(&rs, 1, 1), TBV_RESEQ_DUP);
	CHECK_EQ(rs.held, 1);
	n = arrive(0, 0, out, n);
	CHECK_EQ(n, 2);
	/* an old TSN (a duplicate already handed over) goes straight to the PSN check */
	CHECK_EQ(tbv_reseq_arrive(&rs, 0, 0), TBV_RESEQ_NOW);
	tbv_reseq_taken(&rs, 0);
	CHECK_EQ(rs.next, 2);
}

TEST(reseq_a_gap_every_rail_has_passed_is_lost)
{
	u32 out[8];
	int n = 0;

	tbv_reseq_init(&rs, 2, false);
	n = arrive(1, 1, out, n);	/* 0 missing; lane 0 has not passed it yet */
	CHECK_EQ(n, 0);
	n = arrive(2, 0, out, n);	/* lane 0 passed 0: 0 was lost on the way */
	CHECK_EQ(n, 2);
	CHECK_EQ(out[0], 1);
	CHECK_EQ(out[1], 2);
	CHECK_EQ(rs.gaps_given_up, 1);
	CHECK_EQ(rs.next, 3);
}

TEST(reseq_a_gap_one_rail_has_not_passed_waits_for_the_timeout)
{
	u32 out[8];
	int n = 0;
	void *p;

	tbv_reseq_init(&rs, 3, false);
	n = arrive(2, 1, out, n);
	n = arrive(3, 2, out, n);
	CHECK_EQ(n, 0);		/* lane 0 may still bring 0 and 1 */
	CHECK(tbv_reseq_pop(&rs) == NULL);
	p = tbv_reseq_pop_any(&rs);	/* the caller's timeout */
	CHECK(p == PKT(2));
	CHECK(tbv_reseq_pop(&rs) == PKT(3));
	CHECK(tbv_reseq_pop(&rs) == NULL);
	CHECK_EQ(rs.gaps_given_up, 1);
	CHECK_EQ(rs.next, 4);
	CHECK_EQ(rs.held, 0);
	/* the given-up packet turning up late is handed over (the PSN check drops it) */
	CHECK_EQ(tbv_reseq_arrive(&rs, 0, 0), TBV_RESEQ_NOW);
	CHECK(tbv_reseq_pop_any(&rs) == NULL);
}

/* Found by fuzz_reseq (tests/fuzz/regressions/fuzz_reseq-lane-left-far-behind). */
TEST(reseq_a_lane_left_2_31_tsns_behind_has_not_passed_a_gap)
{
	u32 out[8];
	int n = 0;

	tbv_reseq_init(&rs, 2, false);
	/* next jumps more than half the TSN space; lane 1 delivered nothing since TSN 0 */
	n = arrive(0x70000000u, 0, out, n);
	n = arrive(0xe0000000u, 0, out, n);
	CHECK_EQ(n, 2);
	CHECK_EQ(rs.next, 0xe0000001u);
	/* 0xe0000001 is missing: lane 1 may still bring it, whatever its old count says */
	n = arrive(0xe0000002u, 0, out, n);
	CHECK_EQ(n, 2);
	CHECK_EQ(rs.held, 1);
	n = arrive(0xe0000003u, 1, out, n);	/* now lane 1 passed it too: lost */
	CHECK_EQ(n, 4);
	CHECK_EQ(out[2], 0xe0000002u);
	CHECK_EQ(rs.held, 0);
}

TEST(reseq_a_packet_beyond_the_window_flushes_what_is_held)
{
	u32 out[8];
	int n = 0;

	tbv_reseq_init(&rs, 2, false);
	n = arrive(3, 1, out, n);
	n = arrive(5, 1, out, n);
	CHECK_EQ(tbv_reseq_arrive(&rs, TBV_RESEQ_WINDOW - 1, 1), TBV_RESEQ_HOLD);
	tbv_reseq_hold(&rs, TBV_RESEQ_WINDOW - 1, PKT(TBV_RESEQ_WINDOW - 1));
	n = arrive(TBV_RESEQ_WINDOW, 1, out, n);
	CHECK_EQ(n, 4);
	CHECK_EQ(out[0], 3);
	CHECK_EQ(out[1], 5);
	CHECK_EQ(out[2], TBV_RESEQ_WINDOW - 1);
	CHECK_EQ(out[3], TBV_RESEQ_WINDOW);
	CHECK_EQ(rs.next, TBV_RESEQ_WINDOW + 1);
	CHECK_EQ(rs.held, 0);
	CHECK_EQ(rs.gaps_given_up, 3);	/* 0-2, 4, 6..WINDOW-2 */
}

TEST(reseq_tsns_wrap_around)
{
	u32 out[8];
	int n = 0;

	tbv_reseq_init(&rs, 2, false);
	rs.next = 0xfffffffeu;
	rs.seen[0] = rs.seen[1] = rs.next;
	n = arrive(0, 1, out, n);		/* two ahead, across the wrap */
	n = arrive(0xffffffffu, 1, out, n);
	CHECK_EQ(n, 0);
	n = arrive(0xfffffffeu, 0, out, n);
	CHECK_EQ(n, 3);
	CHECK_EQ(out[0], 0xfffffffeu);
	CHECK_EQ(out[1], 0xffffffffu);
	CHECK_EQ(out[2], 0);
	CHECK_EQ(rs.next, 1);
}

/*
 * Striping as a sender with equal rails does it (chunks of packets per rail, in turn) over
 * FIFO lanes that deliver in random bursts, some packets lost. A lane never
 * runs more than the window ahead (the sender's own window bounds that), and
 * when every lane is held back the timeout gives up the gap. The QP sees
 * strictly increasing TSNs, every packet not lost exactly once, and without
 * loss no gap is ever given up.
 */
TEST(reseq_random_interleavings_of_fifo_rails_come_out_in_order)
{
	enum { N = 20000, LANES = 3, CHUNK = TBV_RESEQ_CHUNK };
	static u32 lane_q[LANES][N], out[N + 1];
	static bool lost[N];
	unsigned int round, qlen[LANES], head[LANES], l, lossy_timeouts[2] = { 0 };

	/* the same interleavings twice: without, then with the chunks' lanes known */
	for (round = 0; round < 40; round++) {
		unsigned int loss_pct = round % 2 ? 2 : 0, expected = 0, timeouts = 0;
		bool chunked = round >= 20;
		int n = 0, i;
		u32 t;
		void *p;

		srand(round % 20 + 1);
		tbv_reseq_init(&rs, LANES, chunked);
		for (l = 0; l < LANES; l++)
			qlen[l] = head[l] = 0;
		for (t = 0; t < N; t++) {
			l = (t / CHUNK) % LANES;
			lost[t] = (unsigned int)(rand() % 100) < loss_pct;
			if (!lost[t]) {
				lane_q[l][qlen[l]++] = t;
				expected++;
			}
		}
		for (;;) {
			unsigned int ready[LANES], nready = 0, pick;

			for (l = 0; l < LANES; l++)
				if (head[l] < qlen[l] &&
				    lane_q[l][head[l]] - rs.next < TBV_RESEQ_WINDOW - 1)
					ready[nready++] = l;
			if (!nready) {
				p = tbv_reseq_pop_any(&rs);	/* the receiver's timeout */
				if (!p)
					break;
				timeouts++;
				out[n++] = TSN(p);
				while ((p = tbv_reseq_pop(&rs)))
					out[n++] = TSN(p);
				continue;
			}
			/* a burst from one lane, as one NAPI poll delivers */
			pick = ready[rand() % nready];
			for (i = rand() % 64 + 1; i > 0 && head[pick] < qlen[pick] &&
			     lane_q[pick][head[pick]] - rs.next < TBV_RESEQ_WINDOW - 1; i--)
				n = arrive(lane_q[pick][head[pick]++], pick, out, n);
			CHECK(rs.held < TBV_RESEQ_WINDOW);
		}
		CHECK_EQ(rs.held, 0);
		CHECK_EQ(n, expected);
		for (i = 0; i < n; i++) {
			CHECK(!lost[out[i]]);
			if (i)
				CHECK(out[i] > out[i - 1]);
		}
		if (!loss_pct) {
			CHECK_EQ(rs.gaps_given_up, 0);
			CHECK_EQ(timeouts, 0);
		} else {
			CHECK(rs.gaps_given_up > 0);
			lossy_timeouts[chunked] += timeouts;
		}
	}
	/* knowing a chunk's lane proves most losses at once, with no timeout */
	CHECK(lossy_timeouts[1] * 4 < lossy_timeouts[0]);
}

/* With chunks, the lane a gap's chunk came on decides alone whether it was lost. */
TEST(reseq_a_gap_is_lost_once_its_chunks_lane_passed_it)
{
	const u32 C = TBV_RESEQ_CHUNK;
	u32 out[4 * TBV_RESEQ_CHUNK];
	int n = 0;

	tbv_reseq_init(&rs, 3, true);
	n = arrive(0, 0, out, n);			/* chunk 0 on lane 0 */
	n = arrive(C, 1, out, n);			/* chunk 1 on lane 1: 1 .. C-1 missing */
	CHECK_EQ(n, 1);
	n = arrive(2, 0, out, n);			/* lane 0 passed 1: lost */
	CHECK_EQ(n, 2);
	CHECK_EQ(out[1], 2);
	CHECK_EQ(rs.next, 3);
	CHECK_EQ(rs.gaps_given_up, 1);
	n = arrive(3, 0, out, n);
	CHECK_EQ(n, 3);
	/* lanes 1 and 2 passed 4, but chunk 0 came on lane 0, which has not: it waits */
	n = arrive(2 * C, 2, out, n);
	CHECK_EQ(n, 3);
	CHECK_EQ(rs.next, 4);
	n = arrive(4, 0, out, n);			/* it came: behind, not lost */
	CHECK_EQ(n, 4);
	CHECK_EQ(rs.gaps_given_up, 1);
	/* 5 .. C-1 never come: lane 0's next chunk proves them lost; 17 .. waits for lane 1 */
	n = arrive(3 * C, 0, out, n);
	CHECK_EQ(n, 5);
	CHECK_EQ(out[4], C);
	CHECK_EQ(rs.next, C + 1);
	n = arrive(4 * C, 1, out, n);			/* lane 1 passed chunk 1's rest */
	CHECK_EQ(n, 6);
	CHECK_EQ(out[5], 2 * C);
	n = arrive(5 * C, 2, out, n);			/* lane 2 passed chunk 2's rest */
	CHECK_EQ(n, 7);
	CHECK_EQ(out[6], 3 * C);
	CHECK_EQ(rs.next, 3 * C + 1);			/* chunk 3 is lane 0's: it waits */
	CHECK_EQ(rs.held, 2);
	CHECK_EQ(rs.gaps_given_up, 4);
}

/* A peer sending any TSNs at all: nothing held beyond the window, all released. */
/*
 * A sender that resends restarts its TSNs a window ahead: whatever the
 * receiver holds and whichever gap it waits for, the restarted packet ends
 * every wait at once and comes out after everything held, then the resends
 * after it pass in order, and late packets from before are handed over.
 */
TEST(reseq_a_restarted_sender_ends_every_wait)
{
	static const u32 starts[] = { 0, 5, 15, 16, 1000, 0xfffffff0u, 0xfffffffbu };
	u32 out[TBV_RESEQ_WINDOW + 4];
	unsigned int i;

	for (i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		u32 base = starts[i], held = base - base % TBV_RESEQ_CHUNK + TBV_RESEQ_CHUNK;
		u32 tx = held + 2, restart = tbv_reseq_restart_tsn(tx);
		int n = 0;

		CHECK_EQ(restart % TBV_RESEQ_CHUNK, 0u);	/* a new chunk */
		CHECK((int32_t)(restart - tx) >= TBV_RESEQ_WINDOW);
		CHECK((int32_t)(restart - tx) < TBV_RESEQ_WINDOW + TBV_RESEQ_CHUNK);
		tbv_reseq_init(&rs, 2, true);
		rs.next = rs.seen[0] = rs.seen[1] = base;	/* both lanes delivered up to base - 1 */
		/* base .. held - 1 lost on lane 0; the next chunk held on lane 1 */
		n = arrive(held, 1, out, n);
		n = arrive(held + 1, 1, out, n);
		CHECK_EQ(n, 0);
		CHECK_EQ(tbv_reseq_arrive(&rs, restart, 0), TBV_RESEQ_FAR);
		while (tbv_reseq_skip_to(&rs, restart))
			n++;
		tbv_reseq_taken(&rs, restart);
		CHECK_EQ(n, 2);
		CHECK_EQ(rs.held, 0u);
		CHECK_EQ(rs.next, restart + 1);
		n = arrive(restart + 1, 0, out, 0);
		CHECK_EQ(n, 1);
		CHECK_EQ(out[0], restart + 1);
		CHECK_EQ(tbv_reseq_arrive(&rs, base, 0), TBV_RESEQ_NOW);
	}
}

TEST(reseq_hostile_tsns_stay_bounded)
{
	unsigned int i, taken = 0, held_in = 0;
	void *p;

	srand(7);
	tbv_reseq_init(&rs, 4, false);
	for (i = 0; i < 100000; i++) {
		u32 tsn = (i % 3) ? rs.next + (u32)(rand() % 300) - 20u : (u32)rand() * 2654435761u;
		unsigned int lane = rand() % 6;	/* lanes beyond the count are ignored */

		switch (tbv_reseq_arrive(&rs, tsn, lane)) {
		case TBV_RESEQ_HOLD:
			tbv_reseq_hold(&rs, tsn, PKT(tsn));
			held_in++;
			break;
		case TBV_RESEQ_FAR:
			while ((p = tbv_reseq_skip_to(&rs, tsn)))
				taken++;
			CHECK_EQ(rs.next, tsn);
			tbv_reseq_taken(&rs, tsn);
			break;
		case TBV_RESEQ_NOW:
			tbv_reseq_taken(&rs, tsn);
			break;
		case TBV_RESEQ_DUP:
			break;
		}
		while ((p = tbv_reseq_pop(&rs)))
			taken++;
		CHECK(rs.held < TBV_RESEQ_WINDOW);
	}
	while ((p = tbv_reseq_pop_any(&rs)))
		taken++;
	CHECK_EQ(rs.held, 0);
	CHECK_EQ(taken, held_in);	/* every held packet came back exactly once */
}

/* The sender's rail choice: most room wins, ties go to the next rail in turn. */
TEST(stripe_pick_rail)
{
	u32 equal[4] = { 256, 256, 256, 256 };
	u32 slow1[2] = { 250, 10 };
	u32 fast2[3] = { 100, 100, 200 };
	unsigned int cur = 0, i, on_slow = 0;

	/* equal rails take turns, wrapping */
	CHECK_EQ(tbv_stripe_pick_rail(equal, 4, 0), 1u);
	CHECK_EQ(tbv_stripe_pick_rail(equal, 4, 3), 0u);
	for (i = 0; i < 8; i++)
		cur = tbv_stripe_pick_rail(equal, 4, cur);
	CHECK_EQ(cur, 0u);
	/* a rail with frames queued is passed over, from either side */
	CHECK_EQ(tbv_stripe_pick_rail(slow1, 2, 0), 0u);
	CHECK_EQ(tbv_stripe_pick_rail(slow1, 2, 1), 0u);
	/* the rail with most room, even if it is not next */
	CHECK_EQ(tbv_stripe_pick_rail(fast2, 3, 0), 2u);
	CHECK_EQ(tbv_stripe_pick_rail(fast2, 3, 2), 2u);
	/* the current rail only when it has strictly more room than all others */
	fast2[2] = 100;
	CHECK_EQ(tbv_stripe_pick_rail(fast2, 3, 2), 0u);
	/* one rail (or none): rail 0 */
	CHECK_EQ(tbv_stripe_pick_rail(slow1, 1, 0), 0u);
	CHECK_EQ(tbv_stripe_pick_rail(slow1, 0, 3), 0u);
	/*
	 * A model: rail 1 drains one frame per chunk, rail 0 all of its own; each
	 * chunk adds 16 frames to the rail chosen. The slow rail gets few chunks.
	 */
	slow1[0] = slow1[1] = 256;
	cur = 0;
	for (i = 0; i < 100; i++) {
		cur = tbv_stripe_pick_rail(slow1, 2, cur);
		slow1[cur] -= slow1[cur] >= 16 ? 16 : slow1[cur];
		on_slow += cur == 1;
		slow1[0] = 256;
		if (slow1[1] < 256)
			slow1[1]++;
	}
	CHECK(on_slow > 0 && on_slow < 10);
}
