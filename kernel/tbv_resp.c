// SPDX-License-Identifier: GPL-2.0
/*
 * The responder: SENDs into receive WQEs, WRITEs into registered memory,
 * READs and atomics queued as response jobs; and its output, which the
 * transmitter runs: ACKs, NAKs and the READ and atomic responses.
 * Packets come from an untrusted peer: the header was validated by the
 * protocol core; here every key, range, right and sequence number is checked
 * before a byte is placed, and nothing is allocated per packet.
 */
#include <linux/ip.h>
#include <linux/slab.h>
#include <net/ipv6.h>

#include "tbv.h"

#define TBV_GRH_BYTES	40	/* what a UD receive buffer holds before the payload */

/*
 * A receive WQE completed: a ring RQ's slot goes back to the process, then its
 * CQE (docs/rxe-abi.md 4.2: an SRQ's went back when it was taken). For a
 * ring QP a CQE lost to a full CQ fails the QP (4.4), through the responder's
 * output as a refusal does (resp_lock held).
 */
static void tbv_recv_post(struct tbv_qp *qp, const struct ib_wc *wc, bool solicited)
{
	bool shared = tbv_qp_is_shared(qp);

	/* the slot first, as rdma_rxe's responder does (tbv_send_wqe_complete() says why) */
	if (shared && !qp->srq)
		tbv_uq_publish(&qp->rq_ring, qp->rq_ring.index + 1);
	if (!tbv_cq_post(qp->rcq, wc, solicited) && shared && !qp->resp.fatal)
		qp->resp.fatal = TBV_NAK_OPERATIONAL;
}

static void tbv_recv_complete(struct tbv_qp *qp, enum ib_wc_status status,
			      enum ib_wc_opcode opcode, u32 byte_len,
			      const struct tbv_rdma_hdr *h)
{
	struct ib_wc wc = {
		.wr_id = qp->resp.recv_wqe->wr_id,
		.status = status,
		.opcode = opcode,
		.byte_len = byte_len,
		.qp = &qp->ibqp,
		.src_qp = h->src_qpn,
		.port_num = 1,
	};

	if (status == IB_WC_SUCCESS && (h->flags & TBV_RF_IMM)) {
		wc.wc_flags |= IB_WC_WITH_IMM;
		wc.ex.imm_data = cpu_to_be32(h->imm);
	}
	if (status == IB_WC_SUCCESS && (h->flags & TBV_RF_INV)) {
		wc.wc_flags |= IB_WC_WITH_INVALIDATE;
		wc.ex.invalidate_rkey = h->rkey;
	}
	tbv_recv_post(qp, &wc, h->flags & TBV_RF_SOLICITED);
}

/*
 * The next receive WQE of a ring RQ, copied once and parsed (docs/rxe-abi.md
 * 4.2, 6.2): the process's producer read (acquire, masked), the slot at our
 * consumer, which is published when the receive completes. False if none.
 */
static bool tbv_take_ring_recv(struct tbv_qp *qp, enum ib_wc_status *status)
{
	struct tbv_uqueue *q = &qp->rq_ring;

	if (!tbv_uq_count(q, tbv_uq_user_index(q)))
		return false;
	*status = tbv_uwqe_recv(q, qp->resp.ring_copy, qp->rq.max_sge, qp->resp.recv_wqe);
	return true;
}

/*
 * Take the next receive WQE into qp->resp.recv_wqe for the message of @h
 * (resp_lock held): 1, or 0 if there is none. A malformed one from a ring
 * (-EINVAL) completes at once with its status and the QP fails (docs/rxe-abi.md
 * 6.2): RC NAKs the request as invalid (the caller's refusal), every type
 * leaves through the responder's output (qp->resp.fatal).
 */
static int tbv_take_recv(struct tbv_qp *qp, const struct tbv_rdma_hdr *h)
{
	enum ib_wc_status status = IB_WC_SUCCESS;
	struct tbv_recv_wqe *wqe;

	if (qp->srq) {
		if (!tbv_srq_take(qp->srq, qp->resp.recv_wqe, qp->resp.ring_copy, &status))
			return 0;
	} else if (tbv_qp_is_shared(qp)) {
		if (!tbv_take_ring_recv(qp, &status))
			return 0;
	} else {
		if (qp->rq.cons == qp->rq.prod)
			return 0;
		wqe = tbv_wq_slot(&qp->rq, qp->rq.cons);
		memcpy(qp->resp.recv_wqe, wqe, struct_size(wqe, sge, wqe->num_sge));
		qp->rq.cons++;
	}
	if (status == IB_WC_SUCCESS)
		return 1;
	tbv_recv_complete(qp, status, IB_WC_RECV, 0, h);
	qp->resp.fatal = TBV_NAK_INVALID;
	return -EINVAL;
}

static void tbv_resp_ack(struct tbv_qp *qp, u8 syndrome, u32 psn, u32 aux)
{
	qp->resp.ack_pending = true;
	qp->resp.ack_syndrome = syndrome;
	qp->resp.ack_psn = psn;
	qp->resp.ack_aux = aux;
}

