// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tbv_integrity: random RDMA traffic with every byte verified on both ends.
 *
 *   tbv_integrity [-q QPS] [-t SECONDS] [-s MAXSIZE] [-S SEED] [-u] [-A] [-E] [-F CASE] [-H] DEV_A GID_A DEV_B GID_B
 *
 * Opens two devices (the two ends of a cable, or the same device twice for
 * loopback), connects QPS RC (or, with -u, UC) QP pairs between them and, for
 * SECONDS, runs rounds in which every pair performs one random operation in a
 * random direction: SEND, SEND with immediate, RDMA WRITE, WRITE with
 * immediate, RDMA READ, or (RC, unless -A) an atomic compare-and-swap or
 * fetch-and-add on one of 8 words per QP whose values a model predicts: the
 * returned old value and the word afterwards are both checked. UC does only
 * SENDs and WRITE with immediate, whose receive completions prove delivery (a
 * message UC loses on the link shows up as a missing completion, an error).
 * Sizes are random (biased to packet boundaries), placed
 * at random offsets, gathered from and scattered to random SGE layouts. After
 * each operation the destination must equal the source byte for byte, the
 * bytes around it must be untouched, and completions must carry the right
 * opcode, length and immediate. Prints a summary; exits 1 on any mismatch or
 * error completion.
 *
 * -E instead runs remote atomics the responder must refuse (misaligned, no
 * access right on the MR or the QP, another PD's key, outside the MR) and
 * checks the error completion, the QP state and that no memory changed.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "tbv_tools.h"

#define BUF_SIZE	(4u << 20)	/* per QP and end: source half, destination half */
#define HALF		(BUF_SIZE / 2)
#define MAX_SGE		4
#define PKT		4048		/* RDMA payload per packet (wire protocol) */
#define SPLIT_PKT	4096		/* the same on a link that splits packets */
#define NWORDS		8		/* atomic targets per QP and end, after the buffer */
#define MR_SIZE		(BUF_SIZE + 4096)

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
	int gid_index;
};

struct qp_end {
	struct end *end;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint64_t *words;		/* atomic targets: buf + BUF_SIZE */
	uint64_t model[NWORDS];		/* what they must hold */
};

static uint64_t rng_state;
static int uc;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void die(const char *what)
{
	fprintf(stderr, "tbv_integrity: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void open_end(struct end *e, const char *name, int gid_index)
{
	e->ctx = tbv_open_by_name("tbv_integrity", name);
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd)
		die("ibv_alloc_pd");
	e->cq = ibv_create_cq(e->ctx, 4096, NULL, NULL, 0);
	if (!e->cq)
		die("ibv_create_cq");
	e->gid_index = gid_index;
	if (ibv_query_gid(e->ctx, 1, gid_index, &e->gid))
		die("ibv_query_gid");
}

/* A new (or reset) QP to INIT with every remote right its type has. */
static void qp_to_init(struct qp_end *q)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_LOCAL_WRITE | (uc ? 0 : IBV_ACCESS_REMOTE_ATOMIC),
	};

	if (ibv_modify_qp(q->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
}

static void make_qp(struct qp_end *q, struct end *e)
{
	struct ibv_qp_init_attr init = {
		.send_cq = e->cq, .recv_cq = e->cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = MAX_SGE,
			 .max_recv_sge = MAX_SGE },
		.qp_type = uc ? IBV_QPT_UC : IBV_QPT_RC,
	};
	int i;

	q->end = e;
	if (posix_memalign((void **)&q->buf, 4096, MR_SIZE))
		die("posix_memalign");
	q->words = (uint64_t *)(q->buf + BUF_SIZE);
	for (i = 0; i < NWORDS; i++)
		q->words[i] = q->model[i] = rnd();
	q->mr = ibv_reg_mr(e->pd, q->buf, MR_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   (uc ? 0 : IBV_ACCESS_REMOTE_ATOMIC));
	if (!q->mr)
		die("ibv_reg_mr");
	if (uc) {
		q->qp = ibv_create_qp(e->pd, &init);
	} else {
		/* the wr API too: -E posts an atomic rxe's ibv_post_send() would refuse */
		struct ibv_qp_init_attr_ex ex = {
			.send_cq = init.send_cq, .recv_cq = init.recv_cq, .cap = init.cap,
			.qp_type = init.qp_type, .pd = e->pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
		};

		q->qp = ibv_create_qp_ex(e->ctx, &ex);
	}
	if (!q->qp)
		die("ibv_create_qp");
	qp_to_init(q);
}

/* The requester's budgets set when QPs move to RTS (only -F changes them). */
static int rts_timeout = 14, rts_retry_cnt = 7, rts_rnr_retry = 7;

static void free_qp(struct qp_end *q)
{
	ibv_destroy_qp(q->qp);
	ibv_dereg_mr(q->mr);
	free(q->buf);
}

static void connect_qp(struct qp_end *q, struct qp_end *peer)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num, .rq_psn = 0x10 * peer->qp->qp_num % 0xffffff,
		.max_dest_rd_atomic = 4, .min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->end->gid, .sgid_index = q->end->gid_index,
				      .hop_limit = 64 } },
	};
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	int ret;

	if (!uc)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	ret = tbv_modify_to_rtr(q->qp, &attr, mask);
	if (ret) {
		errno = ret;
		die("modify to RTR");
	}
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0x10 * q->qp->qp_num % 0xffffff;
	attr.timeout = rts_timeout;
	attr.retry_cnt = rts_retry_cnt;
	attr.rnr_retry = rts_rnr_retry;
	attr.max_rd_atomic = 4;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (!uc)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(q->qp, &attr, mask))
		die("modify to RTS");
}

static uint32_t random_size(uint32_t max)
{
	static const uint32_t edges[] = { 0, 1, PKT - 1, PKT, PKT + 1, 2 * PKT, 3 * PKT + 7,
					  SPLIT_PKT - 1, SPLIT_PKT, SPLIT_PKT + 1,
					  2 * SPLIT_PKT, 3 * SPLIT_PKT + 7 };
	uint32_t s;

	switch (rnd() % 4) {
	case 0:
		s = edges[rnd() % (sizeof(edges) / sizeof(edges[0]))];
		break;
	case 1:
		s = rnd() % 256;
		break;
	default:
		s = rnd() % (max + 1);
		break;
	}
	return s > max ? max : s;
}

