/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The bring-up self-check (docs/wire-protocol.md, "Calibration"): before a
 * link carries traffic, each end sends a round of calibration frames of known
 * sizes and PDFs on every rail, and judges the round the peer sent it: a
 * frame that did not arrive as sent (missing, cut into pieces, merged with
 * the next, longer than a dword's padding, other bytes, other PDFs where the
 * link reads them) fails the rail. Each end tells the other its verdict in
 * the flags of the frames it sends, so both take the same rails out.
 *
 * This file: the frame, its pattern, and the receiving side's judgement of
 * one rail, fed every frame that may belong to a round (no kernel headers).
 */
#ifndef TBV_CALIB_H
#define TBV_CALIB_H

#include "tbv_types.h"
#include "tbv_frame.h"

#define TBV_FT_CALIB		0x05
/*
 * Header: type u8, flags u8, payload_len le16 (bytes after these 4), rail u8,
 * index u8, round u8, count u8, seed le32; then the pattern.
 */
#define TBV_CALIB_HDR_LEN	12

#define TBV_CALIB_F_JUDGED	0x01	/* the sender judged a round of ours on this rail */
#define TBV_CALIB_F_PLAIN_OK	0x02	/* ... and its plain frames came as sent */
#define TBV_CALIB_F_SPLIT_OK	0x04	/* ... and its frames with split packets' PDFs too */
#define TBV_CALIB_F_ALL		0x07

/* Frames of a round: the plain ones, then on a link with split packets the split ones */
#define TBV_CALIB_PLAIN		6
#define TBV_CALIB_SPLIT		2
#define TBV_CALIB_MAX_FRAMES	(TBV_CALIB_PLAIN + TBV_CALIB_SPLIT)
/* pieces of one frame remembered for the report (more are counted) */
#define TBV_CALIB_MAX_PIECES	4

struct tbv_calib_spec {
	u16 size;		/* bytes of the frame */
	u8 sof;			/* PDFs it is sent with */
	u8 eof;
	bool split;		/* a split packet's PDFs */
};

/* Frames in a round. */
static inline unsigned int tbv_calib_count(bool split)
{
	return TBV_CALIB_PLAIN + (split ? TBV_CALIB_SPLIT : 0);
}

/* Frame @index of a round (< TBV_CALIB_MAX_FRAMES). */
void tbv_calib_spec(unsigned int index, struct tbv_calib_spec *s);

struct tbv_calib_hdr {
	u8 flags;
	u8 rail;
	u8 index;
	u8 round;
	u8 count;
	u32 seed;
	u16 size;		/* the whole frame's, from payload_len */
};

/* Write the frame @h describes (h->size bytes, pattern included); returns its length. */
u32 tbv_calib_encode(u8 *frame, const struct tbv_calib_hdr *h);

/*
 * The header of a received frame that starts as a calibration frame: type,
 * a size of TBV_CALIB_HDR_LEN..TBV_FRAME_SIZE, an index below its count, a
 * count that is a round's. The frame's length is not checked against it.
 */
int tbv_calib_decode(const u8 *frame, u32 len, struct tbv_calib_hdr *h);

/* One frame of a round, as it came. */
struct tbv_calib_obs {
	u16 sent;		/* its size */
	u8 npieces;		/* frames it came as (0: missing) */
	bool done;		/* judged */
	bool ok;
	bool bytes_bad;		/* some byte was not the one sent */
	bool pdf_bad;		/* PDFs other than those sent, on a link that reads them */
	u8 sof;			/* the PDFs it came with (its first piece's) */
	u8 eof;
	u16 pieces[TBV_CALIB_MAX_PIECES];
	u32 total;		/* bytes in all its pieces */
};

/* The judgement of what the peer sends on one rail (its NAPI context). */
struct tbv_calib_rx {
	u8 rail;
	u8 count;		/* frames of a round */
	bool reads_pdf;		/* split packets agreed: PDFs are read */
	bool started;		/* a round's first frame came */
	bool open;		/* frame cur came shorter than sent: pieces may follow */
	bool judged;
	bool plain_ok;
	bool split_ok;
	u8 round;
	u8 cur;
	u32 seed;		/* the peer's */
	u32 frames;		/* calibration frames taken (heads and pieces) */
	u32 stray;		/* of those, not part of the judged round */
	u32 tail_left;		/* bytes of a stray frame that may still come as pieces */
	/*
	 * Rounds judged: a round of index 0 with a new seed after one was judged
	 * is judged afresh (the peer brought its link up again without us).
	 */
	u32 rounds_judged;
	bool peer_waiting;	/* its last frame: the judged round's sender has not judged ours */
	/* the peer's verdict on our frames, from its flags */
	bool peer_judged;
	bool peer_plain_ok;
	bool peer_split_ok;
	struct tbv_calib_obs obs[TBV_CALIB_MAX_FRAMES];
};

void tbv_calib_rx_init(struct tbv_calib_rx *r, unsigned int rail, bool split);

/*
 * A frame received on the rail. @may_be_head: it may be a calibration frame's
 * start (its PDFs are a typed frame's, or split packets' with no header held
 * for a payload). Returns true if the frame is the calibration's (consumed),
 * false if it is for the rail's other consumers.
 */
bool tbv_calib_rx_frame(struct tbv_calib_rx *r, const u8 *data, u32 len, u8 sof, u8 eof,
			bool may_be_head);

/* The time is up: what did not come is missing, and the round is judged if it started. */
void tbv_calib_rx_finish(struct tbv_calib_rx *r);

/* Our flags for the frames we send on this rail: our verdict, once there is one. */
u8 tbv_calib_rx_flags(const struct tbv_calib_rx *r);

/* The first frame of the round that failed, or -1. */
int tbv_calib_rx_first_bad(const struct tbv_calib_rx *r);

#endif /* TBV_CALIB_H */
