// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tbv_rdma_decode() on one received ring frame (the input, exactly as long as
 * the frame). A header it accepts must re-encode to the same bytes, fit the
 * frame, and obey what tbv_rdma.h promises: QPN/PSN ranges and the
 * full-packet rule. An input that starts with a split header frame is that
 * frame and the payload frame after it (tbv_split_pairs(), then
 * tbv_rdma_decode_split(), on a link of page-sized packets).
 */
#include "fuzz.h"
#include "tbv_frame.h"
#include "tbv_rdma.h"

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

static int fuzz_split(const u8 *data, size_t size)
{
	const u8 *payload = data + TBV_SPLIT_ENTRY_LEN;
	u32 len = (u32)(size - TBV_SPLIT_ENTRY_LEN), tag = data[TBV_RDMA_HDR_LEN];
	struct tbv_rdma_hdr h;

	if (!tbv_split_pairs(data, payload, len, tbv_split_sof(tag), tbv_split_eof(tag)))
		return 0;
	FUZZ_CHECK(tag < TBV_SPLIT_TAGS && len >= TBV_SPLIT_SAMPLE);
	FUZZ_CHECK(tbv_split_tag(tbv_split_sof(tag), tbv_split_eof(tag)) == (int)tag);
	if (tbv_rdma_decode_split(data, len, TBV_RDMA_SPLIT_PAYLOAD, &h))
		return 0;
	/* a split packet does not fit one frame, and is at most a page */
	FUZZ_CHECK(h.payload_len == len && tbv_rdma_needs_split(h.flags, len));
	FUZZ_CHECK(len <= TBV_RDMA_SPLIT_PAYLOAD && !(h.flags & TBV_RF_GRH));
	if ((h.kind == TBV_RK_SEND || h.kind == TBV_RK_WRITE || h.kind == TBV_RK_READ_RESP) &&
	    !(h.flags & TBV_RF_LAST))
		FUZZ_CHECK(h.payload_len == TBV_RDMA_SPLIT_PAYLOAD);
	fuzz_touch(payload, len);
	return 0;
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	static u8 again[TBV_FRAME_SIZE + 64], third[TBV_FRAME_SIZE + 64];
	struct tbv_rdma_hdr h, h2;
	u32 len, hdr_len;

	if (size >= TBV_SPLIT_ENTRY_LEN && data[0] == TBV_FT_RDMA_SPLIT &&
	    size <= TBV_SPLIT_ENTRY_LEN + TBV_FRAME_SIZE)
		return fuzz_split(data, size);
	if (size > TBV_FRAME_SIZE + 64)
		return -1;	/* not a frame: keep it out of the corpus */
	if (tbv_rdma_decode(data, (u32)size, TBV_RDMA_MAX_PAYLOAD, &h))
		return 0;

	FUZZ_CHECK(size >= TBV_RDMA_HDR_LEN && size <= TBV_FRAME_SIZE);
	FUZZ_CHECK(data[0] == TBV_FT_RDMA);
	FUZZ_CHECK(h.kind >= 1 && h.kind <= TBV_RK_MAX);
	FUZZ_CHECK(!(h.flags & ~TBV_RF_ALL));
	FUZZ_CHECK(h.dst_qpn <= TBV_QPN_MASK && h.src_qpn <= TBV_QPN_MASK);
	FUZZ_CHECK(h.psn <= TBV_PSN_MASK);
	FUZZ_CHECK(h.payload_len <= TBV_RDMA_MAX_PAYLOAD);
	/* Every packet but the last of a message is full (its offset follows from its PSN). */
	if ((h.kind == TBV_RK_SEND || h.kind == TBV_RK_WRITE || h.kind == TBV_RK_READ_RESP) &&
	    !(h.flags & TBV_RF_LAST))
		FUZZ_CHECK(h.payload_len == TBV_RDMA_MAX_PAYLOAD);
	if (h.kind == TBV_RK_ACK && h.syndrome == TBV_NAK_RNR)
		FUZZ_CHECK(tbv_rnr_timer_usec((u8)h.aux) > 0);

	/* Re-encoding gives the frame length, but for a dword's rounding, and the same header bytes. */
	len = tbv_rdma_encode(again, &h);
	FUZZ_CHECK(len <= size && size - len <= TBV_RX_PAD_MAX);
	FUZZ_CHECK(h.payload_len <= len);
	hdr_len = len - h.payload_len;
	FUZZ_CHECK(hdr_len >= TBV_RDMA_HDR_LEN);
	FUZZ_CHECK(!memcmp(again, data, hdr_len));

	/* The payload lies inside the frame: the verbs layer reads it from there (ASan). */
	fuzz_touch(data + hdr_len, h.payload_len);

	/* And the re-encoded frame decodes to a header that encodes the same again. */
	memcpy(again + hdr_len, data + hdr_len, h.payload_len);
	FUZZ_CHECK(tbv_rdma_decode(again, len, TBV_RDMA_MAX_PAYLOAD, &h2) == 0);
	FUZZ_CHECK(tbv_rdma_encode(third, &h2) == len);
	FUZZ_CHECK(!memcmp(third, again, hdr_len));
	return 0;
}