/* Split [addr, addr + len) into 1..MAX_SGE SGEs with random cut points. */
static int random_sges(struct ibv_sge *sge, struct qp_end *q, uint32_t off, uint32_t len)
{
	int n = 1 + rnd() % MAX_SGE, i;
	uint32_t left = len;

	for (i = 0; i < n; i++) {
		uint32_t piece = i == n - 1 ? left : (left ? rnd() % (left + 1) : 0);

		sge[i].addr = (uintptr_t)q->buf + off;
		sge[i].length = piece;
		sge[i].lkey = q->mr->lkey;
		off += piece;
		left -= piece;
	}
	return n;
}

static long mismatches, errors, ops, bytes, atomics;

struct op {
	struct qp_end *src, *dst;
	enum ibv_wr_opcode opcode;
	uint32_t size, src_off, dst_off;
	uint32_t imm;
	int recv_expected;
	int word;			/* atomics: dst->words[word] */
	uint64_t operand, compare, orig;	/* orig: what the atomic must return */
};

static int is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* An atomic on one of dst's words: its result lands in 8 bytes of src at src_off. */
static void post_atomic(struct op *o)
{
	uint64_t *model = &o->dst->model[o->word];
	struct ibv_sge sge = {
		.addr = (uintptr_t)o->src->buf + o->src_off, .length = 8, .lkey = o->src->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 1, .opcode = o->opcode, .send_flags = IBV_SEND_SIGNALED,
		.sg_list = &sge, .num_sge = 1,
	}, *bad;

	memset(o->src->buf + o->src_off - 64, 0xa5, 8 + 128);
	o->orig = *model;
	o->operand = rnd();
	if (o->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		o->compare = rnd() % 2 ? *model : rnd();	/* half of them swap */
		if (o->compare == *model)
			*model = o->operand;
		wr.wr.atomic.compare_add = o->compare;
		wr.wr.atomic.swap = o->operand;
	} else {
		*model += o->operand;
		wr.wr.atomic.compare_add = o->operand;
	}
	wr.wr.atomic.remote_addr = (uintptr_t)&o->dst->words[o->word];
	wr.wr.atomic.rkey = o->dst->mr->rkey;
	o->recv_expected = 0;
	if (ibv_post_send(o->src->qp, &wr, &bad))
		die("ibv_post_send (atomic)");
}

static void check_atomic(struct op *o)
{
	uint8_t *to = o->src->buf + o->src_off;
	uint64_t got;
	int i;

	memcpy(&got, to, 8);
	if (got != o->orig || o->dst->words[o->word] != o->dst->model[o->word]) {
		mismatches++;
		fprintf(stderr, "ATOMIC MISMATCH: opcode %d returned %#llx want %#llx, word %#llx "
			"want %#llx\n", o->opcode, (unsigned long long)got,
			(unsigned long long)o->orig, (unsigned long long)o->dst->words[o->word],
			(unsigned long long)o->dst->model[o->word]);
	}
	for (i = 1; i <= 64; i++) {
		if (to[-i] != 0xa5 || to[8 + i - 1] != 0xa5) {
			mismatches++;
			fprintf(stderr, "OVERWRITE around an atomic's result\n");
			break;
		}
	}
	ops++;
	atomics++;
}

static void fill(uint8_t *p, uint32_t n)
{
	while (n--)
		*p++ = rnd();
}

