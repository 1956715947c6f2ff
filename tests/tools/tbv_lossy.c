// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tbv_lossy: UC and UD over a link that loses, duplicates, reorders and damages
 * frames. The spec lets them lose whole messages; it never lets them deliver a
 * damaged, partial or spliced one, and UC never delivers one twice or out of
 * order.
 *
 *   tbv_lossy -T uc|ud [-n MESSAGES] [-S SEED] DEV_A GID_A DEV_B GID_B
 *
 * A sends MESSAGES messages to B (UC: SEND and WRITE with immediate, up to
 * 16 KiB, so most span several packets; UD: SENDs up to the 2 KiB MTU). Each
 * message's size and bytes follow from its sequence number (carried in its
 * first 8 bytes, or for WRITE in the immediate). B has a receive WQE for every
 * message and polls until nothing has arrived for 3 s. Every receive completion
 * must be successful, have its message's exact size and bytes, and (UC) carry a
 * sequence number above the previous one. Prints "sent N delivered D lost L
 * bad B duplicates U" (D and L count distinct messages; U, UD's repeats);
 * exits 0 when nothing bad arrived and something did.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "tbv_tools.h"

#define UC_MAX_SIZE	(16u << 10)	/* up to 5 packets */
#define UD_MAX_SIZE	2048u		/* the port MTU */
#define GRH		40
#define QKEY		0x11111111u

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_size;
	union ibv_gid gid;
	int gid_index;
};

static int ud;
static uint32_t seed = 1;
static unsigned int slot_size;

static void die(const char *what)
{
	fprintf(stderr, "tbv_lossy: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Message @seq: its size, opcode and bytes follow from the seed and @seq alone. */
static uint32_t msg_size(uint32_t seq)
{
	uint64_t r = mix(seed * 0x9e3779b97f4a7c15ull + seq);
	uint32_t max = ud ? UD_MAX_SIZE : UC_MAX_SIZE;

	return 8 + r % (max - 8 + 1);
}

static int msg_is_write(uint32_t seq)
{
	return !ud && (mix(seq ^ 0x5555) & 3) == 0;
}

static uint8_t msg_byte(uint32_t seq, uint32_t i)
{
	return (uint8_t)mix(((uint64_t)seq << 32 | i) ^ seed);
}

static void fill(uint8_t *p, uint32_t seq)
{
	uint32_t i, size = msg_size(seq);

	memcpy(p, &seq, 4);
	memset(p + 4, 0xa5, 4);
	for (i = 8; i < size; i++)
		p[i] = msg_byte(seq, i);
}

/* The bytes of message @seq at @p; 0 if all match. */
static int check(const uint8_t *p, uint32_t seq)
{
	uint32_t i, size = msg_size(seq), got;

	memcpy(&got, p, 4);
	if (got != seq || p[4] != 0xa5 || p[5] != 0xa5 || p[6] != 0xa5 || p[7] != 0xa5)
		return 1;
	for (i = 8; i < size; i++)
		if (p[i] != msg_byte(seq, i))
			return 1;
	return 0;
}

static void open_end(struct end *e, const char *name, int gid_index, unsigned int n)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 256, .max_recv_wr = n, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = ud ? IBV_QPT_UD : IBV_QPT_UC,
	};

	e->ctx = tbv_open_by_name("tbv_lossy", name);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 2 * n + 512, NULL, NULL, 0);
	if (!e->pd || !e->cq)
		die("ibv_alloc_pd/ibv_create_cq");
	e->buf_size = (size_t)slot_size * 2 * n;	/* receive slots, then WRITE targets */
	e->buf = calloc(1, e->buf_size);
	if (!e->buf)
		die("calloc");
	e->mr = ibv_reg_mr(e->pd, e->buf, e->buf_size, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	if (!e->mr)
		die("ibv_reg_mr");
	init.send_cq = init.recv_cq = e->cq;
	e->qp = ibv_create_qp(e->pd, &init);
	if (!e->qp)
		die("ibv_create_qp");
	e->gid_index = gid_index;
	if (ibv_query_gid(e->ctx, 1, gid_index, &e->gid))
		die("ibv_query_gid");
}

static void connect_end(struct end *e, struct end *peer)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	int ret;

	if (ibv_modify_qp(e->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
		die("modify to INIT");
	attr = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num, .rq_psn = 7,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->gid, .sgid_index = e->gid_index,
				      .hop_limit = 64 } },
	};
	ret = tbv_modify_to_rtr(e->qp, &attr, ud ? IBV_QP_STATE :
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN);
	if (ret) {
		errno = ret;
		die("modify to RTR");
	}
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 7;
	if (ibv_modify_qp(e->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify to RTS");
}

static void post_recvs(struct end *b, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)b->buf + (size_t)i * slot_size,
				       .length = slot_size, .lkey = b->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(b->qp, &wr, &bad))
			die("ibv_post_recv");
	}
}

/* Reap A's send completions until at most @keep are outstanding. */
static void reap_sends(struct end *a, unsigned int *outstanding, unsigned int keep)
{
	struct ibv_wc wc[32];
	int got, i;

	while (*outstanding > keep) {
		got = ibv_poll_cq(a->cq, 32, wc);
		if (got < 0)
			die("ibv_poll_cq");
		for (i = 0; i < got; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "tbv_lossy: send completion: %s\n",
					ibv_wc_status_str(wc[i].status));
				exit(1);
			}
		}
		*outstanding -= got;
	}
}

