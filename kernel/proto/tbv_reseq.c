// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Resequencing of a striped QP's packets (tbv_reseq.h). TSNs compare modulo
 * 2^32; a slot holds the packet whose TSN is next + 1 .. next + WINDOW - 1.
 */
#include "tbv_reseq.h"

static int32_t tbv_tsn_diff(u32 a, u32 b)
{
	return (int32_t)(a - b);
}

static void **tbv_reseq_slot(struct tbv_reseq *rs, u32 tsn)
{
	return &rs->slot[tsn & (TBV_RESEQ_WINDOW - 1)];
}

void tbv_reseq_init(struct tbv_reseq *rs, unsigned int lanes, bool chunked)
{
	memset(rs, 0, sizeof(*rs));
	rs->lanes = TBV_MIN(TBV_MAX(lanes, 1u), (unsigned int)TBV_RESEQ_MAX_LANES);
	rs->chunked = chunked;
}

static u32 tbv_reseq_chunk_slot(u32 chunk)
{
	return chunk & (TBV_RESEQ_CHUNKS - 1);
}

enum tbv_reseq_verdict tbv_reseq_arrive(struct tbv_reseq *rs, u32 tsn, unsigned int lane)
{
	int32_t ahead = tbv_tsn_diff(tsn, rs->next);
	u32 chunk = tsn / TBV_RESEQ_CHUNK;

	if (lane < rs->lanes) {
		if (tbv_tsn_diff(tsn + 1, rs->seen[lane]) > 0)
			rs->seen[lane] = tsn + 1;
		rs->chunk_tag[tbv_reseq_chunk_slot(chunk)] = chunk + 1;
		rs->chunk_lane[tbv_reseq_chunk_slot(chunk)] = lane;
	}
	if (ahead <= 0)
		return TBV_RESEQ_NOW;
	if (ahead >= TBV_RESEQ_WINDOW)
		return TBV_RESEQ_FAR;
	return *tbv_reseq_slot(rs, tsn) ? TBV_RESEQ_DUP : TBV_RESEQ_HOLD;
}

void tbv_reseq_hold(struct tbv_reseq *rs, u32 tsn, void *pkt)
{
	*tbv_reseq_slot(rs, tsn) = pkt;
	rs->held++;
}

/*
 * next moved on: a lane that delivered nothing since is just behind it now.
 * seen[] is compared with next modulo 2^32: left 2^31 or more behind (next
 * skipped that far, or a lane idle that long) it would read as ahead, as if
 * the lane had passed every gap, and gaps would be given up on too soon.
 */
static void tbv_reseq_moved(struct tbv_reseq *rs)
{
	unsigned int l;

	for (l = 0; l < rs->lanes; l++)
		if (tbv_tsn_diff(rs->seen[l], rs->next) < 0)
			rs->seen[l] = rs->next;
}

void tbv_reseq_taken(struct tbv_reseq *rs, u32 tsn)
{
	if (tsn == rs->next) {
		rs->next++;
		tbv_reseq_moved(rs);
	}
}

/* @lane delivered a TSN after the gap at next. */
static bool tbv_reseq_lane_passed(const struct tbv_reseq *rs, unsigned int lane)
{
	return tbv_tsn_diff(rs->seen[lane], rs->next + 1) > 0;
}

/*
 * The packet at next was lost: the lane its chunk came on has delivered a
 * later TSN, or, where no packet of its chunk came yet, every lane has.
 */
static bool tbv_reseq_gap_lost(const struct tbv_reseq *rs)
{
	u32 chunk = rs->next / TBV_RESEQ_CHUNK, slot = tbv_reseq_chunk_slot(chunk);
	unsigned int l;

	if (rs->chunked && rs->chunk_tag[slot] == chunk + 1)
		return tbv_reseq_lane_passed(rs, rs->chunk_lane[slot]);
	for (l = 0; l < rs->lanes; l++)
		if (!tbv_reseq_lane_passed(rs, l))
			return false;
	return true;
}

/* Take the packet at next, if held, and move past it. */
static void *tbv_reseq_take_next(struct tbv_reseq *rs)
{
	void **slot = tbv_reseq_slot(rs, rs->next);
	void *pkt = *slot;

	if (pkt) {
		*slot = NULL;
		rs->held--;
		rs->next++;
	}
	return pkt;
}

/* The next held packet in order, past gaps known lost (or any gap, with @give_up). */
static void *tbv_reseq_next_held(struct tbv_reseq *rs, bool give_up)
{
	bool skipped = false;
	void *pkt = NULL;

	while (rs->held) {
		pkt = tbv_reseq_take_next(rs);
		if (pkt || !(give_up || tbv_reseq_gap_lost(rs)))
			break;
		rs->next++;
		skipped = true;
	}
	rs->gaps_given_up += skipped;
	tbv_reseq_moved(rs);
	return pkt;
}

void *tbv_reseq_pop(struct tbv_reseq *rs)
{
	return tbv_reseq_next_held(rs, false);
}

void *tbv_reseq_pop_any(struct tbv_reseq *rs)
{
	return tbv_reseq_next_held(rs, true);
}

void *tbv_reseq_skip_to(struct tbv_reseq *rs, u32 tsn)
{
	bool skipped = false;
	void *pkt = NULL;

	while (tbv_tsn_diff(tsn, rs->next) > 0) {
		if (!rs->held) {
			rs->next = tsn;
			skipped = true;
			break;
		}
		pkt = tbv_reseq_take_next(rs);
		if (pkt)
			break;
		rs->next++;
		skipped = true;
	}
	rs->gaps_given_up += skipped;
	tbv_reseq_moved(rs);
	return pkt;
}

u32 tbv_reseq_restart_tsn(u32 next_tsn)
{
	u32 tsn = next_tsn + TBV_RESEQ_WINDOW + TBV_RESEQ_CHUNK - 1;

	return tsn - tsn % TBV_RESEQ_CHUNK;
}

unsigned int tbv_stripe_pick_rail(const u32 *room, unsigned int n, unsigned int cur)
{
	unsigned int best, i;

	if (n <= 1)
		return 0;
	best = (cur + 1) % n;
	for (i = 2; i <= n; i++) {
		unsigned int r = (cur + i) % n;

		if (room[r] > room[best])
			best = r;
	}
	return best;
}