static void post_op(struct op *o)
{
	/* READ pulls from dst's memory into src's: the data moves dst -> src */
	int is_read = o->opcode == IBV_WR_RDMA_READ;
	struct qp_end *req = o->src, *data_from = is_read ? o->dst : o->src;
	struct qp_end *data_to = is_read ? o->src : o->dst;
	uint32_t from_off = is_read ? o->dst_off : o->src_off;
	uint32_t to_off = is_read ? o->src_off : o->dst_off;
	struct ibv_sge sge[MAX_SGE], rsge[MAX_SGE];
	struct ibv_send_wr wr = {}, *bad;
	struct ibv_recv_wr rwr = {}, *rbad;

	fill(data_from->buf + from_off, o->size);
	/* guards: destination area and a margin around it get a known pattern */
	memset(data_to->buf + to_off - 64, 0xa5, o->size + 128);

	o->recv_expected = o->opcode == IBV_WR_SEND || o->opcode == IBV_WR_SEND_WITH_IMM ||
			   o->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	if (o->recv_expected) {
		rwr.wr_id = 2;
		rwr.sg_list = rsge;
		rwr.num_sge = o->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 :
			      random_sges(rsge, o->dst, o->dst_off, o->size);
		if (ibv_post_recv(o->dst->qp, &rwr, &rbad))
			die("ibv_post_recv");
	}
	wr.wr_id = 1;
	wr.opcode = o->opcode;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = sge;
	wr.num_sge = random_sges(sge, req, o->src_off, o->size);
	if (o->opcode == IBV_WR_SEND_WITH_IMM || o->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32(o->imm);
	if (o->opcode != IBV_WR_SEND && o->opcode != IBV_WR_SEND_WITH_IMM) {
		wr.wr.rdma.remote_addr = (uintptr_t)o->dst->buf + o->dst_off;
		wr.wr.rdma.rkey = o->dst->mr->rkey;
	}
	if (ibv_post_send(req->qp, &wr, &bad))
		die("ibv_post_send");
}

static void check_transfer(struct op *o)
{
	int is_read = o->opcode == IBV_WR_RDMA_READ;
	struct qp_end *data_from = is_read ? o->dst : o->src, *data_to = is_read ? o->src : o->dst;
	uint32_t from_off = is_read ? o->dst_off : o->src_off;
	uint32_t to_off = is_read ? o->src_off : o->dst_off;
	uint8_t *to = data_to->buf + to_off;
	int i;

	if (memcmp(to, data_from->buf + from_off, o->size)) {
		uint32_t k = 0;

		while (to[k] == data_from->buf[from_off + k])
			k++;
		mismatches++;
		fprintf(stderr, "MISMATCH: opcode %d size %u src_off %u dst_off %u first bad byte %u\n",
			o->opcode, o->size, o->src_off, o->dst_off, k);
		if (getenv("TBV_INTEGRITY_RECHECK")) {
			struct timespec ts = { 0, 200000000 };

			nanosleep(&ts, NULL);
			fprintf(stderr, "  after 200 ms: %s\n",
				memcmp(to, data_from->buf + from_off, o->size) ? "still wrong" : "right");
		}
	}
	for (i = 1; i <= 64; i++) {
		if (to[-i] != 0xa5 || to[o->size + i - 1] != 0xa5) {
			mismatches++;
			fprintf(stderr, "OVERWRITE around the destination: opcode %d size %u\n",
				o->opcode, o->size);
			break;
		}
	}
	ops++;
	bytes += o->size;
}

static void check_op(struct op *o)
{
	if (is_atomic(o->opcode))
		check_atomic(o);
	else
		check_transfer(o);
}

/*
 * -E: remote atomics the responder must refuse. Each case runs on a fresh QP
 * pair; the requester must see the status the spec prescribes, its QP must be
 * in the error state, and the target memory must be unchanged.
 */
enum atomic_case { AC_MISALIGNED, AC_NO_MR_RIGHT, AC_OTHER_PD, AC_OUTSIDE_MR, AC_NO_QP_RIGHT,
		   AC_COUNT };

static const char *const atomic_case_name[AC_COUNT] = {
	"misaligned address", "MR without remote atomic access", "rkey of another PD",
	"address outside the MR", "QP without remote atomic access",
};

static int atomic_error_case(struct end *a, struct end *b, enum atomic_case c)
{
	struct qp_end qa, qb;
	struct ibv_pd *other_pd = NULL;
	struct ibv_mr *target_mr, *extra_mr = NULL;
	uint64_t before[NWORDS], remote, result = 0;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .wr_id = 7, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge, .num_sge = 1 }, *bad;
	enum ibv_wc_status want = IBV_WC_REM_ACCESS_ERR;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;
	time_t deadline;
	int got, fail = 0;

	make_qp(&qa, a);
	make_qp(&qb, b);
	connect_qp(&qa, &qb);
	connect_qp(&qb, &qa);
	target_mr = qb.mr;
	remote = (uintptr_t)&qb.words[1];
	switch (c) {
	case AC_MISALIGNED:
		remote += 4;
		want = IBV_WC_REM_INV_REQ_ERR;
		break;
	case AC_NO_MR_RIGHT:
		extra_mr = ibv_reg_mr(b->pd, qb.words, 4096, IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
		target_mr = extra_mr;
		break;
	case AC_OTHER_PD:
		other_pd = ibv_alloc_pd(b->ctx);
		if (!other_pd)
			die("ibv_alloc_pd");
		extra_mr = ibv_reg_mr(other_pd, qb.words, 4096, IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_ATOMIC);
		target_mr = extra_mr;
		break;
	case AC_OUTSIDE_MR:
		remote = (uintptr_t)qb.buf + MR_SIZE;
		break;
	case AC_NO_QP_RIGHT:
		attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		if (ibv_modify_qp(qb.qp, &attr, IBV_QP_ACCESS_FLAGS))
			die("modify access flags");
		break;
	default:
		break;
	}
	if (!target_mr)
		die("ibv_reg_mr");
	memcpy(before, qb.words, sizeof(before));
	sge = (struct ibv_sge){ .addr = (uintptr_t)qa.buf + 64, .length = 8, .lkey = qa.mr->lkey };
	wr.wr.atomic.remote_addr = remote;
	wr.wr.atomic.rkey = target_mr->rkey;
	wr.wr.atomic.compare_add = 1;
	if (c == AC_MISALIGNED) {
		/*
		 * rxe's provider refuses a misaligned atomic in ibv_post_send() (EINVAL),
		 * its wr API does not: so it reaches the peer, whose responder must refuse it.
		 */
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qa.qp);

		ibv_wr_start(qx);
		qx->wr_id = wr.wr_id;
		qx->wr_flags = wr.send_flags;
		ibv_wr_atomic_fetch_add(qx, wr.wr.atomic.rkey, remote, wr.wr.atomic.compare_add);
		ibv_wr_set_sge(qx, sge.lkey, sge.addr, sge.length);
		errno = ibv_wr_complete(qx);
	} else {
		errno = ibv_post_send(qa.qp, &wr, &bad);
	}
	if (errno)
		die("ibv_post_send");
	deadline = time(NULL) + 30;
	while (!(got = ibv_poll_cq(a->cq, 1, &wc)) && time(NULL) < deadline)
		;
	if (got != 1 || wc.wr_id != 7 || wc.status != want) {
		fprintf(stderr, "%s: %s, want %s\n", atomic_case_name[c],
			got == 1 ? ibv_wc_status_str(wc.status) : "no completion",
			ibv_wc_status_str(want));
		fail = 1;
	}
	if (ibv_query_qp(qa.qp, &attr, IBV_QP_STATE, &init) || attr.qp_state != IBV_QPS_ERR) {
		fprintf(stderr, "%s: requester QP not in the error state\n", atomic_case_name[c]);
		fail = 1;
	}
	memcpy(&result, qa.buf + 64, 8);
	if (memcmp(before, qb.words, sizeof(before)) || result) {
		fprintf(stderr, "%s: memory changed\n", atomic_case_name[c]);
		fail = 1;
	}
	printf("%s: %s\n", atomic_case_name[c], fail ? "FAILED" : ibv_wc_status_str(want));
	if (extra_mr)
		ibv_dereg_mr(extra_mr);
	if (other_pd)
		ibv_dealloc_pd(other_pd);
	free_qp(&qa);
	free_qp(&qb);
	return fail;
}

/*
 * -F CASE: how RC fails, or does not, when the peer cannot answer. One QP pair,
 * one signaled WRITE (SEND for rnr) from A to B, then the completion:
 *   retry     the link loses everything (the test sets that up): retry_cnt 2 is
 *             used up, IBV_WC_RETRY_EXC_ERR, the QP in error
 *   rnr       a SEND with no receive posted, rnr_retry 1: IBV_WC_RNR_RETRY_EXC_ERR
 *   infinite  timeout 0 (infinite), retry_cnt 0, the link losing everything
 *             (the test restores it after a while): the WRITE must not fail and
 *             completes once the link is back
 *   rnr7      a SEND with no receive posted, rnr_retry 7 (infinite): no
 *             completion for 3 s, then B posts the receive and the SEND succeeds
 * After connecting it prints "connected" and waits for a line on stdin (the
 * test breaks the link in between: address resolution needs it). Prints the
 * status and the QP state; exits 0 if they are what the case wants.
 */
