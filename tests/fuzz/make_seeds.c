// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Writes the seed corpus of the fuzz harnesses, DIR/<target>/<name>: small
 * valid inputs built with the protocol core's own encoders, so the seeds follow
 * the format when it changes. `make -C tests/fuzz seeds` rewrites
 * tests/fuzz/corpus/ with it; `make fuzz` also fuzzes from a fresh run of it.
 *
 *	make_seeds DIR
 */
#include <sys/stat.h>
#include "fuzz.h"
#include "tbv_credit.h"
#include "tbv_frame.h"
#include "tbv_rdma.h"
#include "tbv_reseq.h"
#include "tbv_resp_rules.h"
#include "tbv_rxe_wqe.h"

static const char *out_dir;

/* A seed the core's own decoder refuses is a bug here or there: stop. */
static void seed_valid(bool ok, const char *name)
{
	if (!ok) {
		fprintf(stderr, "make_seeds: seed %s does not decode\n", name);
		exit(1);
	}
}

/* An input under construction. */
struct seed {
	u8 buf[16384];
	size_t len;
};

static void seed_add(struct seed *s, const void *p, size_t n)
{
	if (s->len + n > sizeof(s->buf)) {
		fprintf(stderr, "make_seeds: seed too large\n");
		exit(1);
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

static void seed_write(const char *target, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_dir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* ---- RDMA packets (fuzz_rdma; some also for fuzz_frame) ---- */

static void rdma_seed(const char *name, struct tbv_rdma_hdr h, bool for_frame)
{
	static u8 frame[TBV_FRAME_SIZE];
	struct tbv_rdma_hdr d;
	u32 len, i;

	memset(frame, 0, sizeof(frame));
	len = tbv_rdma_encode(frame, &h);
	for (i = len - h.payload_len; i < len; i++)
		frame[i] = (u8)i;
	seed_valid(tbv_rdma_decode(frame, len, TBV_RDMA_MAX_PAYLOAD, &d) == 0, name);
	seed_write("fuzz_rdma", name, frame, len);
	if (for_frame)
		seed_write("fuzz_frame", name, frame, len);
}

/* A split packet: its header frame and its payload frame, one input (fuzz_rdma). */
static void rdma_split_seed(const char *name, struct tbv_rdma_hdr h, u32 tag)
{
	static u8 in[TBV_SPLIT_ENTRY_LEN + TBV_RDMA_SPLIT_PAYLOAD];
	u8 *payload = in + TBV_SPLIT_ENTRY_LEN;
	struct tbv_rdma_hdr d;
	u32 i;

	memset(in, 0, sizeof(in));
	tbv_rdma_encode(in, &h);
	for (i = 0; i < h.payload_len; i++)
		payload[i] = (u8)(i * 7);
	tbv_split_encode(in, tag, payload, payload + h.payload_len - TBV_SPLIT_SAMPLE);
	tbv_split_set_tag(in, tag);
	seed_valid(tbv_split_pairs(in, payload, h.payload_len, tbv_split_sof(tag),
				   tbv_split_eof(tag)) &&
		   tbv_rdma_decode_split(in, h.payload_len, TBV_RDMA_SPLIT_PAYLOAD, &d) == 0, name);
	seed_write("fuzz_rdma", name, in, TBV_SPLIT_ENTRY_LEN + h.payload_len);
}

static void rdma_seeds(void)
{
	const u32 dst = 0x000112, src = 0x000034;

	rdma_seed("send-only", (struct tbv_rdma_hdr){ .kind = TBV_RK_SEND,
		  .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ, .payload_len = 16,
		  .dst_qpn = dst, .src_qpn = src, .psn = 5 }, true);
	rdma_seed("send-first-full", (struct tbv_rdma_hdr){ .kind = TBV_RK_SEND,
		  .flags = TBV_RF_FIRST, .payload_len = TBV_RDMA_MAX_PAYLOAD,
		  .dst_qpn = dst, .src_qpn = src, .psn = TBV_PSN_MASK }, false);
	rdma_seed("send-last-imm", (struct tbv_rdma_hdr){ .kind = TBV_RK_SEND,
		  .flags = TBV_RF_LAST | TBV_RF_IMM | TBV_RF_SOLICITED | TBV_RF_ACK_REQ,
		  .payload_len = 100, .dst_qpn = dst, .src_qpn = src, .psn = 0,
		  .imm = 0x12345678 }, false);
	rdma_seed("write-only-imm", (struct tbv_rdma_hdr){ .kind = TBV_RK_WRITE,
		  .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_IMM, .payload_len = 64,
		  .dst_qpn = dst, .src_qpn = src, .psn = 9, .imm = 1,
		  .va = 0x7f0012345000ull, .rkey = 0x1234, .len = 64 }, false);
	rdma_seed("write-first", (struct tbv_rdma_hdr){ .kind = TBV_RK_WRITE,
		  .flags = TBV_RF_FIRST, .payload_len = TBV_RDMA_MAX_PAYLOAD,
		  .dst_qpn = dst, .src_qpn = src, .psn = 10, .va = 0x1000, .rkey = 7,
		  .len = 10000 }, false);
	rdma_split_seed("split-write-first", (struct tbv_rdma_hdr){ .kind = TBV_RK_WRITE,
			.flags = TBV_RF_FIRST, .payload_len = TBV_RDMA_SPLIT_PAYLOAD,
			.dst_qpn = dst, .src_qpn = src, .psn = 10, .va = 0x1000, .rkey = 7,
			.len = 10000 }, 0);
	rdma_split_seed("split-read-resp-last", (struct tbv_rdma_hdr){
			.kind = TBV_RK_READ_RESP, .flags = TBV_RF_LAST, .payload_len = 4050,
			.dst_qpn = src, .src_qpn = dst, .psn = 12 }, TBV_SPLIT_TAGS - 1);
	rdma_seed("read-req", (struct tbv_rdma_hdr){ .kind = TBV_RK_READ_REQ,
		  .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ, .dst_qpn = dst,
		  .src_qpn = src, .psn = 11, .va = 0x2000, .rkey = 8, .len = 1 << 20 }, true);
	rdma_seed("read-resp-last", (struct tbv_rdma_hdr){ .kind = TBV_RK_READ_RESP,
		  .flags = TBV_RF_LAST, .payload_len = 32, .dst_qpn = src, .src_qpn = dst,
		  .psn = 12 }, false);
	rdma_seed("ack", (struct tbv_rdma_hdr){ .kind = TBV_RK_ACK, .syndrome = TBV_ACK_OK,
		  .dst_qpn = src, .src_qpn = dst, .psn = 12, .aux = 3 }, false);
	rdma_seed("nak-rnr", (struct tbv_rdma_hdr){ .kind = TBV_RK_ACK,
		  .syndrome = TBV_NAK_RNR, .dst_qpn = src, .src_qpn = dst, .psn = 13,
		  .aux = 14 }, false);
	rdma_seed("nak-seq", (struct tbv_rdma_hdr){ .kind = TBV_RK_ACK,
		  .syndrome = TBV_NAK_SEQ, .dst_qpn = src, .src_qpn = dst, .psn = 14 }, false);
	rdma_seed("write-striped", (struct tbv_rdma_hdr){ .kind = TBV_RK_WRITE,
		  .flags = TBV_RF_SEQ | TBV_RF_LAST, .payload_len = 64, .dst_qpn = dst,
		  .src_qpn = src, .psn = 15, .tsn = 0x12345678u }, false);
	rdma_seed("ud-send-grh", (struct tbv_rdma_hdr){ .kind = TBV_RK_UD_SEND,
		  .flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_GRH | TBV_RF_IMM,
		  .payload_len = 40, .dst_qpn = 1, .src_qpn = 1, .psn = 0, .imm = 5,
		  .qkey = 0x80010000u, .sgid = { 0xfe, 0x80, [15] = 1 },
		  .dgid = { 0xfe, 0x80, [15] = 2 } }, true);
}

/* ---- NET fragments (fuzz_frame) and their sequences (fuzz_net_reasm) ---- */

/* Fragment @index of a @packet_len-byte packet: its frame and the frame's length. */
static u32 net_frag(u8 *frame, u32 packet_id, u32 packet_len, u16 index)
{
	u32 len = tbv_net_frag_encode(frame, packet_id, packet_len, index);
	struct tbv_net_frag f;

	memset(frame + TBV_NET_HDR_LEN, 0x5a, len);
	seed_valid(tbv_net_frag_decode(frame, TBV_NET_HDR_LEN + len, &f) == 0, "NET fragment");
	return TBV_NET_HDR_LEN + len;
}

static void credit_seed(u8 *frame, const char *name, u8 flags, u32 seq)
{
	struct tbv_credit_frame c = { .flags = flags, .seq = seq, .limit = seq + 255 }, d;
	u32 len = tbv_credit_frame_encode(frame, &c);

	seed_valid(tbv_credit_frame_decode(frame, len, &d) == 0, name);
	seed_write("fuzz_frame", name, frame, len);
}

static void frame_seeds(void)
{
	static u8 frame[TBV_FRAME_SIZE];
	const u8 short_frame[3] = { TBV_FT_NET, 0, 0 };

	seed_write("fuzz_frame", "net-single", frame, net_frag(frame, 1, 60, 0));
	seed_write("fuzz_frame", "net-first-of-2", frame, net_frag(frame, 2, 5000, 0));
	seed_write("fuzz_frame", "net-last-of-2", frame, net_frag(frame, 2, 5000, 1));
	seed_write("fuzz_frame", "net-empty", frame, net_frag(frame, 3, 0, 0));
	seed_write("fuzz_frame", "too-short", short_frame, sizeof(short_frame));
	credit_seed(frame, "credit-advert", 0, 255);
	credit_seed(frame, "credit-request", TBV_CREDIT_F_REQUEST, 1000);
}

/*
 * One fuzz_net_reasm record: the frame's header and its length, the frame's
 * own or (@padded) a whole ring frame's: a peer may send more than the header
 * says, and then one changed length field in a header is a fragment longer
 * than it should be.
 */
static void reasm_rec_padded(struct seed *s, u32 packet_id, u32 packet_len, u16 index,
			     bool padded)
{
	u8 frame[TBV_FRAME_SIZE], len[2];
	u32 n = net_frag(frame, packet_id, packet_len, index);

	tbv_put_le16(len, (u16)(padded ? TBV_FRAME_SIZE : n));
	seed_add(s, frame, FUZZ_REASM_HDR);
	seed_add(s, len, sizeof(len));
}

static void reasm_rec(struct seed *s, u32 packet_id, u32 packet_len, u16 index)
{
	reasm_rec_padded(s, packet_id, packet_len, index, false);
}

static void reasm_packet_padded(struct seed *s, u32 packet_id, u32 packet_len, bool padded)
{
	u16 i;

	for (i = 0; i < tbv_net_frag_count(packet_len); i++)
		reasm_rec_padded(s, packet_id, packet_len, i, padded);
}

static void reasm_packet(struct seed *s, u32 packet_id, u32 packet_len)
{
	reasm_packet_padded(s, packet_id, packet_len, false);
}

static void reasm_seeds(void)
{
	struct seed s;

	s.len = 0;
	reasm_packet(&s, 1, 60);
	seed_write("fuzz_net_reasm", "single", s.buf, s.len);

	s.len = 0;
	reasm_packet(&s, 2, 10000);
	seed_write("fuzz_net_reasm", "three-fragments", s.buf, s.len);

	s.len = 0;
	reasm_packet(&s, 3, TBV_NET_MAX_PACKET);
	seed_write("fuzz_net_reasm", "largest", s.buf, s.len);

	/* The same in whole ring frames: its last fragment is one length field from too long. */
	s.len = 0;
	reasm_packet_padded(&s, 3, TBV_NET_MAX_PACKET, true);
	seed_write("fuzz_net_reasm", "largest-padded", s.buf, s.len);

	/* A lost fragment, then a good packet. */
	s.len = 0;
	reasm_rec(&s, 4, 10000, 0);
	reasm_rec(&s, 4, 10000, 2);
	reasm_packet(&s, 5, 100);
	seed_write("fuzz_net_reasm", "gap", s.buf, s.len);

	/* A new packet starts before the last one ended. */
	s.len = 0;
	reasm_rec(&s, 6, 5000, 0);
	reasm_packet(&s, 7, 5000);
	reasm_packet(&s, 8, 0);
	seed_write("fuzz_net_reasm", "restart", s.buf, s.len);
}

/* ---- control packets (fuzz_ctl) and login exchanges (fuzz_login) ---- */

/* The peer's offer: @rails rails, its own ring size and HopIDs. */
static struct tbv_login_params peer_params(u32 rails, u32 session)
{
	struct tbv_login_params p = {
		.version_min = TBV_PROTO_VERSION_MIN, .version_max = TBV_PROTO_VERSION_MAX,
		.rails = rails, .ring_size = 512, .frame_size = TBV_FRAME_SIZE,
		.tx_hopid = { 20, 21, 22, 23 }, .session = session,
	};

	return p;
}

/* Messages from the peer to us; each must parse as one. */
static size_t peer_msg(const void *m, size_t len)
{
	struct tbv_ctl_parsed p;

	seed_valid(tbv_ctl_parse(m, len, fuzz_local_uuid, fuzz_peer_uuid, &p) == 0,
		   "control packet");
	return len;
}

static size_t peer_login(void *m, u32 command_id, const struct tbv_login_params *p)
{
	tbv_login_build(m, FUZZ_ROUTE, command_id & 3, fuzz_peer_uuid, fuzz_local_uuid,
			command_id, p);
	return peer_msg(m, sizeof(struct tbv_login_msg));
}

static size_t peer_response(void *m, u32 command_id, enum tbv_login_status status,
			    u32 version, u32 rails)
{
	struct tbv_login_agreed agreed = { .version = version, .rails = rails };

	tbv_login_build_response(m, FUZZ_ROUTE, command_id & 3, fuzz_peer_uuid,
				 fuzz_local_uuid, command_id, status, &agreed);
	return peer_msg(m, sizeof(struct tbv_login_resp_msg));
}

static size_t peer_logout(void *m, enum tbv_msg_type type, u32 command_id)
{
	tbv_logout_build(m, type, FUZZ_ROUTE, command_id & 3, fuzz_peer_uuid, fuzz_local_uuid,
			 command_id);
	return peer_msg(m, sizeof(struct tbv_logout_msg));
}

static void ctl_seeds(void)
{
	struct tbv_login_params p = peer_params(2, 0xabcd);
	u32 m[TBV_CTL_MAX_BYTES / 4];	/* aligned like a control packet */
	struct tbv_ctl_hdr *hdr = (struct tbv_ctl_hdr *)m;

	seed_write("fuzz_ctl", "login", m, peer_login(m, 7, &p));
	p.rails = TBV_MAX_RAILS;
	tbv_login_build((struct tbv_login_msg *)m, FUZZ_ROUTE | TBV_CTL_ROUTE_CM_BIT, 3,
			fuzz_peer_uuid, fuzz_local_uuid, 8, &p);
	seed_write("fuzz_ctl", "login-4-rails-cm", m, sizeof(struct tbv_login_msg));
	seed_write("fuzz_ctl", "login-response",
		   m, peer_response(m, 9, TBV_LOGIN_OK, 1, 2));
	seed_write("fuzz_ctl", "login-response-refused",
		   m, peer_response(m, 10, TBV_LOGIN_E_VERSION, 0, 0));
	seed_write("fuzz_ctl", "logout", m, peer_logout(m, TBV_MSG_LOGOUT, 11));
	seed_write("fuzz_ctl", "logout-response",
		   m, peer_logout(m, TBV_MSG_LOGOUT_RESPONSE, 12));
	/* Another XDomain protocol's packet: not ours. */
	peer_logout(m, TBV_MSG_LOGOUT, 13);
	hdr->protocol_uuid[0] ^= 0xff;
	seed_write("fuzz_ctl", "other-protocol", m, sizeof(struct tbv_logout_msg));
}

/* fuzz_login records. */
static void login_rec(struct seed *s, enum fuzz_login_op op, const void *m, size_t len)
{
	u8 rec[2] = { op, (u8)len };

	seed_add(s, rec, sizeof(rec));
	seed_add(s, m, len);
}

static void login_seeds(void)
{
	const u32 ours = FUZZ_FIRST_COMMAND_ID + 1;	/* our first attempt's command id */
	struct tbv_login_params p = peer_params(2, 0xabcd);
	u32 m[TBV_CTL_MAX_BYTES / 4];	/* aligned like a control packet */
	struct seed s;
	u8 cfg;

	/* cfg 0: we offer one rail; the agreement is version 1, one rail. */
	cfg = 0;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 7, &p));
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours, TBV_LOGIN_OK, 1, 1));
	seed_write("fuzz_login", "peer-first", s.buf, s.len);

	/* A repeated LOGIN (our answer was lost), then the peer restarts. */
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 7, &p));
	p.session++;
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 8, &p));
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours + 1, TBV_LOGIN_OK, 1, 1));
	seed_write("fuzz_login", "retry-and-restart", s.buf, s.len);

	/* cfg 0x1f: four rails, ring 2048; our LOGIN is answered first. */
	cfg = 0x1f;
	p = peer_params(4, 0x1111);
	s.len = 0;
	seed_add(&s, &cfg, 1);
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours, TBV_LOGIN_OK, 1, 4));
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 3, &p));
	seed_write("fuzz_login", "ours-first-4-rails", s.buf, s.len);

	/* An answer to an older attempt, then the peer refuses us. */
	cfg = 1;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours - 1, TBV_LOGIN_OK, 1, 2));
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours + 1, TBV_LOGIN_E_PARAM, 0, 0));
	seed_write("fuzz_login", "stale-then-refused", s.buf, s.len);

	/* We refuse a peer from the future, it comes back speaking our version. */
	cfg = 2;
	p = peer_params(3, 0x2222);
	p.version_min = TBV_PROTO_VERSION_MAX + 1;
	p.version_max = TBV_PROTO_VERSION_MAX + 2;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 1, &p));
	p = peer_params(3, 0x2223);
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 2, &p));
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours, TBV_LOGIN_OK, 1, 3));
	seed_write("fuzz_login", "refused-then-back", s.buf, s.len);

	/* Our LOGIN accepted, we refuse the peer's, then accept its next: up. */
	cfg = 0;
	p = peer_params(1, 0x2224);
	p.version_min = TBV_PROTO_VERSION_MAX + 1;
	p.version_max = TBV_PROTO_VERSION_MAX + 1;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours, TBV_LOGIN_OK, 1, 1));
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 1, &p));
	p = peer_params(1, 0x2224);
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 2, &p));
	seed_write("fuzz_login", "accepted-refused-then-back", s.buf, s.len);

	/* The peer disagrees on the rails: refused once both halves are done. */
	cfg = 1;
	p = peer_params(2, 0x3333);
	s.len = 0;
	seed_add(&s, &cfg, 1);
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 1, &p));
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours, TBV_LOGIN_OK, 1, 1));
	seed_write("fuzz_login", "disagreement", s.buf, s.len);

	/* Up, the peer logs out, and logs in again. */
	cfg = 0;
	p = peer_params(1, 0x4444);
	s.len = 0;
	seed_add(&s, &cfg, 1);
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 1, &p));
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours, TBV_LOGIN_OK, 1, 1));
	login_rec(&s, FUZZ_OP_PEER, m, peer_logout(m, TBV_MSG_LOGOUT, 2));
	login_rec(&s, FUZZ_OP_PEER, m, peer_login(m, 3, &p));
	login_rec(&s, FUZZ_OP_ANSWER, m, peer_response(m, ours + 1, TBV_LOGIN_OK, 1, 1));
	seed_write("fuzz_login", "logout-and-back", s.buf, s.len);
}

