// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Cost of the protocol core's NET path (fragment a packet into 4 KiB frames, validate
 * and reassemble it) against a baseline that only does the two copies any transport
 * must do (packet -> frames -> packet). Rounds alternate between the two so both see
 * the same machine state; the result is a ratio, not an absolute speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tbv_frame.h"

#define ROUNDS 15
#define PACKETS 2000

static u8 packet[TBV_NET_MAX_PACKET], out[TBV_NET_MAX_PACKET];
static u8 frames[TBV_NET_MAX_FRAGS][TBV_FRAME_SIZE];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static u32 run_protocol(u32 len)
{
	struct tbv_net_reasm r = { 0 };
	u32 got = 0, i, n = tbv_net_frag_count(len);

	for (i = 0; i < n; i++) {
		u16 flen = tbv_net_frag_encode(frames[i], 1, len, (u16)i);

		memcpy(frames[i] + TBV_NET_HDR_LEN, packet + i * TBV_NET_FRAG_PAYLOAD, flen);
	}
	for (i = 0; i < n; i++) {
		struct tbv_net_frag f;
		bool discarded, complete;

		if (tbv_net_frag_decode(frames[i], TBV_FRAME_SIZE, &f) ||
		    tbv_net_reasm_push(&r, &f, &discarded, &complete) == TBV_REASM_DROP)
			abort();
		memcpy(out + got, frames[i] + TBV_NET_HDR_LEN, f.len);
		got += f.len;
	}
	return got;
}

static u32 run_baseline(u32 len)
{
	u32 i, n = tbv_net_frag_count(len), got = 0;

	for (i = 0; i < n; i++) {
		u32 chunk = TBV_MIN(len - i * TBV_NET_FRAG_PAYLOAD, (u32)TBV_NET_FRAG_PAYLOAD);

		memcpy(frames[i], packet + i * TBV_NET_FRAG_PAYLOAD, chunk);
	}
	for (i = 0; i < n; i++) {
		u32 chunk = TBV_MIN(len - i * TBV_NET_FRAG_PAYLOAD, (u32)TBV_NET_FRAG_PAYLOAD);

		memcpy(out + got, frames[i], chunk);
		got += chunk;
	}
	return got;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	static const u32 sizes[] = { 1500, 9000, 65522 };
	unsigned int s, round, p;

	memset(packet, 0x5a, sizeof(packet));
	printf("%-8s %14s %14s %8s\n", "packet", "baseline ns", "protocol ns", "ratio");
	for (s = 0; s < TBV_ARRAY_SIZE(sizes); s++) {
		double base[ROUNDS], proto[ROUNDS];
		volatile u32 sink = 0;

		for (round = 0; round < ROUNDS; round++) {
			double t0 = now();

			for (p = 0; p < PACKETS; p++)
				sink += run_baseline(sizes[s]);
			base[round] = (now() - t0) / PACKETS * 1e9;
			t0 = now();
			for (p = 0; p < PACKETS; p++)
				sink += run_protocol(sizes[s]);
			proto[round] = (now() - t0) / PACKETS * 1e9;
		}
		qsort(base, ROUNDS, sizeof(double), cmp);
		qsort(proto, ROUNDS, sizeof(double), cmp);
		printf("%-8u %14.0f %14.0f %8.2f\n", sizes[s], base[ROUNDS / 2], proto[ROUNDS / 2],
		       proto[ROUNDS / 2] / base[ROUNDS / 2]);
	}
	return 0;
}