static int failure_case(struct end *a, struct end *b, const char *name)
{
	int retry = !strcmp(name, "retry"), rnr7 = !strcmp(name, "rnr7");
	int rnr = !strcmp(name, "rnr") || rnr7;
	int infinite = !strcmp(name, "infinite");
	enum ibv_wc_status want = retry ? IBV_WC_RETRY_EXC_ERR :
				  rnr && !rnr7 ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_SUCCESS;
	struct qp_end qa, qb;
	struct ibv_qp_attr attr = {};
	struct ibv_qp_init_attr init;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .wr_id = 9, .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	struct ibv_wc wc;
	time_t start, deadline;
	char line[16];
	int got;

	if (!retry && !rnr && !infinite) {
		fprintf(stderr, "tbv_integrity: -F retry|rnr|rnr7|infinite|local\n");
		return 2;
	}
	make_qp(&qa, a);
	make_qp(&qb, b);
	/* the requester's budgets for this case, set on its way to RTS */
	rts_retry_cnt = retry ? 2 : 0;
	rts_rnr_retry = rnr7 ? 7 : 1;
	rts_timeout = infinite ? 0 : 14;
	connect_qp(&qa, &qb);
	connect_qp(&qb, &qa);
	/* connected (addresses resolved over the link): the test may now break the link */
	printf("connected\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 2;
	sge = (struct ibv_sge){ .addr = (uintptr_t)qa.buf + 64, .length = 64, .lkey = qa.mr->lkey };
	wr.opcode = rnr ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)qb.buf + HALF;
	wr.wr.rdma.rkey = qb.mr->rkey;
	if (ibv_post_send(qa.qp, &wr, &bad))
		die("ibv_post_send");
	start = time(NULL);
	if (rnr7) {
		struct ibv_sge rsge = { .addr = (uintptr_t)qb.buf, .length = 64,
					.lkey = qb.mr->lkey };
		struct ibv_recv_wr recv = { .wr_id = 8, .sg_list = &rsge, .num_sge = 1 }, *rbad;

		/* infinite RNR retries: still waiting after 3 s, then the receive arrives */
		while (!(got = ibv_poll_cq(a->cq, 1, &wc)) && time(NULL) < start + 3)
			;
		if (got) {
			printf("rnr7: completed (%s) without a receive\n", ibv_wc_status_str(wc.status));
			return 1;
		}
		if (ibv_post_recv(qb.qp, &recv, &rbad))
			die("ibv_post_recv");
	}
	deadline = start + 60;
	while (!(got = ibv_poll_cq(a->cq, 1, &wc)) && time(NULL) < deadline)
		;
	if (ibv_query_qp(qa.qp, &attr, IBV_QP_STATE, &init))
		die("ibv_query_qp");
	printf("%s: %s after %ld s, QP %s\n", name,
	       got == 1 ? ibv_wc_status_str(wc.status) : "no completion", (long)(time(NULL) - start),
	       attr.qp_state == IBV_QPS_ERR ? "in error" : "not in error");
	free_qp(&qa);
	free_qp(&qb);
	if (got != 1 || wc.wr_id != 9 || wc.status != want)
		return 1;
	return (want != IBV_WC_SUCCESS) == (attr.qp_state == IBV_QPS_ERR) ? 0 : 1;
}

/*
 * -F local: a WRITE of 1 MiB, then a SEND whose lkey is wrong (a local
 * protection error, found when the requester reaches it). The WRITE went out
 * before and must complete successfully, then the SEND with
 * IBV_WC_LOC_PROT_ERR, and the QP must be in error: the application sees the
 * real error first, not a flush of what was still in flight.
 */
static int local_error_case(struct end *a, struct end *b)
{
	struct qp_end qa, qb;
	struct ibv_qp_attr attr = {};
	struct ibv_qp_init_attr init;
	struct ibv_sge wsge, ssge;
	struct ibv_send_wr send = { .wr_id = 2, .opcode = IBV_WR_SEND,
				    .send_flags = IBV_SEND_SIGNALED, .sg_list = &ssge,
				    .num_sge = 1 };
	struct ibv_send_wr write = { .wr_id = 1, .opcode = IBV_WR_RDMA_WRITE,
				     .send_flags = IBV_SEND_SIGNALED, .sg_list = &wsge,
				     .num_sge = 1, .next = &send }, *bad;
	struct ibv_recv_wr recv = { .wr_id = 3, .sg_list = &ssge, .num_sge = 1 }, *rbad;
	struct ibv_wc wc[2];
	time_t deadline;
	int got = 0, n, ok;

	make_qp(&qa, a);
	make_qp(&qb, b);
	connect_qp(&qa, &qb);
	connect_qp(&qb, &qa);
	wsge = (struct ibv_sge){ .addr = (uintptr_t)qa.buf, .length = 1 << 20,
				 .lkey = qa.mr->lkey };
	write.wr.rdma.remote_addr = (uintptr_t)qb.buf + HALF;
	write.wr.rdma.rkey = qb.mr->rkey;
	ssge = (struct ibv_sge){ .addr = (uintptr_t)qb.buf, .length = 64, .lkey = qb.mr->lkey };
	if (ibv_post_recv(qb.qp, &recv, &rbad))
		die("ibv_post_recv");
	ssge = (struct ibv_sge){ .addr = (uintptr_t)qa.buf, .length = 64,
				 .lkey = qa.mr->lkey ^ 0x5a5a };	/* no such MR */
	if (ibv_post_send(qa.qp, &write, &bad))
		die("ibv_post_send");
	deadline = time(NULL) + 60;
	while (got < 2 && time(NULL) < deadline) {
		n = ibv_poll_cq(a->cq, 2 - got, wc + got);
		if (n < 0)
			die("ibv_poll_cq");
		got += n;
	}
	if (ibv_query_qp(qa.qp, &attr, IBV_QP_STATE, &init))
		die("ibv_query_qp");
	ok = got == 2 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS &&
	     wc[1].wr_id == 2 && wc[1].status == IBV_WC_LOC_PROT_ERR &&
	     attr.qp_state == IBV_QPS_ERR;
	printf("local: %d completions: %s, %s; QP %s\n", got,
	       got > 0 ? ibv_wc_status_str(wc[0].status) : "-",
	       got > 1 ? ibv_wc_status_str(wc[1].status) : "-",
	       attr.qp_state == IBV_QPS_ERR ? "in error" : "not in error");
	free_qp(&qa);
	free_qp(&qb);
	return ok ? 0 : 1;
}