/* ---- resequencing (fuzz_reseq) and credits (fuzz_credit): step sequences ---- */

/* A free-mode arrival of next + @delta on @lane (fuzz.h, FUZZ_RESEQ_*). */
static void reseq_near(struct seed *s, unsigned int lane, int8_t delta)
{
	u8 rec[3] = { FUZZ_RESEQ_ARRIVE, (u8)(lane | FUZZ_RESEQ_NEAR << FUZZ_RESEQ_FORM_SHIFT),
		      (u8)delta };

	seed_add(s, rec, sizeof(rec));
}

static void reseq_op(struct seed *s, enum fuzz_reseq_op op)
{
	u8 b = op;

	seed_add(s, &b, 1);
}

/* Sender mode: @n steps that send one more packet and deliver from lane @deliver. */
static void reseq_send(struct seed *s, unsigned int n, unsigned int chunk_lane, unsigned int deliver,
		       bool lose)
{
	u8 b = FUZZ_SEND_EMIT | chunk_lane << FUZZ_SEND_CHUNK_SHIFT | deliver |
	       (lose ? FUZZ_SEND_LOSE : 0);

	while (n--)
		seed_add(s, &b, 1);
}

static void reseq_seeds(void)
{
	const u8 start[4] = { 0xf0, 0xff, 0xff, 0xff };	/* wraps after 16 packets */
	struct seed s;
	u8 cfg;
	int i;

	/* two lanes, lane 1 overtaking lane 0, then a duplicate, a gap given up, a reset */
	cfg = 1;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	reseq_near(&s, 1, 2);
	reseq_near(&s, 1, 3);
	reseq_near(&s, 1, 3);
	reseq_near(&s, 0, 0);
	reseq_near(&s, 0, 0);
	reseq_near(&s, 1, 5);
	reseq_op(&s, FUZZ_RESEQ_GIVE_UP);
	reseq_op(&s, FUZZ_RESEQ_RESET);
	reseq_near(&s, 0, 0);
	seed_write("fuzz_reseq", "overtake-dup-give-up-reset", s.buf, s.len);

	/* four lanes, chunked: holes in the window, then a packet a window ahead */
	cfg = 3 | FUZZ_RESEQ_CHUNKED;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	for (i = 1; i < 64; i += 3)
		reseq_near(&s, i % 4, (int8_t)i);
	{
		u8 far[4] = { FUZZ_RESEQ_ARRIVE, 2 | FUZZ_RESEQ_AHEAD << FUZZ_RESEQ_FORM_SHIFT,
			      0, 1 };	/* next + 256 */

		seed_add(&s, far, sizeof(far));
	}
	seed_write("fuzz_reseq", "holes-then-far", s.buf, s.len);

	/* a sender over two lanes, chunks alternating, everything arriving */
	cfg = 1 | FUZZ_RESEQ_CHUNKED | FUZZ_RESEQ_SENDER;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	seed_add(&s, start, sizeof(start));
	for (i = 0; i < 4; i++)
		reseq_send(&s, TBV_RESEQ_CHUNK, i % 2, (i + 1) % 2, false);
	reseq_send(&s, 2 * TBV_RESEQ_CHUNK, 0, 0, false);
	seed_write("fuzz_reseq", "sender-two-lanes-wrapping", s.buf, s.len);

	/* a sender over four lanes losing some packets */
	cfg = 3 | FUZZ_RESEQ_CHUNKED | FUZZ_RESEQ_SENDER;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	seed_add(&s, start, sizeof(start));
	for (i = 0; i < 8; i++)
		reseq_send(&s, TBV_RESEQ_CHUNK / 2, i % 4, (i + 3) % 4, i == 5);
	seed_write("fuzz_reseq", "sender-four-lanes-lossy", s.buf, s.len);
}

