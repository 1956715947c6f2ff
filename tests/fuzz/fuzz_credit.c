// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Software credits on one rail, both ends at once (kernel/proto/tbv_credit.c),
 * driven as kernel/tbv_flow.c and tbv_rail.c drive them, in an order the bytes
 * choose: producers count data frames (one, or a packet's fragments) while
 * the credits and the TX pool allow, and queue or give them back later; the
 * controller moves frames into the peer's posted buffers in order and drops
 * what finds none; NAPI reaps, re-posts and advertises; the request timer
 * ticks while a producer starves. tests/unit/test_credit_model.c runs the same
 * rules on random schedules; this runs them on the fuzzer's, with, if the
 * first byte allows, frames lost or duplicated on the way and credit frames a
 * hostile peer makes up. Checked throughout:
 *
 *  - tbv_credit_tx_update() accepts a limit only if it is newer and at most
 *    sent + capacity, refuses (-EPROTO) only a newer one beyond that, and
 *    changes nothing otherwise;
 *  - no data frame and no advertisement is numbered at or beyond the limit:
 *    only requests (after the back-off, ticks apart as it says) and answers
 *    are, and the sender is never further beyond its limit than they account
 *    for; an end answers no more often than it was asked;
 *  - the counts stay bounded: the back-off's gap, a limit at most a ring (and
 *    what producers may give back) beyond the frames sent.
 *
 * With nothing lost, duplicated or made up: no data frame and no credit frame
 * sent within the limit ever finds no buffer, no limit is refused, and a
 * request's count is never below the frames the receiver reaped before it
 * (equal to them while nothing toward it was dropped). The input format is in
 * fuzz.h (FUZZ_CREDIT_*).
 */
#include "fuzz.h"
#include "tbv_credit.h"

#define WIRE_CAP	2048	/* more than any TX pool */
#define BATCHES		4	/* producers with frames counted, not yet queued */

enum kind { DATA, ADVERT, ANSWER, REQUEST };

struct frame {
	u8 kind;
	bool within;		/* numbered below the sender's limit */
	bool forged;		/* made up by a hostile peer */
	u32 seq, limit;
};

struct fifo {
	struct frame f[WIRE_CAP];
	u32 head, tail;
};

struct end {
	struct tbv_credit_tx tx;	/* toward the peer */
	struct tbv_credit_rx rx;	/* our ring */
	u32 capacity;			/* our ring's buffers, and our TX pool */
	struct fifo wire;		/* queued toward the peer, not yet delivered */
	struct fifo ring;		/* in our posted buffers, not reaped */
	u32 batch[BATCHES];		/* data frames each producer counted */
	u32 unqueued, wanted;
	u64 over, requests_over, answers_over, requests_reaped, answers;
	u64 over_since_fed;		/* requests beyond the limit since credits last came */
	u32 last_over_tick;
	bool dropped_toward;		/* a frame toward this end found no buffer or was lost */
};

static struct end ends[2];
static bool lossy, dups, forging;
static u64 dropped_data, dropped_within, limits_refused;

static u32 fifo_len(const struct fifo *q)
{
	return q->tail - q->head;
}

static void fifo_push(struct fifo *q, struct frame f)
{
	FUZZ_CHECK(fifo_len(q) < WIRE_CAP);
	q->f[q->tail++ % WIRE_CAP] = f;
}

static struct frame fifo_pop(struct fifo *q)
{
	return q->f[q->head++ % WIRE_CAP];
}

static bool clean(void)
{
	return !lossy && !dups && !forging;
}

/* TX frames free: the pool, less the counted and the queued (TX completion: delivered). */
static u32 tx_nfree(const struct end *e)
{
	return e->capacity - e->unqueued - fifo_len(&e->wire);
}

static void check_bounds(const struct end *e)
{
	int32_t beyond = (int32_t)(e->tx.sent - e->tx.limit);

	FUZZ_CHECK(e->tx.over_gap >= 2 && e->tx.over_gap <= TBV_CREDIT_OVER_MAX_TICKS);
	/* a limit is at most a ring beyond the frames sent, and ungot frames lower the count */
	FUZZ_CHECK(-beyond <= (int32_t)(e->tx.peer_capacity + BATCHES));
	/* beyond it only by the requests and answers that may go there */
	FUZZ_CHECK(beyond <= 0 || (u64)beyond <= e->over);
	FUZZ_CHECK(e->over == e->requests_over + e->answers_over);
	FUZZ_CHECK(e->answers <= e->requests_reaped);
}