/*
 * -H extras: windows, READs in both directions, a UD QP (joined to one
 * multicast group) and a dump of the MR page, for the hostile-peer tests.
 */
#define HOSTILE_QKEY	0x11111111u
#define HOSTILE_UD_WR	0x0dd
#define HOSTILE_READ_WR	0x7ead

struct hostile {
	struct end *a, *b;
	struct qp_end *qa, *qb;
	struct ibv_mr *mr;
	uint8_t *page;			/* the MR page; the pages around it are guards */
	struct ibv_mw *mw1, *mw2;
	struct qp_end qc;		/* a QP of another PD, to bind that PD's type 2 window */
	struct ibv_mw *mw_other;
	struct ibv_mr *other_bind_mr;
	struct ibv_cq *ud_cq;
	struct ibv_qp *ud;
	struct ibv_mr *ud_mr;
	uint8_t *ud_area;		/* three pages: a receive in the middle one */
};

/* Wait up to @ms for the completion @wr_id on @cq (others are skipped). */
static int hostile_wait_wc(struct ibv_cq *cq, uint64_t wr_id, int ms, struct ibv_wc *wc)
{
	struct timespec now, end;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (ms % 1000) * 1000000L;
	for (;;) {
		int got = ibv_poll_cq(cq, 1, wc);

		if (got < 0)
			die("ibv_poll_cq");
		if (got && wc->wr_id == wr_id)
			return 1;
		if (got)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			return 0;
	}
}

static void hostile_print_wc(int got, const struct ibv_wc *wc)
{
	if (got)
		printf("wc %s %u\n", wc->status == IBV_WC_SUCCESS ? "success" :
		       ibv_wc_status_str(wc->status), wc->byte_len);
	else
		printf("wc none\n");
}

/*
 * "mw1 OFF LEN" / "mw2 OFF LEN": bind the window over the MR page's [OFF, OFF + LEN);
 * "mwo OFF LEN": a type 2 window of the other PD over its own buffer, through qc.
 */
static void hostile_bind(struct hostile *h, int type, unsigned long off, unsigned long len)
{
	int other = type == 3;		/* "mwo": type 2, of the other PD, through qc */
	struct ibv_mw *mw = type == 1 ? h->mw1 : other ? h->mw_other : h->mw2;
	struct ibv_mw_bind_info info = {
		.mr = other ? h->other_bind_mr : h->mr,
		.addr = (uintptr_t)(other ? h->qc.buf : h->page) + off, .length = len,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	struct ibv_qp *qp = other ? h->qc.qp : h->qa->qp;
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_wc wc;
	int ret, got;

	if (type == 1) {
		struct ibv_mw_bind bind = { .wr_id = 0xb1, .send_flags = IBV_SEND_SIGNALED,
					    .bind_info = info };

		ret = ibv_bind_mw(qp, mw, &bind);
	} else {
		struct ibv_send_wr wr = { .wr_id = 0xb1, .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = rkey;
		wr.bind_mw.bind_info = info;
		ret = ibv_post_send(qp, &wr, &bad);
	}
	got = !ret && hostile_wait_wc(h->a->cq, 0xb1, 5000, &wc);
	if (!got || wc.status != IBV_WC_SUCCESS)
		printf("bind failed %d %s\n", ret, got ? ibv_wc_status_str(wc.status) : "-");
	else if (type == 1)
		printf("rkey %u\n", mw->rkey);	/* ibv_bind_mw() updated it */
	else
		printf("rkey %u\n", mw->rkey = rkey);	/* a bind WQE's key is the caller's to keep */
}

static void hostile_hex(const uint8_t *p, unsigned long n)
{
	while (n--)
		printf("%02x", *p++);
	printf("\n");
}

/* "readb OFF LEN": B reads [OFF, OFF + LEN) of the MR page (the responder under test). */
static void hostile_read_by_b(struct hostile *h, unsigned long off, unsigned long len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)h->qb->buf, .length = len,
			       .lkey = h->qb->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = HOSTILE_READ_WR, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	struct ibv_wc wc;
	int got;

	memset(h->qb->buf, 0xa5, len + 64);
	wr.wr.rdma.remote_addr = (uintptr_t)h->page + off;
	wr.wr.rdma.rkey = h->mr->rkey;
	if (ibv_post_send(h->qb->qp, &wr, &bad))
		die("ibv_post_send (read by B)");
	got = hostile_wait_wc(h->b->cq, HOSTILE_READ_WR, 10000, &wc);
	if (!got || wc.status != IBV_WC_SUCCESS) {
		hostile_print_wc(got, &wc);
		return;
	}
	printf("read ");
	hostile_hex(h->qb->buf, len + 64);	/* and 64 bytes after it, still 0xa5 */
}

/*
 * "silence": B stops answering (its QP to the error state), so a READ A posts
 * ("reada OFF LEN": LEN bytes of B's buffer into the MR page at OFF) waits
 * for responses the test crafts; "poll MS" prints its completion, if any.
 */
static void hostile_read_by_a(struct hostile *h, unsigned long off, unsigned long len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)h->page + off, .length = len,
			       .lkey = h->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = HOSTILE_READ_WR, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)h->qb->buf;
	wr.wr.rdma.rkey = h->qb->mr->rkey;
	if (ibv_post_send(h->qa->qp, &wr, &bad))
		die("ibv_post_send (read by A)");
	printf("posted\n");
}

