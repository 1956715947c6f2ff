// SPDX-License-Identifier: GPL-2.0
/*
 * tbv_ring_abuse: drives usb4_rdma's user-shared rings (docs/rxe-abi.md §2-§4) through
 * rdma_rxe's raw user ABI, with no libibverbs: the legacy write() commands of
 * <rdma/ib_user_verbs.h> on /dev/infiniband/uverbsN, driver responses of <rdma/rdma_user_rxe.h>
 * (which is what gives an object rings), the rings mmap()ed on the uverbs fd, WQEs and indexes
 * written as rdma-core's rxe provider writes them, the CQ rings polled in place.
 *
 * Usage: tbv_ring_abuse MODE DEV0 GIDX0 DEV1 GIDX1
 * DEV0 is the requester, DEV1 the responder (the two ends of a virtual cable), each with a
 * RoCE v2 GID index (its GID is read from sysfs). One RC QP and one ring CQ per end.
 *
 * Modes:
 *   exercise     SEND, SEND_WITH_IMM and RDMA_WRITE; data and every CQE field checked.
 *   bad_opcode, bad_num_sge, bad_lkey, bad_sge_len, bad_sge_addr, bad_inline_len,
 *   bad_inline_read, bad_len_no_sge, bad_atomic_len, bad_flush_type, bad_local_inv_sge
 *                after a good SEND, a send WQE with one field corrupted: the documented error
 *                CQE (§6.1) and the QP in ERR.
 *   bad_ud_ah, bad_ud_qpn
 *                on a UD QP of the requester's end, a SEND WQE naming no AH of the process, or
 *                a remote QPN beyond 24 bits: IB_WC_LOC_QP_OP_ERR and the QP in ERR (§6.1).
 *   bad_srq_num_sge
 *                an SRQ ring's receive WQE with 1000 SGEs, taken by a SEND to a QP on the SRQ:
 *                IB_WC_LOC_QP_OP_ERR on the responder, IB_WC_REM_INV_REQ_ERR on the requester.
 *   bad_recv_num_sge, bad_recv_lkey
 *                after a good SEND, a receive WQE with one field corrupted, then a SEND to it:
 *                the responder's error CQE (§6.2), the requester's remote error.
 *   sq_prod, rq_prod, cq_cons
 *                after a good SEND, an index set beyond the ring (§6.3): the tool must finish
 *                (bounded waits), whatever the completions, and every object must be destroyed.
 *   sq_cons, cq_prod
 *                the same with an index that is the kernel's (it keeps its own and never reads
 *                it back): overwritten by the process before the next SEND.
 *   doorbell_storm
 *                on a UD QP of the requester's end with the largest SQ ring, for STORM_SECONDS:
 *                one thread keeps the ring full of unsignaled UD SENDs longer than the MTU
 *                (completed unsent: no frame, no credit), ringing the doorbell when the kernel
 *                is idle, and two more ring it in a loop. Then the ring must be consumed to its producer, a signaled one
 *                completes, and a full ring rung once is left to DESTROY_QP. Prints how many
 *                WQEs and doorbells went in ("storm: posted N ...").
 * Exit 0 only if every check held; each failure prints "FAIL: ...".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

#include "tbv_uverbs.h"

/* kernel values (include/rdma/ib_verbs.h), which uverbs passes through */
enum {
	QP_STATE = 1 << 0, QP_ACCESS_FLAGS = 1 << 3, QP_PKEY_INDEX = 1 << 4, QP_PORT = 1 << 5,
	QP_AV = 1 << 7, QP_PATH_MTU = 1 << 8, QP_TIMEOUT = 1 << 9, QP_RETRY_CNT = 1 << 10,
	QP_RNR_RETRY = 1 << 11, QP_RQ_PSN = 1 << 12, QP_MAX_QP_RD_ATOMIC = 1 << 13,
	QP_MIN_RNR_TIMER = 1 << 15, QP_SQ_PSN = 1 << 16, QP_MAX_DEST_RD_ATOMIC = 1 << 17,
	QP_DEST_QPN = 1 << 20,
};
enum { QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_SQD, QPS_SQE, QPS_ERR };
enum { WC_SUCCESS, WC_LOC_LEN_ERR, WC_LOC_QP_OP_ERR, WC_LOC_EEC_OP_ERR, WC_LOC_PROT_ERR,
	WC_WR_FLUSH_ERR, WC_MW_BIND_ERR, WC_BAD_RESP_ERR, WC_LOC_ACCESS_ERR, WC_REM_INV_REQ_ERR,
	WC_REM_ACCESS_ERR, WC_REM_OP_ERR };
enum { ACCESS_LOCAL_WRITE = 1, ACCESS_REMOTE_WRITE = 2, ACCESS_REMOTE_READ = 4 };
enum { QPT_RC = 2, QPT_UD = 4 };
#define QP_QKEY (1 << 6)
#define UD_QKEY 0x11111111
enum { WC_RECV = 128 };			/* IB_WC_RECV */
#define SEND_SIGNALED 2			/* IB_SEND_SIGNALED, as the provider writes it */
#define SEND_INLINE 8			/* IBV_SEND_INLINE */
#define WR_FLUSH 14			/* IB_UVERBS_WR_FLUSH (not in every uapi header) */
#define SWQE_FLUSH_TYPE 40		/* wr.flush.type's byte in the send WQE (rxe's uapi) */
#define WC_FLAG_WITH_IMM 2	/* IBV_WC_WITH_IMM: user-space value (§4.3) */
#define MTU_1024 3
#define BUF_SIZE 16384
#define RING_WR 15		/* 16 slots */
#define STORM_WR 4096		/* the device's max_qp_wr: the largest SQ ring */
#define STORM_SECONDS 30
#define STORM_LEN 4096		/* a UD SEND longer than the port MTU (2048) */
#define STORM_RINGERS 2		/* the holder's kick is lost to no one: another keeps ringing */
#define WAIT_MS 10000

static int failures;

