// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A striped QP's resequencing window (kernel/proto/tbv_reseq.c), driven as
 * tbv_stripe.c drives it: every arrival is answered by its verdict (handed
 * over now, held unless no spare buffer is left, dropped, or skipped to) and
 * followed by draining what is in order; the give-up timer pops one packet
 * past the gap and drains; a reset releases everything held. Held packets are
 * heap blocks, so ASan sees one handed back twice and LSan one never handed
 * back. After every step:
 *
 *  - held <= WINDOW - 1, and equals the number of occupied slots;
 *  - every held packet sits in its TSN's slot, 1 .. WINDOW - 1 ahead of next,
 *    and the slot at next is empty (the drain took it);
 *  - a held packet is handed back exactly once, at its turn (next just passed it).
 *
 * The input's first byte chooses the lanes, chunked or not, and a mode. In
 * free mode the bytes are arrivals of any TSN on any lane (a hostile peer),
 * give-ups and resets. In sender mode they drive a sender that numbers its
 * packets in order, puts each chunk of TBV_RESEQ_CHUNK on one lane, and lanes
 * that are FIFOs and may lose packets, delivered only while in the window, as
 * the sender's window keeps them: then every arrival is handed over, in
 * strictly increasing TSN order, nothing is a duplicate or far ahead, and on a
 * run that lost nothing everything sent and delivered is handed over. The
 * input format is in fuzz.h (FUZZ_RESEQ_*, FUZZ_SEND_*).
 */
#include "fuzz.h"
#include "tbv_reseq.h"

#define W		TBV_RESEQ_WINDOW
#define PKT_MAGIC	0x70c4e7u
#define LANE_CAP	8192	/* more packets than any input can send */

struct fuzz_pkt {
	u32 magic;
	u32 tsn;
};

static struct tbv_reseq rs;
static unsigned int held_out;	/* packets we handed to rs and did not get back */

static int32_t diff(u32 a, u32 b)
{
	return (int32_t)(a - b);
}

/* A packet came back from pop, pop_any or skip_to: at its turn, once. */
static u32 fuzz_returned(void *p)
{
	struct fuzz_pkt *pkt = p;
	u32 tsn;

	FUZZ_CHECK(pkt->magic == PKT_MAGIC);	/* a freed one is ASan's to report */
	tsn = pkt->tsn;
	FUZZ_CHECK(rs.next == tsn + 1);
	FUZZ_CHECK(held_out > 0);
	held_out--;
	pkt->magic = 0;
	free(pkt);
	return tsn;
}

static void fuzz_check_window(void)
{
	unsigned int i, n = 0;

	FUZZ_CHECK(rs.held <= W - 1);
	for (i = 0; i < W; i++) {
		const struct fuzz_pkt *pkt = rs.slot[i];

		if (!pkt)
			continue;
		n++;
		FUZZ_CHECK(pkt->magic == PKT_MAGIC);
		FUZZ_CHECK((pkt->tsn & (W - 1)) == i);
		FUZZ_CHECK(diff(pkt->tsn, rs.next) >= 1 && diff(pkt->tsn, rs.next) <= W - 1);
	}
	FUZZ_CHECK(n == rs.held);
	FUZZ_CHECK(n == held_out);
	FUZZ_CHECK(!rs.slot[rs.next & (W - 1)]);
}

/* What the QP gets, in order; in sender mode it must be strictly increasing. */
struct fuzz_out {
	bool ordered;		/* check the order */
	bool any;
	u32 last;
	u32 count;
};

static void fuzz_handed(struct fuzz_out *out, u32 tsn)
{
	if (out->ordered && out->any)
		FUZZ_CHECK(diff(tsn, out->last) > 0);
	out->any = true;
	out->last = tsn;
	out->count++;
}

static void fuzz_drain(struct fuzz_out *out)
{
	void *p;

	while ((p = tbv_reseq_pop(&rs)))
		fuzz_handed(out, fuzz_returned(p));
}

