/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Resequencing the packets of one striped QP. A sender that stripes a QP over
 * several rails numbers every packet the QP sends with a transmit sequence
 * number (TSN: 32 bits, +1 per packet, from 0 when the QP is reset). A rail is
 * a FIFO, so the packets of one rail arrive in TSN order, but rails overtake
 * each other. The receiver hands a QP its packets in TSN order: a packet that
 * arrives ahead of a gap is held (at most TBV_RESEQ_WINDOW - 1 TSNs ahead)
 * until the gap fills.
 *
 * A gap's packet is known lost once the rail its chunk came on, or every
 * rail, has delivered a later TSN (rails do not reorder); otherwise the caller
 * gives up on it after a timeout (tbv_reseq_pop_any()): a rail that is only
 * behind (a busy CPU at either end) still brings it. Giving up hands over the packets after the gap, in
 * order: the QP's own PSN check then NAKs and the sender resends, as it does
 * for a frame lost on a single rail. A packet older than the next TSN (a
 * duplicate, or one given up on) is handed over at once: the PSN check deals
 * with it. Nothing here trusts the TSNs a peer sends: any value only decides
 * whether a packet is handed over now, held, or dropped as a duplicate.
 */
#ifndef TBV_RESEQ_H
#define TBV_RESEQ_H

#include "tbv_types.h"

#define TBV_RESEQ_WINDOW	256	/* TSNs a packet may be ahead of next; a power of two */
#define TBV_RESEQ_MAX_LANES	4	/* rails (TBV_MAX_RAILS) */
/*
 * A sender puts a QP's TSNs on the rails in chunks: TSNs k * CHUNK to
 * k * CHUNK + CHUNK - 1 all go on one rail (wire-protocol.md, "Striping").
 */
#define TBV_RESEQ_CHUNK		16
#define TBV_RESEQ_CHUNKS	(TBV_RESEQ_WINDOW / TBV_RESEQ_CHUNK)

struct tbv_reseq {
	u32 next;		/* the TSN the QP takes next */
	u32 held;		/* packets held */
	u32 gaps_given_up;	/* runs of missing TSNs skipped: lost, timed out, overrun */
	unsigned int lanes;	/* rails the peer stripes over */
	bool chunked;		/* the sender keeps each chunk on one lane */
	u32 seen[TBV_RESEQ_MAX_LANES];	/* per lane: 1 + the highest TSN it delivered */
	u32 chunk_tag[TBV_RESEQ_CHUNKS];	/* per chunk slot: 1 + the chunk last seen */
	u8 chunk_lane[TBV_RESEQ_CHUNKS];	/* and the lane it came on */
	void *slot[TBV_RESEQ_WINDOW];	/* slot[tsn % WINDOW]: a held packet */
};

enum tbv_reseq_verdict {
	TBV_RESEQ_NOW,		/* the next TSN, or an old one: hand it over now */
	TBV_RESEQ_HOLD,		/* ahead of a gap: tbv_reseq_hold() it, or drop it */
	TBV_RESEQ_DUP,		/* a packet with this TSN is held already: drop it */
	TBV_RESEQ_FAR,		/* beyond the window: tbv_reseq_skip_to() it */
};

/*
 * A reset QP: nothing held (release them first with tbv_reseq_pop_any()).
 * @chunked: the sender keeps chunks of TBV_RESEQ_CHUNK TSNs on one lane, so a
 * gap is known lost as soon as the lane its chunk came on has passed it.
 */
void tbv_reseq_init(struct tbv_reseq *rs, unsigned int lanes, bool chunked);

/* Packet @tsn arrived on @lane (< lanes): what to do with it. */
enum tbv_reseq_verdict tbv_reseq_arrive(struct tbv_reseq *rs, u32 tsn, unsigned int lane);

/* Hold @pkt, which tbv_reseq_arrive() answered TBV_RESEQ_HOLD for. */
void tbv_reseq_hold(struct tbv_reseq *rs, u32 tsn, void *pkt);

/*
 * The next packet to hand over in order, or NULL: a held packet at next, or,
 * past gaps known lost, the first one after them. Call after every arrival
 * until NULL (an arrival can prove a gap lost).
 */
void *tbv_reseq_pop(struct tbv_reseq *rs);

/* Give up on the gap at next: the first held packet after it, or NULL if none is held. */
void *tbv_reseq_pop_any(struct tbv_reseq *rs);

/*
 * A packet arrived TBV_RESEQ_FAR ahead: give up on everything before @tsn.
 * Returns the held packets before it one at a time, in order, then NULL with
 * next == @tsn (so @tsn is then handed over, and next moves past it).
 */
void *tbv_reseq_skip_to(struct tbv_reseq *rs, u32 tsn);

/* The packet handed over now (verdict NOW, or after skip_to) had TSN @tsn. */
void tbv_reseq_taken(struct tbv_reseq *rs, u32 tsn);

/*
 * The sender's side, after it gave up on its packets in flight (an RC resend,
 * or a duplicate request that says the peer resends): the TSN its next packet
 * takes, given the TSN it would have taken (@next_tsn). A chunk boundary a
 * whole window ahead, so the receiver finds it TBV_RESEQ_FAR and gives up at
 * once on every gap before it: a resend numbered after a gap would otherwise
 * be held behind that gap until the receiver's timeout.
 */
u32 tbv_reseq_restart_tsn(u32 next_tsn);

/*
 * The sender's side: the rail for a QP's next chunk of packets, given what
 * each of @n rails can take now (@room) and the rail of the last chunk
 * (@cur): the one with most room, the first after @cur on a tie, so equal
 * rails take turns and a rail whose frames leave slower gets fewer chunks.
 * With @n of 0 or 1: rail 0.
 */
unsigned int tbv_stripe_pick_rail(const u32 *room, unsigned int n, unsigned int cur);

#endif /* TBV_RESEQ_H */