static void credit_step(struct seed *s, unsigned int end, enum fuzz_credit_op op, unsigned int arg)
{
	u8 b = (end ? FUZZ_CREDIT_END : 0) | arg << FUZZ_CREDIT_ARG_SHIFT | op;

	seed_add(s, &b, 1);
}

static void credit_seeds(void)
{
	struct seed s;
	u8 cfg;
	int i;

	/* rings of 16 and 64: both ends send, the small one starves and asks */
	cfg = 0 | 2 << FUZZ_CREDIT_RING_BITS;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	for (i = 0; i < 24; i++) {
		credit_step(&s, i % 2, FUZZ_CREDIT_PRODUCE_ONE, i % 4);
		credit_step(&s, i % 2, FUZZ_CREDIT_QUEUE, i % 4);
		credit_step(&s, i % 2, FUZZ_CREDIT_DELIVER, 1);
		if (i % 5 == 4)
			credit_step(&s, !(i % 2), FUZZ_CREDIT_NAPI, 1);
	}
	for (i = 0; i < 12; i++)
		credit_step(&s, 0, FUZZ_CREDIT_TICK, 0);
	credit_step(&s, 0, FUZZ_CREDIT_SETTLE, 0);
	credit_step(&s, 1, FUZZ_CREDIT_SETTLE, 0);
	seed_write("fuzz_credit", "both-ways-starved-then-settled", s.buf, s.len);

	/* the netdev's packets of 7 fragments, losses and duplicates, and a made-up limit */
	cfg = 1 | 1 << FUZZ_CREDIT_RING_BITS | FUZZ_CREDIT_LOSSY | FUZZ_CREDIT_DUPS |
	      FUZZ_CREDIT_FORGING;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	for (i = 0; i < 8; i++) {
		credit_step(&s, 0, FUZZ_CREDIT_PRODUCE_MANY, 3);
		credit_step(&s, 0, FUZZ_CREDIT_QUEUE, 3);
		credit_step(&s, 0, i % 3 ? FUZZ_CREDIT_LOSE : FUZZ_CREDIT_DUPLICATE, 0);
		credit_step(&s, 0, FUZZ_CREDIT_DELIVER, 2);
		credit_step(&s, 1, FUZZ_CREDIT_NAPI, 2);
		credit_step(&s, 0, FUZZ_CREDIT_TICK, 0);
	}
	{
		u8 forged[1 + FUZZ_CREDIT_FORGED_LEN] = { FUZZ_CREDIT_FORGE, TBV_CREDIT_F_REQUEST };

		tbv_put_le32(forged + 2, 1000);
		tbv_put_le32(forged + 6, 1u << 31);
		seed_add(&s, forged, sizeof(forged));
	}
	credit_step(&s, 0, FUZZ_CREDIT_NAPI, 7);
	seed_write("fuzz_credit", "fragments-lossy-forged", s.buf, s.len);
}