/* tbv_stripe_rx(): the verdict, then the drain. Returns the verdict. */
static enum tbv_reseq_verdict fuzz_arrive(u32 tsn, unsigned int lane, bool spare,
					  struct fuzz_out *out)
{
	int32_t ahead = diff(tsn, rs.next);
	enum tbv_reseq_verdict v = tbv_reseq_arrive(&rs, tsn, lane);
	struct fuzz_pkt *pkt;
	void *p;

	switch (v) {
	case TBV_RESEQ_NOW:
		FUZZ_CHECK(ahead <= 0);
		tbv_reseq_taken(&rs, tsn);
		fuzz_handed(out, tsn);
		break;
	case TBV_RESEQ_HOLD:
		FUZZ_CHECK(ahead >= 1 && ahead <= W - 1);
		FUZZ_CHECK(!rs.slot[tsn & (W - 1)]);
		if (!spare)
			break;	/* dropped: as if lost on the way */
		pkt = malloc(sizeof(*pkt));
		if (!pkt)
			abort();
		*pkt = (struct fuzz_pkt){ PKT_MAGIC, tsn };
		tbv_reseq_hold(&rs, tsn, pkt);
		held_out++;
		break;
	case TBV_RESEQ_DUP:
		FUZZ_CHECK(ahead >= 1 && ahead <= W - 1);
		FUZZ_CHECK(rs.slot[tsn & (W - 1)] &&
			   ((struct fuzz_pkt *)rs.slot[tsn & (W - 1)])->tsn == tsn);
		break;
	case TBV_RESEQ_FAR:
		FUZZ_CHECK(ahead >= W);
		while ((p = tbv_reseq_skip_to(&rs, tsn)))
			fuzz_handed(out, fuzz_returned(p));
		FUZZ_CHECK(rs.next == tsn && !rs.held);
		tbv_reseq_taken(&rs, tsn);
		fuzz_handed(out, tsn);
		break;
	default:
		FUZZ_CHECK(0);
	}
	fuzz_drain(out);
	fuzz_check_window();
	return v;
}

/* The give-up timer: past the gap at next, then what is in order. */
static void fuzz_give_up(struct fuzz_out *out)
{
	void *p = tbv_reseq_pop_any(&rs);

	FUZZ_CHECK(!p == !held_out);
	if (p)
		fuzz_handed(out, fuzz_returned(p));
	fuzz_drain(out);
	fuzz_check_window();
}

/* A reset: what is held goes back to the spares, not to the QP. */
static void fuzz_release_all(void)
{
	void *p;

	while ((p = tbv_reseq_pop_any(&rs)))
		fuzz_returned(p);
	FUZZ_CHECK(!rs.held && !held_out);
}

static void fuzz_free_mode(struct fuzz_in *in, unsigned int lanes, bool chunked)
{
	struct fuzz_out out = { 0 };
	u8 op, a, b[4];

	while (fuzz_take(in, &op, 1)) {
		unsigned int lane;
		bool spare;
		u32 tsn;

		switch (op & 7) {
		case FUZZ_RESEQ_GIVE_UP:
			fuzz_give_up(&out);
			continue;
		case FUZZ_RESEQ_RESET:
			fuzz_release_all();
			tbv_reseq_init(&rs, lanes, chunked);
			continue;
		case FUZZ_RESEQ_DRAIN:
		case FUZZ_RESEQ_DRAIN + 1:
			fuzz_drain(&out);
			fuzz_check_window();
			continue;
		}
		if (!fuzz_take(in, &a, 1))
			break;
		lane = a & FUZZ_RESEQ_LANE;
		spare = !(a & FUZZ_RESEQ_NO_SPARE);
		memset(b, 0, sizeof(b));
		switch ((a >> FUZZ_RESEQ_FORM_SHIFT) & 3) {
		case FUZZ_RESEQ_NEAR:
			fuzz_take(in, b, 1);
			tsn = rs.next + (int8_t)b[0];
			break;
		case FUZZ_RESEQ_AHEAD:
			fuzz_take(in, b, 2);
			tsn = rs.next + tbv_get_le16(b);
			break;
		case FUZZ_RESEQ_ANY:
			fuzz_take(in, b, 4);
			tsn = tbv_get_le32(b);
			break;
		default:
			fuzz_take(in, b, 2);
			tsn = rs.next - tbv_get_le16(b);
			break;
		}
		fuzz_arrive(tsn, lane, spare, &out);
	}
}