int main(int argc, char **argv)
{
	unsigned int n = 1000, seq, outstanding = 0, delivered = 0, bad = 0, dups = 0, i;
	uint8_t *seen;
	struct end a = {}, b = {};
	struct ibv_ah *ah = NULL;
	uint8_t *src;
	int64_t last = -1;
	time_t quiet_until;
	const char *type = NULL;
	int c;

	while ((c = getopt(argc, argv, "T:n:S:")) != -1) {
		switch (c) {
		case 'T': type = optarg; break;
		case 'n': n = strtoul(optarg, NULL, 0); break;
		case 'S': seed = strtoul(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (!type || (strcmp(type, "uc") && strcmp(type, "ud")) || argc - optind != 4 ||
	    !n || n > 8192)
		goto usage;
	ud = !strcmp(type, "ud");
	slot_size = ud ? UD_MAX_SIZE + GRH : UC_MAX_SIZE;
	open_end(&a, argv[optind], atoi(argv[optind + 1]), n);
	open_end(&b, argv[optind + 2], atoi(argv[optind + 3]), n);
	if (ud) {
		struct ibv_ah_attr ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = b.gid, .sgid_index = a.gid_index, .hop_limit = 64 },
		};

		connect_end(&a, &b);
		connect_end(&b, &a);
		ah = ibv_create_ah(a.pd, &ah_attr);
		if (!ah)
			die("ibv_create_ah");
	} else {
		connect_end(&a, &b);
		connect_end(&b, &a);
	}
	post_recvs(&b, n);
	seen = calloc(n, 1);
	if (!seen)
		die("calloc");

	/* A's source buffer: message seq is built in slot seq % n of A's buffer */
	for (seq = 0; seq < n; seq++) {
		struct ibv_sge sge;
		struct ibv_send_wr wr = { .wr_id = seq, .sg_list = &sge, .num_sge = 1,
					  .send_flags = IBV_SEND_SIGNALED }, *bad_wr;

		reap_sends(&a, &outstanding, 128);
		src = a.buf + (size_t)(seq % n) * slot_size;
		fill(src, seq);
		sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = msg_size(seq),
					.lkey = a.mr->lkey };
		if (ud) {
			wr.opcode = IBV_WR_SEND;
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = b.qp->qp_num;
			wr.wr.ud.remote_qkey = QKEY;
		} else if (msg_is_write(seq)) {
			/* into its own slot after B's receive slots, named by the immediate */
			wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr.imm_data = htobe32(seq);
			wr.wr.rdma.remote_addr = (uintptr_t)b.buf + (size_t)(n + seq) * slot_size;
			wr.wr.rdma.rkey = b.mr->rkey;
		} else {
			wr.opcode = IBV_WR_SEND;
		}
		if (ibv_post_send(a.qp, &wr, &bad_wr))
			die("ibv_post_send");
		outstanding++;
	}
	reap_sends(&a, &outstanding, 0);

	quiet_until = time(NULL) + 3;
	while (time(NULL) < quiet_until) {
		struct ibv_wc wc[32];
		int got = ibv_poll_cq(b.cq, 32, wc), k;

		if (got < 0)
			die("ibv_poll_cq");
		if (!got) {
			usleep(1000);
			continue;
		}
		quiet_until = time(NULL) + 3;
		for (k = 0; k < got; k++) {
			const uint8_t *p = b.buf + (size_t)wc[k].wr_id * slot_size + (ud ? GRH : 0);
			uint32_t got_seq;

			if (wc[k].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "receive completion: %s\n",
					ibv_wc_status_str(wc[k].status));
				bad++;
				continue;
			}
			if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
				got_seq = be32toh(wc[k].imm_data);
				p = b.buf + (size_t)(n + (got_seq < n ? got_seq : 0)) * slot_size;
			} else {
				memcpy(&got_seq, p, 4);
			}
			if (got_seq >= n || wc[k].byte_len != (ud ? GRH : 0) + msg_size(got_seq) ||
			    check(p, got_seq) || (!ud && (int64_t)got_seq <= last)) {
				fprintf(stderr, "bad message: seq %u length %u\n", got_seq,
					wc[k].byte_len);
				bad++;
				continue;
			}
			last = got_seq;
			/* UD has no duplicate detection (IBA): a duplicated frame arrives twice */
			if (seen[got_seq]++)
				dups++;
			else
				delivered++;
		}
	}
	printf("sent %u delivered %u lost %u bad %u duplicates %u\n", n, delivered,
	       n - delivered, bad, dups);
	free(seen);
	if (ah)
		ibv_destroy_ah(ah);
	for (i = 0; i < 2; i++) {
		struct end *e = i ? &b : &a;

		ibv_destroy_qp(e->qp);
		ibv_dereg_mr(e->mr);
		ibv_destroy_cq(e->cq);
		ibv_dealloc_pd(e->pd);
		ibv_close_device(e->ctx);
		free(e->buf);
	}
	return bad || !delivered ? 1 : 0;

usage:
	fprintf(stderr, "usage: tbv_lossy -T uc|ud [-n MESSAGES (1-8192)] [-S SEED] "
		"DEV_A GID_A DEV_B GID_B\n");
	return 2;
}
