// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tbv_nccl_pattern: the verbs NCCL's IB transport (net_ib) issues, between two
 * devices, every result checked.
 *
 *   tbv_nccl_pattern [-q QPS] [-n ROUNDS] SEND_DEV RECV_DEV
 *
 * SEND_DEV plays NCCL's sender (its sendComm), RECV_DEV the receiver (its
 * recvComm with the GPU-direct flush QP); QPS is NCCL_IB_QPS_PER_CONNECTION,
 * the QPs one connection stripes its data over. What is mirrored, from NCCL's
 * src/transport/net_ib/ (2.30, read for this program, not copied):
 *
 * - the GID (connect.cc, ncclIbGetGidIndex): for a RoCE port, unless
 *   NCCL_IB_GID_INDEX is set, walk the table from index 1 preferring an IPv4
 *   GID (NCCL_IB_ADDR_FAMILY's default) that is neither zero nor fe80::, then
 *   RoCE v2 (NCCL_IB_ROCE_VERSION_NUM's default), the version read from
 *   /sys/class/infiniband/DEV/ports/1/gid_attrs/types/IDX;
 * - the probes (init.cc, gdr.cc): ibv_reg_dmabuf_mr(pd, 0, 0, 0, fd -1, 0)
 *   must fail with EOPNOTSUPP or EPROTONOSUPPORT for NCCL to decide there is
 *   no dma-buf support (any other errno means "supported");
 * - memory (reg.cc, ncclIbRegMrDmaBufInternal2): every data buffer registered
 *   page-aligned with LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC and,
 *   with PCI relaxed ordering, RELAXED_ORDERING through ibv_reg_mr_iova2()
 *   with iova = address; the CTS FIFO and the flush buffer as connect.cc does;
 * - QPs (connect.cc): RC, one SGE each way, no inline data; sender QPs with
 *   max_send_wr 2 x 256 = 512 and no receive queue, INIT rights REMOTE_WRITE;
 *   receiver QPs with max_recv_wr 256 and max_send_wr 512, INIT rights
 *   REMOTE_WRITE|REMOTE_ATOMIC|REMOTE_READ ("used for GIN"); CQs of 256 (send)
 *   and 512 (receive) entries per QP, no completion channel; RTR with the
 *   smaller active MTU, PSN 0, max_dest_rd_atomic 1, min_rnr_timer 12, a GRH
 *   with hop_limit 255; RTS with timeout 20, retry_cnt 7, rnr_retry 7,
 *   max_rd_atomic 1;
 * - the flush QP (connect.cc): an RC QP connected to itself (own GID, own
 *   QPN) with rights LOCAL_WRITE|REMOTE_READ, whose 1-byte RDMA READ of the
 *   received buffer into a 4-byte host MR (p2p.cc, ncclIbIflush) is what
 *   NCCL posts after each receive when GPU-direct is on;
 * - the data path (p2p.cc): the receiver posts one zero-SGE receive per QP
 *   (posted on demand, NCCL's default), then RDMA-WRITEs a CTS FIFO entry
 *   (address, size, rkeys, idx last) into the sender's memory, signaled only
 *   in slot 0; the sender polls the entry's idx in host memory, then posts
 *   per QP an unsignaled RDMA WRITE of its 128-byte-aligned chunk and a
 *   signaled WRITE_WITH_IMM: either the data WRITE itself carries the
 *   immediate (RoCE's default), or, as with adaptive routing or several
 *   requests, it follows as a zero-byte WRITE_WITH_IMM with no SGE and no
 *   remote address or key; a QP whose chunk is empty posts it with no SGE;
 *   the receiver completes on IBV_WC_RECV_RDMA_WITH_IMM;
 * - GIN's signal (gin.cc): an 8-byte fetch-and-add into the receiver's MR.
 *
 * Checked: the GID and its type, the dma-buf errno, QP capacities, every byte
 * of every transfer (and the bytes after it), the CTS entry complete when its
 * idx shows, each immediate and byte_len, 256 requests (512 send WRs) posted
 * before any completion is polled, each flush's byte, the atomic's old and new
 * value. Prints a summary line per part and "nccl pattern: OK"; exits 1 on
 * any failure, 2 if the devices cannot be set up.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include "tbv_tools.h"

#define MAX_REQUESTS	256		/* NET_IB_MAX_REQUESTS: 32 requests x 8 receives */
#define MAX_QPS		4
#define CHUNK_ALIGN	128		/* IB_WRITE_CHUNK_ALIGNMENT */
#define BUF_SIZE	(4u << 20)
#define BURST_STRIDE	8192		/* the burst's requests: one region each */
#define ATOMIC_OFF	(BUF_SIZE - 64)	/* GIN signal word in the receive buffer */
#define WR_DUMMY	UINT64_MAX	/* NCCL_IB_RECV_WR_ID_DUMMY */
#define POLL_SECONDS	60

/* ncclIbSendFifo with NCCL_NET_MAX_DEVS_PER_NIC 4: idx is the last 8 bytes. */
struct cts_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t rkeys[4];
	uint32_t nreqs;
	uint32_t tag;
	uint64_t idx;
};

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_port_attr port;
	int gid_index;
	union ibv_gid gid;
};

struct conn {
	struct dev s, r;
	int nqps;
	struct ibv_qp *sqp[MAX_QPS], *rqp[MAX_QPS];
	struct ibv_qp *flush_qp;
	uint8_t *sbuf, *rbuf;
	struct ibv_mr *smr, *rmr;
	struct cts_entry *fifo;			/* the sender's, written by the receiver */
	struct cts_entry *rfifo;		/* the receiver's copies it sends from */
	struct ibv_mr *fifo_mr, *rfifo_mr;
	uint32_t *flush_mem;
	struct ibv_mr *flush_mr;
	uint64_t fifo_head;
};

static long failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die(const char *what)
{
	fprintf(stderr, "tbv_nccl_pattern: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	if (failures++ >= 10)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- the GID, as ncclIbGetGidIndex picks it ---- */

/* 2 for "RoCE v2", 1 for "IB/RoCE v1" or "RoCE v1", 0 if unreadable. */
static int gid_roce_version(const char *dev, int index)
{
	char path[256], buf[16] = "";
	int fd, n;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/types/%d",
		 dev, index);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;	/* an unused entry: EINVAL, which NCCL skips too */
	if (!strncmp(buf, "RoCE v2", 7))
		return 2;
	if (!strncmp(buf, "IB/RoCE v1", 10) || !strncmp(buf, "RoCE v1", 7))
		return 1;
	return 0;
}

static int gid_is_ipv4(const union ibv_gid *g)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, mapped, sizeof(mapped));
}

/* Neither unset (all zero, or fe80:: with nothing after) nor link-local. */
static int gid_usable(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	if (!memcmp(g->raw, zero, 16))
		return 0;
	return !(g->raw[0] == 0xfe && g->raw[1] == 0x80 && !memcmp(g->raw + 2, zero, 6));
}

static void pick_gid(struct dev *d)
{
	const char *env = getenv("NCCL_IB_GID_INDEX");
	union ibv_gid best, cand;
	int i, best_ver, cand_ver;

	if (env && atoi(env) >= 0) {
		d->gid_index = atoi(env);
	} else {
		d->gid_index = 0;
		if (ibv_query_gid(d->ctx, 1, 0, &best))
			die("ibv_query_gid");
		for (i = 1; i < d->port.gid_tbl_len; i++) {
			if (ibv_query_gid(d->ctx, 1, i, &cand))
				continue;
			if (!gid_is_ipv4(&cand) || !gid_usable(&cand))
				continue;	/* the family or an unusable GID */
			if (!gid_is_ipv4(&best)) {
				d->gid_index = i;	/* the first of the wanted family */
				best = cand;
				continue;
			}
			best_ver = gid_roce_version(d->name, d->gid_index);
			cand_ver = gid_roce_version(d->name, i);
			if ((best_ver != cand_ver || !gid_usable(&best)) && cand_ver == 2) {
				d->gid_index = i;
				best = cand;
			}
		}
	}
	if (ibv_query_gid(d->ctx, 1, d->gid_index, &d->gid))
		die("ibv_query_gid");
}

static void open_dev(struct dev *d, const char *name, int cqe)
{
	char text[INET6_ADDRSTRLEN];
	int ver;

	d->name = name;
	d->ctx = tbv_open_by_name("tbv_nccl_pattern", name);
	if (ibv_query_port(d->ctx, 1, &d->port))
		die("ibv_query_port");
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		die("ibv_alloc_pd");
	d->cq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!d->cq)
		die("ibv_create_cq");
	pick_gid(d);
	ver = gid_roce_version(name, d->gid_index);
	inet_ntop(AF_INET6, d->gid.raw, text, sizeof(text));
	printf("%s: link_layer %s active_mtu %d gid_index %d type %s gid %s\n", name,
	       d->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
	       128 << d->port.active_mtu, d->gid_index,
	       ver == 2 ? "RoCE-v2" : ver == 1 ? "RoCE-v1" : "unknown", text);
	if (d->port.link_layer != IBV_LINK_LAYER_ETHERNET)
		fail("%s: NCCL's RoCE path needs an Ethernet link layer", name);
}