static void report(const char *fmt, va_list ap)
{
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	failures++;
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(fmt, ap);
	va_end(ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(fmt, ap);
	va_end(ap);
	exit(1);
}

struct ring {
	struct rxe_queue_buf *q;
	size_t len;
	uint32_t mask, elem;
	uint32_t own;		/* our index: producer (SQ, RQ) or consumer (CQ) */
};

struct end {
	const char *ibdev;
	int fd;
	uint8_t gid[16];
	int gidx;
	uint32_t pd, cq, mr, qp, qpn, lkey, rkey;
	uint8_t *buf;
	struct ring cqr, sq, rq;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void must(int ret, const char *what, const struct end *e)
{
	if (ret)
		die("%s on %s: %s", what, e->ibdev, strerror(-ret));
}

static void read_gid(struct end *e)
{
	char path[256], text[64];
	unsigned int g[8];
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gids/%d", e->ibdev, e->gidx);
	f = fopen(path, "r");
	if (!f || !fgets(text, sizeof(text), f) ||
	    sscanf(text, "%x:%x:%x:%x:%x:%x:%x:%x", &g[0], &g[1], &g[2], &g[3], &g[4], &g[5],
		   &g[6], &g[7]) != 8)
		die("cannot read %s", path);
	fclose(f);
	for (i = 0; i < 8; i++) {
		e->gid[2 * i] = g[i] >> 8;
		e->gid[2 * i + 1] = g[i] & 0xff;
	}
}

static void map_ring(struct end *e, struct ring *r, const struct mminfo *mi, const char *what)
{
	if (!mi->size)
		die("%s of %s: no ring (mminfo size 0): the kernel gave a kernel queue", what, e->ibdev);
	r->len = mi->size;
	r->q = mmap(NULL, mi->size, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd, mi->offset);
	if (r->q == MAP_FAILED)
		die("mmap %s of %s (offset %llu size %u): %s", what, e->ibdev,
		    (unsigned long long)mi->offset, mi->size, strerror(errno));
	r->mask = r->q->index_mask;
	r->elem = 1u << r->q->log2_elem_size;
	if (!r->mask || (r->mask & (r->mask + 1)) ||
	    sizeof(struct rxe_queue_buf) + (size_t)(r->mask + 1) * r->elem > r->len)
		die("%s of %s: header mask %u elem %u does not fit %zu bytes", what, e->ibdev,
		    r->mask, r->elem, r->len);
	r->own = 0;
	printf("%s %s: %u slots of %u bytes, %zu bytes mapped\n", e->ibdev, what, r->mask + 1,
	       r->elem, r->len);
}

static void *slot(struct ring *r, uint32_t i)
{
	return r->q->data + (size_t)(i & r->mask) * r->elem;
}

/*
 * A QP of @type on @e's PD and CQ into @q (a copy of @e but for the QP), its rings mapped;
 * on SRQ @srq if @on_srq (then it has no RQ ring).
 */
static void create_qp_sized(struct end *e, struct end *q, uint8_t type, int on_srq, uint32_t srq,
			    uint32_t send_wr, int sig_all)
{
	struct ib_uverbs_create_qp qp = {};
	struct { struct ib_uverbs_create_qp_resp core; struct rxe_create_qp_resp rxe; } qpr = {};

	*q = *e;
	qp.response = (uintptr_t)&qpr;
	qp.pd_handle = e->pd;
	qp.send_cq_handle = qp.recv_cq_handle = e->cq;
	qp.max_send_wr = send_wr;
	qp.max_recv_wr = on_srq ? 0 : RING_WR;
	qp.max_send_sge = 2;
	qp.max_recv_sge = on_srq ? 0 : 2;
	qp.sq_sig_all = sig_all;
	qp.qp_type = type;
	qp.is_srq = on_srq;
	qp.srq_handle = srq;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_CREATE_QP, &qp, sizeof(qp), sizeof(qpr)),
	     "CREATE_QP", e);
	q->qp = qpr.core.qp_handle;
	q->qpn = qpr.core.qpn;
	map_ring(q, &q->sq, &qpr.rxe.sq_mi, "SQ");
	if (on_srq)
		memset(&q->rq, 0, sizeof(q->rq));
	else
		map_ring(q, &q->rq, &qpr.rxe.rq_mi, "RQ");
	if (q->sq.elem < sizeof(struct rxe_send_wqe) + 2 * sizeof(struct rxe_sge) ||
	    (!on_srq && q->rq.elem < sizeof(struct rxe_recv_wqe) + 2 * sizeof(struct rxe_sge)))
		die("%s: ring slots too small for 2 SGEs", e->ibdev);
	printf("%s: qpn %u, caps send %u/%u recv %u/%u\n", e->ibdev, q->qpn,
	       qpr.core.max_send_wr, qpr.core.max_send_sge, qpr.core.max_recv_wr,
	       qpr.core.max_recv_sge);
}

/* The tests' usual QP: 16-slot rings, every send signaled. */
static void create_qp(struct end *e, struct end *q, uint8_t type, int on_srq, uint32_t srq)
{
	create_qp_sized(e, q, type, on_srq, srq, RING_WR, 1);
}

static void setup(struct end *e)
{
	struct ib_uverbs_get_context gc = {};
	struct ib_uverbs_get_context_resp gcr = {};
	struct ib_uverbs_alloc_pd pd = {};
	struct ib_uverbs_alloc_pd_resp pdr = {};
	struct ib_uverbs_reg_mr mr = {};
	struct ib_uverbs_reg_mr_resp mrr = {};
	struct ib_uverbs_create_cq cq = {};
	struct { struct ib_uverbs_create_cq_resp core; struct rxe_create_cq_resp rxe; } cqr = {};

	e->fd = tbv_uverbs_open(e->ibdev);
	if (e->fd < 0)
		die("no uverbs device for %s: %s", e->ibdev, strerror(-e->fd));
	read_gid(e);

	gc.response = (uintptr_t)&gcr;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_GET_CONTEXT, &gc, sizeof(gc), sizeof(gcr)),
	     "GET_CONTEXT", e);
	pd.response = (uintptr_t)&pdr;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_ALLOC_PD, &pd, sizeof(pd), sizeof(pdr)), "ALLOC_PD", e);
	e->pd = pdr.pd_handle;

	e->buf = aligned_alloc(4096, BUF_SIZE);
	if (!e->buf)
		die("out of memory");
	memset(e->buf, 0, BUF_SIZE);
	mr.response = (uintptr_t)&mrr;
	mr.start = mr.hca_va = (uintptr_t)e->buf;
	mr.length = BUF_SIZE;
	mr.pd_handle = e->pd;
	mr.access_flags = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_REG_MR, &mr, sizeof(mr), sizeof(mrr)), "REG_MR", e);
	e->mr = mrr.mr_handle;
	e->lkey = mrr.lkey;
	e->rkey = mrr.rkey;

	cq.response = (uintptr_t)&cqr;
	cq.cqe = RING_WR;
	cq.comp_channel = -1;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_CREATE_CQ, &cq, sizeof(cq), sizeof(cqr)),
	     "CREATE_CQ", e);
	e->cq = cqr.core.cq_handle;
	map_ring(e, &e->cqr, &cqr.rxe.mi, "CQ");
	if (cqr.core.cqe != e->cqr.mask)
		fail("%s CQ: cqe %u, ring mask %u (§3: cqe = index_mask)", e->ibdev, cqr.core.cqe,
		     e->cqr.mask);
	if (e->cqr.elem < sizeof(struct ib_uverbs_wc))
		die("%s CQ slot %u bytes < ib_uverbs_wc", e->ibdev, e->cqr.elem);

	create_qp(e, e, QPT_RC, 0, 0);
}

