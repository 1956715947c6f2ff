// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A model of one rail between two hosts, both directions at once, driven by
 * random interleavings of what the kernel does (kernel/tbv_flow.c and
 * tbv_rail.c) with the arithmetic of kernel/proto/tbv_credit.c:
 *
 *  - producers count data frames (one, as the requester does, or a packet's
 *    fragments, as the netdev does), queue them later and in any order, or
 *    give one back unsent;
 *  - credit frames ride the same rings as data, in both directions, and take
 *    the peer's buffers: advertisements after a NAPI poll (within the limit),
 *    answers to requests (anyway), requests from the 10 ms timer (only with
 *    nothing counted unqueued; beyond the limit only as the back-off allows);
 *  - each end's controller puts arriving frames into posted buffers in order,
 *    holds up to fifo_max more while none is posted, and drops the rest;
 *  - NAPI reaps a burst, re-posts each buffer, then advertises;
 *  - a host stops now and then for a long while (its vCPUs paused: no NAPI,
 *    no producers, no timer), while its controller still takes frames.
 *
 * On a link that loses nothing, no data frame and no credit frame sent within
 * the limit may ever find no buffer: only requests and answers sent beyond it.
 */
#include "tbv_test.h"
#include "../../kernel/proto/tbv_credit.h"

#define M_Q		8192	/* FIFOs: wires, rings, controller queues */
#define M_BATCHES	64	/* producers' counted, unqueued batches */
#define M_TICK		16	/* model steps per request-timer tick */

enum m_kind { M_DATA, M_ADVERT, M_ANSWER, M_REQUEST };

struct m_frame {
	u8 kind;
	bool within;		/* numbered below the limit the sender had */
	u32 seq, limit;
};

struct m_fifo {
	struct m_frame f[M_Q];
	u32 head, tail;
};

struct m_end {
	struct tbv_credit_tx tx;	/* toward the peer */
	struct tbv_credit_rx rx;	/* our ring */
	struct m_fifo wire;		/* toward the peer, in the order queued */
	struct m_fifo ring;		/* frames in posted buffers, not reaped */
	struct m_fifo held;		/* the controller's queue: no buffer posted yet */
	u32 batch[M_BATCHES];		/* frames each producer counted, not yet queued */
	u32 unqueued, wanted;
	bool owed;			/* an advertisement waits */
	u32 stopped;			/* steps left with the host paused */
};

struct m_config {
	u32 capacity;		/* RX buffers each end advertises (tbv_credit_capacity()) */
	u32 ring;		/* RX buffers each end really has posted (capacity: a true end) */
	u32 fifo_max;		/* frames a controller holds while no buffer is posted */
	u32 pause_steps;	/* hosts pause for about this long now and then (0: never) */
	bool ask_unqueued;	/* a broken sender: requests with frames counted, unqueued */
	u32 steps;
	u64 seed;
};

struct m_stats {
	u64 data_sent, data_reaped, dropped_data, dropped_within, dropped_over;
	u64 requests, requests_over, answers_over, limits_refused, pauses, paused_ticks;
	u64 lost_seen;	/* frames the requests' numbers said never came */
};

static u32 m_rand(u64 *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (u32)(*s >> 33);
}

static u32 m_len(const struct m_fifo *q)
{
	return q->tail - q->head;
}

static void m_push(struct m_fifo *q, struct m_frame f)
{
	q->f[q->tail++ % M_Q] = f;
}

static struct m_frame m_pop(struct m_fifo *q)
{
	return q->f[q->head++ % M_Q];
}

/* A credit frame queued at once, as tbv_flow_send() does under tx_lock. */
static void m_send_credit(struct m_end *e, enum m_kind kind, struct m_stats *st)
{
	struct m_frame f = { .kind = kind };

	f.within = tbv_credit_tx_left(&e->tx) > 0;
	if (kind == M_REQUEST)
		f.limit = e->rx.advertised;
	else
		f.limit = tbv_credit_rx_advertise(&e->rx);
	f.seq = tbv_credit_tx_take(&e->tx, 1);
	if (kind == M_REQUEST) {
		st->requests++;
		st->requests_over += tbv_credit_tx_request_sent(&e->tx, f.seq);
	} else if (kind == M_ANSWER && !f.within) {
		st->answers_over++;
	}
	m_push(&e->wire, f);
}