/* tbv_flow_send(): a credit frame, if it may go now. */
static bool send_credit(struct end *e, enum kind kind)
{
	struct frame f = { .kind = kind };

	if (!tx_nfree(e))
		return false;
	if (kind == ADVERT && tbv_credit_tx_left(&e->tx) <= 0)
		return false;
	if (!tbv_credit_tx_frame_may_go(&e->tx, e->unqueued))
		return false;
	if (kind == REQUEST) {
		if (e->unqueued || !tbv_credit_tx_request_due(&e->tx))
			return false;
		f.limit = e->rx.advertised;
	} else {
		f.limit = tbv_credit_rx_advertise(&e->rx);
	}
	f.within = tbv_credit_tx_left(&e->tx) > 0;
	f.seq = tbv_credit_tx_take(&e->tx, 1);
	if (kind == REQUEST) {
		u32 gap = e->tx.over_gap;
		bool over = tbv_credit_tx_request_sent(&e->tx, f.seq);

		FUZZ_CHECK(over == !f.within);
		if (over) {
			/* the back-off: not before its first tick, then ever further apart */
			FUZZ_CHECK(e->tx.starved_ticks >= TBV_CREDIT_OVER_FIRST_TICK);
			FUZZ_CHECK(!e->over_since_fed || e->tx.starved_ticks - e->last_over_tick >= 2);
			FUZZ_CHECK(e->tx.over_next == e->tx.starved_ticks + gap);
			e->last_over_tick = e->tx.starved_ticks;
			e->over_since_fed++;
			e->requests_over++;
		}
	} else if (kind == ANSWER) {
		e->answers++;
		e->answers_over += !f.within;
	}
	FUZZ_CHECK(kind != ADVERT || f.within);
	e->over += !f.within;
	fifo_push(&e->wire, f);
	return true;
}

/* A producer counts @n data frames, if the pool and the credits allow (tbv_flow_tx_room()). */
static void produce(struct end *e, unsigned int b, u32 n)
{
	if (e->batch[b])
		return;
	if (TBV_MIN(tx_nfree(e), tbv_credit_tx_data_room(&e->tx)) < n) {
		/* tbv_flow_tx_starved(): the timer will ask */
		if (tbv_credit_tx_data_room(&e->tx) < n)
			e->wanted = TBV_MAX(e->wanted, n);
		return;
	}
	tbv_credit_tx_take(&e->tx, n);
	FUZZ_CHECK(tbv_credit_tx_left(&e->tx) >= TBV_CREDIT_RESERVE);
	e->batch[b] = n;
	e->unqueued += n;
}

/* A producer queues its frames (producers race: any order), or gives its one frame back. */
static void queue(struct end *e, unsigned int b, bool give_back)
{
	u32 i;

	if (!e->batch[b])
		return;
	if (give_back && e->batch[b] == 1) {
		tbv_credit_tx_take(&e->tx, -1);		/* tbv_frame_unget() */
	} else {
		for (i = 0; i < e->batch[b]; i++)
			fifo_push(&e->wire, (struct frame){ .kind = DATA, .within = true });
	}
	e->unqueued -= e->batch[b];
	e->batch[b] = 0;
}

/* The peer's controller: a posted buffer, or the frame is lost. */
static void arrive(struct end *to, struct frame f)
{
	if (fifo_len(&to->ring) < to->capacity) {
		fifo_push(&to->ring, f);
		return;
	}
	to->dropped_toward = true;
	if (f.kind == DATA)
		dropped_data++;
	else if (f.within && !f.forged)
		dropped_within++;
}

static void deliver(struct end *from, struct end *to, u32 n)
{
	while (n-- && fifo_len(&from->wire))
		arrive(to, fifo_pop(&from->wire));
}

/* tbv_flow_rx(): a credit frame reaped. */
static void credit_rx(struct end *e, const struct frame *f)
{
	u32 old = e->tx.limit, reach = e->tx.sent + e->tx.peer_capacity;
	int ret;

	if (f->kind == REQUEST) {
		/* every frame before it was reaped or lost: never more reaped than sent before it */
		if (clean()) {
			FUZZ_CHECK((int32_t)(f->seq + 1 - e->rx.reaped) >= 0);
			if (!e->dropped_toward)
				FUZZ_CHECK(f->seq + 1 == e->rx.reaped);
		}
		e->requests_reaped++;
		tbv_credit_rx_request(&e->rx, f->seq);
	}
	ret = tbv_credit_tx_update(&e->tx, f->limit);
	if (ret > 0) {
		FUZZ_CHECK((int32_t)(f->limit - old) > 0 && (int32_t)(f->limit - reach) <= 0);
		FUZZ_CHECK(e->tx.limit == f->limit);
		FUZZ_CHECK(e->tx.starved_ticks == 0 && e->tx.over_gap == 2);
		e->over_since_fed = 0;
	} else {
		FUZZ_CHECK(e->tx.limit == old);
		if (ret < 0)
			FUZZ_CHECK((int32_t)(f->limit - old) > 0 && (int32_t)(f->limit - reach) > 0);
		else
			FUZZ_CHECK((int32_t)(f->limit - old) <= 0);
	}
	if (ret < 0)
		limits_refused++;
	if (ret > 0 && tbv_credit_tx_data_room(&e->tx) >= e->wanted)
		e->wanted = 0;
}