/* ---- the probes ---- */

static void probe_dmabuf(struct dev *d)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_dmabuf_mr(d->pd, 0, 0, 0, -1, 0);
	printf("dmabuf probe: %s %s\n", d->name, mr ? "registered" :
	       errno == EOPNOTSUPP ? "EOPNOTSUPP" :
	       errno == EPROTONOSUPPORT ? "EPROTONOSUPPORT" : strerror(errno));
	if (mr) {
		fail("%s: ibv_reg_dmabuf_mr(fd -1) succeeded", d->name);
		ibv_dereg_mr(mr);
	} else if (errno != EOPNOTSUPP && errno != EPROTONOSUPPORT) {
		fail("%s: ibv_reg_dmabuf_mr(fd -1): %s, so NCCL would assume dma-buf", d->name,
		     strerror(errno));
	}
}

#define DATA_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING)
#define FIFO_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void *page_alloc(size_t size)
{
	void *p;

	if (posix_memalign(&p, 4096, size))
		die("posix_memalign");
	memset(p, 0, size);
	return p;
}

static struct ibv_mr *reg_data(struct dev *d, void *buf, size_t size)
{
	struct ibv_mr *mr = ibv_reg_mr_iova2(d->pd, buf, size, (uintptr_t)buf, DATA_ACCESS);