static void m_produce(struct m_end *e, u64 *s, struct m_stats *st)
{
	u32 n = m_rand(s) % 4 ? 1 : 1 + m_rand(s) % 16, b = m_rand(s) % M_BATCHES;

	if (e->batch[b])
		return;
	if (tbv_credit_tx_data_room(&e->tx) < n) {
		e->wanted = n > e->wanted ? n : e->wanted;
		return;
	}
	tbv_credit_tx_take(&e->tx, n);
	e->batch[b] = n;
	e->unqueued += n;
	st->data_sent += n;
}

/* One producer queues its batch (producers race: any order), or gives a frame back. */
static void m_queue(struct m_end *e, u64 *s, struct m_stats *st)
{
	u32 b = m_rand(s) % M_BATCHES, i;

	if (!e->batch[b])
		return;
	if (e->batch[b] == 1 && m_rand(s) % 16 == 0) {
		tbv_credit_tx_take(&e->tx, -1);		/* tbv_frame_unget() */
		st->data_sent--;
	} else {
		for (i = 0; i < e->batch[b]; i++)
			m_push(&e->wire, (struct m_frame){ .kind = M_DATA, .within = true });
	}
	e->unqueued -= e->batch[b];
	e->batch[b] = 0;
}

/* The peer's controller takes frames off the wire: a posted buffer, its queue, or lost. */
static void m_deliver(struct m_end *from, struct m_end *to, const struct m_config *c, u64 *s,
		      struct m_stats *st)
{
	for (u32 n = m_rand(s) % 8; n && m_len(&from->wire); n--) {
		struct m_frame f = m_pop(&from->wire);

		if (!m_len(&to->held) && m_len(&to->ring) < c->ring) {
			m_push(&to->ring, f);
		} else if (m_len(&to->held) < c->fifo_max) {
			m_push(&to->held, f);
		} else if (f.kind == M_DATA) {
			st->dropped_data++;
		} else if (f.within) {
			st->dropped_within++;
		} else {
			st->dropped_over++;
		}
	}
}

/* tbv_rail_poll(): reap a burst, re-post each buffer, then tbv_flow_rx_done(). */
static void m_napi(struct m_end *e, u32 ring, u64 *s, struct m_stats *st)
{
	for (u32 n = 1 + m_rand(s) % 64; n && m_len(&e->ring); n--) {
		struct m_frame f = m_pop(&e->ring);

		tbv_credit_rx_reaped(&e->rx);
		if (f.kind == M_DATA) {
			st->data_reaped++;
			continue;
		}
		if (f.kind == M_REQUEST)
			st->lost_seen += tbv_credit_rx_request(&e->rx, f.seq);
		if (tbv_credit_tx_update(&e->tx, f.limit) < 0)
			st->limits_refused++;
		/* the controller fills the buffer just posted from its queue */
		if (m_len(&e->held) && m_len(&e->ring) < ring)
			m_push(&e->ring, m_pop(&e->held));
	}
	while (m_len(&e->held) && m_len(&e->ring) < ring)
		m_push(&e->ring, m_pop(&e->held));
	if (tbv_credit_rx_should_advertise(&e->rx) || e->owed) {
		bool answer = e->rx.answer_owed;

		e->owed = (!answer && tbv_credit_tx_left(&e->tx) <= 0) ||
			  !tbv_credit_tx_frame_may_go(&e->tx, e->unqueued);
		if (!e->owed)
			m_send_credit(e, answer ? M_ANSWER : M_ADVERT, st);
	}
}

/* tbv_flow_timer(): still starved, so tick, and ask if that may go now. */
static void m_timer(struct m_end *e, const struct m_config *c, struct m_stats *st)
{
	if (!e->wanted || tbv_credit_tx_data_room(&e->tx) >= e->wanted) {
		e->wanted = 0;
		return;
	}
	tbv_credit_tx_starved_tick(&e->tx);
	if ((!e->unqueued || c->ask_unqueued) && tbv_credit_tx_request_due(&e->tx))
		m_send_credit(e, M_REQUEST, st);
}

