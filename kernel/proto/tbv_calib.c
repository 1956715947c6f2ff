// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The bring-up self-check's frames and their judgement (tbv_calib.h). */
#include "tbv_calib.h"
#include "tbv_rdma.h"

/*
 * Sizes around what a controller may do to a frame: the smallest frame ours
 * can be (a calibration header; the issue asked for 1 byte), one transport
 * packet (256) and a byte either side, the largest frame and one byte less.
 * On a link with split packets, two frames with their PDFs: a page's payload,
 * and one just over a transport packet.
 */
static const u16 tbv_calib_sizes[TBV_CALIB_MAX_FRAMES] = {
	TBV_CALIB_HDR_LEN, 255, 256, 257, TBV_FRAME_SIZE - 1, TBV_FRAME_SIZE,
	TBV_FRAME_SIZE, 257,
};

void tbv_calib_spec(unsigned int index, struct tbv_calib_spec *s)
{
	s->size = tbv_calib_sizes[index % TBV_CALIB_MAX_FRAMES];
	s->split = index >= TBV_CALIB_PLAIN;
	if (s->split) {
		/* two tags far apart: both PDFs differ, and neither is a typed frame's */
		u32 tag = index == TBV_CALIB_PLAIN ? 0 : TBV_SPLIT_TAGS - 1;

		s->sof = tbv_split_sof(tag);
		s->eof = tbv_split_eof(tag);
	} else {
		s->sof = TBV_PDF_SOF;
		s->eof = TBV_PDF_EOF;
	}
}

/* Byte @off (>= TBV_CALIB_HDR_LEN) of frame @index of @round on @rail: a mixed counter. */
static u8 tbv_calib_byte(u32 seed, u8 rail, u8 round, u8 index, u32 off)
{
	u32 x = seed ^ ((u32)rail << 24 | (u32)round << 16 | (u32)index << 8);

	x ^= (off / 4) * 0x9e3779b9u;
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	x ^= x >> 16;
	return x >> (8 * (off % 4));
}

static void tbv_calib_put_hdr(u8 *frame, const struct tbv_calib_hdr *h)
{
	frame[0] = TBV_FT_CALIB;
	frame[1] = h->flags;
	tbv_put_le16(frame + 2, h->size - TBV_FRAME_HDR_LEN);
	frame[4] = h->rail;
	frame[5] = h->index;
	frame[6] = h->round;
	frame[7] = h->count;
	tbv_put_le32(frame + 8, h->seed);
}

u32 tbv_calib_encode(u8 *frame, const struct tbv_calib_hdr *h)
{
	u32 off;

	tbv_calib_put_hdr(frame, h);
	for (off = TBV_CALIB_HDR_LEN; off < h->size; off++)
		frame[off] = tbv_calib_byte(h->seed, h->rail, h->round, h->index, off);
	return h->size;
}

int tbv_calib_decode(const u8 *frame, u32 len, struct tbv_calib_hdr *h)
{
	u32 size;

	if (len < TBV_CALIB_HDR_LEN || frame[0] != TBV_FT_CALIB)
		return -EINVAL;
	size = tbv_get_le16(frame + 2) + TBV_FRAME_HDR_LEN;
	h->flags = frame[1];
	h->rail = frame[4];
	h->index = frame[5];
	h->round = frame[6];
	h->count = frame[7];
	h->seed = tbv_get_le32(frame + 8);
	h->size = size;
	if (size < TBV_CALIB_HDR_LEN || size > TBV_FRAME_SIZE || (h->flags & ~TBV_CALIB_F_ALL) ||
	    h->rail >= TBV_MAX_RAILS ||
	    (h->count != tbv_calib_count(false) && h->count != tbv_calib_count(true)) ||
	    h->index >= h->count)
		return -EINVAL;
	return 0;
}

