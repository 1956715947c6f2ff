/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What the test tools (tbv_integrity, tbv_lossy) share. */
#ifndef TBV_TOOLS_H
#define TBV_TOOLS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

/* The device called @name, opened; @tool exits 2 with a message if it cannot. */
static inline struct ibv_context *tbv_open_by_name(const char *tool, const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	int i;

	if (!list) {
		fprintf(stderr, "%s: ibv_get_device_list: %s\n", tool, strerror(errno));
		exit(2);
	}
	for (i = 0; list[i] && strcmp(ibv_get_device_name(list[i]), name); i++)
		;
	if (!list[i]) {
		fprintf(stderr, "%s: no device %s\n", tool, name);
		exit(2);
	}
	ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "%s: ibv_open_device %s: %s\n", tool, name, strerror(errno));
		exit(2);
	}
	return ctx;
}

/*
 * Move @qp to RTR. That resolves the peer's MAC over the link's IP netdev; on a
 * lossy link an ARP exchange can be lost and the kernel gives up after 1 s with
 * ETIMEDOUT. The QP stays in INIT, so trying again is what an application
 * does. Returns 0 or the last error.
 */
static inline int tbv_modify_to_rtr(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int tries, ret;

	for (tries = 1; (ret = ibv_modify_qp(qp, attr, mask)); tries++) {
		if (ret != ETIMEDOUT || tries == 10)
			return ret;
		fprintf(stderr, "modify to RTR: address resolution timed out, retrying\n");
	}
	return 0;
}

#endif /* TBV_TOOLS_H */
