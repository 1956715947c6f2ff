// SPDX-License-Identifier: GPL-2.0
/*
 * tbv_ring_hoard: what a process holds by keeping the rings it mapped (tests/device/test_quota.py
 * runs it as nobody under a small max_user_queue_mb; docs/security.md, "Local limits"). The raw
 * uverbs ABI, as tbv_ring_abuse (kernel UAPI headers only, no libibverbs): rdma-core's rxe
 * provider unmaps a ring when its object is destroyed or resized, this tool never does.
 *
 * Usage: tbv_ring_hoard DEV MODE ENTRIES STOP_MIB
 *   cq_resize    one CQ of ENTRIES entries, resized again and again, alternately to 2 * ENTRIES + 1
 *                and back (growing and shrinking), each new ring mapped, no old one unmapped
 *   cq_create    CQs of ENTRIES entries, each created, its ring mapped, destroyed: the rings stay
 *   srq_modify   one SRQ of ENTRIES WRs (1 SGE), modify_srq(max_wr) alternately to
 *                2 * ENTRIES + 1 and back, as cq_resize
 * until the kernel refuses a new ring, or until the rings mapped reach STOP_MIB (a kernel that
 * does not refuse).
 *
 * Prints "rings N mapped BYTES largest BYTES until HOW": N rings mapped (the live one and the
 * ones kept), BYTES their sum, the largest one, and HOW the errno name of the refusal
 * ("stop": STOP_MIB reached). Keeps everything until exit. Exit 0; 1 if anything else fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

#include "tbv_uverbs.h"

#define SRQ_MAX_WR 1		/* IB_SRQ_MAX_WR */

static void die(const char *what, int err)
{
	printf("FAIL: %s: %s\n", what, strerror(err));
	exit(1);
}

static const char *err_name(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "unknown";
}

static int fd;
static unsigned long rings;
static size_t mapped, largest;

/* Map the ring @mi describes and keep it: never unmapped. */
static void keep(const struct mminfo *mi)
{
	void *p;

	if (!mi->size)
		die("a ring of size 0 (a kernel queue)", EINVAL);
	p = mmap(NULL, mi->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, mi->offset);
	if (p == MAP_FAILED)
		die("mmap", errno);
	rings++;
	mapped += mi->size;
	if (mi->size > largest)
		largest = mi->size;
}

static int create_cq(uint32_t entries, uint32_t *handle)
{
	struct ib_uverbs_create_cq c = {};
	struct { struct ib_uverbs_create_cq_resp core; struct rxe_create_cq_resp rxe; } r = {};
	int ret;

	c.response = (uintptr_t)&r;
	c.cqe = entries;
	c.comp_channel = -1;
	ret = tbv_uverbs_command(fd, IB_USER_VERBS_CMD_CREATE_CQ, &c, sizeof(c), sizeof(r));
	if (ret)
		return ret;
	*handle = r.core.cq_handle;
	keep(&r.rxe.mi);
	return 0;
}

static void destroy_cq(uint32_t handle)
{
	struct ib_uverbs_destroy_cq c = {};
	struct ib_uverbs_destroy_cq_resp r;
	int ret;

	c.response = (uintptr_t)&r;
	c.cq_handle = handle;
	ret = tbv_uverbs_command(fd, IB_USER_VERBS_CMD_DESTROY_CQ, &c, sizeof(c), sizeof(r));
	if (ret)
		die("DESTROY_CQ", -ret);
}

static int resize_cq(uint32_t handle, uint32_t entries)
{
	struct ib_uverbs_resize_cq c = {};
	struct { struct ib_uverbs_resize_cq_resp core; struct rxe_resize_cq_resp rxe; } r = {};
	int ret;

	c.response = (uintptr_t)&r;
	c.cq_handle = handle;
	c.cqe = entries;
	ret = tbv_uverbs_command(fd, IB_USER_VERBS_CMD_RESIZE_CQ, &c, sizeof(c), sizeof(r));
	if (!ret)
		keep(&r.rxe.mi);
	return ret;
}