/* ---- the responder's opcode sequence (fuzz_resp_seq) ---- */

static void resp_pkt(struct seed *s, u8 kind, u8 flags, u16 payload_len, u32 room)
{
	u8 rec[FUZZ_RESP_REC];

	rec[0] = kind;
	rec[1] = flags;
	tbv_put_le16(rec + 2, payload_len);
	tbv_put_le32(rec + 4, room);
	seed_add(s, rec, sizeof(rec));
}

static void resp_seeds(void)
{
	struct seed s;
	u8 cfg = 0;

	/* a SEND of three packets, a WRITE with immediate of two, a READ */
	s.len = 0;
	seed_add(&s, &cfg, 1);
	resp_pkt(&s, TBV_RK_SEND, TBV_RF_FIRST, TBV_RDMA_MAX_PAYLOAD, 3 * TBV_RDMA_MAX_PAYLOAD);
	resp_pkt(&s, TBV_RK_SEND, 0, TBV_RDMA_MAX_PAYLOAD, 0);
	resp_pkt(&s, TBV_RK_SEND, TBV_RF_LAST, 100, 0);
	resp_pkt(&s, TBV_RK_WRITE, TBV_RF_FIRST, TBV_RDMA_MAX_PAYLOAD, TBV_RDMA_MAX_PAYLOAD + 8);
	resp_pkt(&s, TBV_RK_WRITE, TBV_RF_LAST | TBV_RF_IMM, 8, 0);
	resp_pkt(&s, TBV_RK_READ_REQ, TBV_RF_FIRST | TBV_RF_LAST, 0, 4096);
	seed_write("fuzz_resp_seq", "send-write-read", s.buf, s.len);

	/* issue 23 item 4: a WRITE's packets inside a SEND, refusals kept, a UC gap */
	cfg = FUZZ_RESP_KEEP;
	s.len = 0;
	seed_add(&s, &cfg, 1);
	resp_pkt(&s, TBV_RK_SEND, TBV_RF_FIRST, TBV_RDMA_MAX_PAYLOAD, 2 * TBV_RDMA_MAX_PAYLOAD);
	resp_pkt(&s, TBV_RK_WRITE, TBV_RF_FIRST, TBV_RDMA_MAX_PAYLOAD, 0x30000);
	resp_pkt(&s, TBV_RK_SEND, 0, TBV_RDMA_MAX_PAYLOAD, 0);
	resp_pkt(&s, TBV_RK_WRITE, TBV_RF_LAST | TBV_RF_IMM, 8, 0);
	resp_pkt(&s, TBV_RK_SEND, TBV_RF_LAST, 1, 0);
	resp_pkt(&s, 0, FUZZ_RESP_ABANDON, 0, 0);
	resp_pkt(&s, TBV_RK_SEND, TBV_RF_LAST, 1, 0);
	seed_write("fuzz_resp_seq", "write-inside-send", s.buf, s.len);
}

