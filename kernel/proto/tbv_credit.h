/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Software credits for one rail and one direction: a sender never has more
 * frames on the way than the receiver has RX buffers posted, with no help from
 * the controller (its end-to-end flow control stalls or wedges on some
 * silicon). Agreed at login (TBV_CAP_CREDITS); docs/wire-protocol.md.
 *
 * Everything is a count of frames since the rail started, compared modulo
 * 2^32. It rests on two facts about a rail:
 *
 *  - a ring delivers in order, and a frame that finds no buffer is lost
 *    without taking one;
 *  - the receiver posts every buffer again as soon as it has reaped it
 *    (tbv_rail_poll() copies the data out first), flagged frames' included.
 *
 * So once the receiver has reaped R frames, the frame numbered s (counting
 * from 0) finds a buffer if s < R + capacity, whatever else was lost: the
 * receiver advertises limit = R + capacity in a credit frame every
 * capacity / 4 frames it reaps, and the sender sends a frame only below it.
 * Frames above the limit are allowed to credit frames only; they may be lost,
 * but never take a buffer a frame below the limit needs.
 *
 * Frames lost on the way (the virtual cable's faults; a drop on silicon) leave
 * R behind the frames sent, so the limit shrinks: a sender that stays starved
 * sends a credit request carrying its own count s, and only with no other
 * frame of it still to be queued, so every frame before the request is on the
 * wire ahead of it. When the receiver reaps the request, every earlier frame
 * was reaped or lost: R = s + 1, exactly, and it answers.
 *
 * On a link that loses nothing the receiver's advertisements always come (a
 * starved sender has used up a limit, so the receiver has at least three
 * quarters of a ring to announce once it reaps), and a request is needed only
 * when the receiver is stopped or slow. So the first request goes within the
 * limit (the reserve) and finds a buffer; only if nothing comes back does the
 * sender ask again beyond the limit, where a request may find no buffer and be
 * dropped: from the TBV_CREDIT_OVER_FIRST_TICK-th tick on, 2, 4, 8, ... ticks
 * apart, at most TBV_CREDIT_OVER_MAX_TICKS, so a stopped receiver's controller
 * drops a few requests (the sender counts them), never a data frame. A link that
 * duplicates or reorders frames (USB4 paths do neither; the virtual cable's
 * faults do) makes R too large: the limit then overcommits by as many frames,
 * and a frame may be lost as without credits (RC resends it); a limit beyond
 * anything the sender could have is refused, and the next request puts R
 * right again.
 */
#ifndef TBV_CREDIT_H
#define TBV_CREDIT_H

#include "tbv_types.h"

/* Credits data frames leave to credit frames, so advertisements get through. */
#define TBV_CREDIT_RESERVE	1
/* Starved, the request-timer tick of the first request beyond the limit ... */
#define TBV_CREDIT_OVER_FIRST_TICK	4
/* ... and the most ticks between two of them. */
#define TBV_CREDIT_OVER_MAX_TICKS	100

struct tbv_credit_tx {
	u32 sent;		/* frames sent on this rail (the next frame's number) */
	u32 limit;		/* the receiver's latest limit */
	u32 peer_capacity;	/* RX buffers the peer's ring holds */
	u32 starved_ticks;	/* request-timer ticks since credits last came */
	u32 over_next;		/* the tick a request beyond the limit may go at */
	u32 over_gap;		/* ticks to wait after the next one */
};

struct tbv_credit_rx {
	u32 capacity;		/* RX buffers our ring holds */
	u32 reaped;		/* frames reaped (R) */
	u32 advertised;		/* the limit the peer was last told */
	bool answer_owed;	/* a credit request was reaped and not answered */
};

/*
 * The buffers an RX ring of @ring_size descriptors holds: one less, because
 * the NHI keeps one descriptor empty to tell a full ring from an empty one.
 * Ring sizes are at least 16 (tbv_login_check_params()).
 */
u32 tbv_credit_capacity(u32 ring_size);

void tbv_credit_tx_init(struct tbv_credit_tx *tx, u32 peer_capacity);
void tbv_credit_rx_init(struct tbv_credit_rx *rx, u32 capacity);

/* Frames below the limit not yet sent (negative: beyond it, by credit frames). */
static inline int32_t tbv_credit_tx_left(const struct tbv_credit_tx *tx)
{
	return (int32_t)(tx->limit - tx->sent);
}

/*
 * May a credit frame go now, with @unqueued data frames counted before it and
 * not yet queued? Within the limit always: every frame below it has a buffer,
 * in any order. Beyond it (an answer to a starved peer) only with none: it
 * would reach the peer ahead of them and take the buffer one of them was
 * counted for, so a data frame would find none.
 */
static inline bool tbv_credit_tx_frame_may_go(const struct tbv_credit_tx *tx, u32 unqueued)
{
	return !unqueued || tbv_credit_tx_left(tx) > 0;
}

/* Data frames (NET, RDMA) that may be sent now. */
static inline u32 tbv_credit_tx_data_room(const struct tbv_credit_tx *tx)
{
	int32_t left = tbv_credit_tx_left(tx);

	return left > TBV_CREDIT_RESERVE ? (u32)(left - TBV_CREDIT_RESERVE) : 0;
}

/* Count @n frames about to be queued; returns the first one's number. */
static inline u32 tbv_credit_tx_take(struct tbv_credit_tx *tx, u32 n)
{
	u32 first = tx->sent;

	tx->sent += n;
	return first;
}

/*
 * A limit from the receiver: 1 if it grants more than we had (the requests'
 * back-off starts again), 0 if stale (not beyond the one we have: reordered,
 * or the peer had nothing new), -EPROTO if impossible (more than a ring beyond
 * what we sent: counts went wrong, e.g. duplicated frames, or the peer lies):
 * ignored, the caller counts it.
 */
int tbv_credit_tx_update(struct tbv_credit_tx *tx, u32 limit);

/* The request timer ticked while the sender was starved. */
static inline void tbv_credit_tx_starved_tick(struct tbv_credit_tx *tx)
{
	tx->starved_ticks++;
}

/*
 * Whether a credit request may go now: within the limit always; beyond it
 * (where it may find no buffer) only once the back-off has passed.
 */
bool tbv_credit_tx_request_due(const struct tbv_credit_tx *tx);

/*
 * A request numbered @seq was queued: true if it went beyond the limit (the
 * caller counts it), which also doubles the wait before the next such one.
 */
bool tbv_credit_tx_request_sent(struct tbv_credit_tx *tx, u32 seq);

/* One frame reaped (any frame, flagged or not: its buffer is posted again). */
static inline void tbv_credit_rx_reaped(struct tbv_credit_rx *rx)
{
	rx->reaped++;
}

/*
 * A credit request numbered @seq was reaped (after tbv_credit_rx_reaped()):
 * everything before it was reaped or lost, so exactly @seq + 1 frames count.
 * Returns how many of them never came (frames on one ring arrive in order): a
 * controller without end-to-end flow control drops a frame that finds no
 * buffer posted and only a notify bit, which thunderbolt.ko keeps, says so;
 * a frame lost on the cable is the same to us. 0 if more came than the
 * request says (a duplicate; or the peer lies, and only this count suffers).
 */
u32 tbv_credit_rx_request(struct tbv_credit_rx *rx, u32 seq);

/* True if the peer should be told the limit now (buffers freed, or asked). */
bool tbv_credit_rx_should_advertise(const struct tbv_credit_rx *rx);

/* The limit to advertise now; remembered as advertised, any request answered. */
u32 tbv_credit_rx_advertise(struct tbv_credit_rx *rx);

#endif /* TBV_CREDIT_H */
