// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "tbv_peer_limit.h"

bool tbv_log_limit_allow(struct tbv_log_limit *l, u64 now, u32 *suppressed)
{
	if (!l->started || now - l->window_start >= TBV_PEER_LOG_WINDOW_MS) {
		l->started = true;
		l->window_start = now;
		l->lines = 0;
	}
	if (l->lines >= TBV_PEER_LOG_LINES) {
		if (l->suppressed < 0xffffffffu)
			l->suppressed++;
		return false;
	}
	l->lines++;
	*suppressed = l->suppressed;
	l->suppressed = 0;
	return true;
}

bool tbv_probe_refusal(struct tbv_probe_watch *w, u64 now)
{
	if (!w->started || now - w->window_start >= TBV_PROBE_WINDOW_MS) {
		w->started = true;
		w->window_start = now;
		w->refusals = 0;
	}
	if (w->refusals < 0xffffffffu)
		w->refusals++;
	return w->refusals == TBV_PROBE_MAX + 1;
}

u32 tbv_churn_teardown(struct tbv_churn *c, u64 now)
{
	u64 delay = 0, oldest;

	/* a window left alone after our login could start again ends the streak */
	if (!c->count || now >= c->free_at + TBV_CHURN_WINDOW_MS)
		c->streak = 0;
	if (c->streak) {
		u32 shift = TBV_MIN(c->streak - 1, 16u);

		delay = TBV_MIN((u64)TBV_CHURN_BACKOFF_MS << shift, (u64)TBV_CHURN_BACKOFF_MAX_MS);
	}
	c->streak++;

	c->at[c->next] = now;
	c->next = (c->next + 1) % TBV_CHURN_MAX;
	if (c->count < TBV_CHURN_MAX)
		c->count++;
	/* with TBV_CHURN_MAX recorded, the next may come only a window after the oldest */
	if (c->count == TBV_CHURN_MAX) {
		oldest = c->at[c->next];
		if (oldest + TBV_CHURN_WINDOW_MS > now + delay)
			delay = oldest + TBV_CHURN_WINDOW_MS - now;
	}
	c->free_at = now + delay;
	return (u32)delay;
}
