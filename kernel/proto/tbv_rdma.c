// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * RDMA packet headers. Received headers are untrusted: every field is checked
 * against the rules of its kind before the verbs layer sees it.
 */
#include "tbv_rdma.h"
#include "tbv_frame.h"

void tbv_rdma_put_u64(u8 *p, u64 v)
{
	tbv_put_le32(p, (u32)v);
	tbv_put_le32(p + 4, (u32)(v >> 32));
}

u64 tbv_rdma_get_u64(const u8 *p)
{
	return tbv_get_le32(p) | ((u64)tbv_get_le32(p + 4) << 32);
}

u32 tbv_rdma_encode(u8 *frame, const struct tbv_rdma_hdr *h)
{
	frame[0] = TBV_FT_RDMA;
	frame[1] = 0;
	tbv_put_le16(frame + 2, h->payload_len);
	frame[4] = h->kind;
	frame[5] = h->flags;
	frame[6] = h->syndrome;
	frame[7] = 0;
	tbv_put_le32(frame + 8, h->dst_qpn);
	tbv_put_le32(frame + 12, h->src_qpn);
	tbv_put_le32(frame + 16, h->psn);
	tbv_put_le32(frame + 20, h->imm);
	tbv_rdma_put_u64(frame + 24, h->va);
	tbv_put_le32(frame + 32, h->rkey);
	tbv_put_le32(frame + 36, h->len);
	tbv_put_le32(frame + 40, (h->flags & TBV_RF_SEQ) ? h->tsn : h->qkey);
	tbv_put_le32(frame + 44, h->aux);
	if (h->flags & TBV_RF_GRH) {
		memcpy(frame + TBV_RDMA_HDR_LEN, h->sgid, 16);
		memcpy(frame + TBV_RDMA_HDR_LEN + 16, h->dgid, 16);
	}
	return tbv_rdma_hdr_len(h->flags) + h->payload_len;
}

/* Flags each kind may carry, and those it must carry. */
static const struct {
	u8 allowed;
	u8 required;
} tbv_rdma_kind_flags[TBV_RK_MAX + 1] = {
	[TBV_RK_SEND] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_IMM | TBV_RF_SOLICITED |
			  TBV_RF_ACK_REQ | TBV_RF_INV, 0 },
	[TBV_RK_WRITE] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_IMM | TBV_RF_SOLICITED |
			   TBV_RF_ACK_REQ, 0 },
	[TBV_RK_READ_REQ] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ,
			      TBV_RF_FIRST | TBV_RF_LAST },
	[TBV_RK_READ_RESP] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST, 0 },
	[TBV_RK_ACK] = { TBV_RF_SEQ, 0 },
	[TBV_RK_UD_SEND] = { TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_IMM | TBV_RF_SOLICITED |
			     TBV_RF_GRH, TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_GRH },
	[TBV_RK_ATOMIC] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST, TBV_RF_FIRST | TBV_RF_LAST },
	[TBV_RK_ATOMIC_RESP] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST, TBV_RF_FIRST | TBV_RF_LAST },
	[TBV_RK_FLUSH] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ,
			   TBV_RF_FIRST | TBV_RF_LAST },
	[TBV_RK_ATOMIC_WRITE] = { TBV_RF_SEQ | TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ,
				  TBV_RF_FIRST | TBV_RF_LAST },
};