	if (!mr)
		die("ibv_reg_mr_iova2");
	return mr;
}

/* ---- QPs ---- */

static struct ibv_qp *make_qp(struct dev *d, uint32_t send_wr, uint32_t recv_wr, int access)
{
	struct ibv_qp_init_attr init = {
		.send_cq = d->cq, .recv_cq = d->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 0 },
	};
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = access };
	struct ibv_qp_init_attr got_init;
	struct ibv_qp_attr got;
	struct ibv_qp *qp = ibv_create_qp(d->pd, &init);

	if (!qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	if (ibv_query_qp(qp, &got, IBV_QP_CAP | IBV_QP_ACCESS_FLAGS, &got_init))
		die("ibv_query_qp");
	if (got.cap.max_send_wr < send_wr || got.cap.max_recv_wr < recv_wr)
		fail("%s: QP capacity below what was asked: max_send_wr %u, max_recv_wr %u",
		     d->name, got.cap.max_send_wr, got.cap.max_recv_wr);
	if ((got.qp_access_flags & access) != (unsigned int)access)
		fail("%s: QP access flags %#x lack %#x", d->name, got.qp_access_flags, access);
	return qp;
}

static void connect_qp(struct ibv_qp *qp, struct dev *local, struct dev *remote, uint32_t dqpn)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR, .dest_qp_num = dqpn, .rq_psn = 0,
		.path_mtu = local->port.active_mtu < remote->port.active_mtu ?
			    local->port.active_mtu : remote->port.active_mtu,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1, .sl = 0,
			     .grh = { .dgid = remote->gid, .sgid_index = local->gid_index,
				      .hop_limit = 255, .traffic_class = 0 } },
	};
	int ret;

	ret = tbv_modify_to_rtr(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER);
	if (ret) {
		errno = ret;
		die("modify to RTR");
	}
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 20;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 1;
	attr.sq_psn = 0;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN))
		die("modify to RTS");
}

