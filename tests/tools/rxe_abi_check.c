// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * rxe_abi_check DEV: does DEV behave as the design of docs/rxe-abi.md relies on, when it is
 * driven by the distribution's own rxe provider (libibverbs from the system, no tbverbs
 * provider)? Runs against any device that claims rdma_rxe's user ABI: rdma_rxe itself (to
 * prove the checks), and usb4_rdma once the module speaks that ABI.
 *
 * What is checked, one line each ("ok NAME: ..." or "FAIL NAME: ..."):
 *   binding       netlink reports driver id RDMA_DRIVER_RXE and uverbs ABI 1..2
 *   listed        libibverbs lists and opens the device (a provider took it)
 *   cq_ring       a CQ is a ring mapped from the uverbs device, laid out as struct
 *                 rxe_queue_buf (indexes at 128 and 256, data at 384), index_mask == cqe
 *   qp_rings      a QP maps an SQ and an RQ ring whose index_mask equals the reported caps
 *   post_recv     receives go into the RQ ring (its producer index moves)
 *   post_send     a send goes into the SQ ring (wr_id, opcode, num_sge, length where rxe
 *                 has them), then a doorbell
 *   send_recv     an RC SEND through loopback arrives intact; sq_retired: the SQ's consumer
 *                 index passes the completed WQE
 *   inline_wqe, send_imm_inline   inline data sits in dma.inline_data; SEND_WITH_IMM arrives
 *   notify        ibv_req_notify_cq arms the CQ; the event comes on the channel
 *   wr_api        ibv_wr_start .. ibv_wr_complete (ibv_create_qp_ex) works
 *   cq_ex         ibv_create_cq_ex's start_poll/end_poll read the completion from the ring
 *   ud_ah_num, ud a UD WQE names its AH by a non-zero ah_num; the message arrives with a GRH
 *   srq_ring, srq_recv, srq_resize, srq_limit   SRQ receives go into the SRQ ring;
 *                 modify_srq(max_wr) keeps posted WQEs; the limit raises
 *                 IBV_EVENT_SRQ_LIMIT_REACHED
 *   resize_cq, resize_cq_shrink   resize keeps pending completions in order, in a new
 *                 mapping; shrinking below them fails
 *   cq_overflow   a full CQ raises IBV_EVENT_CQ_ERR and its entries stay intact, in order
 *
 * System calls: the sections that must (or must not) enter the kernel are bracketed by
 * close(-(1000 + 2 * id)) and close(-(1000 + 2 * id + 1)), which fail at once with EBADF,
 * and announced on stdout as "section ID NAME SYSCALLS" (SYSCALLS: the names expected
 * between the markers, comma-separated, or "-" for none). Run under `strace -f`, the
 * caller checks them (tests/device/test_rxe_abi.py). Inside a section nothing but the verbs
 * under test runs: waiting uses CLOCK_MONOTONIC_COARSE, which the vDSO answers.
 *
 * Usage: rxe_abi_check DEV   Exit 0: every check ok; 1: a check failed; 2: usage or setup.
 * DEV's port 1 needs a RoCE v2 GID (an address on its netdev): every check talks to itself
 * through loopback on that GID.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <infiniband/verbs.h>

/* ---- The ABI being checked (include/uapi/rdma/rdma_user_rxe.h, Linux 6.12) ---- */

struct ring_hdr {			/* struct rxe_queue_buf */
	uint32_t log2_elem_size;
	uint32_t index_mask;
	uint32_t pad_1[30];
	uint32_t producer_index;
	uint32_t pad_2[31];
	uint32_t consumer_index;
	uint32_t pad_3[31];
	uint8_t data[];
};
_Static_assert(offsetof(struct ring_hdr, producer_index) == 128, "rxe_queue_buf");
_Static_assert(offsetof(struct ring_hdr, consumer_index) == 256, "rxe_queue_buf");
_Static_assert(offsetof(struct ring_hdr, data) == 384, "rxe_queue_buf");

/* Offsets in struct rxe_send_wqe that a provider writes and the kernel reads. */
enum {
	WQE_WR_ID = 0,
	WQE_OPCODE = 12,
	WQE_SEND_FLAGS = 16,
	WQE_UD_REMOTE_QPN = 24,
	WQE_UD_AH_NUM = 36,
	WQE_DMA_LENGTH = 184,
	WQE_DMA_NUM_SGE = 196,
	WQE_DMA_DATA = 208,		/* dma.sge[] or dma.inline_data[] */
	SEND_WQE_SIZE = 208,		/* sizeof(struct rxe_send_wqe) */
	RECV_WQE_SIZE = 40,		/* sizeof(struct rxe_recv_wqe) */
	UVERBS_WC_SIZE = 48,		/* sizeof(struct ib_uverbs_wc) */
	SGE_SIZE = 16,			/* sizeof(struct rxe_sge) */
	GRH_SIZE = 40,
};

#define WAIT_SECONDS	30		/* for anything the device does on its own */
#define MSG_LEN		64
#define QKEY		0x11111111u

static int failures;
static int next_section;

static void result(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s %s: ", ok ? "ok" : "FAIL", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		failures++;
}