/* qc: an RC QP of @pd on A (connected to B, which never hears from it) and a type 2 window. */
static void hostile_make_other_pd_qp(struct hostile *h, struct ibv_pd *pd, struct qp_end *qb)
{
	struct ibv_qp_init_attr init = {
		/* the pair's type: connect_qp() picks its attributes by -u */
		.send_cq = h->a->cq, .recv_cq = h->a->cq, .qp_type = uc ? IBV_QPT_UC : IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	h->qc.end = h->a;
	if (posix_memalign((void **)&h->qc.buf, 4096, 4096))
		die("posix_memalign (other PD)");
	h->qc.qp = ibv_create_qp(pd, &init);
	h->other_bind_mr = ibv_reg_mr(pd, h->qc.buf, 4096, IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	h->mw_other = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!h->qc.qp || !h->other_bind_mr || !h->mw_other)
		die("QP, MR or window of the other PD");
	qp_to_init(&h->qc);
	connect_qp(&h->qc, qb);
}

/* A UD QP on A with its own CQ, joined to the multicast group ff0e::1:1. */
static void hostile_make_ud(struct hostile *h)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qkey = HOSTILE_QKEY };
	union ibv_gid mgid = { .raw = { 0xff, 0x0e, [13] = 1, [15] = 1 } };

	h->ud_cq = ibv_create_cq(h->a->ctx, 64, NULL, NULL, 0);
	if (!h->ud_cq)
		die("ibv_create_cq (UD)");
	init.send_cq = init.recv_cq = h->ud_cq;
	h->ud = ibv_create_qp(h->a->pd, &init);
	if (!h->ud)
		die("ibv_create_qp (UD)");
	if (ibv_modify_qp(h->ud, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_QKEY))
		die("modify UD to INIT");
	attr.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(h->ud, &attr, IBV_QP_STATE))
		die("modify UD to RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0;
	if (ibv_modify_qp(h->ud, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify UD to RTS");
	if (ibv_attach_mcast(h->ud, &mgid, 0))
		die("ibv_attach_mcast");
	if (posix_memalign((void **)&h->ud_area, 4096, 3 * 4096))
		die("posix_memalign (UD)");
	memset(h->ud_area, 0x5a, 3 * 4096);
	h->ud_mr = ibv_reg_mr(h->a->pd, h->ud_area + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!h->ud_mr)
		die("ibv_reg_mr (UD)");
}

/* "udrecv LEN": a receive of LEN bytes at the start of the UD page (refilled with 0x5a). */
static void hostile_ud_recv(struct hostile *h, unsigned long len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)h->ud_area + 4096, .length = len,
			       .lkey = h->ud_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = HOSTILE_UD_WR, .sg_list = &sge, .num_sge = 1 }, *bad;

	memset(h->ud_area + 4096, 0x5a, 4096);
	if (ibv_post_recv(h->ud, &wr, &bad))
		die("ibv_post_recv (UD)");
	printf("posted\n");
}

/*
 * "udpoll MS": the UD receive's completion ("wc STATUS BYTE_LEN" or "wc none"),
 * then "ud guard ok|BROKEN qp ok|error" (bytes past the receive's LEN and the
 * guard pages must still be 0x5a), then the receive buffer's first 64 bytes.
 */
static void hostile_ud_poll(struct hostile *h, int ms, unsigned long len)
{
	struct ibv_qp_attr attr = {};
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;
	int got = hostile_wait_wc(h->ud_cq, HOSTILE_UD_WR, ms, &wc), broken = 0;
	unsigned long i;

	hostile_print_wc(got, &wc);
	for (i = 0; i < 4096; i++)
		broken |= h->ud_area[i] != 0x5a || h->ud_area[2 * 4096 + i] != 0x5a ||
			  (i >= len && h->ud_area[4096 + i] != 0x5a);
	if (ibv_query_qp(h->ud, &attr, IBV_QP_STATE, &init))
		die("ibv_query_qp (UD)");
	printf("ud guard %s qp %s\n", broken ? "BROKEN" : "ok",
	       attr.qp_state == IBV_QPS_ERR ? "error" : "ok");
	hostile_hex(h->ud_area + 4096, 64);
}

/*
 * Commands beyond check/revive/recv, each answered by the lines said above
 * (mw1/mw2/mwo: "rkey N"; dump: the MR page in hex; fill SEED: "filled"); true if
 * @line was one.
 */
static int hostile_command(struct hostile *h, const char *line)
{
	unsigned long x = 0, y = 0;
	int n = sscanf(line, "%*s %lu %lu", &x, &y);

	if (!strncmp(line, "mw1 ", 4) && n == 2)
		hostile_bind(h, 1, x, y);
	else if (!strncmp(line, "mw2 ", 4) && n == 2)
		hostile_bind(h, 2, x, y);
	else if (!strncmp(line, "mwo ", 4) && n == 2 && x + y <= 4096)
		hostile_bind(h, 3, x, y);
	else if (!strncmp(line, "dump", 4))
		hostile_hex(h->page, 4096);
	else if (!strncmp(line, "fill ", 5) && n >= 1) {
		/* a pattern the test computes too: byte i is i * 31 + i / 256 + SEED */
		for (y = 0; y < 4096; y++)
			h->page[y] = (uint8_t)(y * 31 + (y >> 8) + x);
		printf("filled\n");
	} else if (!strncmp(line, "readb ", 6) && n == 2 && x + y <= 4096)
		hostile_read_by_b(h, x, y);
	else if (!strncmp(line, "reada ", 6) && n == 2 && x + y <= 4096)
		hostile_read_by_a(h, x, y);
	else if (!strncmp(line, "poll ", 5) && n >= 1) {
		struct ibv_wc wc;

		hostile_print_wc(hostile_wait_wc(h->a->cq, HOSTILE_READ_WR, x, &wc), &wc);
	} else if (!strncmp(line, "silence", 7)) {
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

		if (ibv_modify_qp(h->qb->qp, &attr, IBV_QP_STATE))
			die("modify B to ERR");
		printf("silenced\n");
	} else if (!strncmp(line, "udrecv ", 7) && n >= 1 && x <= 4096)
		hostile_ud_recv(h, x);
	else if (!strncmp(line, "udpoll ", 7) && n == 2 && y <= 4096)
		hostile_ud_poll(h, x, y);
	else
		return 0;
	fflush(stdout);
	return 1;
}