static int tbv_rdma_check(const struct tbv_rdma_hdr *h, u32 full)
{
	bool first = h->flags & TBV_RF_FIRST, last = h->flags & TBV_RF_LAST;

	if (h->kind == 0 || h->kind > TBV_RK_MAX)
		return -EPROTO;
	if ((h->flags & ~tbv_rdma_kind_flags[h->kind].allowed) ||
	    (h->flags & tbv_rdma_kind_flags[h->kind].required) !=
	    tbv_rdma_kind_flags[h->kind].required)
		return -EPROTO;
	if ((h->flags & (TBV_RF_IMM | TBV_RF_SOLICITED | TBV_RF_INV)) && !last)
		return -EPROTO;
	if ((h->flags & TBV_RF_IMM) && (h->flags & TBV_RF_INV))
		return -EPROTO;
	if (h->dst_qpn > TBV_QPN_MASK || h->src_qpn > TBV_QPN_MASK || h->psn > TBV_PSN_MASK)
		return -EPROTO;
	if (!(h->flags & TBV_RF_IMM) && h->imm)
		return -EPROTO;
	if (h->kind != TBV_RK_ACK && h->syndrome)
		return -EPROTO;
	if (h->kind != TBV_RK_ACK && h->kind != TBV_RK_ATOMIC && h->kind != TBV_RK_FLUSH &&
	    h->aux)
		return -EPROTO;
	if (h->kind != TBV_RK_UD_SEND && h->qkey)
		return -EPROTO;

	switch (h->kind) {
	case TBV_RK_SEND:
		if (h->va || h->len || (!(h->flags & TBV_RF_INV) && h->rkey))
			return -EPROTO;
		break;
	case TBV_RK_READ_RESP:
		if (h->va || h->rkey || h->len)
			return -EPROTO;
		break;
	case TBV_RK_WRITE:
		if (!first && (h->va || h->rkey || h->len))
			return -EPROTO;
		/* the first packet announces the length; its own payload must fit it */
		if (first && (last ? h->len != h->payload_len : h->len <= h->payload_len))
			return -EPROTO;
		break;
	case TBV_RK_READ_REQ:
		if (h->payload_len || h->len > 0x80000000u)
			return -EPROTO;
		break;
	case TBV_RK_ACK:
		if (h->payload_len || h->syndrome > TBV_ACK_MAX || h->va || h->rkey || h->len)
			return -EPROTO;
		if (h->syndrome != TBV_NAK_RNR && h->syndrome != TBV_ACK_OK && h->aux)
			return -EPROTO;
		if (h->syndrome == TBV_NAK_RNR && h->aux > 31)
			return -EPROTO;
		break;
	case TBV_RK_UD_SEND:
		if (h->va || h->rkey || h->len || h->payload_len > TBV_RDMA_UD_MAX_PAYLOAD)
			return -EPROTO;
		break;
	case TBV_RK_ATOMIC:
		/* alignment is the responder's to check: a misaligned va is a NAK, not noise */
		if (h->len != TBV_ATOMIC_LEN || h->payload_len != TBV_ATOMIC_REQ_PAYLOAD ||
		    (h->aux != TBV_ATOMIC_CMP_SWP && h->aux != TBV_ATOMIC_FETCH_ADD))
			return -EPROTO;
		break;
	case TBV_RK_ATOMIC_RESP:
		if (h->va || h->rkey || h->len || h->payload_len != TBV_ATOMIC_RESP_PAYLOAD)
			return -EPROTO;
		break;
	case TBV_RK_FLUSH:
		if (h->payload_len ||
		    (h->aux != TBV_FLUSH_AUX(TBV_FLUSH_GLOBAL, TBV_FLUSH_RANGE) &&
		     h->aux != TBV_FLUSH_AUX(TBV_FLUSH_GLOBAL, TBV_FLUSH_MR) &&
		     h->aux != TBV_FLUSH_AUX(TBV_FLUSH_PERSISTENT, TBV_FLUSH_RANGE) &&
		     h->aux != TBV_FLUSH_AUX(TBV_FLUSH_PERSISTENT, TBV_FLUSH_MR)))
			return -EPROTO;
		break;
	case TBV_RK_ATOMIC_WRITE:
		if (h->len != TBV_ATOMIC_LEN || h->payload_len != TBV_ATOMIC_LEN)
			return -EPROTO;
		break;
	}
	/* Full-packet rule: a packet's offset in its message is (psn - first) * full. */
	if (h->payload_len > full)
		return -EMSGSIZE;
	if ((h->kind == TBV_RK_SEND || h->kind == TBV_RK_WRITE || h->kind == TBV_RK_READ_RESP) &&
	    !last && h->payload_len != full)
		return -EPROTO;
	return 0;
}