static void info(const char *fmt, ...)
{
	va_list ap;

	printf("info ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void die(const char *what)
{
	printf("FAIL setup: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* ---- System-call sections ---- */

static int section_begin(const char *name, const char *syscalls)
{
	int id = next_section++;

	printf("section %d %s %s\n", id, name, syscalls);
	fflush(stdout);
	syscall(SYS_close, -(1000 + 2 * id));
	return id;
}

static void section_end(int id)
{
	syscall(SYS_close, -(1000 + 2 * id + 1));
}

/* A clock the vDSO answers without entering the kernel. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- Netlink: driver id and ABI of DEV's uverbs char device ---- */

struct nl_answer {
	bool found;
	uint32_t index;
	bool has_driver_id;
	uint32_t driver_id;
	uint64_t abi;
};

static void nl_put_attr(struct nlmsghdr *h, uint16_t type, const void *data, uint16_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* Walk the attributes of one RDMA netlink message. */
static void nl_parse(const struct nlmsghdr *h, const char *name, struct nl_answer *ans,
		     bool chardev)
{
	const char *p = (const char *)NLMSG_DATA(h);
	const char *end = (const char *)h + h->nlmsg_len;
	bool this_dev = false;
	uint32_t index = 0;

	while (p + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const struct nlattr *)p;
		const char *val = p + NLA_HDRLEN;
		int len = a->nla_len - NLA_HDRLEN;

		if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
			break;
		switch (a->nla_type & NLA_TYPE_MASK) {
		case RDMA_NLDEV_ATTR_DEV_INDEX:
			if (len >= 4)
				memcpy(&index, val, 4);
			break;
		case RDMA_NLDEV_ATTR_DEV_NAME:
			this_dev = !strncmp(val, name, len) && strlen(name) < (size_t)len;
			break;
		case RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID:
			if (chardev && len >= 4) {
				ans->has_driver_id = true;
				memcpy(&ans->driver_id, val, 4);
			}
			break;
		case RDMA_NLDEV_ATTR_CHARDEV_ABI:
			if (chardev && len >= 8)
				memcpy(&ans->abi, val, 8);
			break;
		}
		p += NLA_ALIGN(a->nla_len);
	}
	if (!chardev && this_dev) {
		ans->found = true;
		ans->index = index;
	}
}

/* Send @req, hand every answer message to nl_parse(); 0 or an errno value. */
static int nl_exchange(int fd, struct nlmsghdr *req, const char *name, struct nl_answer *ans,
		       bool chardev)
{
	char buf[32768];

	if (send(fd, req, req->nlmsg_len, 0) < 0)
		return errno;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0)
			return errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				int err = ((struct nlmsgerr *)NLMSG_DATA(h))->error;

				return -err;
			}
			nl_parse(h, name, ans, chardev);
			if (!(h->nlmsg_flags & NLM_F_MULTI))
				return 0;
		}
	}
}

static int nl_query(const char *name, struct nl_answer *ans)
{
	union {
		struct nlmsghdr h;
		char buf[256];
	} req;
	uint32_t index;
	int fd, err;

	memset(ans, 0, sizeof(*ans));
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (fd < 0)
		return errno;
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_HDRLEN;
	req.h.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.h.nlmsg_seq = 1;
	err = nl_exchange(fd, &req.h, name, ans, false);
	if (!err && !ans->found)
		err = ENODEV;
	if (!err) {
		memset(&req, 0, sizeof(req));
		req.h.nlmsg_len = NLMSG_HDRLEN;
		req.h.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV);
		req.h.nlmsg_flags = NLM_F_REQUEST;
		req.h.nlmsg_seq = 2;
		index = ans->index;
		nl_put_attr(&req.h, RDMA_NLDEV_ATTR_DEV_INDEX, &index, sizeof(index));
		nl_put_attr(&req.h, RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs", sizeof("uverbs"));
		err = nl_exchange(fd, &req.h, name, ans, true);
	}
	close(fd);
	return err;
}

/* ---- Mappings of the uverbs device: where the provider put the rings ---- */

#define MAX_MAPS 64

struct maps {
	int n;
	uintptr_t start[MAX_MAPS];
	uintptr_t end[MAX_MAPS];
};

static void maps_read(struct maps *m)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	if (!f)
		die("/proc/self/maps");
	m->n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (!strstr(line, "/infiniband/uverbs") || m->n == MAX_MAPS)
			continue;
		if (sscanf(line, "%lx-%lx", &s, &e) == 2) {
			m->start[m->n] = s;
			m->end[m->n] = e;
			m->n++;
		}
	}
	fclose(f);
}

/* The mappings in @after that are not in @before (up to @max), in address order. */
static int maps_new(const struct maps *before, const struct maps *after,
		    struct ring_hdr **out, size_t *len, int max)
{
	int i, j, n = 0;

	for (i = 0; i < after->n; i++) {
		bool old = false;

		for (j = 0; j < before->n; j++)
			old |= before->start[j] == after->start[i] && before->end[j] == after->end[i];
		if (old)
			continue;
		if (n < max) {
			out[n] = (struct ring_hdr *)after->start[i];
			len[n] = after->end[i] - after->start[i];
		}
		n++;
	}
	return n;
}

static uint32_t ring_prod(struct ring_hdr *r)
{
	return __atomic_load_n(&r->producer_index, __ATOMIC_ACQUIRE);
}

static uint32_t ring_cons(struct ring_hdr *r)
{
	return __atomic_load_n(&r->consumer_index, __ATOMIC_ACQUIRE);
}

static uint32_t ring_count(struct ring_hdr *r)
{
	return (ring_prod(r) - ring_cons(r)) & r->index_mask;
}

static uint8_t *ring_slot(struct ring_hdr *r, uint32_t index)
{
	return r->data + ((size_t)(index & r->index_mask) << r->log2_elem_size);
}