/* ---- UD ---- */

/* The 40 bytes before a UD payload: a GRH, or for IPv4 RoCE v2 an IPv4 header at 20. */
static enum rdma_network_type tbv_build_grh(u8 *grh, const struct tbv_rdma_hdr *h)
{
	const struct in6_addr *s = (const struct in6_addr *)h->sgid;
	const struct in6_addr *d = (const struct in6_addr *)h->dgid;

	memset(grh, 0, TBV_GRH_BYTES);
	if (ipv6_addr_v4mapped(s) && ipv6_addr_v4mapped(d)) {
		struct iphdr *ip = (struct iphdr *)(grh + 20);

		ip->version = 4;
		ip->ihl = 5;
		ip->tot_len = htons(sizeof(*ip) + 8 + h->payload_len);
		ip->ttl = 64;
		ip->protocol = IPPROTO_UDP;
		ip->saddr = s->s6_addr32[3];
		ip->daddr = d->s6_addr32[3];
		ip->check = ip_fast_csum((u8 *)ip, ip->ihl);
		return RDMA_NETWORK_IPV4;
	}
	grh[0] = 6 << 4;
	grh[4] = (h->payload_len + 8) >> 8;
	grh[5] = (h->payload_len + 8) & 0xff;
	grh[6] = IPPROTO_UDP;
	grh[7] = 64;
	memcpy(grh + 8, h->sgid, 16);
	memcpy(grh + 24, h->dgid, 16);
	return RDMA_NETWORK_IPV6;
}

static void tbv_resp_ud(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	u8 grh[TBV_GRH_BYTES];
	enum rdma_network_type net;
	struct ib_wc wc = {};
	int ret;

	if (qp->state != IB_QPS_RTR && qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD)
		return;
	if (h->kind != TBV_RK_UD_SEND) {
		atomic64_inc(&qp->dev->rstats.rx_stray);	/* a connected QP's packet */
		return;
	}
	if (h->qkey != qp->qkey) {
		/* IBA 10.2.5: dropped without a trace to the sender, but counted here */
		atomic64_inc(&qp->dev->rstats.ud_qkey_mismatches);
		return;
	}
	ret = tbv_take_recv(qp, h);
	if (ret <= 0) {
		if (!ret)
			atomic64_inc(&qp->dev->rstats.ud_no_recv);
		return;
	}
	net = tbv_build_grh(grh, h);
	if (TBV_GRH_BYTES + h->payload_len > qp->resp.recv_wqe->length) {
		tbv_recv_complete(qp, IB_WC_LOC_LEN_ERR, IB_WC_RECV, 0, h);
		return;
	}
	ret = tbv_sge_copy(qp, qp->resp.recv_wqe->sge, qp->resp.recv_wqe->num_sge, 0, grh,
			   TBV_GRH_BYTES, true);
	if (!ret)
		ret = tbv_sge_copy(qp, qp->resp.recv_wqe->sge, qp->resp.recv_wqe->num_sge, TBV_GRH_BYTES,
				   (void *)payload, h->payload_len, true);
	wc.wr_id = qp->resp.recv_wqe->wr_id;
	wc.status = ret ? IB_WC_LOC_PROT_ERR : IB_WC_SUCCESS;
	wc.opcode = IB_WC_RECV;
	wc.byte_len = TBV_GRH_BYTES + h->payload_len;
	wc.qp = &qp->ibqp;
	wc.src_qp = h->src_qpn;
	wc.wc_flags = IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE;
	wc.network_hdr_type = net;
	wc.port_num = 1;
	wc.pkey_index = 0;
	if (h->flags & TBV_RF_IMM) {
		wc.wc_flags |= IB_WC_WITH_IMM;
		wc.ex.imm_data = cpu_to_be32(h->imm);
	}
	tbv_recv_post(qp, &wc, h->flags & TBV_RF_SOLICITED);
}

/* ---- RC and UC ---- */

/*
 * UC has no NAK: a refused request (key, PD, range, rights) is dropped, counted,
 * and said once in the log; a peer refused more than TBV_PROBE_MAX times a
 * second is probing our keys, which is logged (at most TBV_PEER_LOG_LINES a
 * minute). There is no more to do: nothing it guesses is executed, and we
 * have no way to refuse a peer but the cable's owner unplugging it.
 */
static void tbv_resp_uc_refused(struct tbv_qp *qp, const struct tbv_rdma_hdr *h)
{
	struct tbv_dev *dev = qp->dev;
	bool first, probing, may_log = false;
	u32 suppressed = 0;
	u64 now = ktime_to_ms(ktime_get());

	atomic64_inc(&dev->rstats.uc_refused);
	spin_lock(&dev->probe_lock);
	first = !dev->probe_logged;
	dev->probe_logged = true;
	probing = tbv_probe_refusal(&dev->probe, now);
	if (first || probing)
		may_log = tbv_log_limit_allow(&dev->probe_log, now, &suppressed);
	spin_unlock(&dev->probe_lock);
	if (!may_log)
		return;
	if (first)
		dev_info(&dev->ibdev.dev,
			 "peer %pUb: UC request for rkey 0x%x refused (QP %u); further ones are counted in uc_refused\n",
			 dev->link->info.peer_uuid, h->rkey, qp->ibqp.qp_num);
	else
		dev_warn(&dev->ibdev.dev,
			 "peer %pUb is probing keys: over %u UC requests refused in %u ms (%u lines not logged)\n",
			 dev->link->info.peer_uuid, TBV_PROBE_MAX, TBV_PROBE_WINDOW_MS, suppressed);
}