void tbv_calib_rx_init(struct tbv_calib_rx *r, unsigned int rail, bool split)
{
	unsigned int i;

	memset(r, 0, sizeof(*r));
	r->rail = rail;
	r->count = tbv_calib_count(split);
	r->reads_pdf = split;
	for (i = 0; i < TBV_CALIB_MAX_FRAMES; i++)
		r->obs[i].sent = tbv_calib_sizes[i];
}

/* Do @len bytes at @off of frame @index of the judged round hold what was sent? */
static bool tbv_calib_bytes_ok(const struct tbv_calib_rx *r, u8 index, u32 off, const u8 *data,
			       u32 len)
{
	struct tbv_calib_spec s;
	u8 hdr[TBV_CALIB_HDR_LEN];
	u32 i;

	tbv_calib_spec(index, &s);
	if (off >= s.size)
		return true;	/* padding or a merged frame: the length says it */
	len = TBV_MIN(len, s.size - off);
	if (off < TBV_CALIB_HDR_LEN) {
		struct tbv_calib_hdr h = { .rail = r->rail, .index = index, .round = r->round,
					   .count = r->count, .seed = r->seed, .size = s.size };

		tbv_calib_put_hdr(hdr, &h);
	}
	for (i = 0; i < len; i++) {
		u32 at = off + i;

		if (at == 1)
			continue;	/* the flags change from round to round */
		if (at < TBV_CALIB_HDR_LEN ? data[i] != hdr[at] :
		    data[i] != tbv_calib_byte(r->seed, r->rail, r->round, index, at))
			return false;
	}
	return true;
}

static void tbv_calib_close(struct tbv_calib_rx *r, struct tbv_calib_obs *o)
{
	if (o->done)
		return;
	o->done = true;
	o->ok = o->npieces == 1 && o->total >= o->sent && o->total <= o->sent + (u32)TBV_RX_PAD_MAX &&
		!o->bytes_bad && !o->pdf_bad;
	r->open = false;
}

static void tbv_calib_judge(struct tbv_calib_rx *r)
{
	unsigned int i;

	if (r->judged)
		return;
	r->plain_ok = true;
	r->split_ok = true;
	for (i = 0; i < r->count; i++) {
		struct tbv_calib_spec s;

		tbv_calib_close(r, &r->obs[i]);
		tbv_calib_spec(i, &s);
		if (r->obs[i].ok)
			continue;
		if (s.split)
			r->split_ok = false;
		else
			r->plain_ok = false;
	}
	r->open = false;
	r->judged = true;
	r->rounds_judged++;
}

/* Frame @index's first (or only) piece: @len bytes. */
static void tbv_calib_head(struct tbv_calib_rx *r, u8 index, const u8 *data, u32 len, u8 sof,
			   u8 eof)
{
	struct tbv_calib_obs *o = &r->obs[index];
	struct tbv_calib_spec s;

	tbv_calib_spec(index, &s);
	o->sent = s.size;
	o->npieces = 1;
	o->pieces[0] = len;
	o->total = len;
	o->sof = sof;
	o->eof = eof;
	o->bytes_bad = !tbv_calib_bytes_ok(r, index, 0, data, len);
	if (r->reads_pdf)
		o->pdf_bad = sof != s.sof || eof != s.eof;
	r->cur = index;
	r->open = true;
	if (o->total >= o->sent)
		tbv_calib_close(r, o);
	if (o->done && index + 1 == r->count)
		tbv_calib_judge(r);
}

/* A frame without a header while frame cur is open: the rest of it, or something else. */
static void tbv_calib_piece(struct tbv_calib_rx *r, const u8 *data, u32 len)
{
	struct tbv_calib_obs *o = &r->obs[r->cur];

	if (o->npieces < TBV_CALIB_MAX_PIECES)
		o->pieces[o->npieces] = len;
	if (o->npieces < 255)
		o->npieces++;
	if (!tbv_calib_bytes_ok(r, r->cur, o->total, data, len))
		o->bytes_bad = true;
	o->total += len;
	if (o->total >= o->sent)
		tbv_calib_close(r, o);
	if (o->done && r->cur + 1 == r->count)
		tbv_calib_judge(r);
}