/*
 * -H: the target of a hostile-peer test. Connects one RC QP pair (A on DEV_A,
 * B on DEV_B; A's rq_psn is printed), registers on DEV_A one page in the middle of
 * three (the pages around it hold a guard pattern, outside any MR) with every
 * remote right, and an MR of another PD, prints them as "key value" lines and
 * "ready", then on each "check" line from stdin verifies that the guard pages
 * are untouched and prints "guard ok" or "guard BROKEN", "qp error" or "qp ok"
 * (A's state) and the page's first bytes; "revive" moves A through RESET back
 * to RTS with its first PSNs; "recv" posts on A one receive of the whole MR page
 * and prints "posted"; hostile_command() has the rest. The MR page also has an
 * MR granting only remote read and flush (flush_rkey), and two windows (type 1
 * and 2) to bind over it. A never times out (timeout 0): a READ it posts waits
 * for the responses the test crafts. With -u the pair is UC. Exits at end of
 * input. The test crafts frames as B and injects them.
 */
static int hostile_target(struct end *a, struct end *b)
{
	long page = 4096;
	struct qp_end qa, qb;
	struct ibv_pd *other_pd;
	struct ibv_mr *mr, *other_mr, *flush_mr;
	struct hostile h = { .a = a, .b = b, .qa = &qa, .qb = &qb };
	uint8_t *area;
	char line[64];
	int i;

	make_qp(&qa, a);
	make_qp(&qb, b);
	rts_retry_cnt = 7;
	rts_timeout = 0;
	connect_qp(&qa, &qb);
	connect_qp(&qb, &qa);
	if (posix_memalign((void **)&area, page, 3 * page))
		die("posix_memalign");
	memset(area, 0x5a, 3 * page);
	mr = ibv_reg_mr(a->pd, area + page, page, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			IBV_ACCESS_MW_BIND);
	other_pd = ibv_alloc_pd(a->ctx);
	if (!mr || !other_pd)
		die("ibv_reg_mr/ibv_alloc_pd");
	other_mr = ibv_reg_mr(other_pd, qa.buf, 4096, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	/* kernels before 6.2 have no FLUSH access flags: flush_rkey 0 says so */
	flush_mr = ibv_reg_mr(a->pd, area + page, page, IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_FLUSH_GLOBAL);
	if (!other_mr)
		die("ibv_reg_mr (other PD)");
	h.mr = mr;
	h.page = area + page;
	h.mw1 = ibv_alloc_mw(a->pd, IBV_MW_TYPE_1);
	h.mw2 = ibv_alloc_mw(a->pd, IBV_MW_TYPE_2);
	if (!h.mw1 || !h.mw2)
		die("ibv_alloc_mw");
	hostile_make_other_pd_qp(&h, other_pd, &qb);
	hostile_make_ud(&h);
	printf("qpn_a %u\nqpn_b %u\nrq_psn %u\nsq_psn %u\naddr %llu\nlen %ld\nrkey %u\n"
	       "other_pd_rkey %u\nother_pd_addr %llu\nflush_rkey %u\nud_qpn %u\nud_qkey %u\n"
	       "ready\n", qa.qp->qp_num, qb.qp->qp_num, 0x10 * qb.qp->qp_num % 0xffffff,
	       0x10 * qa.qp->qp_num % 0xffffff,
	       (unsigned long long)(uintptr_t)(area + page), page, mr->rkey, other_mr->rkey,
	       (unsigned long long)(uintptr_t)qa.buf, flush_mr ? flush_mr->rkey : 0, h.ud->qp_num,
	       HOSTILE_QKEY);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		struct ibv_qp_attr attr = {};
		struct ibv_qp_init_attr init;
		int broken = 0;

		if (hostile_command(&h, line))
			continue;

		if (!strncmp(line, "revive", 6)) {
			/* a refused request put the QP in error: back to RTS, same PSNs */
			attr.qp_state = IBV_QPS_RESET;
			if (ibv_modify_qp(qa.qp, &attr, IBV_QP_STATE))
				die("modify to RESET");
			qp_to_init(&qa);
			connect_qp(&qa, &qb);
			printf("revived\n");
			fflush(stdout);
			continue;
		}
		if (!strncmp(line, "recv", 4)) {
			struct ibv_sge rsge = { .addr = (uintptr_t)(area + page), .length = page,
						.lkey = mr->lkey };
			struct ibv_recv_wr rwr = { .wr_id = 0x7ec, .sg_list = &rsge, .num_sge = 1 };
			struct ibv_recv_wr *rbad;

			if (ibv_post_recv(qa.qp, &rwr, &rbad))
				die("ibv_post_recv (hostile target)");
			printf("posted\n");
			fflush(stdout);
			continue;
		}
		if (strncmp(line, "check", 5))
			continue;
		for (i = 0; i < page; i++)
			broken |= area[i] != 0x5a || area[2 * page + i] != 0x5a;
		if (ibv_query_qp(qa.qp, &attr, IBV_QP_STATE, &init))
			die("ibv_query_qp");
		printf("guard %s qp %s first bytes %02x%02x%02x%02x\n", broken ? "BROKEN" : "ok",
		       attr.qp_state == IBV_QPS_ERR ? "error" : "ok",
		       area[page], area[page + 1], area[page + 2], area[page + 3]);
		fflush(stdout);
	}
	ibv_destroy_qp(h.ud);
	ibv_destroy_cq(h.ud_cq);
	ibv_dereg_mr(h.ud_mr);
	free(h.ud_area);
	ibv_dealloc_mw(h.mw1);
	ibv_dealloc_mw(h.mw2);
	ibv_dealloc_mw(h.mw_other);
	ibv_destroy_qp(h.qc.qp);
	ibv_dereg_mr(h.other_bind_mr);
	free(h.qc.buf);
	if (flush_mr)
		ibv_dereg_mr(flush_mr);
	ibv_dereg_mr(other_mr);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(other_pd);
	free(area);
	free_qp(&qa);
	free_qp(&qb);
	return 0;
}

