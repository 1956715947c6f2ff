// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Software credits (kernel/proto/tbv_credit.c) and the credit frame. */
#include <stdlib.h>
#include "tbv_test.h"
#include "../../kernel/proto/tbv_credit.h"
#include "../../kernel/proto/tbv_frame.h"

TEST(credit_capacity_is_one_less_than_the_ring)
{
	CHECK_EQ(tbv_credit_capacity(16), 15);
	CHECK_EQ(tbv_credit_capacity(256), 255);
}

TEST(credit_sender_stops_at_the_limit_keeping_the_reserve)
{
	struct tbv_credit_tx tx;
	u32 i;

	tbv_credit_tx_init(&tx, 8);
	CHECK_EQ(tbv_credit_tx_data_room(&tx), 8 - TBV_CREDIT_RESERVE);
	for (i = 0; i < 8 - TBV_CREDIT_RESERVE; i++)
		CHECK_EQ(tbv_credit_tx_take(&tx, 1), i);
	CHECK_EQ(tbv_credit_tx_data_room(&tx), 0);
	CHECK_EQ(tbv_credit_tx_left(&tx), TBV_CREDIT_RESERVE);	/* for a credit frame */
	tbv_credit_tx_take(&tx, 2);				/* beyond: requests may */
	CHECK_EQ(tbv_credit_tx_left(&tx), -1);
	CHECK_EQ(tbv_credit_tx_data_room(&tx), 0);
}

TEST(credit_sender_ignores_stale_and_refuses_impossible_limits)
{
	struct tbv_credit_tx tx;

	tbv_credit_tx_init(&tx, 8);
	CHECK_EQ(tbv_credit_tx_update(&tx, 8), 0);		/* not news */
	CHECK_EQ(tbv_credit_tx_update(&tx, 7), 0);		/* stale (reordered) */
	CHECK_EQ(tx.limit, 8);
	CHECK_EQ(tbv_credit_tx_update(&tx, 9), -EPROTO);	/* frees a buffer we never used */
	tbv_credit_tx_take(&tx, 2);
	CHECK_EQ(tbv_credit_tx_update(&tx, 10), 1);
	CHECK_EQ(tbv_credit_tx_data_room(&tx), 8 - TBV_CREDIT_RESERVE);
	CHECK_EQ(tbv_credit_tx_update(&tx, 0x80000010u), 0);	/* "behind" modulo 2^32 */
	CHECK_EQ(tbv_credit_tx_update(&tx, 0x7fffffffu), -EPROTO);
	CHECK_EQ(tx.limit, 10);
}

TEST(credit_counts_wrap_around)
{
	struct tbv_credit_tx tx;
	struct tbv_credit_rx rx;

	tbv_credit_tx_init(&tx, 15);
	tbv_credit_rx_init(&rx, 15);
	tx.sent = 0xfffffff0u;
	tx.limit = 0xfffffff0u + 15;
	rx.reaped = 0xfffffff0u;
	rx.advertised = tx.limit;
	tbv_credit_tx_take(&tx, 14);
	CHECK_EQ(tbv_credit_tx_left(&tx), 1);
	for (int i = 0; i < 14; i++)
		tbv_credit_rx_reaped(&rx);
	CHECK(tbv_credit_rx_should_advertise(&rx));
	CHECK_EQ(tbv_credit_tx_update(&tx, tbv_credit_rx_advertise(&rx)), 1);
	CHECK_EQ(tbv_credit_tx_left(&tx), 15);
	CHECK(tx.limit < 0x100u);				/* wrapped */
}

TEST(credit_receiver_advertises_once_a_quarter_ring_is_free)
{
	struct tbv_credit_rx rx;

	tbv_credit_rx_init(&rx, 16);
	CHECK(!tbv_credit_rx_should_advertise(&rx));
	tbv_credit_rx_reaped(&rx);
	tbv_credit_rx_reaped(&rx);
	tbv_credit_rx_reaped(&rx);
	CHECK(!tbv_credit_rx_should_advertise(&rx));
	tbv_credit_rx_reaped(&rx);
	CHECK(tbv_credit_rx_should_advertise(&rx));
	CHECK_EQ(tbv_credit_rx_advertise(&rx), 20);
	CHECK(!tbv_credit_rx_should_advertise(&rx));
}

TEST(credit_request_resynchronises_the_count_and_is_answered)
{
	struct tbv_credit_rx rx;

	tbv_credit_rx_init(&rx, 16);
	/* frames 0..9 sent, 3 of them lost: 7 reaped, then request 10 */
	for (int i = 0; i < 8; i++)
		tbv_credit_rx_reaped(&rx);
	CHECK_EQ(tbv_credit_rx_request(&rx, 10), 3);
	CHECK(tbv_credit_rx_should_advertise(&rx));		/* even with nothing freed */
	CHECK_EQ(tbv_credit_rx_advertise(&rx), 11 + 16);
	CHECK(!tbv_credit_rx_should_advertise(&rx));
	/* a duplicate made the count too large: the request lowers it again */
	for (int i = 0; i < 5; i++)
		tbv_credit_rx_reaped(&rx);
	CHECK_EQ(tbv_credit_rx_request(&rx, 14), 0);
	CHECK_EQ(tbv_credit_rx_advertise(&rx), 15 + 16);
}

