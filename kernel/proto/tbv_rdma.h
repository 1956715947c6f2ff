/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * RDMA packets: one packet per ring frame, frame type TBV_FT_RDMA. A packet is
 * a fixed 48-byte header (docs/wire-protocol.md, "RDMA packets"), for UD an
 * address extension (source and destination GID), then at most
 * TBV_RDMA_MAX_PAYLOAD bytes of message data. Every packet but the last of a
 * message carries exactly that many bytes (the link's "full" payload), so a
 * packet's offset in its message follows from its PSN alone: retransmitting
 * from any PSN needs no other state.
 *
 * Split packets (TBV_CAP_SPLIT, agreed at login): the full payload is a page,
 * TBV_RDMA_SPLIT_PAYLOAD, so that a sender can hand the controller a pinned
 * page of the MR instead of copying it. A packet whose header and payload do
 * not fit one frame travels as its header, in a header frame (frame type
 * TBV_FT_RDMA_SPLIT: up to TBV_SPLIT_BATCH entries, each a header and its
 * pair check below), and the payload's raw bytes in a frame of its own whose
 * descriptor PDFs are not the typed frames' (TBV_PDF_SOF/EOF) but carry the
 * pair's tag. A header frame's payload frames follow it on its rail, in the
 * order of its entries, before any other frame.
 *
 * PSNs are 24-bit and wrap; a READ request uses one PSN per response packet,
 * as in InfiniBand, so a request's responses and the requests after it never
 * share a PSN.
 */
#ifndef TBV_RDMA_H
#define TBV_RDMA_H

#include "tbv_types.h"
#include "tbv_frame.h"

#define TBV_FT_RDMA		0x02
#define TBV_FT_RDMA_SPLIT	0x04	/* the header of a split packet; its payload follows */

#define TBV_RDMA_HDR_LEN	48
#define TBV_RDMA_GRH_LEN	32	/* source GID, destination GID */
#define TBV_RDMA_MAX_PAYLOAD	(4096 - TBV_RDMA_HDR_LEN)
#define TBV_RDMA_UD_MAX_PAYLOAD	(4096 - TBV_RDMA_HDR_LEN - TBV_RDMA_GRH_LEN)
#define TBV_RDMA_SPLIT_PAYLOAD	4096	/* a full packet's payload on a link that splits */

#define TBV_PSN_MASK		0xffffffu
#define TBV_QPN_MASK		0xffffffu

enum tbv_rdma_kind {
	TBV_RK_SEND = 1,	/* RC/UC message for a receive WQE */
	TBV_RK_WRITE = 2,	/* RC/UC: va, rkey, len on the first packet */
	TBV_RK_READ_REQ = 3,	/* RC: va, rkey, len; no payload */
	TBV_RK_READ_RESP = 4,	/* RC: data of a READ, one PSN per packet */
	TBV_RK_ACK = 5,		/* RC: syndrome, psn, msn; no payload */
	TBV_RK_UD_SEND = 6,	/* UD (and GSI): one packet, GRH, qkey */
	TBV_RK_ATOMIC = 7,	/* RC: va, rkey, len 8, aux = enum tbv_atomic_op; operands */
	TBV_RK_ATOMIC_RESP = 8,	/* RC: the original 8 bytes at va, one PSN */
	TBV_RK_FLUSH = 9,	/* RC: va, rkey, len, aux = type | level << 8; no payload */
	TBV_RK_ATOMIC_WRITE = 10,/* RC: va, rkey, len 8; 8 bytes stored at once */
	TBV_RK_MAX = TBV_RK_ATOMIC_WRITE,
};

/* FLUSH (aux): what is to be made durable, and over which bytes. */
enum tbv_flush_type {
	TBV_FLUSH_GLOBAL = 1,		/* global visibility */
	TBV_FLUSH_PERSISTENT = 2,	/* persistence */
};

enum tbv_flush_level {
	TBV_FLUSH_RANGE = 0,		/* [va, va + len) */
	TBV_FLUSH_MR = 1,		/* the whole MR the rkey names (va, len ignored) */
};

#define TBV_FLUSH_AUX(type, level)	((type) | (level) << 8)

/* Atomic operations (TBV_RK_ATOMIC aux); both act on 8 aligned bytes. */
enum tbv_atomic_op {
	TBV_ATOMIC_CMP_SWP = 1,	/* if (*va == compare) *va = swap */
	TBV_ATOMIC_FETCH_ADD = 2,	/* *va += add */
};

#define TBV_ATOMIC_LEN		8	/* bytes an atomic operates on */
#define TBV_ATOMIC_REQ_PAYLOAD	16	/* swap or add, then compare (0 for FETCH_ADD) */
#define TBV_ATOMIC_RESP_PAYLOAD	8	/* the value before the operation */

enum tbv_rdma_flag {
	TBV_RF_FIRST = 0x01,	/* first packet of a message */
	TBV_RF_LAST = 0x02,	/* last packet of a message */
	TBV_RF_IMM = 0x04,	/* immediate data (last packet of SEND/WRITE, UD) */
	TBV_RF_SOLICITED = 0x08,
	TBV_RF_ACK_REQ = 0x10,	/* the responder acknowledges this packet now */
	TBV_RF_GRH = 0x20,	/* the GID extension follows the header (UD) */
	TBV_RF_INV = 0x40,	/* SEND (last packet): invalidate the window rkey names */
	TBV_RF_SEQ = 0x80,	/* a striped QP's packet: the TSN is in the qkey field (tbv_reseq.h) */
	TBV_RF_ALL = 0xff,
};

enum tbv_ack_syndrome {
	TBV_ACK_OK = 0,		/* everything up to psn arrived and was executed */
	TBV_NAK_SEQ = 1,	/* psn is the one expected: resend from there */
	TBV_NAK_RNR = 2,	/* no receive WQE for psn; aux is the RNR timer code */
	TBV_NAK_INVALID = 3,	/* remote invalid request (bad opcode/length) */
	TBV_NAK_ACCESS = 4,	/* remote access error (rkey, range, rights) */
	TBV_NAK_OPERATIONAL = 5,/* remote operational error */
	TBV_ACK_MAX = TBV_NAK_OPERATIONAL,
};

/* A decoded packet header; fields a kind does not use are zero on the wire. */
struct tbv_rdma_hdr {
	u8 kind;
	u8 flags;
	u8 syndrome;		/* ACK */
	u16 payload_len;
	u32 dst_qpn;
	u32 src_qpn;
	u32 psn;
	u32 imm;		/* IMM flag, network byte order kept as on the verbs API */
	u64 va;			/* WRITE first, READ_REQ */
	u32 rkey;		/* WRITE first, READ_REQ, ATOMIC; SEND with INV */
	u32 len;		/* WRITE first, READ_REQ: whole message length */
	u32 qkey;		/* UD */
	u32 tsn;		/* SEQ flag: transmit sequence number, same bytes as qkey */
	u32 aux;		/* ACK: msn (OK) or RNR timer code (NAK_RNR); ATOMIC: op; FLUSH */
	u8 sgid[16];		/* GRH flag */
	u8 dgid[16];
};

/* Bytes of header in front of the payload of a packet with these flags. */
static inline u32 tbv_rdma_hdr_len(u8 flags)
{
	return TBV_RDMA_HDR_LEN + ((flags & TBV_RF_GRH) ? TBV_RDMA_GRH_LEN : 0);
}

/*
 * Number a packet already encoded in @frame for a striped QP: sets the SEQ
 * flag and the TSN (RC/UC kinds only; their qkey field is unused).
 */
static inline void tbv_rdma_set_tsn(u8 *frame, u32 tsn)
{
	frame[5] |= TBV_RF_SEQ;
	tbv_put_le32(frame + 40, tsn);
}

/* Write @h into @frame (at least tbv_rdma_hdr_len(h->flags) bytes); returns the frame length. */
u32 tbv_rdma_encode(u8 *frame, const struct tbv_rdma_hdr *h);

/*
 * Parse and validate a received frame: type, kind, flags allowed for the kind,
 * zero reserved bytes, QPN/PSN ranges, payload length against the frame length
 * and the full-packet rule for packets of @full payload bytes (the link's:
 * TBV_RDMA_MAX_PAYLOAD or TBV_RDMA_SPLIT_PAYLOAD). Returns 0 or a negative
 * errno; @h is then trusted only as far as its own consistency goes (keys and
 * ranges are the verbs layer's to check).
 */
int tbv_rdma_decode(const u8 *frame, u32 frame_len, u32 full, struct tbv_rdma_hdr *h);

/*
 * The same for a split packet: @hdr is the TBV_RDMA_HDR_LEN bytes of its
 * header frame (type TBV_FT_RDMA_SPLIT), @payload_len the length of the
 * payload frame that came after it. A split packet has no GID extension.
 */
int tbv_rdma_decode_split(const u8 *hdr, u32 payload_len, u32 full, struct tbv_rdma_hdr *h);

/* Does a packet with these flags and payload need two frames (a split link only)? */
static inline bool tbv_rdma_needs_split(u8 flags, u32 payload_len)
{
	return tbv_rdma_hdr_len(flags) + payload_len > TBV_FRAME_SIZE;
}

/*
 * The pair check, after the header in each entry of a header frame: the
 * pair's tag (one byte, then 7 zero bytes), then the first and the last
 * TBV_SPLIT_SAMPLE bytes of the payload. A receiver pairs the next payload
 * frame on the rail with the next header it holds; if frames were lost
 * between, it would pair a header with the wrong payload and place those
 * bytes at the wrong offset. Consecutive pairs on a rail have different tags
 * (a counter of TBV_SPLIT_TAGS values, more than twice TBV_SPLIT_BATCH),
 * carried in the payload frame's PDFs, and the samples must match too: a
 * payload frame pairs with the held header of its tag, and the headers
 * before that one lost their payloads.
 */
#define TBV_SPLIT_SAMPLE	8
#define TBV_SPLIT_ENTRY_LEN	(TBV_RDMA_HDR_LEN + 8 + 2 * TBV_SPLIT_SAMPLE)
#define TBV_SPLIT_BATCH		16	/* entries a header frame carries at most */
#define TBV_SPLIT_PDF_FIRST	3	/* the payload frame's PDFs: 3..15, never 1 or 2 */
#define TBV_SPLIT_PDF_VALUES	13
#define TBV_SPLIT_TAGS		(TBV_SPLIT_PDF_VALUES * TBV_SPLIT_PDF_VALUES)

/* The payload frame's PDFs for @tag (< TBV_SPLIT_TAGS). */
static inline u8 tbv_split_sof(u32 tag)
{
	return TBV_SPLIT_PDF_FIRST + tag % TBV_SPLIT_PDF_VALUES;
}

static inline u8 tbv_split_eof(u32 tag)
{
	return TBV_SPLIT_PDF_FIRST + tag / TBV_SPLIT_PDF_VALUES % TBV_SPLIT_PDF_VALUES;
}

/* The tag in a payload frame's PDFs, or -1 if they carry none. */
static inline int tbv_split_tag(u8 sof, u8 eof)
{
	if (sof < TBV_SPLIT_PDF_FIRST || sof >= TBV_SPLIT_PDF_FIRST + TBV_SPLIT_PDF_VALUES ||
	    eof < TBV_SPLIT_PDF_FIRST || eof >= TBV_SPLIT_PDF_FIRST + TBV_SPLIT_PDF_VALUES)
		return -1;
	return (sof - TBV_SPLIT_PDF_FIRST) + (eof - TBV_SPLIT_PDF_FIRST) * TBV_SPLIT_PDF_VALUES;
}

static inline void tbv_split_set_tag(u8 *frame, u32 tag)
{
	frame[TBV_RDMA_HDR_LEN] = tag % TBV_SPLIT_TAGS;
}

/* The entries in a header frame of @frame_len bytes: 1..TBV_SPLIT_BATCH, or 0 if malformed. */
static inline u32 tbv_split_entries(u32 frame_len)
{
	if (!frame_len || frame_len % TBV_SPLIT_ENTRY_LEN ||
	    frame_len / TBV_SPLIT_ENTRY_LEN > TBV_SPLIT_BATCH)
		return 0;
	return frame_len / TBV_SPLIT_ENTRY_LEN;
}

/* Is a frame with these PDFs a typed frame (else: a split packet's payload, or noise)? */
static inline bool tbv_pdf_typed(u8 sof, u8 eof)
{
	return sof == TBV_PDF_SOF && eof == TBV_PDF_EOF;
}

/*
 * Make @frame, which holds a packet's header (tbv_rdma_encode()), an entry of
 * a header frame: type, pair check with @tag and the payload's first and last
 * samples (@first, @last). Returns its length, TBV_SPLIT_ENTRY_LEN.
 */
u32 tbv_split_encode(u8 *frame, u32 tag, const u8 *first, const u8 *last);

/*
 * Is @payload (@len bytes, in a frame with PDFs @sof, @eof) the payload of the
 * header frame's entry @hdr (TBV_SPLIT_ENTRY_LEN bytes)? The header itself is
 * checked later, by tbv_rdma_decode_split().
 */
bool tbv_split_pairs(const u8 *hdr, const u8 *payload, u32 len, u8 sof, u8 eof);

/* Atomic operands and results in a payload: little endian like the header. */
void tbv_rdma_put_u64(u8 *p, u64 v);
u64 tbv_rdma_get_u64(const u8 *p);

static inline u32 tbv_psn_add(u32 psn, u32 n)
{
	return (psn + n) & TBV_PSN_MASK;
}

/* a - b as a signed distance on the 24-bit circle: < 0 when a is before b. */
static inline int32_t tbv_psn_diff(u32 a, u32 b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

/* Packets (and PSNs) a message of @len bytes takes, @full bytes a packet: at least one. */
static inline u32 tbv_rdma_npkts(u32 len, u32 full)
{
	return len ? (len + full - 1) / full : 1;
}

/* Payload bytes of packet @index (0-based) of a @len-byte message. */
static inline u32 tbv_rdma_pkt_payload(u32 len, u32 index, u32 full)
{
	u32 off = index * full;

	return len > off ? TBV_MIN(len - off, full) : 0;
}

/*
 * The requester's window (RC): a packet is not sent while its PSN is
 * TBV_TX_WINDOW or more past the oldest one not yet acknowledged; a READ
 * request, whose PSNs are its responses', while the last of them would be.
 * That keeps a striped QP's response stream within the resequencing window
 * at the requester (TBV_RESEQ_WINDOW, 256): responses beyond it land past
 * the window when the rails drift apart, and every gap before them is
 * given up.
 */
#define TBV_TX_WINDOW		192

/*
 * A READ longer than the window is asked for in parts of TBV_READ_PART_PKTS
 * response packets, each its own READ_REQ (va, len and first PSN of the
 * part; a responder answers any READ_REQ). Two parts fit the window, so one
 * streams while the next is asked for. @split: the QP may have two READ
 * requests out for one WQE (max_rd_atomic >= 2). Returns the packets a part
 * of a READ of @npkts packets takes.
 */
#define TBV_READ_PART_PKTS	(TBV_TX_WINDOW / 2)

static inline u32 tbv_read_part_pkts(u32 npkts, bool split)
{
	return split && npkts > TBV_TX_WINDOW ? TBV_READ_PART_PKTS : npkts;
}

/* The first packet after the part that packet @pkt of a READ is in. */
static inline u32 tbv_read_part_end(u32 npkts, u32 part, u32 pkt)
{
	return TBV_MIN((pkt / part + 1) * part, npkts);
}

/*
 * Does [va, va + len) lie within [base, base + length)? Written so that no sum
 * can wrap: every remote access (an MR's range, a memory window's) is checked
 * with it before a byte moves (tests/fuzz/fuzz_access.c).
 */
static inline bool tbv_range_within(u64 base, u64 length, u64 va, u64 len)
{
	return va >= base && len <= length && va - base <= length - len;
}

/* The responder's view of an arriving request PSN against the one it expects. */
enum tbv_psn_class {
	TBV_PSN_EXPECTED,
	TBV_PSN_DUPLICATE,	/* already executed: acknowledge again (READ: respond again) */
	TBV_PSN_AHEAD,		/* a packet before it was lost: NAK once */
};

static inline enum tbv_psn_class tbv_psn_classify(u32 psn, u32 expected)
{
	int32_t d = tbv_psn_diff(psn, expected);

	return d == 0 ? TBV_PSN_EXPECTED : d < 0 ? TBV_PSN_DUPLICATE : TBV_PSN_AHEAD;
}

/*
 * The 5-bit RNR timer code of InfiniBand (IBA table 45) in microseconds:
 * 0 means 655.36 ms; codes above 31 are invalid and read as code 0.
 */
u32 tbv_rnr_timer_usec(u8 code);

/* Microseconds of the local ACK timeout code (4.096 us * 2^code); 0 = infinite. */
static inline u64 tbv_ack_timeout_usec(u8 code)
{
	return code ? (4096ull << TBV_MIN(code, 31)) / 1000 : 0;
}

#define TBV_MIN_ACK_TIMEOUT_MS	100	/* shorter timeouts are raised to this */
#define TBV_ACK_PROBE_MS	10000	/* timeout 0 (infinite): still resend this often */
#define TBV_ACK_TICK_MIN_MS	25
#define TBV_ACK_TICK_MAX_MS	1000

/* How long a requester waits for ACKs before it resends, in ms, for timeout @code. */
static inline u32 tbv_ack_wait_ms(u8 code)
{
	u64 ms = code ? (tbv_ack_timeout_usec(code) + 999) / 1000 : TBV_ACK_PROBE_MS;

	return (u32)TBV_MAX(ms, (u64)TBV_MIN_ACK_TIMEOUT_MS);
}

/*
 * The ACK timer's tick for a wait of @wait_ms: a quarter of it, 25 ms to 1 s.
 * The wait is counted in ticks, each worth its length however late it came
 * (kernel/tbv_comp.c says why).
 */
static inline u32 tbv_ack_tick_ms(u32 wait_ms)
{
	return TBV_MIN(TBV_MAX(wait_ms / 4, (u32)TBV_ACK_TICK_MIN_MS), (u32)TBV_ACK_TICK_MAX_MS);
}

#endif /* TBV_RDMA_H */