/* A lane: a FIFO of the TSNs sent on it, not yet delivered or lost. */
struct fuzz_lane {
	u32 tsn[LANE_CAP];
	unsigned int head, tail;
};

static struct fuzz_lane lane_q[TBV_RESEQ_MAX_LANES];

static void fuzz_sender_mode(struct fuzz_in *in, unsigned int lanes)
{
	struct fuzz_out out = { 0 };
	u32 sent, delivered = 0, lost = 0, chunk_lane = 0;
	u8 b[4] = { 0 }, op;
	unsigned int l;

	memset(lane_q, 0, sizeof(lane_q));
	/*
	 * Start near any TSN (a wrap included): packets far ahead (TBV_RESEQ_FAR)
	 * move next there, half the number space at most at a time.
	 */
	fuzz_take(in, b, 4);
	if (diff(tbv_get_le32(b), rs.next) < W)
		fuzz_arrive(rs.next + 0x7fffffffu, 0, true, &out);
	if (diff(tbv_get_le32(b), rs.next) >= W)
		fuzz_arrive(tbv_get_le32(b), 0, true, &out);
	out = (struct fuzz_out){ .ordered = true };	/* the sender's packets from here */
	sent = rs.next;
	while (fuzz_take(in, &op, 1)) {
		struct fuzz_lane *q;

		if ((op & FUZZ_SEND_EMIT) && sent % TBV_RESEQ_CHUNK == 0)
			chunk_lane = ((op >> FUZZ_SEND_CHUNK_SHIFT) & 3) % lanes;
		if (op & FUZZ_SEND_EMIT) {
			q = &lane_q[chunk_lane];
			if (q->tail - q->head < LANE_CAP)
				q->tsn[q->tail++ % LANE_CAP] = sent++;
		}
		q = &lane_q[(op & FUZZ_SEND_LANE) % lanes];
		if (q->head == q->tail)
			continue;
		if (op & FUZZ_SEND_LOSE) {
			q->head++;	/* lost on the way: never seen */
			lost++;
			continue;
		}
		/* the sender's window: nothing arrives a window or more ahead */
		if (diff(q->tsn[q->head % LANE_CAP], rs.next) >= W)
			continue;
		FUZZ_CHECK(fuzz_arrive(q->tsn[q->head++ % LANE_CAP], (op & FUZZ_SEND_LANE) % lanes,
				       true, &out) <= TBV_RESEQ_HOLD);
		delivered++;
		/* everything delivered so far is handed over or held */
		FUZZ_CHECK(out.count + held_out == delivered);
	}
	for (l = 0; l < lanes; l++)
		if (lane_q[l].head != lane_q[l].tail)
			return;
	/* all sent and nothing lost: all handed over, nothing held */
	if (!lost)
		FUZZ_CHECK(out.count == delivered && !rs.held);
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct fuzz_in in = { data, size };
	unsigned int lanes;
	bool chunked;
	u8 cfg = 0;

	fuzz_take(&in, &cfg, 1);
	lanes = 1 + (cfg & FUZZ_RESEQ_LANES);
	chunked = cfg & FUZZ_RESEQ_CHUNKED;
	tbv_reseq_init(&rs, lanes, chunked);
	held_out = 0;
	if (cfg & FUZZ_RESEQ_SENDER)
		fuzz_sender_mode(&in, lanes);
	else
		fuzz_free_mode(&in, lanes, chunked);
	fuzz_release_all();
	return 0;
}