TEST(credit_frame_roundtrip_and_rejects)
{
	struct tbv_credit_frame c = { .flags = TBV_CREDIT_F_REQUEST, .seq = 0xdeadbeef,
				      .limit = 0x01020304 }, d;
	u8 f[TBV_FRAME_SIZE];

	CHECK_EQ(tbv_credit_frame_encode(f, &c), TBV_CREDIT_FRAME_LEN);
	CHECK_EQ(tbv_frame_type(f, TBV_CREDIT_FRAME_LEN), TBV_FT_CREDIT);
	CHECK_EQ(tbv_credit_frame_decode(f, TBV_CREDIT_FRAME_LEN, &d), 0);
	CHECK_EQ(d.flags, c.flags);
	CHECK_EQ(d.seq, c.seq);
	CHECK_EQ(d.limit, c.limit);
	CHECK_EQ(tbv_credit_frame_decode(f, TBV_CREDIT_FRAME_LEN - 1, &d), -EMSGSIZE);
	CHECK_EQ(tbv_credit_frame_decode(f, TBV_CREDIT_FRAME_LEN + 1, &d), -EMSGSIZE);
	f[1] = 0x02;						/* unknown flag */
	CHECK_EQ(tbv_credit_frame_decode(f, TBV_CREDIT_FRAME_LEN, &d), -EPROTO);
	f[1] = 0;
	f[2] = 9;						/* payload length */
	CHECK_EQ(tbv_credit_frame_decode(f, TBV_CREDIT_FRAME_LEN, &d), -EPROTO);
	f[2] = 8;
	f[0] = TBV_FT_NET;
	CHECK_EQ(tbv_credit_frame_decode(f, TBV_CREDIT_FRAME_LEN, &d), -EPROTO);
}

/*
 * A rail in one direction, step by step: the sender queues data frames onto a
 * wire that delivers in order, late, losing or duplicating some; the
 * receiver's ring holds `capacity` buffers and drops a frame that finds none;
 * its NAPI reaps late and in bursts; limits come back in credit frames over a
 * second wire that is late and lossy too. A sender starved for a while sends
 * a request as the kernel's request timer does (beyond the limit, backed off).
 */
struct sim_frame {
	u32 seq;
	bool request;
	bool within;		/* sent below the limit the sender had */
};

struct sim_result {
	u64 data_sent, data_reaped, drops_within, drops_beyond, requests, bad_limits;
};

#define SIM_Q 4096

static u32 sim_rand(u64 *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (u32)(*s >> 33);
}

static bool sim_chance(u64 *s, u32 ppm)
{
	return ppm && sim_rand(s) % 1000000 < ppm;
}

static void sim_run(u32 capacity, u32 loss_ppm, u32 dup_ppm, bool honour_credits, u64 seed,
		    u32 steps, struct sim_result *r)
{
	static struct sim_frame wire[SIM_Q], ring[SIM_Q];
	static u32 back[SIM_Q];
	u32 wh = 0, wt = 0, rh = 0, rt = 0, bh = 0, bt = 0, starved = 0, ring_used = 0;
	struct tbv_credit_tx tx;
	struct tbv_credit_rx rx;
	u64 s = seed;

	memset(r, 0, sizeof(*r));
	tbv_credit_tx_init(&tx, capacity);
	tbv_credit_rx_init(&rx, capacity);
	for (u32 step = 0; step < steps; step++) {
		u32 burst = sim_rand(&s) % 8;

		/* sender: data while credits last, else a request once starved long enough */
		for (u32 i = 0; i < burst && wt - wh < SIM_Q - 2; i++) {
			struct sim_frame f = { 0 };

			if (honour_credits && !tbv_credit_tx_data_room(&tx)) {
				if (++starved < 200)
					break;
				starved = 0;
				tbv_credit_tx_starved_tick(&tx);
				if (!tbv_credit_tx_request_due(&tx))
					break;
				f.request = true;
				r->requests++;
			}
			f.within = tbv_credit_tx_left(&tx) > 0;
			f.seq = tbv_credit_tx_take(&tx, 1);
			if (f.request)
				tbv_credit_tx_request_sent(&tx, f.seq);
			if (!f.request)
				r->data_sent++;
			if (sim_chance(&s, loss_ppm))
				continue;
			wire[wt++ % SIM_Q] = f;
			if (sim_chance(&s, dup_ppm))
				wire[wt++ % SIM_Q] = f;
		}
		/* wire -> ring, in order; no buffer: lost */
		for (u32 n = sim_rand(&s) % 6; n && wh != wt; n--) {
			struct sim_frame f = wire[wh++ % SIM_Q];

			if (ring_used == capacity) {
				if (f.within)
					r->drops_within++;
				else
					r->drops_beyond++;
				continue;
			}
			ring_used++;
			ring[rt++ % SIM_Q] = f;
		}
		/* NAPI, sometimes late, reaps a burst and reposts each buffer */
		if (sim_rand(&s) % 3 == 0) {
			for (u32 n = sim_rand(&s) % 12; n && rh != rt; n--) {
				struct sim_frame f = ring[rh++ % SIM_Q];

				ring_used--;
				tbv_credit_rx_reaped(&rx);
				if (f.request)
					tbv_credit_rx_request(&rx, f.seq);
				else
					r->data_reaped++;
			}
			if (tbv_credit_rx_should_advertise(&rx)) {
				u32 limit = tbv_credit_rx_advertise(&rx);

				if (!sim_chance(&s, loss_ppm) && bt - bh < SIM_Q)
					back[bt++ % SIM_Q] = limit;
			}
		}
		/* limits come back, late */
		for (u32 n = sim_rand(&s) % 2; n && bh != bt; n--) {
			int ret = tbv_credit_tx_update(&tx, back[bh++ % SIM_Q]);

			if (ret < 0)
				r->bad_limits++;
			if (ret > 0)
				starved = 0;
		}
	}
}