/* ---- ring slots written by user space (fuzz_rxe_wqe) ---- */

static void rxe_st32(u8 *p, u32 off, u32 v)
{
	memcpy(p + off, &v, sizeof(v));
}

static void rxe_st64(u8 *p, u32 off, u64 v)
{
	memcpy(p + off, &v, sizeof(v));
}

/* The limits header (fuzz.h), then @slot: checked by the core's own parser first. */
static void rxe_seed(const char *name, u8 cfg, const u8 *slot, u32 len)
{
	const struct tbv_rxe_limits lim = {
		.qp_type = ((cfg >> FUZZ_RXE_QPT_SHIFT) & 3) % 3,
		.flush_verbs = cfg & FUZZ_RXE_FLUSH_VERBS,
		.max_sge = 4, .max_inline = 128, .max_msg = 0x80000000u,
	};
	u8 hdr[FUZZ_RXE_HDR] = { cfg, 4 };
	struct tbv_rxe_send w;
	struct tbv_rxe_recv r;
	struct seed s;

	tbv_put_le16(hdr + 2, 128);
	seed_valid(cfg & FUZZ_RXE_RECV ? tbv_rxe_recv_parse(slot, len, &lim, &r) == TBV_RXE_OK :
					 tbv_rxe_send_parse(slot, len, &lim, &w) == TBV_RXE_OK, name);
	s.len = 0;
	seed_add(&s, hdr, sizeof(hdr));
	seed_add(&s, slot, len);
	seed_write("fuzz_rxe_wqe", name, s.buf, s.len);
}