/*
 * A responder error: RC NAKs it (and the requester fails the WQE), then, as
 * IBA prescribes for invalid requests, access and operational errors (classes
 * A, C, D1), goes to the error state: nothing after the refused request is
 * executed. UC drops the message and goes on.
 */
static void tbv_resp_fail(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, u8 syndrome)
{
	atomic64_inc(syndrome == TBV_NAK_ACCESS ? &qp->dev->rstats.rejected_access :
						  &qp->dev->rstats.rejected_invalid);
	tbv_resp_abandon(&qp->resp.msg);
	if (qp->ibqp.qp_type == IB_QPT_RC) {
		tbv_resp_ack(qp, syndrome, h->psn, 0);
		qp->resp.epsn = tbv_psn_add(h->psn, 1);
		qp->resp.nak_sent = true;
		qp->resp.fatal = syndrome;
	} else {
		qp->resp.uc_dropping = true;
		if (syndrome == TBV_NAK_ACCESS)
			tbv_resp_uc_refused(qp, h);
	}
}

/* Undo tbv_resp_rules' verdict into the errno tbv_errno_syndrome() maps. */
static int tbv_resp_verdict_errno(enum tbv_resp_verdict v)
{
	return v == TBV_RESP_OK ? 0 : v == TBV_RESP_TOO_LONG ? -EMSGSIZE : -EPROTO;
}

/* The opcode sequence was checked (tbv_resp_request()); the bytes are checked here. */
static int tbv_resp_send(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	u32 offset = qp->resp.msg.placed, byte_len;
	int ret;

	/* a first packet takes a WQE; UC reuses the one of a message it dropped */
	if ((h->flags & TBV_RF_FIRST) && !qp->resp.recv_active) {
		ret = tbv_take_recv(qp, h);
		if (ret <= 0)
			return ret ?: -EAGAIN;	/* malformed, or RNR */
		qp->resp.recv_active = true;
	}
	if (h->flags & TBV_RF_FIRST)
		offset = 0;
	ret = tbv_resp_verdict_errno(tbv_resp_accept(&qp->resp.msg, h, qp->resp.recv_wqe->length));
	if (ret == -EMSGSIZE) {
		qp->resp.recv_active = false;
		tbv_recv_complete(qp, IB_WC_LOC_LEN_ERR, IB_WC_RECV, 0, h);
	}
	if (ret)
		return ret;
	ret = tbv_sge_copy(qp, qp->resp.recv_wqe->sge, qp->resp.recv_wqe->num_sge, offset,
			   (void *)payload, h->payload_len, true);
	if (ret) {
		qp->resp.recv_active = false;
		tbv_recv_complete(qp, IB_WC_LOC_PROT_ERR, IB_WC_RECV, 0, h);
		return -EIO;
	}
	byte_len = tbv_resp_placed(&qp->resp.msg, h, qp->resp.recv_wqe->length);
	if (h->flags & TBV_RF_LAST) {
		qp->resp.recv_active = false;
		/* SEND_WITH_INV: the window is invalidated before the receive completes */
		if ((h->flags & TBV_RF_INV) && tbv_mw_invalidate(qp, h->rkey, true)) {
			tbv_recv_complete(qp, IB_WC_REM_INV_REQ_ERR, IB_WC_RECV, 0, h);
			return -EINVAL;
		}
		qp->resp.msn++;
		tbv_recv_complete(qp, IB_WC_SUCCESS, IB_WC_RECV, byte_len, h);
	}
	return 0;
}

static int tbv_resp_write(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	u32 byte_len;
	int ret;

	if (!(qp->access & IB_ACCESS_REMOTE_WRITE))
		return -EACCES;
	ret = tbv_resp_verdict_errno(tbv_resp_accept(&qp->resp.msg, h, 0));
	if (ret)
		return ret;
	if (h->flags & TBV_RF_FIRST) {
		/* The whole target range is checked once; each packet again below. */
		if (h->len && tbv_mr_remote(qp, h->rkey, h->va, h->len, IB_ACCESS_REMOTE_WRITE,
					    NULL, 0, true))
			return -EACCES;
		qp->resp.write_rkey = h->rkey;
		qp->resp.write_va = h->va;
	}
	/* The receive WQE an immediate consumes must exist before anything is written. */
	if ((h->flags & TBV_RF_IMM) && !qp->resp.recv_active) {
		ret = tbv_take_recv(qp, h);
		if (ret <= 0)
			return ret ?: -EAGAIN;
		qp->resp.recv_active = true;
	}
	if (h->payload_len) {
		if (tbv_mr_remote(qp, qp->resp.write_rkey, qp->resp.write_va, h->payload_len,
				  IB_ACCESS_REMOTE_WRITE, (void *)payload, h->payload_len, true))
			return -EACCES;	/* deregistered while the WRITE was under way */
		qp->resp.write_va += h->payload_len;
	}
	byte_len = tbv_resp_placed(&qp->resp.msg, h, 0);
	if (h->flags & TBV_RF_LAST) {
		qp->resp.msn++;
		if (h->flags & TBV_RF_IMM) {
			qp->resp.recv_active = false;
			tbv_recv_complete(qp, IB_WC_SUCCESS, IB_WC_RECV_RDMA_WITH_IMM,
					  byte_len, h);
		}
	}
	return 0;
}