/* A calibration frame not judged: taken, and the pieces that may follow its head too. */
static void tbv_calib_stray(struct tbv_calib_rx *r, const struct tbv_calib_hdr *h, u32 len)
{
	r->stray++;
	r->tail_left = len < h->size ? h->size - len : 0;
}

/* A frame that starts as a calibration frame. */
static void tbv_calib_rx_head(struct tbv_calib_rx *r, const struct tbv_calib_hdr *h,
			      const u8 *data, u32 len, u8 sof, u8 eof)
{
	unsigned int i;

	if (h->flags & TBV_CALIB_F_JUDGED) {
		r->peer_judged = true;
		r->peer_plain_ok = h->flags & TBV_CALIB_F_PLAIN_OK;
		r->peer_split_ok = h->flags & TBV_CALIB_F_SPLIT_OK;
	}
	/* the round we judged again: the peer has not heard our verdict */
	r->peer_waiting = r->judged && h->seed == r->seed && !(h->flags & TBV_CALIB_F_JUDGED);
	if (r->judged && !h->index && h->seed != r->seed && h->rail == r->rail &&
	    h->count == r->count) {
		/* the peer calibrates again (a new bring-up of its own): judge that round */
		struct tbv_calib_rx fresh;

		tbv_calib_rx_init(&fresh, r->rail, r->reads_pdf);
		fresh.frames = r->frames;
		fresh.stray = r->stray;
		fresh.rounds_judged = r->rounds_judged;
		*r = fresh;
	}
	if (r->judged || h->rail != r->rail || h->count != r->count) {
		tbv_calib_stray(r, h, len);
		return;
	}
	if (!r->started) {
		if (h->index) {
			tbv_calib_stray(r, h, len);	/* a round we came in the middle of */
			return;
		}
		r->started = true;
		r->seed = h->seed;
		r->round = h->round;
		tbv_calib_head(r, 0, data, len, sof, eof);
		return;
	}
	if (h->seed != r->seed || h->round != r->round || h->index <= r->cur) {
		/* the round we judge is over: what did not come is missing */
		tbv_calib_judge(r);
		tbv_calib_stray(r, h, len);
		return;
	}
	for (i = r->cur; i < h->index; i++)
		tbv_calib_close(r, &r->obs[i]);	/* missing, or what came of it */
	tbv_calib_head(r, h->index, data, len, sof, eof);
}

bool tbv_calib_rx_frame(struct tbv_calib_rx *r, const u8 *data, u32 len, u8 sof, u8 eof,
			bool may_be_head)
{
	struct tbv_calib_hdr h;

	if (may_be_head && !tbv_calib_decode(data, len, &h)) {
		r->frames++;
		r->tail_left = 0;
		tbv_calib_rx_head(r, &h, data, len, sof, eof);
		return true;
	}
	if (r->tail_left) {
		r->frames++;
		r->stray++;
		r->tail_left -= TBV_MIN(len, r->tail_left);
		return true;
	}
	if (!r->open || r->judged)
		return false;
	r->frames++;
	tbv_calib_piece(r, data, len);
	return true;
}

void tbv_calib_rx_finish(struct tbv_calib_rx *r)
{
	if (r->started)
		tbv_calib_judge(r);
}

u8 tbv_calib_rx_flags(const struct tbv_calib_rx *r)
{
	if (!r->judged)
		return 0;
	return TBV_CALIB_F_JUDGED | (r->plain_ok ? TBV_CALIB_F_PLAIN_OK : 0) |
	       (r->split_ok ? TBV_CALIB_F_SPLIT_OK : 0);
}

int tbv_calib_rx_first_bad(const struct tbv_calib_rx *r)
{
	unsigned int i;

	for (i = 0; i < r->count; i++)
		if (!r->obs[i].ok)
			return i;
	return -1;
}