static void setup(struct conn *c, const char *sname, const char *rname)
{
	int i;

	open_dev(&c->s, sname, MAX_REQUESTS * c->nqps);
	open_dev(&c->r, rname, 2 * MAX_REQUESTS * c->nqps);
	probe_dmabuf(&c->s);
	probe_dmabuf(&c->r);

	c->sbuf = page_alloc(BUF_SIZE);
	c->rbuf = page_alloc(BUF_SIZE);
	c->smr = reg_data(&c->s, c->sbuf, BUF_SIZE);
	c->rmr = reg_data(&c->r, c->rbuf, BUF_SIZE);
	c->fifo = page_alloc(MAX_REQUESTS * sizeof(*c->fifo));
	c->rfifo = page_alloc(MAX_REQUESTS * sizeof(*c->rfifo));
	c->fifo_mr = ibv_reg_mr(c->s.pd, c->fifo, MAX_REQUESTS * sizeof(*c->fifo), FIFO_ACCESS);
	c->rfifo_mr = ibv_reg_mr(c->r.pd, c->rfifo, MAX_REQUESTS * sizeof(*c->rfifo),
				 FIFO_ACCESS);
	c->flush_mem = page_alloc(4096);
	c->flush_mr = ibv_reg_mr(c->r.pd, c->flush_mem, sizeof(int), IBV_ACCESS_LOCAL_WRITE);
	if (!c->fifo_mr || !c->rfifo_mr || !c->flush_mr)
		die("ibv_reg_mr");

	for (i = 0; i < c->nqps; i++) {
		c->sqp[i] = make_qp(&c->s, 2 * MAX_REQUESTS, 0, IBV_ACCESS_REMOTE_WRITE);
		c->rqp[i] = make_qp(&c->r, 2 * MAX_REQUESTS, MAX_REQUESTS,
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
				    IBV_ACCESS_REMOTE_READ);
	}
	for (i = 0; i < c->nqps; i++) {
		connect_qp(c->sqp[i], &c->s, &c->r, c->rqp[i]->qp_num);
		connect_qp(c->rqp[i], &c->r, &c->s, c->sqp[i]->qp_num);
	}
	c->flush_qp = make_qp(&c->r, MAX_REQUESTS, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	connect_qp(c->flush_qp, &c->r, &c->r, c->flush_qp->qp_num);
	printf("qps: %d per connection, sender max_send_wr %d, receiver max_recv_wr %d, "
	       "flush QP %#x connected to itself\n", c->nqps, 2 * MAX_REQUESTS, MAX_REQUESTS,
	       c->flush_qp->qp_num);
}

/* ---- completions ---- */

static void poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, const char *what)
{
	time_t deadline = time(NULL) + POLL_SECONDS;
	int got = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			die("ibv_poll_cq");
		got += r;
		if (!r)
			sched_yield();	/* let the device's work run if it shares this CPU */
		if (!r && time(NULL) > deadline) {
			fprintf(stderr, "FAIL: %s: %d of %d completions after %d s\n", what, got,
				n, POLL_SECONDS);
			exit(1);
		}
	}
	for (r = 0; r < n; r++)
		if (wc[r].status != IBV_WC_SUCCESS)
			fail("%s: completion status %s (wr_id %#llx)", what,
			     ibv_wc_status_str(wc[r].status), (unsigned long long)wc[r].wr_id);
}

static void post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(qp, wr, &bad);

	if (ret) {
		errno = ret;
		die(what);
	}
}

static long cts_signaled, cts_completed;

/* n completions from the receiver's CQ, past the signaled CTS WRITEs it also holds. */
static void poll_recv_side(struct conn *c, struct ibv_wc *out, int n, const char *what)
{
	struct ibv_wc wc;
	int got = 0;

	while (got < n) {
		poll_n(c->r.cq, &wc, 1, what);
		if (wc.opcode == IBV_WC_RDMA_WRITE)
			cts_completed++;
		else
			out[got++] = wc;
	}
}

/* ---- the receiver's side of one request ---- */

/* One zero-SGE receive per QP (posted on demand, before the CTS). */
static void post_recvs(struct conn *c)
{
	struct ibv_recv_wr wr = { .wr_id = WR_DUMMY, .sg_list = NULL, .num_sge = 0 }, *bad;
	int i;

	for (i = 0; i < c->nqps; i++)
		if (ibv_post_recv(c->rqp[i], &wr, &bad))
			die("ibv_post_recv");
}

