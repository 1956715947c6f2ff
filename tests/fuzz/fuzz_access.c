// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The responder's acceptance arithmetic (kernel/proto/tbv_rdma.h), which every
 * remote access of a peer goes through before a byte moves:
 *
 *  - tbv_range_within(), the range check of an MR (tbv_mr_check()) and of a
 *    memory window (tbv_mw_check()): it accepts exactly the accesses that lie
 *    inside the granted range, computed here without wrapping (128 bits);
 *  - what follows an accepted access in an MR of user pages (tbv_mr_copy()):
 *    its last byte is on a page the MR pinned;
 *  - a message checked once in full and then placed packet by packet
 *    (segmentation, tbv_rdma_pkt_payload()): every packet's bytes lie inside
 *    the message, and the packets add up to it;
 *  - tbv_psn_classify(): expected, duplicate (up to 2^23 behind) or ahead,
 *    by the 24-bit distance.
 *
 * A granted range never wraps the address space: registration refuses an MR
 * whose iova + length wraps (tbv_mr.c), and a window is bound inside an MR.
 * The harness keeps to such ranges; the range check itself is tried on all.
 *
 * Input: records of 40 bytes (base, length, va, len as u64, then a u32 page
 * offset and a u32 PSN pair seed). Boundary cases come from the low bits: the
 * va and len are also tried relative to the range's ends.
 */
#include <string.h>

#include "fuzz.h"
#include "tbv_rdma.h"

#define REC		40
#define PAGE		4096u
#define MAX_MSG		(1u << 31)	/* the largest message a WQE can carry */

typedef unsigned __int128 u128;

static u64 get64(const u8 *p)
{
	u64 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static u32 get32(const u8 *p)
{
	u32 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The check against arithmetic that cannot wrap. */
static void check_range(u64 base, u64 length, u64 va, u64 len)
{
	bool inside = va >= base && (u128)va + len <= (u128)base + length;

	FUZZ_CHECK(tbv_range_within(base, length, va, len) == inside);
}

/* An MR of user pages: iova, length, its first byte page_offset into its first page. */
static void check_mr_pages(u64 iova, u64 length, u32 page_offset, u64 va, u64 len)
{
	u128 npages = ((u128)page_offset + length + PAGE - 1) / PAGE;
	u64 off;

	if ((u128)iova + length > ~0ull || !tbv_range_within(iova, length, va, len) || !len)
		return;
	off = va - iova + page_offset;	/* as tbv_mr_copy() computes it */
	FUZZ_CHECK((u128)off + len - 1 < npages * PAGE);
	FUZZ_CHECK(((u128)off + len - 1) / PAGE < npages);
}

/* A message of @len bytes at @va, accepted as a whole, then placed packet by packet. */
static void check_segments(u64 base, u64 length, u64 va, u32 len)
{
	u32 n = tbv_rdma_npkts(len, TBV_RDMA_MAX_PAYLOAD), i;
	u64 total = 0;

	if ((u128)base + length > ~0ull || !tbv_range_within(base, length, va, len))
		return;
	FUZZ_CHECK(n >= 1);
	/* a few packets: the first, the last, and around one chosen by the input */
	for (i = 0; i < n; i++) {
		u64 off = (u64)i * TBV_RDMA_MAX_PAYLOAD;
		u32 plen = tbv_rdma_pkt_payload(len, i, TBV_RDMA_MAX_PAYLOAD);

		FUZZ_CHECK(plen <= TBV_RDMA_MAX_PAYLOAD);
		FUZZ_CHECK(i + 1 == n || plen == TBV_RDMA_MAX_PAYLOAD);
		FUZZ_CHECK(off + plen <= len);
		FUZZ_CHECK(tbv_range_within(base, length, va + off, plen));
		total += plen;
		if (i == 2 && n > 6)
			i = n - 3;	/* the middle is the same arithmetic */
	}
	if (n <= 6)
		FUZZ_CHECK(total == len);
	/* every packet but the last is full, the last holds the rest */
	FUZZ_CHECK((u64)(n - 1) * TBV_RDMA_MAX_PAYLOAD + tbv_rdma_pkt_payload(len, n - 1, TBV_RDMA_MAX_PAYLOAD) == len);
	/* past the last packet nothing is placed */
	FUZZ_CHECK(tbv_rdma_pkt_payload(len, n, TBV_RDMA_MAX_PAYLOAD) == 0);
}

static void check_psn(u32 seed)
{
	u32 expected = seed & TBV_PSN_MASK;
	u32 d = (seed >> 8) & TBV_PSN_MASK;
	u32 psn = tbv_psn_add(expected, d);
	enum tbv_psn_class c = tbv_psn_classify(psn, expected);

	if (d == 0)
		FUZZ_CHECK(c == TBV_PSN_EXPECTED);
	else if (d >= 0x800000u)
		FUZZ_CHECK(c == TBV_PSN_DUPLICATE);	/* 1 .. 2^23 behind */
	else
		FUZZ_CHECK(c == TBV_PSN_AHEAD);
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	for (; size >= REC; data += REC, size -= REC) {
		u64 base = get64(data), length = get64(data + 8);
		u64 va = get64(data + 16), len = get64(data + 24);
		u32 page_offset = get32(data + 32) % PAGE, seed = get32(data + 36);
		/* near the range's ends too, where an off-by-one or a wrap would show */
		u64 vas[] = { va, base + (va & 0xffff), base + length - (va & 0xffff),
			      base - (va & 0xff) };
		u64 lens[] = { len, len & 0xffff, length - (len & 0xff), length + (len & 0xff) };
		unsigned int i, j;

		for (i = 0; i < TBV_ARRAY_SIZE(vas); i++) {
			for (j = 0; j < TBV_ARRAY_SIZE(lens); j++) {
				check_range(base, length, vas[i], lens[j]);
				check_mr_pages(base, length, page_offset, vas[i], lens[j]);
			}
			check_segments(base, length, vas[i], (u32)(len % MAX_MSG));
		}
		check_psn(seed);
	}
	return 0;
}
