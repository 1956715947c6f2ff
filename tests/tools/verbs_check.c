// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Small libibverbs probes for the VM tests, through the real provider:
 *   verbs_check hold DEV SECONDS   open DEV, allocate a PD, print "ready", then
 *                                  print every async event until the device is
 *                                  gone (DEVICE_FATAL) or SECONDS pass
 *   verbs_check unsupported DEV    verbs not implemented yet must fail cleanly
 *                                  with EOPNOTSUPP; prints one line per verb
 *   verbs_check inline_read DEV    post a READ, then a READ with IBV_SEND_INLINE,
 *                                  in one chain; prints "post <errno> bad_wr <which>"
 *   verbs_check last_wqe DEV       an RC QP on an SRQ goes INIT -> ERR, then
 *                                  RESET -> INIT -> ERR; prints "last_wqe N M": the
 *                                  Last WQE Reached events after each ERR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list) {
		perror("ibv_get_device_list");
		exit(2);
	}
	for (i = 0; list[i]; i++) {
		if (!strcmp(ibv_get_device_name(list[i]), name)) {
			ctx = ibv_open_device(list[i]);
			if (!ctx) {
				fprintf(stderr, "ibv_open_device(%s): %s\n", name, strerror(errno));
				exit(2);
			}
		}
	}
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "no device %s\n", name);
		exit(2);
	}
	return ctx;
}