static int modify(struct end *e, const struct end *peer, int state)
{
	struct ib_uverbs_modify_qp m = {};

	m.qp_handle = e->qp;
	m.qp_state = state;
	m.attr_mask = QP_STATE;
	if (state == QPS_INIT) {
		m.attr_mask |= QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS;
		m.port_num = 1;
		m.qp_access_flags = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ;
	} else if (state == QPS_RTR) {
		m.attr_mask |= QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN |
			       QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER;
		memcpy(m.dest.dgid, peer->gid, 16);
		m.dest.sgid_index = e->gidx;
		m.dest.hop_limit = 64;
		m.dest.is_global = 1;
		m.dest.port_num = 1;
		m.path_mtu = MTU_1024;
		m.dest_qp_num = peer->qpn;
		m.rq_psn = 0x100;
		m.max_dest_rd_atomic = 1;
		m.min_rnr_timer = 12;
	} else if (state == QPS_RTS) {
		m.attr_mask |= QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_SQ_PSN |
			       QP_MAX_QP_RD_ATOMIC;
		m.timeout = 14;
		m.retry_cnt = 7;
		m.rnr_retry = 7;
		m.sq_psn = 0x100;
		m.max_rd_atomic = 1;
	}
	return tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof(m), 0);
}

static int qp_state(struct end *e)
{
	struct ib_uverbs_query_qp q = {};
	struct ib_uverbs_query_qp_resp r = {};

	q.response = (uintptr_t)&r;
	q.qp_handle = e->qp;
	q.attr_mask = QP_STATE;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_QUERY_QP, &q, sizeof(q), sizeof(r)), "QUERY_QP", e);
	return r.qp_state;
}

static void connect_ends(struct end *a, struct end *b)
{
	must(modify(a, b, QPS_INIT), "MODIFY_QP INIT", a);
	must(modify(b, a, QPS_INIT), "MODIFY_QP INIT", b);
	must(modify(a, b, QPS_RTR), "MODIFY_QP RTR", a);
	must(modify(b, a, QPS_RTR), "MODIFY_QP RTR", b);
	must(modify(a, b, QPS_RTS), "MODIFY_QP RTS", a);
	must(modify(b, a, QPS_RTS), "MODIFY_QP RTS", b);
}

/* The next producer slot, zeroed, or NULL if the ring is full (as the provider's queue_full()). */
static void *producer_slot(struct ring *r)
{
	uint32_t cons = __atomic_load_n(&r->q->consumer_index, __ATOMIC_ACQUIRE);
	void *s;

	if (((r->own + 1) & r->mask) == (cons & r->mask))
		return NULL;
	s = slot(r, r->own);
	memset(s, 0, r->elem);
	return s;
}

static void publish(struct ring *r)
{
	r->own = (r->own + 1) & r->mask;
	__atomic_store_n(&r->q->producer_index, r->own, __ATOMIC_RELEASE);
}

/* A receive WQE as the provider's post_recv fills it (not published). */
static struct rxe_recv_wqe *recv_wqe(struct end *e, uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct rxe_recv_wqe *w = producer_slot(&e->rq);

	if (!w)
		die("%s RQ ring full", e->ibdev);
	w->wr_id = wr_id;
	w->dma.num_sge = 1;
	w->dma.length = w->dma.resid = len;
	w->dma.sge[0].addr = (uintptr_t)e->buf + off;
	w->dma.sge[0].length = len;
	w->dma.sge[0].lkey = e->lkey;
	return w;
}

static void post_recv(struct end *e, uint64_t wr_id, uint32_t off, uint32_t len)
{
	recv_wqe(e, wr_id, off, len);
	publish(&e->rq);
}

/* A send WQE as init_send_wqe() of rdma-core's rxe provider fills it (not published). */
static struct rxe_send_wqe *send_wqe(struct end *e, uint64_t wr_id, uint32_t opcode,
				     uint32_t off, uint32_t len)
{
	struct rxe_send_wqe *w = producer_slot(&e->sq);

	if (!w)
		die("%s SQ ring full", e->ibdev);
	w->wr.wr_id = wr_id;
	w->wr.opcode = opcode;
	w->wr.send_flags = SEND_SIGNALED;
	w->dma.num_sge = 1;
	w->dma.length = w->dma.resid = len;
	w->dma.sge[0].addr = (uintptr_t)e->buf + off;
	w->dma.sge[0].length = len;
	w->dma.sge[0].lkey = e->lkey;
	return w;
}

/* The doorbell: POST_SEND with no work request, as the provider's post_send_db(). */
static int doorbell(struct end *e)
{
	struct ib_uverbs_post_send p = {};
	struct ib_uverbs_post_send_resp r = {};

	p.response = (uintptr_t)&r;
	p.qp_handle = e->qp;
	p.wqe_size = sizeof(struct ib_uverbs_send_wr);
	return tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_POST_SEND, &p, sizeof(p), sizeof(r));
}

/* Poll one CQE from the ring within the bounded wait; false if none came. */
static int poll_one(struct end *e, struct ib_uverbs_wc *wc, int wait_ms)
{
	struct ring *r = &e->cqr;
	int64_t deadline = now_ms() + wait_ms;

	do {
		uint32_t prod = __atomic_load_n(&r->q->producer_index, __ATOMIC_ACQUIRE);

		if ((prod & r->mask) != r->own) {
			memcpy(wc, slot(r, r->own), sizeof(*wc));
			r->own = (r->own + 1) & r->mask;
			__atomic_store_n(&r->q->consumer_index, r->own, __ATOMIC_RELEASE);
			return 1;
		}
		usleep(1000);
	} while (now_ms() < deadline);
	return 0;
}