/* Wait for @n completions on @e's CQ; check status, opcode, length, immediate. */
static void reap(struct end *e, int n, struct op *ops_of_round, int nops)
{
	time_t deadline = time(NULL) + 30;

	while (n > 0) {
		struct ibv_wc wc[16];
		int got = ibv_poll_cq(e->cq, 16, wc), i, k;

		if (got < 0)
			die("ibv_poll_cq");
		if (!got && time(NULL) > deadline) {
			fprintf(stderr, "tbv_integrity: %d completions missing after 30 s\n", n);
			errors++;
			return;
		}
		for (i = 0; i < got; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "completion error: %s (opcode %d, qp %u)\n",
					ibv_wc_status_str(wc[i].status), wc[i].opcode, wc[i].qp_num);
				errors++;
				continue;
			}
			for (k = 0; k < nops; k++) {
				struct op *o = &ops_of_round[k];

				/* QP numbers are per device: the two ends can share one */
				if (wc[i].wr_id != 2 || o->dst->end != e ||
				    o->dst->qp->qp_num != wc[i].qp_num)
					continue;
				if (wc[i].byte_len != o->size ||
				    (o->opcode != IBV_WR_SEND) != !!(wc[i].wc_flags & IBV_WC_WITH_IMM) ||
				    ((wc[i].wc_flags & IBV_WC_WITH_IMM) && be32toh(wc[i].imm_data) != o->imm)) {
					fprintf(stderr, "bad receive completion: len %u want %u, flags %x\n",
						wc[i].byte_len, o->size, wc[i].wc_flags);
					mismatches++;
				}
			}
		}
		n -= got;
	}
}

int main(int argc, char **argv)
{
	int nqp = 4, seconds = 10, no_atomics = 0, error_cases = 0, hostile = 0, c, i;
	const char *failure = NULL;
	uint32_t maxsize = 256 * 1024;
	struct end a, b;
	struct qp_end *qa, *qb;
	struct op *round;
	time_t end_time;

	rng_state = (uint64_t)time(NULL) * 2654435761u | 1;
	while ((c = getopt(argc, argv, "q:t:s:S:uAEF:H")) != -1) {
		switch (c) {
		case 'q': nqp = atoi(optarg); break;
		case 't': seconds = atoi(optarg); break;
		case 's': maxsize = strtoul(optarg, NULL, 0); break;
		case 'S': rng_state = strtoull(optarg, NULL, 0) | 1; break;
		case 'u': uc = 1; break;
		case 'A': no_atomics = 1; break;
		case 'E': error_cases = 1; break;
		case 'F': failure = optarg; break;
		case 'H': hostile = 1; break;
		default: goto usage;
		}
	}
	if (argc - optind != 4 || nqp < 1 || maxsize > HALF - 256)
		goto usage;
	printf("seed %llu\n", (unsigned long long)rng_state);
	open_end(&a, argv[optind], atoi(argv[optind + 1]));
	open_end(&b, argv[optind + 2], atoi(argv[optind + 3]));
	if (failure && !strcmp(failure, "local"))
		return local_error_case(&a, &b);
	if (failure)
		return failure_case(&a, &b, failure);
	if (hostile)
		return hostile_target(&a, &b);
	if (error_cases) {
		int failed = 0;

		for (c = 0; c < AC_COUNT; c++)
			failed += atomic_error_case(&a, &b, c);
		return failed ? 1 : 0;
	}
	qa = calloc(nqp, sizeof(*qa));
	qb = calloc(nqp, sizeof(*qb));
	round = calloc(nqp, sizeof(*round));
	if (!qa || !qb || !round)
		die("calloc");
	for (i = 0; i < nqp; i++) {
		make_qp(&qa[i], &a);
		make_qp(&qb[i], &b);
	}
	for (i = 0; i < nqp; i++) {
		connect_qp(&qa[i], &qb[i]);
		connect_qp(&qb[i], &qa[i]);
	}

	end_time = time(NULL) + seconds;
	while (time(NULL) < end_time && !errors) {
		int sends_a = 0, sends_b = 0, recvs_a = 0, recvs_b = 0;

		for (i = 0; i < nqp; i++) {
			static const enum ibv_wr_opcode opcodes[] = {
				IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
				IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
				IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
			};
			struct op *o = &round[i];
			int a_to_b = rnd() & 1;

			o->src = a_to_b ? &qa[i] : &qb[i];
			o->dst = a_to_b ? &qb[i] : &qa[i];
			/*
			 * UC completes a plain WRITE when it is sent, before it is placed,
			 * and READ does not exist: only operations with a receive
			 * completion prove delivery there.
			 */
			do
				o->opcode = opcodes[rnd() % (no_atomics ? 5 : 7)];
			while (uc && (o->opcode == IBV_WR_RDMA_WRITE || o->opcode == IBV_WR_RDMA_READ));
			o->size = random_size(maxsize);
			o->src_off = 64 + rnd() % (HALF - maxsize - 128);
			o->dst_off = HALF + 64 + rnd() % (HALF - maxsize - 128);
			o->imm = rnd();
			/*
			 * A quarter page-aligned (rounded up, where the message still fits
			 * its half with the 64-byte margins): their full packets lie in one
			 * page each (zero-copy TX).
			 */
			if (!(o->imm & 3)) {
				uint32_t src = (o->src_off + 4095) & ~4095u;
				uint32_t dst = (o->dst_off + 4095) & ~4095u;

				if (src + maxsize + 64 <= HALF)
					o->src_off = src;
				if (dst + maxsize + 64 <= BUF_SIZE)
					o->dst_off = dst;
			}
			if (is_atomic(o->opcode)) {
				o->size = 8;
				o->src_off &= ~7u;
				o->word = rnd() % NWORDS;
				post_atomic(o);
			} else {
				post_op(o);
			}
			if (a_to_b) {
				sends_a++;
				recvs_b += o->recv_expected;
			} else {
				sends_b++;
				recvs_a += o->recv_expected;
			}
		}
		reap(&a, sends_a + recvs_a, round, nqp);
		reap(&b, sends_b + recvs_b, round, nqp);
		for (i = 0; i < nqp && !errors; i++)
			check_op(&round[i]);
	}
	printf("%ld operations, %ld bytes, %ld atomics, %ld mismatches, %ld errors\n", ops, bytes,
	       atomics, mismatches, errors);
	for (i = 0; i < nqp; i++) {
		free_qp(&qa[i]);
		free_qp(&qb[i]);
	}
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	return mismatches || errors || !ops ? 1 : 0;
usage:
	fprintf(stderr, "usage: tbv_integrity [-q QPS] [-t SECONDS] [-s MAXSIZE] [-S SEED] [-u] [-A] [-E] "
		"[-F retry|rnr|rnr7|infinite|local] [-H] DEV_A GID_A DEV_B GID_B\n");
	return 2;
}