/* tbv_rail_poll(): reap up to @n frames, each buffer posted again, then tbv_flow_rx_done(). */
static void napi(struct end *e, u32 n)
{
	while (n-- && fifo_len(&e->ring)) {
		struct frame f = fifo_pop(&e->ring);

		tbv_credit_rx_reaped(&e->rx);
		if (f.kind != DATA)
			credit_rx(e, &f);
	}
	if (tbv_credit_rx_should_advertise(&e->rx))
		send_credit(e, e->rx.answer_owed ? ANSWER : ADVERT);
}

/* tbv_flow_timer(): starved, so tick and ask; or credits came meanwhile. */
static void tick(struct end *e)
{
	if (!e->wanted || tbv_credit_tx_data_room(&e->tx) >= e->wanted) {
		e->wanted = 0;
		return;
	}
	tbv_credit_tx_starved_tick(&e->tx);
	send_credit(e, REQUEST);
}

static const u32 ring_sizes[4] = { 16, 32, 64, 256 };

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct fuzz_in in = { data, size };
	u8 cfg = 0, op, b[FUZZ_CREDIT_FORGED_LEN];
	unsigned int i;

	fuzz_take(&in, &cfg, 1);
	lossy = cfg & FUZZ_CREDIT_LOSSY;
	dups = cfg & FUZZ_CREDIT_DUPS;
	forging = cfg & FUZZ_CREDIT_FORGING;
	dropped_data = dropped_within = limits_refused = 0;
	memset(ends, 0, sizeof(ends));
	for (i = 0; i < 2; i++) {
		u32 ring = ring_sizes[(cfg >> (FUZZ_CREDIT_RING_BITS * i)) & 3];

		ends[i].capacity = tbv_credit_capacity(ring);
	}
	for (i = 0; i < 2; i++) {
		tbv_credit_tx_init(&ends[i].tx, ends[!i].capacity);
		tbv_credit_rx_init(&ends[i].rx, ends[i].capacity);
	}

	while (fuzz_take(&in, &op, 1)) {
		bool far_end = op & FUZZ_CREDIT_END;
		struct end *e = &ends[far_end], *peer = &ends[!far_end];
		u32 arg = (op >> FUZZ_CREDIT_ARG_SHIFT) & 7;

		switch (op & 15) {
		case FUZZ_CREDIT_PRODUCE_ONE:
			produce(e, arg % BATCHES, 1);
			break;
		case FUZZ_CREDIT_PRODUCE_MANY:
			produce(e, arg % BATCHES, 1 + 2 * arg);
			break;
		case FUZZ_CREDIT_QUEUE:
		case FUZZ_CREDIT_GIVE_BACK:
			queue(e, arg % BATCHES, (op & 15) == FUZZ_CREDIT_GIVE_BACK);
			break;
		case FUZZ_CREDIT_DELIVER:
		case FUZZ_CREDIT_DELIVER + 1:
		case FUZZ_CREDIT_DELIVER + 2:
			deliver(e, peer, 1 + arg * 4);
			break;
		case FUZZ_CREDIT_NAPI:
		case FUZZ_CREDIT_NAPI + 1:
			napi(e, 1 + arg * 8);
			break;
		case FUZZ_CREDIT_TICK:
			tick(e);
			break;
		case FUZZ_CREDIT_LOSE:
			if (lossy && fifo_len(&e->wire)) {
				fifo_pop(&e->wire);
				peer->dropped_toward = true;
			}
			break;
		case FUZZ_CREDIT_DUPLICATE:
			if (dups && fifo_len(&e->wire) && fifo_len(&e->wire) < WIRE_CAP) {
				struct frame f = e->wire.f[e->wire.head % WIRE_CAP];

				arrive(peer, f);
			}
			break;
		case FUZZ_CREDIT_FORGE:
			if (forging && fuzz_take(&in, b, sizeof(b)) == sizeof(b))
				arrive(e, (struct frame){ .kind = b[0] & 1 ? REQUEST : ADVERT,
					  .forged = true, .seq = tbv_get_le32(b + 1),
					  .limit = tbv_get_le32(b + 5) });
			break;
		default:	/* FUZZ_CREDIT_SETTLE: time passes, everything moves */
			deliver(e, peer, WIRE_CAP);
			napi(peer, WIRE_CAP);
			break;
		}
		check_bounds(&ends[0]);
		check_bounds(&ends[1]);
		if (clean())
			FUZZ_CHECK(!dropped_data && !dropped_within && !limits_refused);
	}
	return 0;
}