static void print_wc(const char *who, const struct ib_uverbs_wc *wc)
{
	printf("%s CQE: wr_id %llu status %u opcode %u byte_len %u imm 0x%08x qp %u flags 0x%x\n",
	       who, (unsigned long long)wc->wr_id, wc->status, wc->opcode, wc->byte_len,
	       ntohl(wc->ex.imm_data), wc->qp_num, wc->wc_flags);
}

static void expect_wc(struct end *e, const char *who, uint64_t wr_id, uint32_t status,
		      int opcode, int byte_len, int imm)
{
	struct ib_uverbs_wc wc;

	if (!poll_one(e, &wc, WAIT_MS)) {
		fail("%s: no CQE for wr_id %llu within %d ms", who, (unsigned long long)wr_id,
		     WAIT_MS);
		return;
	}
	print_wc(who, &wc);
	if (wc.wr_id != wr_id)
		fail("%s: wr_id %llu, expected %llu", who, (unsigned long long)wc.wr_id,
		     (unsigned long long)wr_id);
	if (wc.status != status)
		fail("%s: status %u, expected %u", who, wc.status, status);
	if (opcode >= 0 && wc.opcode != (uint32_t)opcode)
		fail("%s: opcode %u, expected %d", who, wc.opcode, opcode);
	if (byte_len >= 0 && wc.byte_len != (uint32_t)byte_len)
		fail("%s: byte_len %u, expected %d", who, wc.byte_len, byte_len);
	if (wc.qp_num != e->qpn)
		fail("%s: qp_num %u, expected %u", who, wc.qp_num, e->qpn);
	if (imm >= 0) {
		if (!(wc.wc_flags & WC_FLAG_WITH_IMM) || ntohl(wc.ex.imm_data) != (uint32_t)imm)
			fail("%s: imm 0x%08x flags 0x%x, expected imm 0x%08x", who,
			     ntohl(wc.ex.imm_data), wc.wc_flags, imm);
	} else if (wc.wc_flags & WC_FLAG_WITH_IMM) {
		fail("%s: WITH_IMM set on a completion without immediate", who);
	}
}

