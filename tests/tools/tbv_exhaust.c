// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What one local user can take from a device (tests/device/test_quota.py runs it as
 * nobody): verbs objects until the kernel refuses them.
 *
 *   tbv_exhaust DEV big FLOOR_MIB   the largest CQs and QPs the device allows, one of each
 *                                   in turn, until each is refused; stops by itself before
 *                                   MemAvailable falls below FLOOR_MIB (a kernel that does
 *                                   not refuse in time must not take the VM down with it);
 *                                   locked in memory if RLIMIT_MEMLOCK allows (see big())
 *   tbv_exhaust DEV count KIND      the smallest objects of KIND (ctx, pd, cq, qp) until refused;
 *                                   KIND mw: memory windows, type 1 and type 2 in turn (unbound)
 *   tbv_exhaust DEV probe           one context, PD, CQ, QP and MR, then exits: 0 if all worked
 *
 * big and count print one line per kind, "KIND COUNT HOW" (HOW: the errno's name, or
 * "floor"), then "ready", and keep everything until their stdin closes; then they print
 * "closed" and exit 0. probe prints
 * "probe ok", or "probe STEP ERRNO" and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "tbv_tools.h"

#define TOOL		"tbv_exhaust"
#define MAX_INLINE	512	/* the device's (docs/architecture.md, "Limits") */
#define MAX_OBJECTS	70000	/* more than any device limit: a bound on the arrays */

/* MemAvailable in MiB. */
static long mem_available_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long kib = -1;

	if (!f) {
		perror("/proc/meminfo");
		exit(2);
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1)
			break;
	fclose(f);
	if (kib < 0) {
		fprintf(stderr, TOOL ": no MemAvailable\n");
		exit(2);
	}
	return kib / 1024;
}

static const char *err_name(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "unknown";
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t wr, uint32_t sge,
				uint32_t inline_data)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {
			.max_send_wr = wr,
			.max_recv_wr = wr,
			.max_send_sge = sge,
			.max_recv_sge = sge,
			.max_inline_data = inline_data,
		},
		.qp_type = IBV_QPT_RC,
	};

	return ibv_create_qp(pd, &attr);
}

/* Keep everything until the test closes our stdin. */
static void hold(void)
{
	char buf[64];

	printf("ready\n");
	fflush(stdout);
	while (fread(buf, 1, sizeof(buf), stdin) > 0)
		;
	printf("closed\n");
}

static int big(struct ibv_context *ctx, long floor_mib)
{
	struct ibv_device_attr dev;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *small = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	const char *cq_how = NULL, *qp_how = NULL;
	unsigned long cqs = 0, qps = 0;

	if (!pd || !small || ibv_query_device(ctx, &dev)) {
		fprintf(stderr, TOOL ": setup: %s\n", strerror(errno));
		return 2;
	}
	/*
	 * In a memory cgroup that the kernel's queues fill, our own pages (code,
	 * libraries) would be reclaimed to make room and faulted in again without
	 * end: keep them, so the cgroup has nothing to reclaim and refuses at once.
	 * Not MCL_FUTURE: the queues' rings, mapped later, would count against
	 * RLIMIT_MEMLOCK and their mmap() fail (EAGAIN) long before any limit of ours.
	 */
	mlockall(MCL_CURRENT);
	while (!cq_how || !qp_how) {
		if (mem_available_mib() < floor_mib) {
			cq_how = cq_how ?: "floor";
			qp_how = qp_how ?: "floor";
			break;
		}
		if (!cq_how) {
			if (ibv_create_cq(ctx, dev.max_cqe, NULL, NULL, 0))
				cqs++;
			else
				cq_how = err_name(errno);
		}
		if (!qp_how) {
			if (create_qp(pd, small, dev.max_qp_wr, dev.max_sge, MAX_INLINE))
				qps++;
			else
				qp_how = err_name(errno);
		}
	}
	printf("cq %lu %s\nqp %lu %s\n", cqs, cq_how, qps, qp_how);
	hold();
	return 0;
}

static int count(struct ibv_context *ctx, const char *kind)
{
	struct ibv_device *device = ctx->device;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	unsigned long n;
	void *obj = NULL;
	struct rlimit nofile;

	if (!pd || !cq) {
		fprintf(stderr, TOOL ": setup: %s\n", strerror(errno));
		return 2;
	}
	/* each context is an open file: allow as many as the hard limit does */
	if (!getrlimit(RLIMIT_NOFILE, &nofile)) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	/* the context, PD and CQ above are the first of their kinds */
	n = !strcmp(kind, "qp") || !strcmp(kind, "mw") ? 0 : 1;
	for (; n < MAX_OBJECTS; n++) {
		if (!strcmp(kind, "ctx"))
			obj = ibv_open_device(device);
		else if (!strcmp(kind, "pd"))
			obj = ibv_alloc_pd(ctx);
		else if (!strcmp(kind, "cq"))
			obj = ibv_create_cq(ctx, 1, NULL, NULL, 0);
		else if (!strcmp(kind, "qp"))
			obj = create_qp(pd, cq, 1, 1, 0);
		else if (!strcmp(kind, "mw"))
			obj = ibv_alloc_mw(pd, n % 2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
		else {
			fprintf(stderr, TOOL ": unknown kind %s\n", kind);
			return 2;
		}
		if (!obj)
			break;
	}
	printf("%s %lu %s\n", kind, n, obj ? "none" : err_name(errno));
	hold();
	return 0;
}

static int probe(struct ibv_context *ctx)
{
	static char buf[4096];
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	const char *step;

	step = "pd";
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		goto fail;
	step = "cq";
	cq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
	if (!cq)
		goto fail;
	step = "qp";
	if (!create_qp(pd, cq, 256, 2, 64))
		goto fail;
	step = "mr";
	if (!ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE))
		goto fail;
	printf("probe ok\n");
	return 0;
fail:
	printf("probe %s %s\n", step, err_name(errno));
	return 1;
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;

	if (argc < 3) {
		fprintf(stderr, "usage: " TOOL " DEV big FLOOR_MIB | count ctx|pd|cq|qp|mw | probe\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = tbv_open_by_name(TOOL, argv[1]);
	if (!strcmp(argv[2], "big") && argc == 4)
		return big(ctx, atol(argv[3]));
	if (!strcmp(argv[2], "count") && argc == 4)
		return count(ctx, argv[3]);
	if (!strcmp(argv[2], "probe"))
		return probe(ctx);
	fprintf(stderr, TOOL ": bad arguments\n");
	return 2;
}
