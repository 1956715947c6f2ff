// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tbv_integrity: random RDMA traffic with every byte verified on both ends.
 *
 *   tbv_integrity [-q QPS] [-t SECONDS] [-s MAXSIZE] [-S SEED] [-u] DEV_A GID_A DEV_B GID_B
 *
 * Opens two devices (the two ends of a cable, or the same device twice for
 * loopback), connects QPS RC (or, with -u, UC) QP pairs between them and, for
 * SECONDS, runs rounds in which every pair performs one random operation in a
 * random direction: SEND, SEND with immediate, RDMA WRITE, WRITE with
 * immediate or RDMA READ (UC: only SENDs and WRITE with immediate, whose
 * receive completions prove delivery; a message UC loses on the link shows up
 * as a missing completion, an error), of a random size (biased to packet boundaries)
 * at random offsets, gathered from and scattered to random SGE layouts. After
 * each operation the destination must equal the source byte for byte, the
 * bytes around it must be untouched, and completions must carry the right
 * opcode, length and immediate. Prints a summary; exits 1 on any mismatch or
 * error completion.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#define BUF_SIZE	(4u << 20)	/* per QP and end: source half, destination half */
#define HALF		(BUF_SIZE / 2)
#define MAX_SGE		4
#define PKT		4048		/* RDMA payload per packet (wire protocol) */

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
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i;

	if (!list)
		die("ibv_get_device_list");
	for (i = 0; list[i] && strcmp(ibv_get_device_name(list[i]), name); i++)
		;
	if (!list[i]) {
		fprintf(stderr, "tbv_integrity: no device %s\n", name);
		exit(2);
	}
	e->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!e->ctx)
		die("ibv_open_device");
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

static void make_qp(struct qp_end *q, struct end *e)
{
	struct ibv_qp_init_attr init = {
		.send_cq = e->cq, .recv_cq = e->cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = MAX_SGE,
			 .max_recv_sge = MAX_SGE },
		.qp_type = uc ? IBV_QPT_UC : IBV_QPT_RC,
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_LOCAL_WRITE,
	};

	q->end = e;
	if (posix_memalign((void **)&q->buf, 4096, BUF_SIZE))
		die("posix_memalign");
	q->mr = ibv_reg_mr(e->pd, q->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!q->mr)
		die("ibv_reg_mr");
	q->qp = ibv_create_qp(e->pd, &init);
	if (!q->qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(q->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
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

	if (!uc)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(q->qp, &attr, mask))
		die("modify to RTR");
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0x10 * q->qp->qp_num % 0xffffff;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 4;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (!uc)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(q->qp, &attr, mask))
		die("modify to RTS");
}

static uint32_t random_size(uint32_t max)
{
	static const uint32_t edges[] = { 0, 1, PKT - 1, PKT, PKT + 1, 2 * PKT, 3 * PKT + 7 };
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

struct op {
	struct qp_end *src, *dst;
	enum ibv_wr_opcode opcode;
	uint32_t size, src_off, dst_off;
	uint32_t imm;
	int recv_expected;
};

static long mismatches, errors, ops, bytes;

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

static void check_op(struct op *o)
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

				if (wc[i].wr_id != 2 || o->dst->qp->qp_num != wc[i].qp_num)
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
	int nqp = 4, seconds = 10, c, i;
	uint32_t maxsize = 256 * 1024;
	struct end a, b;
	struct qp_end *qa, *qb;
	struct op *round;
	time_t end_time;

	rng_state = (uint64_t)time(NULL) * 2654435761u | 1;
	while ((c = getopt(argc, argv, "q:t:s:S:u")) != -1) {
		switch (c) {
		case 'q': nqp = atoi(optarg); break;
		case 't': seconds = atoi(optarg); break;
		case 's': maxsize = strtoul(optarg, NULL, 0); break;
		case 'S': rng_state = strtoull(optarg, NULL, 0) | 1; break;
		case 'u': uc = 1; break;
		default: goto usage;
		}
	}
	if (argc - optind != 4 || nqp < 1 || maxsize > HALF - 256)
		goto usage;
	printf("seed %llu\n", (unsigned long long)rng_state);
	open_end(&a, argv[optind], atoi(argv[optind + 1]));
	open_end(&b, argv[optind + 2], atoi(argv[optind + 3]));
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
				o->opcode = opcodes[rnd() % 5];
			while (uc && (o->opcode == IBV_WR_RDMA_WRITE || o->opcode == IBV_WR_RDMA_READ));
			o->size = random_size(maxsize);
			o->src_off = 64 + rnd() % (HALF - maxsize - 128);
			o->dst_off = HALF + 64 + rnd() % (HALF - maxsize - 128);
			o->imm = rnd();
			post_op(o);
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
	printf("%ld operations, %ld bytes, %ld mismatches, %ld errors\n", ops, bytes,
	       mismatches, errors);
	for (i = 0; i < nqp; i++) {
		ibv_destroy_qp(qa[i].qp);
		ibv_destroy_qp(qb[i].qp);
		ibv_dereg_mr(qa[i].mr);
		ibv_dereg_mr(qb[i].mr);
		free(qa[i].buf);
		free(qb[i].buf);
	}
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	return mismatches || errors || !ops ? 1 : 0;
usage:
	fprintf(stderr, "usage: tbv_integrity [-q QPS] [-t SECONDS] [-s MAXSIZE] [-S SEED] [-u] "
		"DEV_A GID_A DEV_B GID_B\n");
	return 2;
}