static void fill(uint8_t *p, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static void check_data(struct end *req, uint32_t soff, struct end *resp, uint32_t doff,
		       uint32_t len, const char *what)
{
	if (memcmp(req->buf + soff, resp->buf + doff, len))
		fail("%s: the %u bytes that arrived differ from those sent", what, len);
}

static void good_send(struct end *req, struct end *resp, uint64_t id)
{
	post_recv(resp, 1000 + id, 0, 256);
	fill(req->buf, 64, (uint8_t)id);
	send_wqe(req, id, IB_UVERBS_WR_SEND, 0, 64);
	publish(&req->sq);
	must(doorbell(req), "POST_SEND doorbell", req);
	expect_wc(req, "requester", id, WC_SUCCESS, IB_UVERBS_WC_SEND, -1, -1);
	expect_wc(resp, "responder", 1000 + id, WC_SUCCESS, WC_RECV, 64, -1);
	check_data(req, 0, resp, 0, 64, "SEND");
}

static void exercise(struct end *req, struct end *resp)
{
	struct rxe_send_wqe *w;

	good_send(req, resp, 1);

	post_recv(resp, 1002, 256, 256);
	fill(req->buf + 256, 100, 0x5a);
	w = send_wqe(req, 2, IB_UVERBS_WR_SEND_WITH_IMM, 256, 100);
	w->wr.ex.imm_data = htonl(0x12345678);
	publish(&req->sq);

	fill(req->buf + 1024, 3000, 0xa5);	/* three packets at MTU 1024 */
	w = send_wqe(req, 3, IB_UVERBS_WR_RDMA_WRITE, 1024, 3000);
	w->wr.wr.rdma.remote_addr = (uintptr_t)resp->buf + 4096;
	w->wr.wr.rdma.rkey = resp->rkey;
	w->iova = w->wr.wr.rdma.remote_addr;
	publish(&req->sq);
	must(doorbell(req), "POST_SEND doorbell", req);

	expect_wc(req, "requester", 2, WC_SUCCESS, IB_UVERBS_WC_SEND, -1, -1);
	expect_wc(req, "requester", 3, WC_SUCCESS, IB_UVERBS_WC_RDMA_WRITE, -1, -1);
	expect_wc(resp, "responder", 1002, WC_SUCCESS, WC_RECV, 100, 0x12345678);
	check_data(req, 256, resp, 256, 100, "SEND_WITH_IMM");
	check_data(req, 1024, resp, 4096, 3000, "RDMA_WRITE");
	if (__atomic_load_n(&req->sq.q->consumer_index, __ATOMIC_ACQUIRE) != req->sq.own)
		fail("requester SQ consumer %u, producer %u: completed WQEs not released",
		     req->sq.q->consumer_index, req->sq.own);
	if (__atomic_load_n(&resp->rq.q->consumer_index, __ATOMIC_ACQUIRE) != resp->rq.own)
		fail("responder RQ consumer %u, producer %u: completed receives not released",
		     resp->rq.q->consumer_index, resp->rq.own);
}

/* A remote operation's target: the responder's buffer, 8-byte aligned. */
static void remote(struct rxe_send_wqe *w, struct end *resp, uint32_t off)
{
	w->wr.wr.rdma.remote_addr = (uintptr_t)resp->buf + off;
	w->wr.wr.rdma.rkey = resp->rkey;
	w->iova = w->wr.wr.rdma.remote_addr;
}

/*
 * One field of a send WQE (a SEND of 64 bytes from the start of the buffer) made wrong as
 * @mode says; returns the status the kernel must complete it with (§6.1), or -1 for an
 * unknown mode.
 */
static int corrupt_send(struct rxe_send_wqe *w, struct end *req, struct end *resp,
			const char *mode)
{
	if (!strcmp(mode, "bad_opcode")) {
		w->wr.opcode = 0x20;	/* IB_WR_REG_MR: kernel only (§6.4 item 2) */
		return WC_LOC_QP_OP_ERR;
	}
	if (!strcmp(mode, "bad_num_sge")) {
		w->dma.num_sge = 1000;
		return WC_LOC_QP_OP_ERR;
	}
	if (!strcmp(mode, "bad_lkey")) {
		w->dma.sge[0].lkey = req->lkey ^ 0x5500;
		return WC_LOC_PROT_ERR;
	}
	if (!strcmp(mode, "bad_sge_len")) {
		w->dma.sge[0].length = BUF_SIZE * 4;	/* beyond the MR */
		return WC_LOC_PROT_ERR;
	}
	if (!strcmp(mode, "bad_sge_addr")) {
		w->dma.sge[0].addr = (uintptr_t)req->buf - 65536;	/* before the MR */
		return WC_LOC_PROT_ERR;
	}
	if (!strcmp(mode, "bad_inline_len")) {
		/* inline bytes beyond the QP's max_inline_data (0) and the slot */
		w->wr.send_flags |= SEND_INLINE;
		w->dma.length = 100000;
		return WC_LOC_LEN_ERR;
	}
	if (!strcmp(mode, "bad_inline_read")) {
		/* a READ carries no payload to inline */
		w->wr.opcode = IB_UVERBS_WR_RDMA_READ;
		w->wr.send_flags |= SEND_INLINE;
		remote(w, resp, 4096);
		return WC_LOC_QP_OP_ERR;
	}
	if (!strcmp(mode, "bad_len_no_sge")) {
		/* a length with no SGEs: inline data posted without the flag */
		w->dma.num_sge = 0;
		return WC_LOC_LEN_ERR;
	}
	if (!strcmp(mode, "bad_atomic_len")) {
		/* an atomic's one SGE must be 8 bytes */
		w->wr.opcode = IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
		w->wr.wr.atomic.remote_addr = (uintptr_t)resp->buf + 4096;
		w->wr.wr.atomic.compare_add = 1;
		w->wr.wr.atomic.rkey = resp->rkey;
		w->iova = w->wr.wr.atomic.remote_addr;
		return WC_LOC_LEN_ERR;
	}
	if (!strcmp(mode, "bad_flush_type")) {
		/* neither GLOBAL nor PERSISTENT (a kernel without FLUSH refuses the opcode: the same) */
		w->wr.opcode = WR_FLUSH;
		remote(w, resp, 4096);
		w->dma.num_sge = 0;
		((uint8_t *)w)[SWQE_FLUSH_TYPE] = 7;
		return WC_LOC_QP_OP_ERR;
	}
	if (!strcmp(mode, "bad_local_inv_sge")) {
		/* LOCAL_INV takes no SGEs */
		w->wr.opcode = IB_UVERBS_WR_LOCAL_INV;
		w->wr.ex.invalidate_rkey = req->rkey;
		return WC_LOC_QP_OP_ERR;
	}
	return -1;
}

/* After a good SEND, one send WQE with one field wrong: that status, then the QP in ERR (§6.1). */
static void bad_send(struct end *req, struct end *resp, const char *mode)
{
	struct rxe_send_wqe *w;
	int status, state;

	good_send(req, resp, 1);
	post_recv(resp, 1002, 0, 256);
	w = send_wqe(req, 2, IB_UVERBS_WR_SEND, 0, 64);
	status = corrupt_send(w, req, resp, mode);
	if (status < 0)
		die("unknown mode %s", mode);
	publish(&req->sq);
	must(doorbell(req), "POST_SEND doorbell", req);
	expect_wc(req, "requester", 2, status, -1, -1, -1);
	state = qp_state(req);
	printf("requester QP state %d\n", state);
	if (state != QPS_ERR)
		fail("requester QP in state %d after an invalid WQE, expected ERR (%d)", state,
		     QPS_ERR);
}

/*
 * After a good SEND, a receive WQE with one field wrong, then a SEND to it (§6.2): the
 * responder completes the receive with the error, its QP fails, and the requester gets
 * the NAK's remote error (invalid request for a WQE that does not parse, operational for
 * one whose buffer is not the process's).
 */
static void bad_recv(struct end *req, struct end *resp, const char *mode)
{
	struct rxe_recv_wqe *r;
	uint32_t status, remote_status;

	good_send(req, resp, 1);
	r = recv_wqe(resp, 1002, 0, 256);
	if (!strcmp(mode, "bad_recv_num_sge")) {
		r->dma.num_sge = 1000;
		status = WC_LOC_QP_OP_ERR;
		remote_status = WC_REM_INV_REQ_ERR;
	} else {
		r->dma.sge[0].lkey = resp->lkey ^ 0x5500;
		status = WC_LOC_PROT_ERR;
		remote_status = WC_REM_OP_ERR;
	}
	publish(&resp->rq);
	send_wqe(req, 2, IB_UVERBS_WR_SEND, 0, 64);
	publish(&req->sq);
	must(doorbell(req), "POST_SEND doorbell", req);
	expect_wc(resp, "responder", 1002, status, WC_RECV, -1, -1);
	expect_wc(req, "requester", 2, remote_status, -1, -1, -1);
	printf("QP states: requester %d responder %d\n", qp_state(req), qp_state(resp));
	if (qp_state(resp) != QPS_ERR)
		fail("responder QP in state %d after an invalid receive WQE, expected ERR",
		     qp_state(resp));
}

/*
 * A UD QP on @e's PD and CQ, in RTS, in @ud (its rings mapped); its own number. The RC
 * QP's end is copied so that the helpers that take an end work on it.
 */
static void ud_qp_sized(struct end *e, struct end *ud, uint32_t send_wr, int sig_all)
{
	struct ib_uverbs_modify_qp m = {};

	create_qp_sized(e, ud, QPT_UD, 0, 0, send_wr, sig_all);
	m.qp_handle = ud->qp;
	m.qp_state = QPS_INIT;
	m.attr_mask = QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_QKEY;
	m.port_num = 1;
	m.qkey = UD_QKEY;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof(m), 0), "MODIFY_QP UD INIT", e);
	memset(&m, 0, sizeof(m));
	m.qp_handle = ud->qp;
	m.qp_state = QPS_RTR;
	m.attr_mask = QP_STATE;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof(m), 0), "MODIFY_QP UD RTR", e);
	m.qp_state = QPS_RTS;
	m.attr_mask = QP_STATE | QP_SQ_PSN;
	m.sq_psn = 0x100;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof(m), 0), "MODIFY_QP UD RTS", e);
}

static void ud_qp(struct end *e, struct end *ud)
{
	ud_qp_sized(e, ud, RING_WR, 1);
}

static void destroy_qp(struct end *e)
{
	struct ib_uverbs_destroy_qp dq = {};
	struct ib_uverbs_destroy_qp_resp dqr;

	dq.response = (uintptr_t)&dqr;
	dq.qp_handle = e->qp;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_DESTROY_QP, &dq, sizeof(dq), sizeof(dqr)),
	     "DESTROY_QP", e);
	munmap(e->sq.q, e->sq.len);
	if (e->rq.q)
		munmap(e->rq.q, e->rq.len);
}