/* The CTS: fill our copy of the FIFO entry and RDMA-WRITE it into the sender's FIFO. */
static void post_cts(struct conn *c, int slot, uint32_t off, uint32_t size, uint32_t tag)
{
	struct cts_entry *e = &c->rfifo[slot];
	struct ibv_sge sge = { .addr = (uintptr_t)e, .length = sizeof(*e),
			       .lkey = c->rfifo_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = slot, .opcode = IBV_WR_RDMA_WRITE, .sg_list = &sge, .num_sge = 1,
		.wr.rdma = { .remote_addr = (uintptr_t)&c->fifo[slot], .rkey = c->fifo_mr->rkey },
	};

	memset(e, 0, sizeof(*e));
	e->addr = (uintptr_t)c->rbuf + off;
	e->size = size;
	e->rkeys[0] = c->rmr->rkey;
	e->nreqs = 1;
	e->tag = tag;
	e->idx = ++c->fifo_head;
	/* signaled in the slot of the QP's device index (0): so the send queue drains */
	if (slot == 0) {
		wr.send_flags = IBV_SEND_SIGNALED;
		cts_signaled++;
	}
	post_send(c->rqp[0], &wr, "ibv_post_send (CTS)");	/* always the first QP */
}

/* ---- the sender's side ---- */

/* Wait for the CTS entry's idx; the rest of it must be there with it. */
static struct cts_entry wait_cts(struct conn *c, int slot)
{
	volatile struct cts_entry *e = &c->fifo[slot];
	uint64_t want = c->rfifo[slot].idx;
	time_t deadline = time(NULL) + POLL_SECONDS;
	struct cts_entry got;

	while (e->idx != want) {
		sched_yield();
		if (time(NULL) > deadline) {
			fprintf(stderr, "FAIL: CTS slot %d: idx %lu, want %lu after %d s\n", slot,
				(unsigned long)e->idx, (unsigned long)want, POLL_SECONDS);
			exit(1);
		}
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	memcpy(&got, (const void *)e, sizeof(got));
	if (memcmp(&got, &c->rfifo[slot], sizeof(got)))
		fail("CTS slot %d: entry incomplete when its idx %llu showed", slot,
		     (unsigned long long)want);
	return got;
}

/*
 * One request's data: on each QP a 128-byte-aligned chunk as an RDMA WRITE,
 * then the WRITE_WITH_IMM. @separate_imm: the immediate rides on a zero-byte
 * WRITE_WITH_IMM with no SGE and no remote address or key (adaptive routing,
 * several requests); else the data WRITE carries it. Returns the signaled WRs.
 */
static int post_data(struct conn *c, const struct cts_entry *cts, uint32_t src_off,
		     uint32_t imm, int separate_imm, uint64_t wr_id)
{
	uint32_t chunk = (cts->size + c->nqps - 1) / c->nqps, sent = 0;
	int i;

	chunk = (chunk + CHUNK_ALIGN - 1) / CHUNK_ALIGN * CHUNK_ALIGN;
	for (i = 0; i < c->nqps; i++) {
		uint32_t len = cts->size - sent < chunk ? cts->size - sent : chunk;
		struct ibv_sge sge = { .addr = (uintptr_t)c->sbuf + src_off + sent,
				       .length = len, .lkey = c->smr->lkey };
		struct ibv_send_wr wrs[2], *last = &wrs[0];

		memset(wrs, 0, sizeof(wrs));
		wrs[0].wr_id = wr_id;
		wrs[0].opcode = IBV_WR_RDMA_WRITE;
		wrs[0].sg_list = &sge;
		wrs[0].num_sge = len ? 1 : 0;
		wrs[0].wr.rdma.remote_addr = cts->addr + sent;
		wrs[0].wr.rdma.rkey = cts->rkeys[0];
		if (separate_imm) {
			wrs[0].next = &wrs[1];
			last = &wrs[1];		/* memset: no SGE, remote_addr 0, rkey 0 */
		}
		last->wr_id = wr_id;
		last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		last->imm_data = htonl(imm);
		last->send_flags = IBV_SEND_SIGNALED;
		post_send(c->sqp[i], &wrs[0], "ibv_post_send (data)");
		sent += len;
	}
	return c->nqps;
}

static void fill(uint8_t *p, uint32_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	while (n--) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		*p++ = x;
	}
}

/* The receive completions of one request: one per QP, each with the immediate. */
static void check_recv_wcs(struct ibv_wc *wc, int n, uint32_t imm, uint32_t size, int separate_imm)
{
	uint32_t bytes = 0;
	int i;

	for (i = 0; i < n; i++) {
		if (wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc[i].wc_flags & IBV_WC_WITH_IMM))
			fail("receive completion: opcode %d flags %#x", wc[i].opcode, wc[i].wc_flags);
		if (ntohl(wc[i].imm_data) != imm)
			fail("receive completion: immediate %u want %u", ntohl(wc[i].imm_data), imm);
		if (wc[i].wr_id != WR_DUMMY)
			fail("receive completion: wr_id %#llx", (unsigned long long)wc[i].wr_id);
		bytes += wc[i].byte_len;
	}
	/* byte_len: what the WRITE_WITH_IMM itself wrote (0 when it came separately) */
	if (bytes != (separate_imm ? 0 : size))
		fail("receive completions: byte_len sum %u want %u", bytes, separate_imm ? 0 : size);
}