/* The header of a ring the provider mapped: NULL if it is fine, else what is wrong. */
static const char *ring_bad(struct ring_hdr *r, size_t len, uint32_t entries, size_t elem_min)
{
	static char why[160];
	uint32_t slots = r->index_mask + 1;

	if (r->log2_elem_size < 6 || r->log2_elem_size > 16)
		snprintf(why, sizeof(why), "log2_elem_size %u", r->log2_elem_size);
	else if (slots & (slots - 1) || !r->index_mask)
		snprintf(why, sizeof(why), "index_mask %#x is not 2^n - 1", r->index_mask);
	else if (r->index_mask != entries)
		snprintf(why, sizeof(why), "index_mask %u, but %u entries reported", r->index_mask,
			 entries);
	else if ((1u << r->log2_elem_size) < elem_min)
		snprintf(why, sizeof(why), "element of %u bytes, %zu needed",
			 1u << r->log2_elem_size, elem_min);
	else if (len < offsetof(struct ring_hdr, data) + ((size_t)slots << r->log2_elem_size))
		snprintf(why, sizeof(why), "mapping of %zu bytes holds fewer than %u slots", len, slots);
	else if (r->producer_index > r->index_mask || r->consumer_index > r->index_mask)
		snprintf(why, sizeof(why), "indexes %u/%u beyond the mask", r->producer_index,
			 r->consumer_index);
	else
		return NULL;
	return why;
}

/* ---- Device, QPs, completions ---- */

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;			/* 64 KiB registered, carved up by the checks */
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

struct qp {
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ring_hdr *sq, *rq;	/* the mapped rings (rq NULL with an SRQ) */
};

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list)
		die("ibv_get_device_list");
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

/* The first RoCE v2 GID with an IPv4-mapped address, else the first RoCE v2 GID. */
static int pick_gid(struct dev *d)
{
	struct ibv_port_attr pa;
	int i, v2 = -1;

	if (ibv_query_port(d->ctx, 1, &pa))
		die("ibv_query_port");
	d->mtu = pa.active_mtu < IBV_MTU_1024 ? pa.active_mtu : IBV_MTU_1024;
	for (i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };

		if (ibv_query_gid_ex(d->ctx, 1, i, &e, 0) || e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (!memcmp(e.gid.raw, v4, sizeof(v4))) {
			v2 = i;
			break;
		}
		if (v2 < 0)
			v2 = i;
	}
	if (v2 < 0)
		return -1;
	d->gid_index = v2;
	return ibv_query_gid(d->ctx, 1, v2, &d->gid);
}

static struct ibv_cq *make_cq(struct dev *d, int cqe, struct ring_hdr **ring, size_t *len)
{
	struct maps before, after;
	struct ring_hdr *r[2];
	size_t l[2];
	struct ibv_cq *cq;

	maps_read(&before);
	cq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	maps_read(&after);
	*ring = maps_new(&before, &after, r, l, 2) == 1 ? r[0] : NULL;
	if (*ring && len)
		*len = l[0];
	return cq;
}

/* A QP; its rings are found by their index_mask (the caps requested differ). */
static void make_qp(struct dev *d, struct qp *q, enum ibv_qp_type type, struct ibv_cq *scq,
		    struct ibv_cq *rcq, struct ibv_srq *srq, bool ex)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = type, .send_cq = scq, .recv_cq = rcq, .srq = srq, .pd = d->pd,
		.cap = { .max_send_wr = 15, .max_recv_wr = srq ? 0 : 31, .max_send_sge = 2,
			 .max_recv_sge = 2, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	struct maps before, after;
	struct ring_hdr *r[3];
	size_t l[3];
	int i, n;

	if (ex) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	}
	maps_read(&before);
	q->qp = ibv_create_qp_ex(d->ctx, &a);
	if (!q->qp)
		die("ibv_create_qp_ex");
	maps_read(&after);
	q->qpx = ex ? ibv_qp_to_qp_ex(q->qp) : NULL;
	q->sq = q->rq = NULL;
	n = maps_new(&before, &after, r, l, 3);
	for (i = 0; i < n && i < 3; i++) {
		if (r[i]->index_mask == a.cap.max_send_wr &&
		    !ring_bad(r[i], l[i], a.cap.max_send_wr, SEND_WQE_SIZE + 2 * SGE_SIZE))
			q->sq = r[i];
		else if (!srq && r[i]->index_mask == a.cap.max_recv_wr &&
			 !ring_bad(r[i], l[i], a.cap.max_recv_wr, RECV_WQE_SIZE + 2 * SGE_SIZE))
			q->rq = r[i];
	}
	if (n != (srq ? 1 : 2) || !q->sq || (!srq && !q->rq))
		info("QP %u: %d new mappings, sq %s, rq %s (caps %u/%u)", q->qp->qp_num, n,
		     q->sq ? "found" : "missing", q->rq ? "found" : "missing",
		     a.cap.max_send_wr, a.cap.max_recv_wr);
}

