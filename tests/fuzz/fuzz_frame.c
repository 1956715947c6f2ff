// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * One received ring frame (the input, exactly as long as the frame) as a rail
 * sees it: tbv_frame_type(), then the NET fragment header (tbv_net_frag_decode)
 * the RDMA header (tbv_rdma_decode) and the credit frame. Each decoder must accept only its own
 * frame type; an accepted NET header must re-encode to the same bytes and its
 * payload must lie inside the frame.
 */
#include "fuzz.h"
#include "tbv_frame.h"
#include "tbv_rdma.h"

static void fuzz_net(const u8 *data, size_t size)
{
	u8 again[TBV_NET_HDR_LEN];
	struct tbv_net_frag f;
	u32 packet_len;

	if (tbv_net_frag_decode(data, (u32)size, &f))
		return;
	FUZZ_CHECK(size >= TBV_NET_HDR_LEN && size <= TBV_FRAME_SIZE);
	FUZZ_CHECK(data[0] == TBV_FT_NET);
	FUZZ_CHECK(f.len <= size - TBV_NET_HDR_LEN && f.len <= TBV_NET_FRAG_PAYLOAD);
	FUZZ_CHECK(f.count >= 1 && f.count <= TBV_NET_MAX_FRAGS && f.index < f.count);
	if (f.index + 1 < f.count)
		FUZZ_CHECK(f.len == TBV_NET_FRAG_PAYLOAD);

	/* The netdev copies the payload out of the frame: it must be inside (ASan). */
	fuzz_touch(data + TBV_NET_HDR_LEN, f.len);

	/* A packet this fragment can belong to; its fragment @index encodes the same header. */
	if (f.index + 1 == f.count)
		packet_len = (u32)f.index * TBV_NET_FRAG_PAYLOAD + f.len;
	else
		packet_len = (u32)(f.count - 1) * TBV_NET_FRAG_PAYLOAD + 1;
	FUZZ_CHECK(tbv_net_frag_count(packet_len) == f.count);
	FUZZ_CHECK(tbv_net_frag_encode(again, f.packet_id, packet_len, f.index) == f.len);
	FUZZ_CHECK(!memcmp(again, data, TBV_NET_HDR_LEN));
}

/* An accepted credit frame is exactly one and re-encodes to the same bytes. */
static void fuzz_credit(const u8 *data, size_t size)
{
	u8 again[TBV_CREDIT_FRAME_LEN];
	struct tbv_credit_frame c;

	if (tbv_credit_frame_decode(data, (u32)size, &c))
		return;
	FUZZ_CHECK(size == TBV_CREDIT_FRAME_LEN && data[0] == TBV_FT_CREDIT);
	FUZZ_CHECK(!(c.flags & ~TBV_CREDIT_F_REQUEST));
	FUZZ_CHECK(tbv_credit_frame_encode(again, &c) == TBV_CREDIT_FRAME_LEN);
	FUZZ_CHECK(!memcmp(again, data, TBV_CREDIT_FRAME_LEN));
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct tbv_rdma_hdr h;
	int type;

	if (size > TBV_FRAME_SIZE + 64)
		return -1;	/* not a frame: keep it out of the corpus */

	type = tbv_frame_type(data, (u32)size);
	if (size < TBV_FRAME_HDR_LEN || size > TBV_FRAME_SIZE)
		FUZZ_CHECK(type < 0);
	else
		FUZZ_CHECK(type == data[0]);

	/* Both decoders see every frame, as a confused sender could make them do. */
	fuzz_net(data, size);
	fuzz_credit(data, size);
	if (!tbv_rdma_decode(data, (u32)size, TBV_RDMA_MAX_PAYLOAD, &h))
		FUZZ_CHECK(type == TBV_FT_RDMA);
	return 0;
}