static long flushes;

/* NCCL's flush: a 1-byte RDMA READ of the received buffer on the loopback QP. */
static void flush(struct conn *c, uint32_t off)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->flush_mem, .length = 1,
			       .lkey = c->flush_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 0x1000, .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
		.sg_list = &sge, .num_sge = 1,
		.wr.rdma = { .remote_addr = (uintptr_t)c->rbuf + off, .rkey = c->rmr->rkey },
	};
	struct ibv_wc wc;

	*c->flush_mem = 0xdeadbe00;
	post_send(c->flush_qp, &wr, "ibv_post_send (flush)");
	poll_recv_side(c, &wc, 1, "flush");
	if (wc.opcode != IBV_WC_RDMA_READ || wc.qp_num != c->flush_qp->qp_num)
		fail("flush completion: opcode %d on QP %#x", wc.opcode, wc.qp_num);
	if ((*c->flush_mem & 0xff) != c->rbuf[off] || (*c->flush_mem >> 8) != 0xdeadbe)
		fail("flush: read %#x, buffer byte %#x", *c->flush_mem, c->rbuf[off]);
	flushes++;
}

static long mismatches, requests, bytes;

static void check_data(struct conn *c, uint32_t dst_off, uint32_t src_off, uint32_t size)
{
	uint32_t i;

	if (memcmp(c->rbuf + dst_off, c->sbuf + src_off, size)) {
		for (i = 0; c->rbuf[dst_off + i] == c->sbuf[src_off + i]; i++)
			;
		mismatches++;
		fail("data: %u bytes, first wrong byte at %u", size, i);
	}
	for (i = 0; i < 64; i++)
		if (c->rbuf[dst_off + size + i] != 0xa5) {
			mismatches++;
			fail("data: byte %u after a %u-byte transfer overwritten", i, size);
			break;
		}
	requests++;
	bytes += size;
}

/* ---- the parts ---- */

static const uint32_t sizes[] = { 0, 1, 127, 128, 4096, 8192, 8193, 65536, 100000, 1 << 20 };

static void rounds(struct conn *c, int n)
{
	struct ibv_wc wc[MAX_QPS];
	int k;

	for (k = 0; k < n; k++) {
		uint32_t size = sizes[k % (sizeof(sizes) / sizeof(sizes[0]))];
		uint32_t off = (k * 4096) % (BUF_SIZE / 2), src_off = ((k * 7) % 64) * 64;
		int slot = k % MAX_REQUESTS, separate = k & 1;
		struct cts_entry cts;

		fill(c->sbuf + src_off, size, k);
		memset(c->rbuf + off, 0xa5, size + 64);
		post_recvs(c);
		post_cts(c, slot, off, size, k);
		cts = wait_cts(c, slot);
		post_data(c, &cts, src_off, size, separate, k);
		poll_recv_side(c, wc, c->nqps, "receive");
		check_recv_wcs(wc, c->nqps, size, size, separate);
		check_data(c, off, src_off, size);
		if (size)
			flush(c, off);
		poll_n(c->s.cq, wc, c->nqps, "send");
	}
	printf("rounds: %ld requests, %ld bytes, sizes 0..%u, immediate on the data and "
	       "separate, %ld mismatches\n", requests, bytes, 1u << 20, mismatches);
}