/*
 * A response job slot for a READ or atomic (the job queue is in PSN order).
 * With max_dest_rd_atomic jobs queued, the oldest gives way: a requester keeps
 * no more than that many outstanding, so when it sends a new one the oldest
 * queued job answers a request it has completed already (a duplicate it sent
 * while rewinding). A peer that does not keep the limit only loses responses.
 */
static struct tbv_read_job *tbv_resp_job(struct tbv_qp *qp)
{
	u32 limit = clamp(qp->max_dest_rd_atomic, 1u, (u32)TBV_MAX_RD_ATOMIC);

	while (qp->resp.read_count >= limit) {
		qp->resp.read_head = (qp->resp.read_head + 1) % TBV_MAX_RD_ATOMIC;
		qp->resp.read_count--;
		atomic64_inc(&qp->dev->rstats.responses_superseded);
	}
	return &qp->resp.reads[(qp->resp.read_head + qp->resp.read_count) % TBV_MAX_RD_ATOMIC];
}

static void tbv_resp_queue_atomic(struct tbv_qp *qp, struct tbv_read_job *job, u32 psn, u64 orig)
{
	*job = (struct tbv_read_job){ .psn = psn, .npkts = 1, .atomic = true, .atomic_orig = orig };
	qp->resp.read_count++;
}

/* Execute an atomic request once and queue its response. */
static int tbv_resp_atomic(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	struct tbv_atomic_result *res;
	u64 orig;
	int ret;

	if (!(qp->access & IB_ACCESS_REMOTE_ATOMIC))
		return -EACCES;
	if (h->va % TBV_ATOMIC_LEN)
		return -EINVAL;		/* IBA 9.4.5: misaligned atomics are invalid requests */
	ret = tbv_mr_atomic(qp, h->rkey, h->va, h->aux, tbv_rdma_get_u64(payload),
			    tbv_rdma_get_u64(payload + 8), &orig);
	if (ret)
		return ret == -EINVAL ? -EINVAL : -EACCES;	/* misaligned, or no access */
	res = &qp->resp.atomics[qp->resp.atomic_next];
	qp->resp.atomic_next = (qp->resp.atomic_next + 1) % TBV_MAX_RD_ATOMIC;
	*res = (struct tbv_atomic_result){ .psn = h->psn, .valid = true, .orig = orig };
	tbv_resp_queue_atomic(qp, tbv_resp_job(qp), h->psn, orig);
	return 0;
}

/*
 * A repeated atomic: its response was lost. Answer with the result kept when
 * it was executed; one too old to be kept cannot be outstanding, so it is
 * ignored. True if a response was queued.
 */
static bool tbv_resp_atomic_replay(struct tbv_qp *qp, const struct tbv_rdma_hdr *h)
{
	int i;

	/* newest first: after a PSN wrap an old result may share the PSN */
	for (i = 1; i <= TBV_MAX_RD_ATOMIC; i++) {
		struct tbv_atomic_result *res =
			&qp->resp.atomics[(qp->resp.atomic_next + TBV_MAX_RD_ATOMIC - i) % TBV_MAX_RD_ATOMIC];

		if (!res->valid || res->psn != h->psn)
			continue;
		atomic64_inc(&qp->dev->rstats.atomic_replays);
		tbv_resp_queue_atomic(qp, tbv_resp_job(qp), h->psn, res->orig);
		return true;
	}
	return false;
}

/* Queue the responses of a READ request (also a repeated one: READs are idempotent). */
static int tbv_resp_read(struct tbv_qp *qp, const struct tbv_rdma_hdr *h)
{
	struct tbv_read_job *job;

	if (!(qp->access & IB_ACCESS_REMOTE_READ))
		return -EACCES;
	if (h->len && tbv_mr_remote(qp, h->rkey, h->va, h->len, IB_ACCESS_REMOTE_READ,
				    NULL, 0, false))
		return -EACCES;
	job = tbv_resp_job(qp);
	*job = (struct tbv_read_job){
		.rkey = h->rkey, .va = h->va, .len = h->len, .psn = h->psn,
		.npkts = tbv_rdma_npkts(h->len, tbv_qp_full(qp)),
	};
	qp->resp.read_count++;
	return 0;
}