/*
 * On a UD QP of the requester's end, after a good SEND over RC, a UD SEND whose address
 * names no AH of the process (bad_ud_ah) or a remote QPN beyond 24 bits (bad_ud_qpn):
 * IB_WC_LOC_QP_OP_ERR, and the UD QP in ERR (§6.1).
 */
static void bad_ud(struct end *req, struct end *resp, const char *mode)
{
	struct rxe_send_wqe *w;
	struct end ud;
	int state;

	good_send(req, resp, 1);
	ud_qp(req, &ud);
	w = send_wqe(&ud, 2, IB_UVERBS_WR_SEND, 0, 64);
	w->wr.wr.ud.remote_qpn = resp->qpn;
	w->wr.wr.ud.remote_qkey = UD_QKEY;
	w->wr.wr.ud.ah_num = 0x7ffffff0;	/* never handed out */
	if (!strcmp(mode, "bad_ud_qpn")) {
		w->wr.wr.ud.remote_qpn = 0x1000001;
		w->wr.wr.ud.ah_num = 1;
	}
	publish(&ud.sq);
	must(doorbell(&ud), "POST_SEND doorbell (UD)", &ud);
	expect_wc(&ud, "UD", 2, WC_LOC_QP_OP_ERR, -1, -1, -1);
	state = qp_state(&ud);
	printf("UD QP state %d\n", state);
	if (state != QPS_ERR)
		fail("UD QP in state %d after an invalid WQE, expected ERR (%d)", state, QPS_ERR);
	req->cqr.own = ud.cqr.own;	/* the one CQ: what was polled through the copy */
	destroy_qp(&ud);
}

static void destroy_ah(struct end *e, uint32_t handle)
{
	struct ib_uverbs_destroy_ah d = { .ah_handle = handle };

	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_DESTROY_AH, &d, sizeof(d), 0), "DESTROY_AH", e);
}

/* An AH on @e's PD to @dgid from @e's GID index; its handle, and rdma_rxe's ah_num in @num. */
static uint32_t create_ah(struct end *e, const uint8_t *dgid, uint32_t *num)
{
	struct ib_uverbs_create_ah c = {};
	struct { struct ib_uverbs_create_ah_resp core; struct rxe_create_ah_resp rxe; } cr = {};

	c.response = (uintptr_t)&cr;
	c.pd_handle = e->pd;
	c.attr.is_global = 1;
	memcpy(c.attr.grh.dgid, dgid, 16);
	c.attr.grh.sgid_index = e->gidx;
	c.attr.grh.hop_limit = 64;
	c.attr.port_num = 1;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_CREATE_AH, &c, sizeof(c), sizeof(cr)), "CREATE_AH", e);
	*num = cr.rxe.ah_num;
	return cr.core.ah_handle;
}

struct storm {
	struct end *ud;
	uint32_t ah_num, dest_qpn;
	int64_t deadline;
	volatile int stop;
	uint64_t posted, filler_doorbells, ringer_doorbells;
	int failed;
};

/* A UD SEND of STORM_LEN bytes (completed unsent, no frame) into SQ slot @i. */
static void storm_wqe(struct storm *st, uint32_t i, int signaled, uint64_t wr_id)
{
	struct end *ud = st->ud;
	struct rxe_send_wqe *w = slot(&ud->sq, i);

	memset(w, 0, ud->sq.elem);
	w->wr.wr_id = wr_id;
	w->wr.opcode = IB_UVERBS_WR_SEND;
	w->wr.send_flags = signaled ? SEND_SIGNALED : 0;
	w->wr.wr.ud.remote_qpn = st->dest_qpn;
	w->wr.wr.ud.remote_qkey = UD_QKEY;
	w->wr.wr.ud.ah_num = st->ah_num;
	w->dma.num_sge = 1;
	w->dma.length = w->dma.resid = STORM_LEN;
	w->dma.sge[0].addr = (uintptr_t)ud->buf;
	w->dma.sge[0].length = STORM_LEN;
	w->dma.sge[0].lkey = ud->lkey;
}

/*
 * Every slot the kernel consumed goes back to it: the producer just behind the consumer.
 * The slots keep the WQEs written at the start (the kernel never writes a send slot), so a
 * refill costs the process nothing per WQE, as it costs an attacker nothing. How many.
 */
static uint32_t storm_refill(struct ring *sq)
{
	uint32_t cons = __atomic_load_n(&sq->q->consumer_index, __ATOMIC_ACQUIRE);
	uint32_t full = (cons + sq->mask) & sq->mask, n = (full - sq->own) & sq->mask;

	sq->own = full;
	__atomic_store_n(&sq->q->producer_index, sq->own, __ATOMIC_RELEASE);
	return n;
}

/*
 * Keep the SQ ring full, until the deadline. It rings the doorbell only when the kernel
 * took nothing since its last refill: a kick of its own would make this thread the one
 * that runs the transmitter, which then finds the ring drained at its next pass, nobody
 * refilling it meanwhile. The ringers' kicks keep the transmitter going in theirs.
 */
static void *storm_filler(void *arg)
{
	struct storm *st = arg;
	struct ring *sq = &st->ud->sq;
	uint32_t cons = sq->q->consumer_index;
	int64_t idle_since = now_ms();

	while (now_ms() < st->deadline && !st->failed) {
		uint32_t now_cons = __atomic_load_n(&sq->q->consumer_index, __ATOMIC_ACQUIRE);

		st->posted += storm_refill(sq);
		if (now_cons != cons) {
			cons = now_cons;
			idle_since = now_ms();
		} else if (now_ms() - idle_since >= 2) {
			if (doorbell(st->ud)) {
				st->failed = 1;
				break;
			}
			st->filler_doorbells++;
			idle_since = now_ms();
		}
	}
	st->stop = 1;
	return NULL;
}

/* Ring the doorbell with nothing new until the filler stops. */
static void *storm_ringer(void *arg)
{
	struct storm *st = arg;
	uint64_t n = 0;

	while (!st->stop) {
		if (doorbell(st->ud)) {
			st->failed = 1;
			break;
		}
		n++;
	}
	__atomic_add_fetch(&st->ringer_doorbells, n, __ATOMIC_RELAXED);
	return NULL;
}