/* The fixed header's fields (TBV_RDMA_HDR_LEN bytes at @frame), with the checks of its frame type @type. */
static int tbv_rdma_decode_hdr(const u8 *frame, u8 type, struct tbv_rdma_hdr *h)
{
	if (frame[0] != type || frame[1] != 0 || frame[7] != 0)
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	h->payload_len = tbv_get_le16(frame + 2);
	h->kind = frame[4];
	h->flags = frame[5];
	h->syndrome = frame[6];
	h->dst_qpn = tbv_get_le32(frame + 8);
	h->src_qpn = tbv_get_le32(frame + 12);
	h->psn = tbv_get_le32(frame + 16);
	h->imm = tbv_get_le32(frame + 20);
	h->va = tbv_rdma_get_u64(frame + 24);
	h->rkey = tbv_get_le32(frame + 32);
	h->len = tbv_get_le32(frame + 36);
	if (h->flags & TBV_RF_SEQ)
		h->tsn = tbv_get_le32(frame + 40);
	else
		h->qkey = tbv_get_le32(frame + 40);
	h->aux = tbv_get_le32(frame + 44);
	if (h->flags & ~TBV_RF_ALL)
		return -EPROTO;
	return 0;
}

int tbv_rdma_decode(const u8 *frame, u32 frame_len, u32 full, struct tbv_rdma_hdr *h)
{
	int ret;

	if (frame_len < TBV_RDMA_HDR_LEN || frame_len > TBV_FRAME_SIZE)
		return -EMSGSIZE;
	ret = tbv_rdma_decode_hdr(frame, TBV_FT_RDMA, h);
	if (ret)
		return ret;
	/* the frame holds the packet, and at most a dword's rounding after it */
	if ((u32)tbv_rdma_hdr_len(h->flags) + h->payload_len > frame_len ||
	    frame_len - tbv_rdma_hdr_len(h->flags) - h->payload_len > TBV_RX_PAD_MAX)
		return -EMSGSIZE;
	if (h->flags & TBV_RF_GRH) {
		memcpy(h->sgid, frame + TBV_RDMA_HDR_LEN, 16);
		memcpy(h->dgid, frame + TBV_RDMA_HDR_LEN + 16, 16);
	}
	return tbv_rdma_check(h, full);
}

u32 tbv_split_encode(u8 *frame, u32 tag, const u8 *first, const u8 *last)
{
	u8 *check = frame + TBV_RDMA_HDR_LEN;

	frame[0] = TBV_FT_RDMA_SPLIT;
	memset(check, 0, 8);
	check[0] = tag % TBV_SPLIT_TAGS;
	memcpy(check + 8, first, TBV_SPLIT_SAMPLE);
	memcpy(check + 8 + TBV_SPLIT_SAMPLE, last, TBV_SPLIT_SAMPLE);
	return TBV_SPLIT_ENTRY_LEN;
}

bool tbv_split_pairs(const u8 *hdr, const u8 *payload, u32 len, u8 sof, u8 eof)
{
	const u8 *check = hdr + TBV_RDMA_HDR_LEN;
	u32 tag = check[0];

	if (len < TBV_SPLIT_SAMPLE || tag >= TBV_SPLIT_TAGS ||
	    sof != tbv_split_sof(tag) || eof != tbv_split_eof(tag))
		return false;
	return !memcmp(check + 8, payload, TBV_SPLIT_SAMPLE) &&
	       !memcmp(check + 8 + TBV_SPLIT_SAMPLE, payload + len - TBV_SPLIT_SAMPLE,
		       TBV_SPLIT_SAMPLE);
}

int tbv_rdma_decode_split(const u8 *hdr, u32 payload_len, u32 full, struct tbv_rdma_hdr *h)
{
	int ret = tbv_rdma_decode_hdr(hdr, TBV_FT_RDMA_SPLIT, h);

	if (ret)
		return ret;
	/* the GID extension would be in the header frame, which is the bare header */
	if (h->flags & TBV_RF_GRH)
		return -EPROTO;
	/* a payload that fits one frame with its header is never split */
	if (h->payload_len != payload_len || !tbv_rdma_needs_split(h->flags, payload_len))
		return -EMSGSIZE;
	return tbv_rdma_check(h, full);
}

u32 tbv_rnr_timer_usec(u8 code)
{
	static const u32 usec[32] = {
		655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
		1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
		40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};

	return usec[code < 32 ? code : 0];
}