static int create_srq(uint32_t entries, uint32_t *handle)
{
	struct ib_uverbs_alloc_pd p = {};
	struct ib_uverbs_alloc_pd_resp pr = {};
	struct ib_uverbs_create_srq c = {};
	struct { struct ib_uverbs_create_srq_resp core; struct rxe_create_srq_resp rxe; } r = {};
	int ret;

	p.response = (uintptr_t)&pr;
	ret = tbv_uverbs_command(fd, IB_USER_VERBS_CMD_ALLOC_PD, &p, sizeof(p), sizeof(pr));
	if (ret)
		die("ALLOC_PD", -ret);
	c.response = (uintptr_t)&r;
	c.pd_handle = pr.pd_handle;
	c.max_wr = entries;
	c.max_sge = 1;
	ret = tbv_uverbs_command(fd, IB_USER_VERBS_CMD_CREATE_SRQ, &c, sizeof(c), sizeof(r));
	if (ret)
		return ret;
	*handle = r.core.srq_handle;
	keep(&r.rxe.mi);
	return 0;
}

/* rxe's modify_srq: the new ring's mminfo is written to mmap_info_addr, not to a response. */
static int modify_srq(uint32_t handle, uint32_t entries)
{
	struct { struct ib_uverbs_modify_srq core; struct rxe_modify_srq_cmd rxe; } c = {};
	struct mminfo mi = {};
	int ret;

	c.core.srq_handle = handle;
	c.core.attr_mask = SRQ_MAX_WR;
	c.core.max_wr = entries;
	c.rxe.mmap_info_addr = (uintptr_t)&mi;
	ret = tbv_uverbs_command(fd, IB_USER_VERBS_CMD_MODIFY_SRQ, &c, sizeof(c), 0);
	if (!ret)
		keep(&mi);
	return ret;
}

int main(int argc, char **argv)
{
	struct ib_uverbs_get_context gc = {};
	struct ib_uverbs_get_context_resp gcr = {};
	uint32_t entries, handle = 0, i;
	const char *mode;
	size_t stop;
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 5) {
		fprintf(stderr, "usage: %s DEV cq_resize|cq_create|srq_modify ENTRIES STOP_MIB\n",
			argv[0]);
		return 2;
	}
	mode = argv[2];
	entries = strtoul(argv[3], NULL, 0);
	stop = strtoull(argv[4], NULL, 0) << 20;
	fd = tbv_uverbs_open(argv[1]);
	if (fd < 0)
		die(argv[1], -fd);
	gc.response = (uintptr_t)&gcr;
	ret = tbv_uverbs_command(fd, IB_USER_VERBS_CMD_GET_CONTEXT, &gc, sizeof(gc), sizeof(gcr));
	if (ret)
		die("GET_CONTEXT", -ret);

	if (!strcmp(mode, "cq_resize"))
		ret = create_cq(entries, &handle);
	else if (!strcmp(mode, "srq_modify"))
		ret = create_srq(entries, &handle);
	else if (strcmp(mode, "cq_create"))
		die(mode, EINVAL);	/* not a mode */
	for (i = 1; !ret && mapped < stop; i++) {
		/* odd steps grow, even ones shrink back */
		uint32_t n = i % 2 ? 2 * entries + 1 : entries;

		if (!strcmp(mode, "cq_resize")) {
			ret = resize_cq(handle, n);
		} else if (!strcmp(mode, "srq_modify")) {
			ret = modify_srq(handle, n);
		} else {
			ret = create_cq(entries, &handle);
			if (!ret)
				destroy_cq(handle);	/* its ring stays mapped */
		}
	}
	printf("rings %lu mapped %zu largest %zu until %s\n", rings, mapped, largest,
	       ret ? err_name(-ret) : "stop");
	return 0;
}
