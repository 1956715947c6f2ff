/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What travels in one ring frame (at most TBV_FRAME_SIZE bytes): a 4-byte
 * common header naming the frame type, then a type-specific header and payload.
 * All multi-byte fields are little-endian. Every ring frame is a complete
 * hardware frame: it carries TBV_PDF_SOF / TBV_PDF_EOF in its descriptor; the
 * one kind of frame without a header, a split packet's payload (tbv_rdma.h),
 * carries other PDFs.
 */
#ifndef TBV_FRAME_H
#define TBV_FRAME_H

#include "tbv_types.h"
#include "tbv_login.h"

/* RX frame flags reported by the controller (struct tbv_frame.flags). */
#define TBV_FRAME_F_CRC_ERROR	0x1u
#define TBV_FRAME_F_OVERRUN	0x2u
#define TBV_PDF_SOF		1	/* descriptor start-of-frame value */
#define TBV_PDF_EOF		2	/* descriptor end-of-frame value */
/*
 * Bytes a received frame may have beyond what its header says: nothing
 * promises that a controller reports an RX length that is not a multiple of
 * four exactly, rather than rounded up to a dword (docs/hardware.md).
 */
#define TBV_RX_PAD_MAX		3

enum tbv_frame_type {
	TBV_FT_NET = 0x01,		/* a fragment of an Ethernet frame for the link's netdev */
	/* 0x02: TBV_FT_RDMA (tbv_rdma.h) */
	TBV_FT_CREDIT = 0x03,		/* software credits (tbv_credit.h), if agreed at login */
	/* 0x04: TBV_FT_RDMA_SPLIT (tbv_rdma.h), if agreed at login */
};

#define TBV_FRAME_HDR_LEN	4	/* type u8, flags u8, payload_len le16 */
/* Room beside a received frame for a header that came in the frame before it (split packets) */
#define TBV_FRAME_PREFIX_MAX	48

/* NET fragment header: common header + index le16 + count le16 + packet id le32. */
#define TBV_NET_HDR_LEN		12
#define TBV_NET_FRAG_PAYLOAD	(TBV_FRAME_SIZE - TBV_NET_HDR_LEN)
#define TBV_NET_MAX_PACKET	65536	/* Ethernet header included */
#define TBV_NET_MAX_FRAGS	((TBV_NET_MAX_PACKET + TBV_NET_FRAG_PAYLOAD - 1) / \
				 TBV_NET_FRAG_PAYLOAD)

struct tbv_net_frag {
	u16 len;			/* payload bytes in this frame */
	u16 index;
	u16 count;
	u32 packet_id;
};

static inline unsigned int tbv_net_frag_count(u32 packet_len)
{
	return packet_len ? (packet_len + TBV_NET_FRAG_PAYLOAD - 1) / TBV_NET_FRAG_PAYLOAD : 1;
}

/* Write the header of fragment @index of a @packet_len-byte packet; returns its payload length. */
u16 tbv_net_frag_encode(u8 *frame, u32 packet_id, u32 packet_len, u16 index);

/* The frame type of a received frame, or a negative errno if it is too short. */
int tbv_frame_type(const u8 *frame, u32 frame_len);

/* Parse a NET fragment header; every field is checked against @frame_len. */
int tbv_net_frag_decode(const u8 *frame, u32 frame_len, struct tbv_net_frag *out);

/*
 * The buffer the netdev allocates for a packet that starts with fragment @f
 * (index 0, decoded): the fragment itself if it is the only one, else room
 * for count full fragments, but never more than the largest packet. Only
 * tbv_net_frag_decode()'s check of the last fragment keeps a packet within
 * it: the reassembly fuzzer copies into a buffer of exactly this size.
 */
u32 tbv_net_packet_room(const struct tbv_net_frag *f);

/*
 * Credit frame: common header (flags: TBV_CREDIT_F_*, payload length 8), then
 * the sender's frame count before this frame (seq, le32) and the limit it
 * grants the other direction of the rail (le32).
 */
#define TBV_CREDIT_F_REQUEST	0x01	/* starved: reply, and count exactly seq + 1 frames */
#define TBV_CREDIT_FRAME_LEN	12

struct tbv_credit_frame {
	u8 flags;
	u32 seq;
	u32 limit;
};

/* Write a credit frame; returns its length. */
u32 tbv_credit_frame_encode(u8 *frame, const struct tbv_credit_frame *c);
int tbv_credit_frame_decode(const u8 *frame, u32 frame_len, struct tbv_credit_frame *out);

/*
 * Reassembly of one rail's NET fragments. Frames on a rail arrive in order but
 * any of them may be missing (no RX buffer posted, a drop on the link); a packet
 * with a gap is discarded whole, never delivered partially.
 */
struct tbv_net_reasm {
	bool active;
	u32 packet_id;
	u16 next_index;
	u16 count;
	u32 received;			/* payload bytes so far */
};

enum tbv_reasm_action {
	TBV_REASM_APPEND,		/* copy the payload to the packet under construction */
	TBV_REASM_START,		/* discard any partial packet, start a new one, copy */
	TBV_REASM_DROP,			/* discard this fragment (and the partial packet) */
};

/*
 * Decide what to do with fragment @f. *@discarded is set when a partial packet
 * is abandoned; *@complete when the packet is whole after this fragment.
 */
enum tbv_reasm_action tbv_net_reasm_push(struct tbv_net_reasm *r,
					 const struct tbv_net_frag *f,
					 bool *discarded, bool *complete);

#endif /* TBV_FRAME_H */