static int hold(const char *name, int seconds)
{
	struct ibv_context *ctx = open_dev(name);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	time_t end = time(NULL) + seconds;
	int fatal = 0;

	if (!pd) {
		fprintf(stderr, "ibv_alloc_pd: %s\n", strerror(errno));
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	while (!fatal && time(NULL) < end) {
		struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		if (ibv_get_async_event(ctx, &ev))
			break;
		printf("event %s\n", ibv_event_type_str(ev.event_type));
		fflush(stdout);
		fatal = ev.event_type == IBV_EVENT_DEVICE_FATAL;
		ibv_ack_async_event(&ev);
	}
	/* After the device is gone these fail, but must not crash. */
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("closed\n");
	return fatal ? 0 : 1;
}

static void report(const char *verb, int ok_errno)
{
	printf("%s %s\n", verb, ok_errno == EOPNOTSUPP ? "EOPNOTSUPP" : strerror(ok_errno));
}

/*
 * What is not supported must fail cleanly (EOPNOTSUPP), and requests beyond
 * the reported limits must be refused (EINVAL), never silently clamped. One
 * line per probe: "<probe> <errno name or Success>".
 */
static int unsupported(const char *name)
{
	struct ibv_context *ctx = open_dev(name);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_device_attr da;
	struct ibv_qp_init_attr qpa;
	struct ibv_cq *cq;
	void *obj;

	if (!pd || ibv_query_device(ctx, &da)) {
		fprintf(stderr, "ibv_alloc_pd/query_device: %s\n", strerror(errno));
		return 2;
	}
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq) {
		fprintf(stderr, "ibv_create_cq: %s\n", strerror(errno));
		return 2;
	}
	errno = 0;
	obj = ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
	report("reg_dmabuf_mr", obj ? 0 : errno);
	errno = 0;
	obj = ibv_reg_mr(pd, &da, sizeof(da), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	report("reg_mr_on_demand", obj ? 0 : errno);
	errno = 0;
	obj = ibv_open_xrcd(ctx, &(struct ibv_xrcd_init_attr){
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1 });
	report("open_xrcd", obj ? 0 : errno);
	errno = 0;
	obj = ibv_alloc_mw(pd, (enum ibv_mw_type)3);	/* types 1 and 2 exist */
	report("alloc_mw_bad_type", obj ? 0 : errno);

	errno = 0;
	obj = ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0);
	report("create_cq_over_max_cqe", obj ? 0 : errno);
	qpa = (struct ibv_qp_init_attr){
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = da.max_qp_wr + 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	errno = 0;
	obj = ibv_create_qp(pd, &qpa);
	report("create_qp_over_max_wr", obj ? 0 : errno);
	qpa.cap.max_send_wr = 1;
	qpa.cap.max_send_sge = da.max_sge + 1;
	errno = 0;
	obj = ibv_create_qp(pd, &qpa);
	report("create_qp_over_max_sge", obj ? 0 : errno);
	qpa.cap.max_send_sge = 1;
	qpa.cap.max_inline_data = 1 << 20;
	errno = 0;
	obj = ibv_create_qp(pd, &qpa);
	report("create_qp_over_max_inline", obj ? 0 : errno);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

/*
 * Create one object of every kind the data path has, move the QPs through
 * INIT, then destroy everything in reverse. For allocation-failure runs: a
 * step that fails prints "<step> <errno>" and everything made so far is still
 * destroyed. Exit 0 when every step worked, 3 when one failed cleanly.
 */
static int objects(const char *name)
{
	static char buf[8192] __attribute__((aligned(4096)));
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_srq_init_attr srqa = { .attr = { .max_wr = 8, .max_sge = 2 } };
	struct ibv_qp_init_attr qpa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
	};
	struct ibv_context *ctx;
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_srq *srq = NULL;
	struct ibv_qp *rc = NULL, *ud = NULL, *srq_qp = NULL;
	const char *failed = NULL;
	int err = 0;

	ctx = open_dev(name);
#define STEP(what, expr) do { if (!failed && !(expr)) { failed = what; err = errno; } } while (0)
	STEP("alloc_pd", (pd = ibv_alloc_pd(ctx)));
	STEP("create_cq", (cq = ibv_create_cq(ctx, 32, NULL, NULL, 0)));
	STEP("reg_mr", (mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE)));
	STEP("create_srq", (srq = ibv_create_srq(pd, &srqa)));
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	STEP("create_qp_rc", (rc = ibv_create_qp(pd, &qpa)));
	qpa.qp_type = IBV_QPT_UD;
	STEP("create_qp_ud", (ud = ibv_create_qp(pd, &qpa)));
	qpa.qp_type = IBV_QPT_RC;
	qpa.srq = srq;
	STEP("create_qp_srq", (srq_qp = ibv_create_qp(pd, &qpa)));
	STEP("modify_qp_init", !(errno = ibv_modify_qp(rc, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
							IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)));
#undef STEP
	if (failed)
		printf("%s %s\n", failed, strerror(err));
	if (srq_qp && ibv_destroy_qp(srq_qp))
		failed = "destroy_qp";
	if (ud && ibv_destroy_qp(ud))
		failed = "destroy_qp";
	if (rc && ibv_destroy_qp(rc))
		failed = "destroy_qp";
	if (srq && ibv_destroy_srq(srq))
		failed = "destroy_srq";
	if (mr && ibv_dereg_mr(mr))
		failed = "dereg_mr";
	if (cq && ibv_destroy_cq(cq))
		failed = "destroy_cq";
	if (pd && ibv_dealloc_pd(pd))
		failed = "dealloc_pd";
	ibv_close_device(ctx);
	return failed ? 3 : 0;
}

/*
 * An RDMA READ has nothing to send inline: mlx5 refuses IBV_SEND_INLINE on it
 * at post time, rdma-core's rxe provider posts it. The QP is moved to the error
 * state (posting is allowed there and needs no peer); prints what ibv_post_send()
 * returned, where bad_wr points and whether the READ before it was flushed.
 */