static void m_run(const struct m_config *c, struct m_stats *st)
{
	static struct m_end ends[2];
	u64 s = c->seed;

	memset(ends, 0, sizeof(ends));
	memset(st, 0, sizeof(*st));
	for (int i = 0; i < 2; i++) {
		tbv_credit_tx_init(&ends[i].tx, c->capacity);
		tbv_credit_rx_init(&ends[i].rx, c->capacity);
	}
	for (u32 step = 0; step < c->steps; step++) {
		for (int i = 0; i < 2; i++) {
			struct m_end *e = &ends[i], *peer = &ends[!i];

			m_deliver(e, peer, c, &s, st);
			if (e->stopped) {
				e->stopped--;
				continue;
			}
			if (c->pause_steps && m_rand(&s) % 20000 == 0) {
				e->stopped = c->pause_steps / 2 + m_rand(&s) % c->pause_steps;
				st->pauses++;
				st->paused_ticks += e->stopped / M_TICK;
			}
			switch (m_rand(&s) % 4) {
			case 0:
				m_produce(e, &s, st);
				break;
			case 1:
				m_queue(e, &s, st);
				break;
			case 2:
				if (m_rand(&s) % 3 == 0)
					m_napi(e, c->ring, &s, st);
				break;
			default:
				if (step % M_TICK == 0)
					m_timer(e, c, st);
				break;
			}
		}
	}
	printf("# model: capacity %u ring %u fifo %u: data %llu sent %llu reaped; dropped data %llu,"
	       " within %llu, over %llu; requests %llu (%llu over), answers over %llu;"
	       " %llu pauses, %llu ticks\n", c->capacity, c->ring, c->fifo_max,
	       (unsigned long long)st->data_sent, (unsigned long long)st->data_reaped,
	       (unsigned long long)st->dropped_data, (unsigned long long)st->dropped_within,
	       (unsigned long long)st->dropped_over, (unsigned long long)st->requests,
	       (unsigned long long)st->requests_over, (unsigned long long)st->answers_over,
	       (unsigned long long)st->pauses, (unsigned long long)st->paused_ticks);
}

TEST(credit_model_no_data_or_credit_within_the_limit_finds_no_buffer)
{
	static const u32 capacities[] = { 15, 63, 255 };
	struct m_stats st;

	for (unsigned int i = 0; i < TBV_ARRAY_SIZE(capacities); i++) {
		for (u64 seed = 1; seed <= 3; seed++) {
			/* no controller queue (drops at once); hosts pause for ~600 ticks */
			struct m_config c = { .capacity = capacities[i], .ring = capacities[i],
					      .pause_steps = 10000, .steps = 400000,
					      .seed = seed * 7 + i };

			m_run(&c, &st);
			CHECK_EQ(st.dropped_data, 0);
			CHECK_EQ(st.dropped_within, 0);
			CHECK_EQ(st.limits_refused, 0);
			CHECK(st.dropped_over <= st.requests_over + st.answers_over);
			CHECK(st.lost_seen <= st.dropped_over);	/* never more than were lost */
			CHECK(st.pauses > 0);
			CHECK(st.data_reaped > 5000);			/* it moves */
		}
	}
}

TEST(credit_model_a_paused_receiver_costs_a_few_requests_not_frames)
{
	struct m_config c = { .capacity = 63, .ring = 63, .pause_steps = 40000, .steps = 600000,
			      .seed = 11 };
	struct m_stats st;

	/* long pauses, no controller queue: requests beyond the limit back off */
	m_run(&c, &st);
	CHECK_EQ(st.dropped_data, 0);
	CHECK_EQ(st.dropped_within, 0);
	CHECK(st.pauses > 0);
	CHECK(st.requests_over > 0);				/* starved, it asked */
	CHECK(st.dropped_over > 0);				/* and a pause lost some */
	CHECK(st.lost_seen > 0 && st.lost_seen <= st.dropped_over); /* the receiver saw that */
	/* a request every tick of every pause would be paused_ticks; backed off, a few */
	CHECK(st.requests_over * 8 < st.paused_ticks);
	/* a controller that holds 64 frames keeps what the back-off sends in a pause */
	c.fifo_max = 64;
	m_run(&c, &st);
	CHECK(st.pauses > 0);
	CHECK_EQ(st.dropped_data + st.dropped_within + st.dropped_over, 0);
}

TEST(credit_model_can_fail)
{
	struct m_config c = { .capacity = 16, .ring = 12, .pause_steps = 10000, .steps = 200000,
			      .seed = 5 };
	struct m_stats st;

	/* an end that advertises more buffers than it posted loses frames */
	m_run(&c, &st);
	CHECK(st.dropped_data + st.dropped_within > 0);
	/* a request counted ahead of frames still to be queued overstates what was reaped */
	c.ring = 16;
	c.ask_unqueued = true;
	m_run(&c, &st);
	CHECK(st.dropped_data + st.dropped_within > 0);
}