/* The SQ ring's consumer at its producer within the bounded wait. */
static int sq_consumed(struct ring *sq, int wait_ms)
{
	int64_t deadline = now_ms() + wait_ms;

	do {
		if ((__atomic_load_n(&sq->q->consumer_index, __ATOMIC_ACQUIRE) & sq->mask) == sq->own)
			return 1;
		usleep(1000);
	} while (now_ms() < deadline);
	return 0;
}

/*
 * A process that keeps its SQ ring full of WQEs that cost the kernel no frame (UD SENDs
 * longer than the MTU) while a second thread keeps ringing the doorbell: every doorbell
 * returns, the kernel consumes the ring to the end, and the QP is destroyed with a full
 * ring just rung. A CPU kept by the transmitter shows in the kernel log (soft lockup, RCU
 * stall), which the test reads.
 */
static void doorbell_storm(struct end *req, struct end *resp)
{
	pthread_t filler, ringer[STORM_RINGERS];
	struct storm st = {};
	uint32_t ah, cons;
	struct end ud;

	good_send(req, resp, 1);
	ud_qp_sized(req, &ud, STORM_WR, 0);
	ah = create_ah(req, resp->gid, &st.ah_num);
	st.ud = &ud;
	st.dest_qpn = resp->qpn;
	for (uint32_t i = 0; i <= ud.sq.mask; i++)
		storm_wqe(&st, i, 0, i);
	st.deadline = now_ms() + STORM_SECONDS * 1000LL;
	if (pthread_create(&filler, NULL, storm_filler, &st))
		die("pthread_create");
	for (int i = 0; i < STORM_RINGERS; i++)
		if (pthread_create(&ringer[i], NULL, storm_ringer, &st))
			die("pthread_create");
	pthread_join(filler, NULL);
	for (int i = 0; i < STORM_RINGERS; i++)
		pthread_join(ringer[i], NULL);
	printf("storm: posted %llu WQEs of %u bytes in %d s, doorbells: filler %llu, ringers %llu\n",
	       (unsigned long long)st.posted, STORM_LEN, STORM_SECONDS,
	       (unsigned long long)st.filler_doorbells, (unsigned long long)st.ringer_doorbells);
	if (st.failed)
		fail("a POST_SEND doorbell failed during the storm");
	if (st.posted <= ud.sq.mask)
		fail("posted %llu WQEs: the ring of %u slots was never refilled",
		     (unsigned long long)st.posted, ud.sq.mask + 1);
	if (!sq_consumed(&ud.sq, WAIT_MS)) {
		cons = __atomic_load_n(&ud.sq.q->consumer_index, __ATOMIC_ACQUIRE);
		fail("SQ consumer %u, producer %u %d ms after the storm: WQEs left behind",
		     cons, ud.sq.own, WAIT_MS);
	} else {
		printf("storm: the SQ ring was consumed to its producer %u\n", ud.sq.own);
	}
	/* one signaled: its completion comes, after every unsignaled one before it */
	storm_wqe(&st, ud.sq.own, 1, 77);
	publish(&ud.sq);
	must(doorbell(&ud), "POST_SEND doorbell (UD)", &ud);
	expect_wc(&ud, "UD", 77, WC_SUCCESS, IB_UVERBS_WC_SEND, -1, -1);
	req->cqr.own = ud.cqr.own;	/* the one CQ: what was polled through the copy */
	/* a full ring rung once: the destroy meets the transmitter's work, queued or running */
	storm_wqe(&st, ud.sq.own - 1, 0, 0);	/* the signaled one's slot: unsignaled again */
	storm_refill(&ud.sq);
	must(doorbell(&ud), "POST_SEND doorbell (UD)", &ud);
	destroy_qp(&ud);
	destroy_ah(req, ah);
}

/* An SRQ ring on @e's PD, mapped into @r; its handle. */
static uint32_t create_srq(struct end *e, struct ring *r)
{
	struct ib_uverbs_create_srq c = {};
	struct { struct ib_uverbs_create_srq_resp core; struct rxe_create_srq_resp rxe; } cr = {};

	c.response = (uintptr_t)&cr;
	c.pd_handle = e->pd;
	c.max_wr = RING_WR;
	c.max_sge = 2;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_CREATE_SRQ, &c, sizeof(c), sizeof(cr)),
	     "CREATE_SRQ", e);
	map_ring(e, r, &cr.rxe.mi, "SRQ");
	return cr.core.srq_handle;
}

/*
 * After a good SEND, a second pair of RC QPs, the responder's on an SRQ ring; the SRQ's
 * receive WQE has 1000 SGEs (§6.2): the SEND that takes it completes the receive
 * IB_WC_LOC_QP_OP_ERR, its QP fails, and the requester gets IB_WC_REM_INV_REQ_ERR.
 */
static void bad_srq(struct end *req, struct end *resp)
{
	struct ib_uverbs_destroy_srq ds = {};
	struct ib_uverbs_destroy_srq_resp dsr;
	struct rxe_recv_wqe *r;
	struct ring srq;
	struct end a, b;
	uint32_t srq_handle;

	good_send(req, resp, 1);
	srq_handle = create_srq(resp, &srq);
	create_qp(req, &a, QPT_RC, 0, 0);
	create_qp(resp, &b, QPT_RC, 1, srq_handle);
	connect_ends(&a, &b);
	r = producer_slot(&srq);
	if (!r)
		die("SRQ ring full");
	r->wr_id = 1002;
	r->dma.num_sge = 1000;
	r->dma.length = r->dma.resid = 256;
	r->dma.sge[0].addr = (uintptr_t)resp->buf;
	r->dma.sge[0].length = 256;
	r->dma.sge[0].lkey = resp->lkey;
	publish(&srq);
	send_wqe(&a, 2, IB_UVERBS_WR_SEND, 0, 64);
	publish(&a.sq);
	must(doorbell(&a), "POST_SEND doorbell", &a);
	expect_wc(&b, "responder (SRQ)", 1002, WC_LOC_QP_OP_ERR, WC_RECV, -1, -1);
	expect_wc(&a, "requester", 2, WC_REM_INV_REQ_ERR, -1, -1, -1);
	printf("QP states: requester %d responder (SRQ) %d\n", qp_state(&a), qp_state(&b));
	if (qp_state(&b) != QPS_ERR)
		fail("the SRQ's QP in state %d after an invalid SRQ WQE, expected ERR", qp_state(&b));
	/* the one CQ per end: what was polled through the copies */
	req->cqr.own = a.cqr.own;
	resp->cqr.own = b.cqr.own;
	destroy_qp(&a);
	destroy_qp(&b);
	ds.response = (uintptr_t)&dsr;
	ds.srq_handle = srq_handle;
	must(tbv_uverbs_command(resp->fd, IB_USER_VERBS_CMD_DESTROY_SRQ, &ds, sizeof(ds), sizeof(dsr)),
	     "DESTROY_SRQ", resp);
	munmap(srq.q, srq.len);
}

