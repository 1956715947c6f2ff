// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Ring frame headers and NET fragmentation/reassembly. Received frames are
 * untrusted: every length and index is checked before it is believed.
 */
#include "tbv_frame.h"

u16 tbv_net_frag_encode(u8 *frame, u32 packet_id, u32 packet_len, u16 index)
{
	u32 offset = (u32)index * TBV_NET_FRAG_PAYLOAD;
	u32 len = packet_len > offset ? packet_len - offset : 0;

	if (len > TBV_NET_FRAG_PAYLOAD)
		len = TBV_NET_FRAG_PAYLOAD;
	frame[0] = TBV_FT_NET;
	frame[1] = 0;
	tbv_put_le16(frame + 2, (u16)len);
	tbv_put_le16(frame + 4, index);
	tbv_put_le16(frame + 6, (u16)tbv_net_frag_count(packet_len));
	tbv_put_le32(frame + 8, packet_id);
	return (u16)len;
}

int tbv_frame_type(const u8 *frame, u32 frame_len)
{
	if (frame_len < TBV_FRAME_HDR_LEN || frame_len > TBV_FRAME_SIZE)
		return -EMSGSIZE;
	return frame[0];
}

int tbv_net_frag_decode(const u8 *frame, u32 frame_len, struct tbv_net_frag *out)
{
	if (frame_len < TBV_NET_HDR_LEN || frame_len > TBV_FRAME_SIZE)
		return -EMSGSIZE;
	if (frame[0] != TBV_FT_NET || frame[1] != 0)
		return -EPROTO;
	out->len = tbv_get_le16(frame + 2);
	out->index = tbv_get_le16(frame + 4);
	out->count = tbv_get_le16(frame + 6);
	out->packet_id = tbv_get_le32(frame + 8);
	if (out->len > frame_len - TBV_NET_HDR_LEN)
		return -EMSGSIZE;
	if (!out->count || out->count > TBV_NET_MAX_FRAGS || out->index >= out->count)
		return -EPROTO;
	/* Every fragment but the last is full; the last is not empty unless alone. */
	if (out->index + 1 < out->count && out->len != TBV_NET_FRAG_PAYLOAD)
		return -EPROTO;
	if (out->index + 1 == out->count && !out->len && out->count > 1)
		return -EPROTO;
	/* 17 fragments could carry more than the largest packet; no sender makes them */
	if (out->index + 1 == out->count &&
	    (u32)(out->count - 1) * TBV_NET_FRAG_PAYLOAD + out->len > TBV_NET_MAX_PACKET)
		return -EMSGSIZE;
	return 0;
}

u32 tbv_net_packet_room(const struct tbv_net_frag *f)
{
	if (f->count == 1)
		return f->len;
	return TBV_MIN((u32)f->count * TBV_NET_FRAG_PAYLOAD, (u32)TBV_NET_MAX_PACKET);
}

u32 tbv_credit_frame_encode(u8 *frame, const struct tbv_credit_frame *c)
{
	frame[0] = TBV_FT_CREDIT;
	frame[1] = c->flags;
	tbv_put_le16(frame + 2, TBV_CREDIT_FRAME_LEN - TBV_FRAME_HDR_LEN);
	tbv_put_le32(frame + 4, c->seq);
	tbv_put_le32(frame + 8, c->limit);
	return TBV_CREDIT_FRAME_LEN;
}

int tbv_credit_frame_decode(const u8 *frame, u32 frame_len, struct tbv_credit_frame *out)
{
	if (frame_len != TBV_CREDIT_FRAME_LEN)
		return -EMSGSIZE;
	if (frame[0] != TBV_FT_CREDIT || (frame[1] & ~TBV_CREDIT_F_REQUEST) ||
	    tbv_get_le16(frame + 2) != TBV_CREDIT_FRAME_LEN - TBV_FRAME_HDR_LEN)
		return -EPROTO;
	out->flags = frame[1];
	out->seq = tbv_get_le32(frame + 4);
	out->limit = tbv_get_le32(frame + 8);
	return 0;
}

enum tbv_reasm_action tbv_net_reasm_push(struct tbv_net_reasm *r,
					 const struct tbv_net_frag *f,
					 bool *discarded, bool *complete)
{
	*discarded = false;
	*complete = false;

	if (f->index == 0) {
		*discarded = r->active;
		r->active = true;
		r->packet_id = f->packet_id;
		r->count = f->count;
		r->next_index = 1;
		r->received = f->len;
		*complete = f->count == 1;
		if (*complete)
			r->active = false;
		return TBV_REASM_START;
	}
	if (!r->active || f->packet_id != r->packet_id || f->count != r->count ||
	    f->index != r->next_index) {
		*discarded = r->active;
		r->active = false;
		return TBV_REASM_DROP;
	}
	r->next_index++;
	r->received += f->len;
	if (r->next_index == r->count) {
		r->active = false;
		*complete = true;
	}
	return TBV_REASM_APPEND;
}