static int inline_read(const char *name)
{
	static char buf[4096] __attribute__((aligned(4096)));
	struct ibv_qp_init_attr qpa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_sge sge;
	struct ibv_send_wr wr[2] = {}, *bad = NULL;
	struct ibv_context *ctx = open_dev(name);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	int ret, flushed = 0;

	if (!pd || !cq || !mr) {
		perror("inline_read: pd, cq, mr");
		return 2;
	}
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	qp = ibv_create_qp(pd, &qpa);
	if (!qp || ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_ACCESS_FLAGS) ||
	    ibv_modify_qp(qp, &attr, IBV_QP_STATE)) {
		perror("inline_read: qp");
		return 2;
	}
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	for (int i = 0; i < 2; i++) {
		wr[i].wr_id = i + 1;
		wr[i].opcode = IBV_WR_RDMA_READ;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED | (i ? IBV_SEND_INLINE : 0);
		wr[i].wr.rdma.remote_addr = 0x1000;
		wr[i].wr.rdma.rkey = 1;
	}
	wr[0].next = &wr[1];
	ret = ibv_post_send(qp, wr, &bad);
	for (int tries = 0; tries < 1000 && !flushed; tries++) {
		while (ibv_poll_cq(cq, 1, &wc) > 0)
			flushed += wc.wr_id == 1 && wc.status == IBV_WC_WR_FLUSH_ERR;
		if (!flushed)
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	printf("post %s bad_wr %s first %s\n", ret ? strerrorname_np(ret) : "0",
	       bad == &wr[1] ? "inline" : bad == &wr[0] ? "first" : bad ? "other" : "none",
	       flushed ? "flushed" : "not-completed");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

/* The async events of @type for @qp that arrive within @ms; others are printed and skipped. */
static int count_qp_events(struct ibv_context *ctx, struct ibv_qp *qp,
			   enum ibv_event_type type, int ms)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	int n = 0;

	while (poll(&p, 1, ms) > 0) {
		struct ibv_async_event ev;

		if (ibv_get_async_event(ctx, &ev))
			break;
		if (ev.event_type == type && ev.element.qp == qp)
			n++;
		else
			printf("event %s\n", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
	return n;
}

/*
 * IBA 10.3.1: a QP on an SRQ reports Last WQE Reached when it enters the error
 * state (it takes no more of the SRQ's WQEs), once; a consumer waits for it
 * before it destroys the QP. After RESET and another ERR it reports again.
 * (rdma_rxe reports again on a modify from ERR to ERR, which is no transition:
 * not asked here.)
 */
static int last_wqe(const char *name)
{
	struct ibv_srq_init_attr srqa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_qp_init_attr qpa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
	};
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	struct ibv_context *ctx = open_dev(name);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_srq *srq = pd ? ibv_create_srq(pd, &srqa) : NULL;
	struct ibv_qp *qp;
	int first, second;

	if (!pd || !cq || !srq) {
		perror("last_wqe: pd, cq, srq");
		return 2;
	}
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	qpa.srq = srq;
	qp = ibv_create_qp(pd, &qpa);
	if (!qp || ibv_modify_qp(qp, &init, init_mask) || ibv_modify_qp(qp, &err, IBV_QP_STATE)) {
		perror("last_wqe: qp to ERR");
		return 2;
	}
	first = count_qp_events(ctx, qp, IBV_EVENT_QP_LAST_WQE_REACHED, 1000);
	if (ibv_modify_qp(qp, &reset, IBV_QP_STATE) || ibv_modify_qp(qp, &init, init_mask) ||
	    ibv_modify_qp(qp, &err, IBV_QP_STATE)) {
		perror("last_wqe: qp through RESET to ERR");
		return 2;
	}
	second = count_qp_events(ctx, qp, IBV_EVENT_QP_LAST_WQE_REACHED, 1000);
	printf("last_wqe %d %d\n", first, second);
	ibv_destroy_qp(qp);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "objects"))
		return objects(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(argv[2], atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "unsupported"))
		return unsupported(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "inline_read"))
		return inline_read(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "last_wqe"))
		return last_wqe(argv[2]);
	fprintf(stderr, "usage: verbs_check hold DEV SECONDS | unsupported DEV | objects DEV | "
		"inline_read DEV | last_wqe DEV\n");
	return 2;
}