/* Every CQE that comes within the wait, printed; returns how many. */
static int drain(struct end *e, const char *who, int wait_ms)
{
	struct ib_uverbs_wc wc;
	int n = 0;

	while (poll_one(e, &wc, wait_ms)) {
		print_wc(who, &wc);
		if (++n > 4 * (int)(e->cqr.mask + 1))
			break;
	}
	return n;
}

/* After a good SEND, an index beyond the ring (§6.3): bounded, whatever the completions. */
static void bad_index(struct end *req, struct end *resp, const char *mode)
{
	good_send(req, resp, 1);
	if (!strcmp(mode, "sq_prod")) {
		send_wqe(req, 2, IB_UVERBS_WR_SEND, 0, 64);
		__atomic_store_n(&req->sq.q->producer_index, 0xffffffffu, __ATOMIC_RELEASE);
		post_recv(resp, 1002, 0, 256);
	} else if (!strcmp(mode, "rq_prod")) {
		__atomic_store_n(&resp->rq.q->producer_index, resp->rq.own + resp->rq.mask + 7,
				 __ATOMIC_RELEASE);
		send_wqe(req, 2, IB_UVERBS_WR_SEND, 0, 64);
		publish(&req->sq);
	} else if (!strcmp(mode, "sq_cons")) {
		post_recv(resp, 1002, 0, 256);
		send_wqe(req, 2, IB_UVERBS_WR_SEND, 0, 64);
		publish(&req->sq);
		__atomic_store_n(&req->sq.q->consumer_index, 0x7fffabcdu, __ATOMIC_RELEASE);
	} else if (!strcmp(mode, "cq_prod")) {
		__atomic_store_n(&resp->cqr.q->producer_index, resp->cqr.own + 9, __ATOMIC_RELEASE);
		post_recv(resp, 1002, 0, 256);
		send_wqe(req, 2, IB_UVERBS_WR_SEND, 0, 64);
		publish(&req->sq);
	} else {
		__atomic_store_n(&req->cqr.q->consumer_index, 0xfffffff0u, __ATOMIC_RELEASE);
		post_recv(resp, 1002, 0, 256);
		send_wqe(req, 2, IB_UVERBS_WR_SEND, 0, 64);
		publish(&req->sq);
	}
	must(doorbell(req), "POST_SEND doorbell", req);
	printf("requester: %d CQEs, responder: %d CQEs\n", drain(req, "requester", 2000),
	       drain(resp, "responder", 2000));
	printf("QP states: requester %d responder %d\n", qp_state(req), qp_state(resp));
	/* the kernel must still take a QP to ERR and flush whatever is left, promptly */
	must(modify(req, resp, QPS_ERR), "MODIFY_QP ERR", req);
	must(modify(resp, req, QPS_ERR), "MODIFY_QP ERR", resp);
	must(doorbell(req), "POST_SEND doorbell in ERR", req);
	printf("after ERR: requester %d CQEs, responder %d CQEs\n", drain(req, "requester", 1000),
	       drain(resp, "responder", 1000));
}

static void teardown(struct end *e)
{
	struct ib_uverbs_destroy_qp dq = {};
	struct ib_uverbs_destroy_qp_resp dqr;
	struct ib_uverbs_destroy_cq dc = {};
	struct ib_uverbs_destroy_cq_resp dcr;
	struct ib_uverbs_dereg_mr dm = {};
	struct ib_uverbs_dealloc_pd dp = {};

	dq.response = (uintptr_t)&dqr;
	dq.qp_handle = e->qp;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_DESTROY_QP, &dq, sizeof(dq), sizeof(dqr)),
	     "DESTROY_QP", e);
	dc.response = (uintptr_t)&dcr;
	dc.cq_handle = e->cq;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_DESTROY_CQ, &dc, sizeof(dc), sizeof(dcr)),
	     "DESTROY_CQ", e);
	dm.mr_handle = e->mr;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_DEREG_MR, &dm, sizeof(dm), 0), "DEREG_MR", e);
	dp.pd_handle = e->pd;
	must(tbv_uverbs_command(e->fd, IB_USER_VERBS_CMD_DEALLOC_PD, &dp, sizeof(dp), 0), "DEALLOC_PD", e);
	munmap(e->sq.q, e->sq.len);
	munmap(e->rq.q, e->rq.len);
	munmap(e->cqr.q, e->cqr.len);
	close(e->fd);
	free(e->buf);
}

int main(int argc, char **argv)
{
	struct end req = {}, resp = {};
	const char *mode;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 6) {
		fprintf(stderr, "usage: %s MODE DEV0 GIDX0 DEV1 GIDX1\n", argv[0]);
		return 2;
	}
	mode = argv[1];
	req.ibdev = argv[2];
	req.gidx = atoi(argv[3]);
	resp.ibdev = argv[4];
	resp.gidx = atoi(argv[5]);

	setup(&req);
	setup(&resp);
	connect_ends(&req, &resp);
	printf("connected: %s qpn %u <-> %s qpn %u\n", req.ibdev, req.qpn, resp.ibdev, resp.qpn);

	if (!strcmp(mode, "exercise"))
		exercise(&req, &resp);
	else if (!strcmp(mode, "doorbell_storm"))
		doorbell_storm(&req, &resp);
	else if (!strcmp(mode, "bad_srq_num_sge"))
		bad_srq(&req, &resp);
	else if (!strncmp(mode, "bad_ud_", 7))
		bad_ud(&req, &resp, mode);
	else if (!strncmp(mode, "bad_recv_", 9))
		bad_recv(&req, &resp, mode);
	else if (!strncmp(mode, "bad_", 4))
		bad_send(&req, &resp, mode);
	else if (!strcmp(mode, "sq_prod") || !strcmp(mode, "rq_prod") || !strcmp(mode, "cq_cons") ||
		 !strcmp(mode, "sq_cons") || !strcmp(mode, "cq_prod"))
		bad_index(&req, &resp, mode);
	else
		die("unknown mode %s", mode);

	teardown(&req);
	teardown(&resp);
	if (failures) {
		printf("%s: %d check(s) failed\n", mode, failures);
		return 1;
	}
	printf("%s: OK\n", mode);
	return 0;
}