/* RESET -> INIT -> RTR -> RTS, connected to @dest on this device (loopback). */
static int connect_qp(struct dev *d, struct qp *q, uint32_t dest)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		.qkey = QKEY,
	};
	bool ud = q->qp->qp_type == IBV_QPT_UD;
	int ret, tries;

	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
		return errno ? errno : EINVAL;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .path_mtu = d->mtu, .dest_qp_num = dest,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = d->gid, .sgid_index = d->gid_index, .hop_limit = 64 } },
	};
	/* RTR resolves our own address; a lost ARP exchange times out: try again */
	for (tries = 1;; tries++) {
		ret = ibv_modify_qp(q->qp, &a, ud ? IBV_QP_STATE :
				    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
		if (ret != ETIMEDOUT || tries == 10)
			break;
	}
	if (ret)
		return ret;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
				  .rnr_retry = 7, .max_rd_atomic = 1 };
	return ibv_modify_qp(q->qp, &a, ud ? IBV_QP_STATE | IBV_QP_SQ_PSN :
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Two QPs of @type connected to each other. */
static void make_pair(struct dev *d, struct qp *a, struct qp *b, enum ibv_qp_type type,
		      struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq, bool ex)
{
	int ret;

	make_qp(d, a, type, scq, scq, NULL, ex);
	make_qp(d, b, type, rcq, rcq, srq, ex);
	ret = connect_qp(d, a, b->qp->qp_num);
	if (!ret)
		ret = connect_qp(d, b, a->qp->qp_num);
	if (ret) {
		errno = ret;
		die("connecting a QP pair through loopback");
	}
}

/* Poll until @n completions are in @wc (no system call); returns how many came. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	double deadline = now() + WAIT_SECONDS;
	int got = 0, i = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			break;
		got += r;
		if (!r && !(++i & 1023) && now() > deadline)
			break;
	}
	return got;
}

/* Whatever is in @cq now, without waiting. */
static int poll_now(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	int r = ibv_poll_cq(cq, n, wc);

	return r < 0 ? 0 : r;
}

static int post_recv(struct ibv_qp *qp, struct ibv_srq *srq, struct dev *d, uint64_t wr_id,
		     uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)d->buf + off, len, d->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
}