static void rxe_sge(u8 *slot, u32 at, u32 i, u64 addr, u32 len, u32 lkey)
{
	rxe_st64(slot, at + i * TBV_RXE_SGE_SIZE + TBV_RXE_SGE_ADDR, addr);
	rxe_st32(slot, at + i * TBV_RXE_SGE_SIZE + TBV_RXE_SGE_LENGTH, len);
	rxe_st32(slot, at + i * TBV_RXE_SGE_SIZE + TBV_RXE_SGE_LKEY, lkey);
}

static void rxe_seeds(void)
{
	const u8 rc = TBV_RXE_QPT_RC << FUZZ_RXE_QPT_SHIFT | FUZZ_RXE_FLUSH_VERBS;
	u8 slot[256];

	/* a SEND with immediate from two SGEs */
	memset(slot, 0, sizeof(slot));
	rxe_st64(slot, TBV_RXE_SWQE_WR_ID, 1);
	rxe_st32(slot, TBV_RXE_SWQE_OPCODE, TBV_RXE_WR_SEND_WITH_IMM);
	rxe_st32(slot, TBV_RXE_SWQE_SEND_FLAGS, TBV_RXE_SEND_SIGNALED);
	rxe_sge(slot, TBV_RXE_SWQE_DATA, 0, 0x10000, 100, 0x1234);
	rxe_sge(slot, TBV_RXE_SWQE_DATA, 1, 0x20000, 28, 0x1234);
	rxe_st32(slot, TBV_RXE_SWQE_DMA_NUM_SGE, 2);
	rxe_st32(slot, TBV_RXE_SWQE_DMA_LENGTH, 128);
	rxe_seed("send-two-sges", rc, slot, sizeof(slot));

	/* an RDMA WRITE of 32 inline bytes */
	memset(slot, 0, sizeof(slot));
	rxe_st32(slot, TBV_RXE_SWQE_OPCODE, TBV_RXE_WR_RDMA_WRITE);
	rxe_st32(slot, TBV_RXE_SWQE_SEND_FLAGS, TBV_RXE_SEND_INLINE | TBV_RXE_SEND_SIGNALED);
	rxe_st64(slot, TBV_RXE_SWQE_REMOTE_ADDR, 0x7000);
	rxe_st32(slot, TBV_RXE_SWQE_RDMA_RKEY, 0x99);
	memset(slot + TBV_RXE_SWQE_DATA, 'i', 32);
	rxe_st32(slot, TBV_RXE_SWQE_DMA_LENGTH, 32);
	rxe_seed("write-inline", rc, slot, sizeof(slot));

	/* a compare-and-swap into one 8-byte SGE */
	memset(slot, 0, sizeof(slot));
	rxe_st32(slot, TBV_RXE_SWQE_OPCODE, TBV_RXE_WR_ATOMIC_CMP_AND_SWP);
	rxe_st64(slot, TBV_RXE_SWQE_REMOTE_ADDR, 0x8000);
	rxe_st64(slot, TBV_RXE_SWQE_ATOMIC_COMPARE_ADD, 1);
	rxe_st64(slot, TBV_RXE_SWQE_ATOMIC_SWAP, 2);
	rxe_st32(slot, TBV_RXE_SWQE_ATOMIC_RKEY, 0x98);
	rxe_sge(slot, TBV_RXE_SWQE_DATA, 0, 0x30000, 8, 0x1234);
	rxe_st32(slot, TBV_RXE_SWQE_DMA_NUM_SGE, 1);
	rxe_st32(slot, TBV_RXE_SWQE_DMA_LENGTH, 8);
	rxe_seed("cmp-swap", rc, slot, sizeof(slot));

	/* a FLUSH of a range, as ibv_wr_flush() writes it */
	memset(slot, 0, sizeof(slot));
	rxe_st32(slot, TBV_RXE_SWQE_OPCODE, TBV_RXE_WR_FLUSH);
	rxe_st64(slot, TBV_RXE_SWQE_REMOTE_ADDR, 0x9000);
	rxe_st32(slot, TBV_RXE_SWQE_FLUSH_RKEY, 0x97);
	slot[TBV_RXE_SWQE_FLUSH_TYPE] = TBV_RXE_FLUSH_GLOBAL;
	slot[TBV_RXE_SWQE_FLUSH_LEVEL] = TBV_RXE_FLUSH_RANGE;
	rxe_st32(slot, TBV_RXE_SWQE_DMA_LENGTH, 4096);
	rxe_seed("flush", rc, slot, sizeof(slot));

	/* a UD SEND to QPN 0x12 through AH number 1 */
	memset(slot, 0, sizeof(slot));
	rxe_st32(slot, TBV_RXE_SWQE_OPCODE, TBV_RXE_WR_SEND);
	rxe_st32(slot, TBV_RXE_SWQE_UD_REMOTE_QPN, 0x12);
	rxe_st32(slot, TBV_RXE_SWQE_UD_REMOTE_QKEY, 0x11111111);
	rxe_st32(slot, TBV_RXE_SWQE_UD_AH_NUM, 1);
	rxe_sge(slot, TBV_RXE_SWQE_DATA, 0, 0x40000, 1024, 0x1234);
	rxe_st32(slot, TBV_RXE_SWQE_DMA_NUM_SGE, 1);
	rxe_st32(slot, TBV_RXE_SWQE_DMA_LENGTH, 1024);
	rxe_seed("ud-send", TBV_RXE_QPT_UD << FUZZ_RXE_QPT_SHIFT, slot, sizeof(slot));

	/* a receive of two SGEs in a 128-byte slot */
	memset(slot, 0, sizeof(slot));
	rxe_st64(slot, TBV_RXE_RWQE_WR_ID, 2);
	rxe_sge(slot, TBV_RXE_RWQE_SGE, 0, 0x50000, 4096, 0x1234);
	rxe_sge(slot, TBV_RXE_RWQE_SGE, 1, 0x60000, 4096, 0x1234);
	rxe_st32(slot, TBV_RXE_RWQE_DMA_NUM_SGE, 2);
	rxe_st32(slot, 16, 8192);	/* dma.length, as the provider writes it */
	rxe_seed("recv-two-sges", FUZZ_RXE_RECV, slot, 128);
}