/* 256 requests in flight: 512 send WRs on each sender QP before a completion is polled. */
static void burst(struct conn *c)
{
	static struct ibv_wc wc[2 * MAX_REQUESTS * MAX_QPS];
	int seen[MAX_REQUESTS] = { 0 };
	long before = mismatches;
	int slot, i, n;

	for (slot = 0; slot < MAX_REQUESTS; slot++) {
		fill(c->sbuf + slot * BURST_STRIDE, 4096 + slot, 1000 + slot);
		memset(c->rbuf + slot * BURST_STRIDE, 0xa5, 4096 + slot + 64);
		post_recvs(c);
		post_cts(c, slot, slot * BURST_STRIDE, 4096 + slot, slot);
	}
	for (slot = 0; slot < MAX_REQUESTS; slot++) {
		struct cts_entry cts = wait_cts(c, slot);

		/* immediate: the request id (NCCL's matching by ID) */
		post_data(c, &cts, slot * BURST_STRIDE, slot, 1, slot);
	}
	n = MAX_REQUESTS * c->nqps;
	poll_n(c->s.cq, wc, n, "burst send");
	poll_recv_side(c, wc, n, "burst receive");
	for (i = 0; i < n; i++)
		if (wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM || wc[i].byte_len ||
		    ntohl(wc[i].imm_data) >= MAX_REQUESTS)
			fail("burst receive: opcode %d byte_len %u immediate %u", wc[i].opcode,
			     wc[i].byte_len, ntohl(wc[i].imm_data));
		else
			seen[ntohl(wc[i].imm_data)]++;
	for (slot = 0; slot < MAX_REQUESTS; slot++)
		if (seen[slot] != c->nqps)
			fail("burst: request %d completed %d times on %d QPs", slot, seen[slot],
			     c->nqps);
	for (slot = 0; slot < MAX_REQUESTS; slot++)
		check_data(c, slot * BURST_STRIDE, slot * BURST_STRIDE, 4096 + slot);
	flush(c, (MAX_REQUESTS - 1) * BURST_STRIDE);
	printf("burst: %d requests in flight, %d send WRs per sender QP, %ld mismatches\n",
	       MAX_REQUESTS, 2 * MAX_REQUESTS, mismatches - before);
}

/* GIN's signal: a fetch-and-add on the receiver's memory (MR and QP allow REMOTE_ATOMIC). */
static void gin_signal(struct conn *c)
{
	volatile uint64_t *word = (uint64_t *)(c->rbuf + ATOMIC_OFF);
	uint64_t *result = (uint64_t *)(c->sbuf + ATOMIC_OFF);
	struct ibv_sge sge = { .addr = (uintptr_t)result, .length = 8, .lkey = c->smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 7, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED,
		.sg_list = &sge, .num_sge = 1,
		.wr.atomic = { .remote_addr = (uintptr_t)word, .compare_add = 5,
			       .rkey = c->rmr->rkey },
	};
	struct ibv_wc wc;

	*word = 0x1234500000000000ull;
	*result = 0;
	post_send(c->sqp[0], &wr, "ibv_post_send (atomic)");
	poll_n(c->s.cq, &wc, 1, "atomic");
	if (wc.opcode != IBV_WC_FETCH_ADD || *result != 0x1234500000000000ull ||
	    *word != 0x1234500000000005ull)
		fail("atomic: returned %#llx, word now %#llx", (unsigned long long)*result,
		     (unsigned long long)*word);
	printf("atomic: fetch-and-add returned %#llx, word now %#llx\n",
	       (unsigned long long)*result, (unsigned long long)*word);
}

int main(int argc, char **argv)
{
	struct conn c = { .nqps = 1 };
	int opt, n = 20;

	while ((opt = getopt(argc, argv, "q:n:")) != -1) {
		switch (opt) {
		case 'q':
			c.nqps = atoi(optarg);
			break;
		case 'n':
			n = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind != 2 || c.nqps < 1 || c.nqps > MAX_QPS || n < 1)
		goto usage;
	setup(&c, argv[optind], argv[optind + 1]);
	rounds(&c, n);
	burst(&c);
	gin_signal(&c);
	while (cts_completed < cts_signaled) {
		struct ibv_wc wc;

		poll_n(c.r.cq, &wc, 1, "CTS");
		if (wc.opcode != IBV_WC_RDMA_WRITE)
			fail("CTS completion: opcode %d", wc.opcode);
		cts_completed++;
	}
	printf("cts: %ld FIFO entries written, %ld signaled\n", (long)c.fifo_head, cts_signaled);
	printf("flush: %ld loopback RDMA READs\n", flushes);
	printf("nccl pattern: %s (%ld failures)\n", failures ? "FAILED" : "OK", failures);
	return failures ? 1 : 0;
usage:
	fprintf(stderr, "usage: tbv_nccl_pattern [-q QPS (1-%d)] [-n ROUNDS] SEND_DEV RECV_DEV\n",
		MAX_QPS);
	return 2;
}