TEST(credit_simulation_no_frame_within_the_limit_is_ever_dropped)
{
	static const u32 capacities[] = { 15, 31, 255 };
	struct sim_result r;

	for (unsigned int i = 0; i < TBV_ARRAY_SIZE(capacities); i++) {
		sim_run(capacities[i], 0, 0, true, 1 + i, 200000, &r);
		CHECK_EQ(r.drops_within, 0);
		CHECK_EQ(r.drops_beyond, 0);
		CHECK_EQ(r.bad_limits, 0);
		CHECK(r.data_reaped > 100000);			/* it moves */
		CHECK(r.data_sent - r.data_reaped <= capacities[i]);
	}
}

TEST(credit_simulation_losses_are_resolved_by_requests)
{
	struct sim_result r;

	/* 2 % of frames and limits lost: leaked credits come back through requests */
	for (u64 seed = 1; seed <= 4; seed++) {
		sim_run(31, 20000, 0, true, seed, 200000, &r);
		CHECK_EQ(r.drops_within, 0);
		CHECK_EQ(r.bad_limits, 0);
		CHECK(r.requests > 0);
		CHECK(r.data_reaped > 50000);			/* never stuck for good */
	}
}

TEST(credit_simulation_duplicates_are_refused_then_resynchronised)
{
	struct sim_result r;

	sim_run(31, 0, 20000, true, 7, 200000, &r);
	CHECK(r.bad_limits > 0);				/* noticed */
	CHECK(r.requests > 0);
	CHECK(r.data_reaped > 50000);				/* and recovered each time */
}

TEST(credit_simulation_detects_a_sender_without_credits)
{
	struct sim_result r;

	/* the model can fail: ignoring credits overruns the ring */
	sim_run(31, 0, 0, false, 3, 20000, &r);
	CHECK(r.drops_beyond + r.drops_within > 0);
}

/*
 * A starved sender's requests: the first within the limit (the reserve), then
 * beyond it only after TBV_CREDIT_OVER_FIRST_TICK ticks and ever further apart,
 * so a stopped receiver gets a few, not one per tick; a limit that grants
 * credits starts the back-off again.
 */
TEST(credit_requests_beyond_the_limit_back_off)
{
	static const u32 want[] = { 1, 4, 6, 10, 18, 34, 66, 130, 230, 330, 430 };
	struct tbv_credit_tx tx;
	u32 sent[TBV_ARRAY_SIZE(want) + 1], n = 0, tick;

	tbv_credit_tx_init(&tx, 8);
	tbv_credit_tx_take(&tx, 8 - TBV_CREDIT_RESERVE);	/* data up to the reserve */
	for (tick = 1; tick <= 450; tick++) {
		tbv_credit_tx_starved_tick(&tx);
		if (!tbv_credit_tx_request_due(&tx))
			continue;
		if (n < TBV_ARRAY_SIZE(sent))
			sent[n] = tick;
		n++;
		/* the first goes within the limit; every later one beyond it */
		CHECK_EQ(tbv_credit_tx_request_sent(&tx, tbv_credit_tx_take(&tx, 1)), n > 1);
	}
	CHECK_EQ(n, TBV_ARRAY_SIZE(want));
	for (u32 i = 0; i < TBV_ARRAY_SIZE(want) && i < n; i++)
		CHECK_EQ(sent[i], want[i]);
	/* credits came: the next starved spell starts over */
	CHECK_EQ(tbv_credit_tx_update(&tx, tx.sent + 4), 1);
	tbv_credit_tx_take(&tx, 4);
	tbv_credit_tx_starved_tick(&tx);
	CHECK(!tbv_credit_tx_request_due(&tx));			/* no reserve left, tick 1 */
	for (tick = 2; tick < TBV_CREDIT_OVER_FIRST_TICK; tick++) {
		tbv_credit_tx_starved_tick(&tx);
		CHECK(!tbv_credit_tx_request_due(&tx));
	}
	tbv_credit_tx_starved_tick(&tx);
	CHECK(tbv_credit_tx_request_due(&tx));
}