/* ---- the acceptance arithmetic (fuzz_access): base, length, va, len, page offset, PSN seed ---- */

static void access_rec(struct seed *s, u64 base, u64 length, u64 va, u64 len, u32 page_offset,
		       u32 psn_seed)
{
	seed_add(s, &base, 8);
	seed_add(s, &length, 8);
	seed_add(s, &va, 8);
	seed_add(s, &len, 8);
	seed_add(s, &page_offset, 4);
	seed_add(s, &psn_seed, 4);
}

static void access_seeds(void)
{
	struct seed s = { .len = 0 };

	/* an MR of 1 MiB starting 100 bytes into a page; a 64 KiB WRITE inside it */
	access_rec(&s, 0x7f0000001064ull, 1 << 20, 0x7f0000002000ull, 65536, 100, 0x123456);
	/* one byte past the end; a range at the top of the address space */
	access_rec(&s, 0x10000, 4096, 0x10001, 4096, 0, 0x800000);
	access_rec(&s, ~0ull - 4095, 4096, ~0ull - 16, 32, 4095, 0xffffff);
	seed_write("fuzz_access", "mr-write-edges", s.buf, s.len);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make_seeds DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0755) && errno != EEXIST) {
		perror(out_dir);
		return 1;
	}
	rdma_seeds();
	frame_seeds();
	reasm_seeds();
	ctl_seeds();
	login_seeds();
	reseq_seeds();
	credit_seeds();
	resp_seeds();
	rxe_seeds();
	access_seeds();
	return 0;
}