static int post_send(struct ibv_qp *qp, struct dev *d, uint64_t wr_id, uint32_t off,
		     uint32_t len, enum ibv_wr_opcode op, unsigned int flags, struct ibv_ah *ah,
		     uint32_t remote_qpn)
{
	struct ibv_sge sge = { (uintptr_t)d->buf + off, len, d->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED | flags, .imm_data = htobe32(0x12345678),
	}, *bad;

	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = remote_qpn;
		wr.wr.ud.remote_qkey = QKEY;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static void fill(struct dev *d, uint32_t off, uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		d->buf[off + i] = (uint8_t)(seed + i * 7);
}

static bool same(struct dev *d, uint32_t a, uint32_t b, uint32_t len)
{
	return !memcmp(d->buf + a, d->buf + b, len);
}

/* Wait for an async event of @type (others are acknowledged and reported). */
static bool wait_async(struct dev *d, enum ibv_event_type type, void *element)
{
	double deadline = now() + WAIT_SECONDS;

	while (now() < deadline) {
		struct pollfd p = { .fd = d->ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;
		bool match;

		if (poll(&p, 1, 500) <= 0)
			continue;
		if (ibv_get_async_event(d->ctx, &ev))
			return false;
		match = ev.event_type == type && ev.element.cq == element;
		if (!match)
			info("async event %s", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		if (match)
			return true;
	}
	return false;
}

/* Acknowledge the async events already queued (a CQ or SRQ waits for them to be destroyed). */
static int drain_async(struct dev *d)
{
	int n = 0;

	for (;;) {
		struct pollfd p = { .fd = d->ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;

		if (poll(&p, 1, 200) <= 0 || ibv_get_async_event(d->ctx, &ev))
			return n;
		ibv_ack_async_event(&ev);
		n++;
	}
}

/* ---- The checks ---- */

static bool check_binding(const char *name)
{
	struct nl_answer a;
	int err = nl_query(name, &a);

	if (err) {
		result(false, "binding", "netlink query of %s: %s", name, strerror(err));
		return false;
	}
	result(a.has_driver_id && a.driver_id == RDMA_DRIVER_RXE && a.abi >= 1 && a.abi <= 2,
	       "binding", "netlink: driver id %s%u (RDMA_DRIVER_RXE is %u), uverbs ABI %" PRIu64
	       " (the rxe provider takes 1..2)", a.has_driver_id ? "" : "absent, ",
	       a.driver_id, RDMA_DRIVER_RXE, a.abi);
	return true;
}

static void destroy_pair(struct qp *a, struct qp *b)
{
	ibv_destroy_qp(a->qp);
	ibv_destroy_qp(b->qp);
}

/* Rings, receives, the doorbell, polling, inline and immediate data over RC. */
static void check_rc(struct dev *d)
{
	struct ring_hdr *scq_ring, *rcq_ring;
	struct ibv_cq *scq, *rcq;
	struct ibv_wc wc[2];
	struct qp a, b;
	const char *bad;
	uint32_t prod;
	uint8_t *slot;
	size_t len;
	int s, i, n, ret;

	scq = make_cq(d, 15, &scq_ring, &len);
	bad = scq_ring ? ring_bad(scq_ring, len, scq->cqe, UVERBS_WC_SIZE) : "no new mapping";
	result(!bad, "cq_ring", "cqe %d: %s", scq->cqe, bad ? bad : "rxe_queue_buf layout");
	rcq = make_cq(d, 63, &rcq_ring, NULL);
	make_pair(d, &a, &b, IBV_QPT_RC, scq, rcq, NULL, false);
	result(a.sq && a.rq && b.sq && b.rq, "qp_rings",
	       "SQ and RQ rings of both QPs mapped, index_mask == the reported caps");
	if (!a.sq || !b.rq || !scq_ring)
		goto out;

	/* receives go into the RQ ring without a system call */
	prod = ring_prod(b.rq);
	s = section_begin("post_recv", "-");
	for (i = 0, ret = 0; i < 4 && !ret; i++)
		ret = post_recv(b.qp, NULL, d, 100 + i, 4096 + i * MSG_LEN, MSG_LEN);
	section_end(s);
	result(!ret && ((ring_prod(b.rq) - prod) & b.rq->index_mask) == 4, "post_recv",
	       "4 receives: RQ producer index %u -> %u", prod, ring_prod(b.rq));

	/* a send goes into the SQ ring, then one doorbell */
	fill(d, 0, MSG_LEN, 1);
	prod = ring_prod(a.sq);
	s = section_begin("post_send", "write");
	ret = post_send(a.qp, d, 7, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	section_end(s);
	slot = ring_slot(a.sq, prod);
	result(!ret && ((ring_prod(a.sq) - prod) & a.sq->index_mask) == 1 &&
	       *(uint64_t *)(slot + WQE_WR_ID) == 7 &&
	       *(uint32_t *)(slot + WQE_OPCODE) == IBV_WR_SEND &&
	       *(uint32_t *)(slot + WQE_DMA_NUM_SGE) == 1 &&
	       *(uint32_t *)(slot + WQE_DMA_LENGTH) == MSG_LEN, "post_send",
	       "ret %d; WQE in SQ slot %u with wr_id, opcode, num_sge and length in place", ret,
	       prod);

	/* completions come out of the CQ rings without a system call */
	s = section_begin("poll_cq", "-");
	n = poll_n(scq, wc, 1);
	n += poll_n(rcq, wc + n, 1);
	section_end(s);
	result(n == 2 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 7 &&
	       wc[0].opcode == IBV_WC_SEND && wc[1].status == IBV_WC_SUCCESS &&
	       wc[1].wr_id == 100 && wc[1].opcode == IBV_WC_RECV && wc[1].byte_len == MSG_LEN &&
	       wc[1].qp_num == b.qp->qp_num && same(d, 0, 4096, MSG_LEN), "send_recv",
	       "RC SEND: %d of 2 completions (%s, %s), payload %s", n,
	       n > 0 ? ibv_wc_status_str(wc[0].status) : "-",
	       n > 1 ? ibv_wc_status_str(wc[1].status) : "-",
	       same(d, 0, 4096, MSG_LEN) ? "intact" : "differs");
	result(ring_cons(a.sq) == ring_prod(a.sq), "sq_retired",
	       "the completed WQE left the SQ ring: consumer %u, producer %u", ring_cons(a.sq),
	       ring_prod(a.sq));

	/* inline data and immediate travel in the WQE */
	fill(d, 0, 32, 2);
	prod = ring_prod(a.sq);
	ret = post_send(a.qp, d, 8, 0, 32, IBV_WR_SEND_WITH_IMM, IBV_SEND_INLINE, NULL, 0);
	slot = ring_slot(a.sq, prod);
	result(!ret && (*(uint32_t *)(slot + WQE_SEND_FLAGS) & IBV_SEND_INLINE) &&
	       *(uint32_t *)(slot + WQE_DMA_LENGTH) == 32 &&
	       !memcmp(slot + WQE_DMA_DATA, d->buf, 32), "inline_wqe",
	       "the data is in dma.inline_data, IBV_SEND_INLINE and dma.length set");
	n = poll_n(scq, wc, 1);
	n += poll_n(rcq, wc + n, 1);
	result(n == 2 && wc[1].status == IBV_WC_SUCCESS && (wc[1].wc_flags & IBV_WC_WITH_IMM) &&
	       be32toh(wc[1].imm_data) == 0x12345678 && wc[1].byte_len == 32 &&
	       same(d, 0, 4096 + MSG_LEN, 32), "send_imm_inline",
	       "SEND_WITH_IMM inline: %d of 2 completions, imm %#x, %u bytes", n,
	       n == 2 ? be32toh(wc[1].imm_data) : 0, n == 2 ? wc[1].byte_len : 0);
out:
	destroy_pair(&a, &b);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
}

/* Arming is a command; the completion event then comes on the channel. */
static void check_notify(struct dev *d)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(d->ctx);
	struct ibv_cq *scq, *ncq, *ev_cq = NULL;
	struct ring_hdr *ring;
	struct ibv_wc wc;
	struct qp a, b;
	void *ev_ctx;
	int s, ret, n = 0;
	bool got = false;

	if (!ch)
		die("ibv_create_comp_channel");
	ncq = ibv_create_cq(d->ctx, 7, NULL, ch, 0);
	if (!ncq)
		die("ibv_create_cq with a channel");
	scq = make_cq(d, 7, &ring, NULL);
	make_pair(d, &a, &b, IBV_QPT_RC, scq, ncq, NULL, false);
	ret = post_recv(b.qp, NULL, d, 200, 4096, MSG_LEN);
	s = section_begin("req_notify_cq", "ioctl");
	ret |= ibv_req_notify_cq(ncq, 0);
	section_end(s);
	ret |= post_send(a.qp, d, 9, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	if (!ret) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };

		if (poll(&p, 1, WAIT_SECONDS * 1000) == 1 && !ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) {
			got = ev_cq == ncq;
			ibv_ack_cq_events(ev_cq, 1);
		}
		n = poll_n(ncq, &wc, 1);
	}
	result(!ret && got && n == 1 && wc.wr_id == 200, "notify",
	       "armed CQ: event %s, then %d completion", got ? "came" : "did not come", n);
	poll_n(scq, &wc, 1);
	destroy_pair(&a, &b);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(ncq);
	ibv_destroy_comp_channel(ch);
}

/*
 * Not a check, information for docs/rxe-abi.md: the length the provider writes into the WQE
 * for ibv_wr_set_sge_list() and ibv_wr_set_inline_data_list() with buffers of 8 and 24
 * bytes, and what arrives. rdma-core 59 gets both wrong (providers/rxe/rxe.c:1095-1110,
 * 1153-1154); 65 fixes them.
 */
static void probe_wr_lists(struct dev *d, struct qp *a, struct qp *b, struct ibv_cq *scq,
			   struct ibv_cq *rcq)
{
	struct ibv_sge sges[2] = {
		{ (uintptr_t)d->buf, 8, d->mr->lkey }, { (uintptr_t)d->buf + 8, 24, d->mr->lkey },
	};
	struct ibv_data_buf bufs[2] = { { d->buf, 8 }, { d->buf + 8, 24 } };
	static const char *const what[2] = { "ibv_wr_set_sge_list", "ibv_wr_set_inline_data_list" };
	struct ibv_wc wc;
	int i;

	for (i = 0; i < 2; i++) {
		uint32_t prod = ring_prod(a->sq), len;
		int ret = post_recv(b->qp, NULL, d, 310 + i, 4096, MSG_LEN);

		ibv_wr_start(a->qpx);
		a->qpx->wr_id = 20 + i;
		a->qpx->wr_flags = IBV_SEND_SIGNALED | (i ? IBV_SEND_INLINE : 0);
		ibv_wr_send(a->qpx);
		if (i)
			ibv_wr_set_inline_data_list(a->qpx, 2, bufs);
		else
			ibv_wr_set_sge_list(a->qpx, 2, sges);
		ret |= ibv_wr_complete(a->qpx);
		len = *(uint32_t *)(ring_slot(a->sq, prod) + WQE_DMA_LENGTH);
		if (!ret && poll_n(scq, &wc, 1) == 1 && poll_n(rcq, &wc, 1) == 1)
			info("provider: %s(8 + 24 bytes) wrote dma.length %u; %s, %u bytes arrived",
			     what[i], len, ibv_wc_status_str(wc.status), wc.byte_len);
		else
			info("provider: %s(8 + 24 bytes) wrote dma.length %u; ret %d, no receive",
			     what[i], len, ret);
	}
}

/* ibv_wr_* on an ibv_create_qp_ex QP, read back with ibv_create_cq_ex's iterator. */
static void check_wr_api(struct dev *d)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 15, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
				       IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_poll_cq_attr pa = { 0 };
	struct ring_hdr *ring;
	struct ibv_cq_ex *cqx;
	struct ibv_cq *scq;
	struct ibv_wc wc;
	struct qp a, b;
	uint32_t byte_len = 0, imm = 0, qp_num = 0;
	uint64_t wr_id = 0;
	int s, ret, status = -1;
	double deadline;

	cqx = ibv_create_cq_ex(d->ctx, &ca);
	if (!cqx)
		die("ibv_create_cq_ex");
	scq = make_cq(d, 15, &ring, NULL);
	make_pair(d, &a, &b, IBV_QPT_RC, scq, ibv_cq_ex_to_cq(cqx), NULL, true);
	fill(d, 0, MSG_LEN, 3);
	ret = post_recv(b.qp, NULL, d, 300, 4096, MSG_LEN);
	s = section_begin("wr_api", "write");
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 10;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(a.qpx, htobe32(0xabcd));
	ibv_wr_set_sge(a.qpx, d->mr->lkey, (uintptr_t)d->buf, MSG_LEN);
	ret |= ibv_wr_complete(a.qpx);
	section_end(s);
	result(!ret && poll_n(scq, &wc, 1) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 10,
	       "wr_api", "ibv_wr_send_imm + ibv_wr_set_sge + ibv_wr_complete: ret %d", ret);

	s = section_begin("cq_ex_poll", "-");
	deadline = now() + WAIT_SECONDS;
	do {
		ret = ibv_start_poll(cqx, &pa);
	} while (ret == ENOENT && now() < deadline);
	if (!ret) {
		wr_id = cqx->wr_id;
		status = cqx->status;
		byte_len = ibv_wc_read_byte_len(cqx);
		imm = be32toh(ibv_wc_read_imm_data(cqx));
		qp_num = ibv_wc_read_qp_num(cqx);
		ibv_end_poll(cqx);
	}
	section_end(s);
	result(!ret && status == IBV_WC_SUCCESS && wr_id == 300 && byte_len == MSG_LEN &&
	       imm == 0xabcd && qp_num == b.qp->qp_num && same(d, 0, 4096, MSG_LEN), "cq_ex",
	       "start_poll %d: wr_id %" PRIu64 ", byte_len %u, imm %#x, qp_num %u", ret, wr_id,
	       byte_len, imm, qp_num);
	if (a.sq)
		probe_wr_lists(d, &a, &b, scq, ibv_cq_ex_to_cq(cqx));
	destroy_pair(&a, &b);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
}

/* UD: the WQE names its address handle by ah_num; the message arrives behind a GRH. */
static void check_ud(struct dev *d)
{
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = d->gid, .sgid_index = d->gid_index, .hop_limit = 64 },
	};
	struct ring_hdr *ring;
	struct ibv_cq *scq, *rcq;
	struct ibv_wc wc[2];
	struct ibv_ah *ah;
	struct qp a, b;
	uint32_t prod, ah_num = 0, qpn = 0;
	int ret, n = 0;

	scq = make_cq(d, 15, &ring, NULL);
	rcq = make_cq(d, 15, &ring, NULL);
	make_pair(d, &a, &b, IBV_QPT_UD, scq, rcq, NULL, false);
	ah = ibv_create_ah(d->pd, &aa);
	if (!ah)
		die("ibv_create_ah");
	fill(d, 0, MSG_LEN, 4);
	ret = post_recv(b.qp, NULL, d, 400, 4096, GRH_SIZE + MSG_LEN);
	if (a.sq) {
		prod = ring_prod(a.sq);
		ret |= post_send(a.qp, d, 11, 0, MSG_LEN, IBV_WR_SEND, 0, ah, b.qp->qp_num);
		ah_num = *(uint32_t *)(ring_slot(a.sq, prod) + WQE_UD_AH_NUM);
		qpn = *(uint32_t *)(ring_slot(a.sq, prod) + WQE_UD_REMOTE_QPN);
		n = poll_n(scq, wc, 1);
		n += poll_n(rcq, wc + n, 1);
	}
	result(!ret && ah_num && qpn == b.qp->qp_num, "ud_ah_num",
	       "UD WQE: ah_num %u (0 would mean an inline AV), remote_qpn %u", ah_num, qpn);
	result(n == 2 && wc[1].status == IBV_WC_SUCCESS && wc[1].byte_len == GRH_SIZE + MSG_LEN &&
	       (wc[1].wc_flags & IBV_WC_GRH) && wc[1].src_qp == a.qp->qp_num &&
	       same(d, 0, 4096 + GRH_SIZE, MSG_LEN), "ud",
	       "UD SEND: %d of 2 completions, byte_len %u, src_qp %u", n,
	       n == 2 ? wc[1].byte_len : 0, n == 2 ? wc[1].src_qp : 0);
	ibv_destroy_ah(ah);
	destroy_pair(&a, &b);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
}