/*
 * FLUSH: everything this QP placed before it is placed; with the MR granting
 * the type, the range (or, level MR, the whole MR) is made durable. For host
 * memory global visibility is a barrier; persistence is never granted (the
 * MR flag is refused at registration: no persistent memory here).
 */
static int tbv_resp_flush(struct tbv_qp *qp, const struct tbv_rdma_hdr *h)
{
	u32 type = h->aux & 0xff, level = h->aux >> 8;
	int access = type == TBV_FLUSH_PERSISTENT ? IB_ACCESS_FLUSH_PERSISTENT :
						    IB_ACCESS_FLUSH_GLOBAL;
	struct tbv_mr *mr;
	int ret;

	if (h->rkey & TBV_KEY_MW_BIT)
		return -EACCES;		/* windows carry no flush rights */
	if (level == TBV_FLUSH_RANGE) {
		ret = tbv_mr_remote(qp, h->rkey, h->va, h->len, access, NULL, 0, false);
	} else {
		mr = tbv_mr_get(qp->dev, h->rkey);
		if (!mr)
			return -EACCES;
		ret = mr->umem ? tbv_mr_check(mr, qp->ibqp.pd, mr->iova, 0, access) : -EACCES;
		tbv_mr_put(mr);
	}
	if (ret)
		return -EACCES;
	smp_wmb();	/* our earlier stores to the MR before the ACK that reports them */
	return 0;
}

/* ATOMIC_WRITE: the 8 aligned bytes at va are stored by one store, never torn. */
static int tbv_resp_atomic_write(struct tbv_qp *qp, const struct tbv_rdma_hdr *h,
				 const u8 *payload)
{
	u64 value;
	int ret;

	if (!(qp->access & IB_ACCESS_REMOTE_WRITE))
		return -EACCES;
	if (h->va % TBV_ATOMIC_LEN)
		return -EINVAL;
	memcpy(&value, payload, sizeof(value));	/* the bytes as the requester's memory held them */
	ret = tbv_mr_atomic_write(qp, h->rkey, h->va, value);
	return ret == -EINVAL ? -EINVAL : ret ? -EACCES : 0;
}

static void tbv_resp_drop_reads(struct tbv_qp *qp)
{
	qp->resp.read_head = 0;
	qp->resp.read_count = 0;
}

/*
 * A request at @psn came again (a READ resent from a lost response on, or an
 * atomic): the requester asks again for every response from @psn on, so drop
 * the queued jobs that reach @psn, including one it lies within; jobs wholly
 * before it stay (jobs are in PSN order).
 */
static void tbv_resp_drop_reads_from(struct tbv_qp *qp, u32 psn)
{
	u32 i;

	for (i = 0; i < qp->resp.read_count; i++) {
		const struct tbv_read_job *job =
			&qp->resp.reads[(qp->resp.read_head + i) % TBV_MAX_RD_ATOMIC];

		if (tbv_psn_diff(tbv_psn_add(job->psn, job->npkts - 1), psn) >= 0)
			break;
	}
	qp->resp.read_count = i;
}

/* ---- The responder's state ---- */

/*
 * At QP creation: room for a copy of the biggest receive WQE (SRQ's or QP's),
 * and for receive WQEs from a ring (the RQ's or the SRQ's), of its slot of
 * @ring_slot bytes (0: no ring).
 */
