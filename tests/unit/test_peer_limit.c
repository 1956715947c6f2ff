// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>

#include "tbv_test.h"
#include "../../kernel/proto/tbv_peer_limit.h"

TEST(log_limit_lets_a_few_lines_through_per_window)
{
	struct tbv_log_limit l = {};
	u32 suppressed = 99, allowed = 0, i;

	for (i = 0; i < 1000; i++)
		allowed += tbv_log_limit_allow(&l, 1000 + i, &suppressed);
	CHECK_EQ(allowed, TBV_PEER_LOG_LINES);
	/* still within the window: nothing */
	CHECK(!tbv_log_limit_allow(&l, 1000 + TBV_PEER_LOG_WINDOW_MS - 1, &suppressed));
	/* the next window's first line reports what was suppressed */
	CHECK(tbv_log_limit_allow(&l, 1000 + TBV_PEER_LOG_WINDOW_MS, &suppressed));
	CHECK_EQ(suppressed, 1000 - TBV_PEER_LOG_LINES + 1);
	CHECK(tbv_log_limit_allow(&l, 1000 + TBV_PEER_LOG_WINDOW_MS + 1, &suppressed));
	CHECK_EQ(suppressed, 0);
}

TEST(log_limit_starts_at_any_time)
{
	struct tbv_log_limit l = {};
	u32 suppressed = 99;

	CHECK(tbv_log_limit_allow(&l, 0, &suppressed));
	CHECK_EQ(suppressed, 0);
}

TEST(churn_backs_off_a_peer_that_keeps_tearing_down)
{
	static const u32 want[] = { 0, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000,
				    60000 };
	struct tbv_churn c = {};
	u64 now = 5000;
	unsigned int i;

	for (i = 0; i < TBV_ARRAY_SIZE(want); i++) {
		u32 delay = tbv_churn_teardown(&c, now);

		/* the window rule may ask for more than the back-off, never less */
		CHECK(delay >= want[i]);
		if (i < TBV_CHURN_MAX - 1 || i > TBV_CHURN_MAX)
			CHECK_EQ(delay, want[i]);
		now += delay + 100;	/* our login, a bring-up, and the peer strikes again */
	}
}

TEST(churn_forgets_after_a_quiet_window)
{
	struct tbv_churn c = {};

	CHECK_EQ(tbv_churn_teardown(&c, 0), 0);
	CHECK_EQ(tbv_churn_teardown(&c, 10), TBV_CHURN_BACKOFF_MS);
	CHECK_EQ(tbv_churn_teardown(&c, 2000), 2 * TBV_CHURN_BACKOFF_MS);
	/* left alone for a minute after our login could start: a restart, not a storm */
	CHECK_EQ(tbv_churn_teardown(&c, 4000 + TBV_CHURN_WINDOW_MS - 1), 4 * TBV_CHURN_BACKOFF_MS);
	CHECK_EQ(tbv_churn_teardown(&c, 8000 + 2 * TBV_CHURN_WINDOW_MS), 0);
	CHECK_EQ(c.streak, 1);
}

/*
 * A hostile peer that forces each teardown as soon as our login lets it, or
 * later: no window holds more than TBV_CHURN_MAX of them, over hours.
 */
TEST(churn_bounds_teardowns_per_window)
{
	static u64 times[20000];
	unsigned int n = 0, i, j, seed;

	for (seed = 1; seed <= 20; seed++) {
		struct tbv_churn c = {};
		u64 now = seed * 7;

		srand(seed);
		n = 0;
		while (now < 4ull * 3600 * 1000 && n < TBV_ARRAY_SIZE(times)) {
			u32 delay = tbv_churn_teardown(&c, now);

			times[n++] = now;
			/* the peer waits between 0 and a little over a window, mostly briefly */
			now += delay + (rand() % 4 ? rand() % 50 : rand() % (TBV_CHURN_WINDOW_MS + 5000));
		}
		for (i = 0; i < n; i++) {
			for (j = i; j < n && times[j] < times[i] + TBV_CHURN_WINDOW_MS; j++)
				;
			CHECK(j - i <= TBV_CHURN_MAX);
		}
	}
	CHECK(n > 100);
}

TEST(probe_refusals_over_the_threshold_mark_a_window_once)
{
	struct tbv_probe_watch w = {};
	u32 i, marked = 0;

	for (i = 0; i < TBV_PROBE_MAX; i++)
		marked += tbv_probe_refusal(&w, 500);
	CHECK_EQ(marked, 0);
	CHECK(tbv_probe_refusal(&w, 500 + TBV_PROBE_WINDOW_MS - 1));
	for (i = 0; i < 10000; i++)
		marked += tbv_probe_refusal(&w, 600);
	CHECK_EQ(marked, 0);
	/* a new window counts afresh */
	for (i = 0; i <= TBV_PROBE_MAX; i++)
		marked += tbv_probe_refusal(&w, 500 + TBV_PROBE_WINDOW_MS);
	CHECK_EQ(marked, 1);
}

TEST(probe_refusals_at_a_steady_low_rate_are_not_probing)
{
	struct tbv_probe_watch w = {};
	u64 now = 0;
	u32 i, marked = 0;

	/* TBV_PROBE_MAX a second, for a minute */
	for (i = 0; i < 60 * TBV_PROBE_MAX; i++, now += TBV_PROBE_WINDOW_MS / TBV_PROBE_MAX)
		marked += tbv_probe_refusal(&w, now);
	CHECK_EQ(marked, 0);
}
