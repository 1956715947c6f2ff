/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Bounds on what a peer's control messages can make a link do. A peer may log
 * in as a new session, offer what we refuse, or log out as often as it likes:
 * each time we answer, but we need neither say so in the log every time nor
 * rebuild our devices at the peer's pace. Times are milliseconds of a
 * monotonic clock, given by the caller.
 */
#ifndef TBV_PEER_LIMIT_H
#define TBV_PEER_LIMIT_H

#include "tbv_types.h"

/* Lines about what the peer did: at most this many per window, per link. */
#define TBV_PEER_LOG_WINDOW_MS		60000
#define TBV_PEER_LOG_LINES		5

struct tbv_log_limit {
	bool started;
	u64 window_start;
	u32 lines;		/* logged in this window */
	u32 suppressed;		/* not logged since the last line that was */
};

/*
 * May a line be logged at @now? If so, *@suppressed says how many were not
 * since the last one that was (to be reported with it).
 */
bool tbv_log_limit_allow(struct tbv_log_limit *l, u64 now, u32 *suppressed);

/*
 * Teardowns the peer forces (a new session, a refusal or a LOGOUT while our
 * devices are up or coming up). The first costs nothing; each further one makes
 * our next login wait TBV_CHURN_BACKOFF_MS, doubling, up to
 * TBV_CHURN_BACKOFF_MAX_MS, until the peer leaves the link alone for a window
 * after that wait; and never so little that more than TBV_CHURN_MAX teardowns
 * could fall in one window (a teardown needs our login first).
 */
#define TBV_CHURN_WINDOW_MS		60000
#define TBV_CHURN_MAX			6
#define TBV_CHURN_BACKOFF_MS		1000
#define TBV_CHURN_BACKOFF_MAX_MS	60000

struct tbv_churn {
	u64 at[TBV_CHURN_MAX];	/* the latest teardowns, a ring; at[next] is the oldest */
	u32 next;
	u32 count;		/* teardowns recorded, up to TBV_CHURN_MAX */
	u32 streak;		/* teardowns in a row (no quiet window between) */
	u64 free_at;		/* when the last one let our login start again */
};

/* The peer forced a teardown at @now: how long our next login must wait (ms). */
u32 tbv_churn_teardown(struct tbv_churn *c, u64 now);

/*
 * Requests our UC responders refused (key, PD, range or rights). UC has no
 * NAK, so a peer could guess rkeys without limit and without a trace; more
 * than TBV_PROBE_MAX refusals within TBV_PROBE_WINDOW_MS is taken as probing.
 */
#define TBV_PROBE_WINDOW_MS		1000
#define TBV_PROBE_MAX			100

struct tbv_probe_watch {
	bool started;
	u64 window_start;
	u32 refusals;		/* in this window */
};

/*
 * One more refusal at @now: true for the one that takes its window past
 * TBV_PROBE_MAX (so once per window at most).
 */
bool tbv_probe_refusal(struct tbv_probe_watch *w, u64 now);

#endif /* TBV_PEER_LIMIT_H */