int tbv_resp_create(struct tbv_qp *qp, u32 recv_sge, u32 ring_slot)
{
	qp->resp.recv_wqe = kzalloc(struct_size(qp->resp.recv_wqe, sge, recv_sge),
				    tbv_quota_gfp(&qp->charge));
	if (!qp->resp.recv_wqe)
		return -ENOMEM;
	if (!ring_slot)
		return 0;
	qp->resp.ring_copy = tbv_uwqe_buf_alloc(ring_slot, tbv_quota_gfp(&qp->charge));
	if (!qp->resp.ring_copy) {
		kfree(qp->resp.recv_wqe);
		qp->resp.recv_wqe = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* The QP is reset (resp_lock held): no message, ACK, response or atomic result is pending. */
void tbv_resp_reset(struct tbv_qp *qp)
{
	qp->resp.recv_active = false;
	qp->resp.srq_done = false;
	qp->resp.ack_pending = false;
	qp->resp.nak_sent = false;
	qp->resp.uc_dropping = false;
	qp->resp.fatal = 0;
	qp->resp.msn = 0;
	tbv_resp_drop_reads(qp);
	memset(qp->resp.atomics, 0, sizeof(qp->resp.atomics));
	qp->resp.atomic_next = 0;
	tbv_resp_abandon(&qp->resp.msg);
}

/* modify_qp (sq_lock held too): the first request PSN expected. */
void tbv_resp_modify(struct tbv_qp *qp, const struct ib_qp_attr *attr, int mask)
{
	if (mask & IB_QP_RQ_PSN)
		qp->resp.epsn = attr->rq_psn;
}

/* Destroy (or a failed creation), once nothing reaches the QP any more. */
void tbv_resp_destroy(struct tbv_qp *qp)
{
	spin_lock_bh(&qp->resp_lock);
	tbv_resp_reset(qp);
	spin_unlock_bh(&qp->resp_lock);
	kfree(qp->resp.recv_wqe);
	qp->resp.recv_wqe = NULL;
	tbv_uwqe_buf_free(qp->resp.ring_copy);
	qp->resp.ring_copy = NULL;
}

static u8 tbv_errno_syndrome(int err)
{
	switch (err) {
	case -EACCES:
		return TBV_NAK_ACCESS;
	case -EIO:
		return TBV_NAK_OPERATIONAL;
	default:
		return TBV_NAK_INVALID;
	}
}

/* A request packet for an RC or UC QP (resp_lock held); true if TX has work. */
static bool tbv_resp_request(struct tbv_qp *qp, const struct tbv_rdma_hdr *h,
			     const u8 *payload)
{
	bool rc = qp->ibqp.qp_type == IB_QPT_RC;
	int ret;

	if (qp->state != IB_QPS_RTR && qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD &&
	    qp->state != IB_QPS_SQE)
		return false;
	if (qp->resp.fatal)
		return false;	/* on its way to the error state */
	if (!rc && h->kind != TBV_RK_SEND && h->kind != TBV_RK_WRITE)
		return false;	/* READ, atomics, FLUSH: RC only */

	switch (tbv_psn_classify(h->psn, qp->resp.epsn)) {
	case TBV_PSN_AHEAD:
		if (!rc) {
			/* UC: the message in progress is lost; resynchronise on the next first */
			tbv_resp_abandon(&qp->resp.msg);
			qp->resp.uc_dropping = !(h->flags & TBV_RF_FIRST);
			qp->resp.epsn = h->psn;
			if (qp->resp.uc_dropping) {
				qp->resp.epsn = tbv_psn_add(h->psn, 1);
				return false;
			}
			break;
		}
		if (!qp->resp.nak_sent) {
			qp->resp.nak_sent = true;
			atomic64_inc(&qp->dev->rstats.seq_naks);
			tbv_resp_ack(qp, TBV_NAK_SEQ, qp->resp.epsn, 0);
			return true;
		}
		return false;
	case TBV_PSN_DUPLICATE:
		if (!rc)
			return false;
		/* on a lossless cable this stays 0: else a requester resends too early */
		atomic64_inc(&qp->dev->rstats.rx_duplicates);
		/* the requester resends: what we sent it may wait behind a gap */
		tbv_stripe_tx_restart(qp);
		if (h->kind == TBV_RK_READ_REQ) {
			/* the responses were lost: answer again, ahead of newer reads */
			tbv_resp_drop_reads_from(qp, h->psn);
			if (tbv_resp_read(qp, h))
				return false;
			return true;
		}
		if (h->kind == TBV_RK_ATOMIC) {
			/* never executed twice; answered ahead of newer responses, like a READ */
			tbv_resp_drop_reads_from(qp, h->psn);
			return tbv_resp_atomic_replay(qp, h);
		}
		if (h->flags & (TBV_RF_ACK_REQ | TBV_RF_LAST)) {
			tbv_resp_ack(qp, TBV_ACK_OK, tbv_psn_add(qp->resp.epsn, TBV_PSN_MASK), qp->resp.msn);
			return true;
		}
		return false;
	case TBV_PSN_EXPECTED:
		break;
	}
	if (!rc && qp->resp.uc_dropping) {
		if (!(h->flags & TBV_RF_FIRST)) {
			qp->resp.epsn = tbv_psn_add(h->psn, 1);
			return false;
		}
		qp->resp.uc_dropping = false;
	}
	qp->resp.nak_sent = false;

	/* IBA's opcode sequence: RC NAKs a violation as invalid, UC drops the message */
	if (tbv_resp_seq_check(&qp->resp.msg, h->kind, h->flags) != TBV_RESP_OK) {
		atomic64_inc(&qp->dev->rstats.opcode_seq_errors);
		tbv_resp_fail(qp, h, TBV_NAK_INVALID);
		if (!rc)
			qp->resp.epsn = tbv_psn_add(h->psn, 1);
		return rc;
	}

	switch (h->kind) {
	case TBV_RK_SEND:
		ret = tbv_resp_send(qp, h, payload);
		break;
	case TBV_RK_WRITE:
		ret = tbv_resp_write(qp, h, payload);
		break;
	case TBV_RK_READ_REQ:
		ret = tbv_resp_read(qp, h);
		if (!ret) {
			qp->resp.epsn = tbv_psn_add(h->psn, tbv_rdma_npkts(h->len, tbv_qp_full(qp)));
			qp->resp.msn++;
			return true;
		}
		break;
	case TBV_RK_ATOMIC:
		ret = tbv_resp_atomic(qp, h, payload);
		if (!ret) {
			qp->resp.epsn = tbv_psn_add(h->psn, 1);
			qp->resp.msn++;
			return true;
		}
		break;
	case TBV_RK_FLUSH:
		ret = tbv_resp_flush(qp, h);
		if (!ret)
			qp->resp.msn++;
		break;
	case TBV_RK_ATOMIC_WRITE:
		ret = tbv_resp_atomic_write(qp, h, payload);
		if (!ret)
			qp->resp.msn++;
		break;
	default:
		ret = -EPROTO;
		break;
	}

	if (ret == -EAGAIN) {
		/* Receiver not ready: RC asks to resend this PSN later; UC drops. */
		if (!rc) {
			tbv_resp_abandon(&qp->resp.msg);
			qp->resp.uc_dropping = true;
			qp->resp.epsn = tbv_psn_add(h->psn, 1);
			return false;
		}
		atomic64_inc(&qp->dev->rstats.rnr_naks);
		tbv_resp_ack(qp, TBV_NAK_RNR, h->psn, qp->min_rnr_timer);
		return true;
	}
	if (ret) {
		tbv_resp_fail(qp, h, tbv_errno_syndrome(ret));
		if (!rc)
			qp->resp.epsn = tbv_psn_add(h->psn, 1);
		return rc;
	}
	qp->resp.epsn = tbv_psn_add(h->psn, 1);
	if (rc && (h->flags & (TBV_RF_ACK_REQ | TBV_RF_LAST))) {
		tbv_resp_ack(qp, TBV_ACK_OK, h->psn, qp->resp.msn);
		return true;
	}
	return false;
}

/* ---- Entry points of RX (BH disabled) ---- */

/*
 * A UD packet for @qp; true if the transmitter must run: the QP is to fail
 * (a malformed ring WQE, a lost CQE: tbv_take_recv(), tbv_recv_post()).
 */
bool tbv_resp_rx_ud(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	bool failing;

	spin_lock(&qp->resp_lock);
	failing = qp->resp.fatal;
	tbv_resp_ud(qp, h, payload);
	failing = !failing && qp->resp.fatal;
	spin_unlock(&qp->resp_lock);
	return failing;
}

/* A request packet for an RC or UC QP; true if the transmitter has work. */
bool tbv_resp_rx(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	bool kick, failing;

	spin_lock(&qp->resp_lock);
	failing = qp->resp.fatal;
	kick = tbv_resp_request(qp, h, payload);
	/* a UC QP fails without a NAK (a lost CQE, a malformed ring WQE): the output fails it */
	kick |= !failing && qp->resp.fatal;
	spin_unlock(&qp->resp_lock);
	return kick;
}

/* ---- Responder output: ACKs and READ responses (resp_lock held) ---- */

static int tbv_resp_tx_ack(struct tbv_qp *qp)
{
	struct tbv_rail *rail = tbv_xmit_rail(qp, qp->loopback);
	struct tbv_rdma_hdr h = {
		.kind = TBV_RK_ACK,
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->dest_qpn,
		.psn = qp->resp.ack_psn,
		.syndrome = qp->resp.ack_syndrome,
		.aux = qp->resp.ack_aux,
	};
	struct tbv_frame *frame = tbv_xmit_get(qp, rail, TBV_TX_ANSWER, qp->loopback);

	if (!frame)
		return -EAGAIN;
	frame->size = tbv_rdma_encode(frame->data, &h);
	qp->resp.ack_pending = false;
	tbv_xmit_send(qp, rail, frame, qp->loopback);
	return 0;
}

static int tbv_resp_tx_read(struct tbv_qp *qp, struct tbv_read_job *job)
{
	struct tbv_rail *rail = tbv_xmit_rail(qp, qp->loopback);
	u32 full = tbv_qp_full(qp), off = job->sent * full;
	struct tbv_rdma_hdr h = {
		.kind = TBV_RK_READ_RESP,
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->dest_qpn,
		.psn = tbv_psn_add(job->psn, job->sent),
		.payload_len = tbv_rdma_pkt_payload(job->len, job->sent, full),
		.flags = (job->sent == 0 ? TBV_RF_FIRST : 0) |
			 (job->sent + 1 == job->npkts ? TBV_RF_LAST : 0),
	};
	struct tbv_frame *payload_frame, *frame;
	u8 *payload;

	frame = tbv_xmit_get_pkt(qp, rail, TBV_TX_ANSWER, qp->loopback, h.flags,
				 job->atomic ? TBV_ATOMIC_RESP_PAYLOAD : h.payload_len, &payload_frame);
	if (!frame)
		return -EAGAIN;
	if (job->atomic) {
		h.kind = TBV_RK_ATOMIC_RESP;
		h.payload_len = TBV_ATOMIC_RESP_PAYLOAD;
		frame->size = tbv_rdma_encode(frame->data, &h);
		tbv_rdma_put_u64((u8 *)frame->data + TBV_RDMA_HDR_LEN, job->atomic_orig);
		job->sent++;
		tbv_xmit_send(qp, rail, frame, qp->loopback);
		return 0;
	}
	frame->size = tbv_rdma_encode(frame->data, &h);
	payload = (u8 *)frame->data + TBV_RDMA_HDR_LEN;
	if (payload_frame) {
		payload_frame->size = h.payload_len;
		payload = payload_frame->data;
	}
	if (h.payload_len &&
	    (!payload_frame || qp->loopback ||
	     tbv_mr_remote_page(qp, job->rkey, job->va + off, IB_ACCESS_REMOTE_READ,
				payload_frame)) &&
	    tbv_mr_remote(qp, job->rkey, job->va + off, h.payload_len, IB_ACCESS_REMOTE_READ,
			  payload, h.payload_len, false)) {
		/* deregistered meanwhile: stop answering; the requester times out */
		tbv_xmit_unget(qp, rail, frame, qp->loopback);
		if (payload_frame)
			tbv_xmit_unget(qp, rail, payload_frame, qp->loopback);
		job->sent = job->npkts;
		return 0;
	}
	job->sent++;
	if (payload_frame)
		tbv_xmit_send_split(qp, rail, frame, payload_frame, qp->loopback);
	else
		tbv_xmit_send(qp, rail, frame, qp->loopback);
	return 0;
}

static void tbv_resp_tx(struct tbv_qp *qp)
{
	/*
	 * A refusal's NAK goes out after the responses still owed to the READs and
	 * atomics before it (the QP stops right after it): the requester must see
	 * them complete, then the refused request fail.
	 */
	bool nak_last = qp->resp.fatal && qp->resp.read_count;

	if (qp->resp.ack_pending && !nak_last && tbv_resp_tx_ack(qp))
		return;
	while (qp->resp.read_count) {
		struct tbv_read_job *job = &qp->resp.reads[qp->resp.read_head];

		if (tbv_resp_tx_read(qp, job))
			return;
		if (job->sent == job->npkts) {
			qp->resp.read_head = (qp->resp.read_head + 1) % TBV_MAX_RD_ATOMIC;
			qp->resp.read_count--;
		}
	}
	if (nak_last && qp->resp.ack_pending)
		tbv_resp_tx_ack(qp);
}

/*
 * Send what the responder owes (the transmitter, BH disabled). Returns the
 * syndrome of a refused request whose NAK is out, or 0: the QP is then to
 * fail (tbv_resp_fail_qp()).
 */
u8 tbv_resp_output(struct tbv_qp *qp)
{
	u8 fatal = 0;

	spin_lock(&qp->resp_lock);
	if (qp->state != IB_QPS_ERR && qp->state != IB_QPS_RESET) {
		tbv_resp_tx(qp);
		if (qp->resp.fatal && !qp->resp.ack_pending)
			fatal = qp->resp.fatal;
	}
	spin_unlock(&qp->resp_lock);
	return fatal;
}

/*
 * The responder refused a request and its NAK is out: the QP goes to error.
 * Returns @syndrome, or 0 if the QP is there already, or was reset (and maybe
 * re-armed) meanwhile (BH disabled).
 */
u8 tbv_resp_fail_qp(struct tbv_qp *qp, u8 syndrome)
{
	spin_lock(&qp->sq_lock);
	spin_lock(&qp->resp_lock);
	if (qp->state == IB_QPS_ERR || qp->state == IB_QPS_RESET || !qp->resp.fatal)
		syndrome = 0;
	else
		qp->state = IB_QPS_ERR;
	spin_unlock(&qp->resp_lock);
	spin_unlock(&qp->sq_lock);
	return syndrome;
}

/* ---- Flush ---- */

static void tbv_flush_wc(struct tbv_qp *qp, u64 wr_id)
{
	struct ib_wc wc = {
		.wr_id = wr_id,
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = IB_WC_RECV,
		.qp = &qp->ibqp,
	};

	tbv_recv_post(qp, &wc, false);
}

/*
 * Every posted receive WQE completes with a flush error (not those of an
 * SRQ); a ring RQ's up to the process's producer as it is now (docs/rxe-abi.md
 * 4.5), each slot copied once for its wr_id, whatever else it holds.
 */
bool tbv_rq_flush(struct tbv_qp *qp)
{
	bool srq_done = false;
	u32 n;

	spin_lock_bh(&qp->resp_lock);
	if (qp->resp.recv_active) {
		tbv_flush_wc(qp, qp->resp.recv_wqe->wr_id);
		qp->resp.recv_active = false;
	}
	if (qp->srq) {
		/* nothing of ours to flush; in error, the QP takes no more SRQ WQEs */
		srq_done = !qp->resp.srq_done;
		qp->resp.srq_done = true;
	} else if (tbv_qp_is_shared(qp)) {
		for (n = tbv_uq_count(&qp->rq_ring, tbv_uq_user_index(&qp->rq_ring)); n; n--) {
			tbv_uwqe_recv(&qp->rq_ring, qp->resp.ring_copy, qp->rq.max_sge,
				      qp->resp.recv_wqe);
			tbv_flush_wc(qp, qp->resp.recv_wqe->wr_id);
		}
	} else {
		while (qp->rq.cons != qp->rq.prod) {
			struct tbv_recv_wqe *wqe = tbv_wq_slot(&qp->rq, qp->rq.cons);

			tbv_flush_wc(qp, wqe->wr_id);
			qp->rq.cons++;
		}
	}
	spin_unlock_bh(&qp->resp_lock);
	return srq_done;
}