/* The SRQ ring, modify_srq resizing it, and the limit event. */
static void check_srq(struct dev *d)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 15, .max_sge = 2 } };
	struct ibv_srq_attr ma = { .max_wr = 63 };
	struct maps before, after;
	struct ring_hdr *ring = NULL, *r[2];
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_wc wc[2];
	struct ring_hdr *cring;
	struct qp a, b;
	uint32_t prod = 0;
	size_t l[2];
	int s, i, n, ret = 0;

	maps_read(&before);
	srq = ibv_create_srq(d->pd, &sa);
	if (!srq)
		die("ibv_create_srq");
	maps_read(&after);
	if (maps_new(&before, &after, r, l, 2) == 1 &&
	    !ring_bad(r[0], l[0], sa.attr.max_wr, RECV_WQE_SIZE + 2 * SGE_SIZE))
		ring = r[0];
	scq = make_cq(d, 15, &cring, NULL);
	rcq = make_cq(d, 15, &cring, NULL);
	make_pair(d, &a, &b, IBV_QPT_RC, scq, rcq, srq, false);
	if (ring)
		prod = ring_prod(ring);
	s = section_begin("post_srq_recv", "-");
	for (i = 0; i < 4 && !ret; i++)
		ret = post_recv(NULL, srq, d, 500 + i, 4096 + i * MSG_LEN, MSG_LEN);
	section_end(s);
	result(ring && !ret && ((ring_prod(ring) - prod) & ring->index_mask) == 4, "srq_ring",
	       "SRQ ring (max_wr %u) mapped; 4 receives moved its producer index", sa.attr.max_wr);

	fill(d, 0, MSG_LEN, 5);
	ret = post_send(a.qp, d, 12, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	n = poll_n(scq, wc, 1);
	n += poll_n(rcq, wc + n, 1);
	result(!ret && n == 2 && wc[1].wr_id == 500 && same(d, 0, 4096, MSG_LEN), "srq_recv",
	       "a SEND took the oldest SRQ receive: %d of 2 completions", n);

	/* resize with 3 receives posted: they stay, in order, in the new ring */
	maps_read(&before);
	ret = ibv_modify_srq(srq, &ma, IBV_SRQ_MAX_WR);
	maps_read(&after);
	ring = maps_new(&before, &after, r, l, 2) == 1 ? r[0] : NULL;
	ret |= post_send(a.qp, d, 13, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	n = poll_n(scq, wc, 1);
	n += poll_n(rcq, wc + n, 1);
	result(!ret && ring && ring->index_mask >= 63 && n == 2 && wc[1].wr_id == 501,
	       "srq_resize", "modify_srq(max_wr 63): ret %d, new ring %s, next receive wr_id %"
	       PRIu64, ret, ring ? "mapped" : "missing", n == 2 ? wc[1].wr_id : 0);

	/* arm the limit at 2 with 2 posted: taking one raises the event */
	ma.srq_limit = 2;
	ret = ibv_modify_srq(srq, &ma, IBV_SRQ_LIMIT);
	ret |= post_send(a.qp, d, 14, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	n = poll_n(scq, wc, 1);
	n += poll_n(rcq, wc + n, 1);
	result(!ret && n == 2 && wait_async(d, IBV_EVENT_SRQ_LIMIT_REACHED, srq), "srq_limit",
	       "limit 2, one receive left: IBV_EVENT_SRQ_LIMIT_REACHED (ret %d)", ret);
	destroy_pair(&a, &b);
	drain_async(d);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
}

/* Wait until @r holds @n entries (the producer moved, nobody consumed). */
static bool ring_wait(struct ring_hdr *r, uint32_t n)
{
	double deadline = now() + WAIT_SECONDS;

	while (ring_count(r) < n && now() < deadline)
		;
	return ring_count(r) == n;
}

/* resize_cq keeps pending completions in order; it refuses to drop any. */
static void check_resize(struct dev *d)
{
	struct maps before, after;
	struct ring_hdr *ring, *r[2];
	struct ibv_cq *cq, *rcq;
	struct ibv_wc wc[4];
	struct ring_hdr *rring;
	struct qp a, b;
	size_t l[2];
	int i, n, ret = 0, shrink;
	bool ok;

	cq = make_cq(d, 7, &ring, NULL);
	rcq = make_cq(d, 15, &rring, NULL);
	make_pair(d, &a, &b, IBV_QPT_RC, cq, rcq, NULL, false);
	for (i = 0; i < 3 && !ret; i++)
		ret = post_recv(b.qp, NULL, d, 600 + i, 4096 + i * MSG_LEN, MSG_LEN);
	for (i = 0; i < 3 && !ret; i++)
		ret = post_send(a.qp, d, 700 + i, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	ok = !ret && ring && ring_wait(ring, 3);
	maps_read(&before);
	ret = ibv_resize_cq(cq, 40);
	maps_read(&after);
	ring = maps_new(&before, &after, r, l, 2) == 1 ? r[0] : NULL;
	n = poll_n(cq, wc, 3);
	for (i = 0; i < n; i++)
		ok &= wc[i].wr_id == (uint64_t)(700 + i) && wc[i].status == IBV_WC_SUCCESS;
	result(ok && !ret && n == 3 && cq->cqe >= 40 && ring &&
	       ring->index_mask == (uint32_t)cq->cqe, "resize_cq",
	       "grow 7 -> %d with 3 pending: ret %d, new ring %s, %d completions in order",
	       cq->cqe, ret, ring ? "mapped" : "missing", n);

	for (i = 0; i < 3; i++)
		post_recv(b.qp, NULL, d, 610 + i, 4096 + i * MSG_LEN, MSG_LEN);
	for (i = 0; i < 3; i++)
		post_send(a.qp, d, 800 + i, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	ok = ring && ring_wait(ring, 3);
	shrink = ibv_resize_cq(cq, 2);
	n = poll_n(cq, wc, 3);
	n += poll_now(cq, wc + n, 1);
	result(ok && shrink && n == 3 && wc[0].wr_id == 800, "resize_cq_shrink",
	       "shrink to 2 with 3 pending refused (ret %d), %d completions kept", shrink, n);
	destroy_pair(&a, &b);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(rcq);
}

/* A full CQ: IBV_EVENT_CQ_ERR, and what it holds stays intact (the ring is never overrun). */
static void check_overflow(struct dev *d)
{
	struct ring_hdr *ring, *rring;
	struct ibv_cq *cq, *rcq;
	struct ibv_wc wc[8];
	struct qp a, b;
	int i, n, cap, ret = 0;
	bool event, ok = true;

	cq = make_cq(d, 3, &ring, NULL);
	rcq = make_cq(d, 63, &rring, NULL);
	cap = cq->cqe;
	make_pair(d, &a, &b, IBV_QPT_RC, cq, rcq, NULL, false);
	for (i = 0; i < cap + 2 && !ret; i++)
		ret = post_recv(b.qp, NULL, d, 900 + i, 4096 + i * MSG_LEN, MSG_LEN);
	for (i = 0; i < cap + 2 && !ret; i++)
		ret = post_send(a.qp, d, 1000 + i, 0, MSG_LEN, IBV_WR_SEND, 0, NULL, 0);
	event = !ret && wait_async(d, IBV_EVENT_CQ_ERR, cq);
	if (ring)
		info("full CQ ring: producer %u, consumer %u, mask %u", ring_prod(ring),
		     ring_cons(ring), ring->index_mask);
	n = poll_n(cq, wc, cap < 8 ? cap : 8);
	n += poll_now(cq, wc + n, 8 - n);
	for (i = 0; i < n; i++)
		ok &= wc[i].wr_id == (uint64_t)(1000 + i) && wc[i].status == IBV_WC_SUCCESS;
	result(event && ok && n == cap, "cq_overflow",
	       "%d sends into a CQ of %d: IBV_EVENT_CQ_ERR %s, %d completions kept%s", cap + 2,
	       cap, event ? "raised" : "missing", n, ok ? " in order" : ", not in order");
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		if (!ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi))
			info("the sender's QP is in state %d after the overflow", qa.qp_state);
	}
	destroy_pair(&a, &b);
	info("%d more async events acknowledged", drain_async(d));
	ibv_destroy_cq(cq);
	ibv_destroy_cq(rcq);
}

static void usage(void)
{
	fprintf(stderr, "usage: rxe_abi_check DEV\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct dev d = { 0 };

	if (argc != 2)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	check_binding(argv[1]);
	d.ctx = open_dev(argv[1]);
	result(d.ctx != NULL, "listed", "libibverbs %s %s", d.ctx ? "lists and opens" :
	       "does not list (no provider bound) or cannot open", argv[1]);
	if (!d.ctx)
		return 1;
	d.pd = ibv_alloc_pd(d.ctx);
	if (!d.pd)
		die("ibv_alloc_pd");
	if (posix_memalign((void **)&d.buf, 4096, 65536))
		die("posix_memalign");
	memset(d.buf, 0, 65536);
	d.mr = ibv_reg_mr(d.pd, d.buf, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ);
	if (!d.mr)
		die("ibv_reg_mr");
	if (pick_gid(&d))
		die("no RoCE v2 GID on port 1 (is the netdev up with an address?)");
	info("GID index %d, path MTU %d", d.gid_index, 128 << d.mtu);

	check_rc(&d);
	check_notify(&d);
	check_wr_api(&d);
	check_ud(&d);
	check_srq(&d);
	check_resize(&d);
	check_overflow(&d);

	drain_async(&d);
	ibv_dereg_mr(d.mr);
	ibv_dealloc_pd(d.pd);
	ibv_close_device(d.ctx);
	free(d.buf);
	printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
	return failures ? 1 : 0;
}
