// SPDX-License-Identifier: GPL-2.0
/*
 * The requester: post_send's work requests become send WQEs (tbv_post_one()),
 * and send WQEs become request packets (tbv_req_output(), which the
 * transmitter runs), one ring frame each (tbv_xmit.c). RC keeps WQEs until
 * the completer retires them and resends from the first lost PSN when it
 * rewinds the requester (go back N, never a whole message); UC and UD
 * complete on transmission.
 */
#include <linux/uaccess.h>

#include "tbv.h"
#include "tbv_rxe_wqe.h"

/* ---- Completions ---- */

static enum ib_wc_opcode tbv_wc_opcode(u32 wr_opcode)
{
	switch (wr_opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return IB_WC_COMP_SWAP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return IB_WC_FETCH_ADD;
	case IB_WR_BIND_MW:
		return IB_WC_BIND_MW;
	case IB_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_WR_FLUSH:
		return IB_WC_FLUSH;
	case IB_WR_ATOMIC_WRITE:
		return IB_WC_ATOMIC_WRITE;
	default:
		return IB_WC_SEND;
	}
}

/*
 * A send WQE is done and has left the SQ (sq.cons passed it, sq_lock held): a
 * completion when signaled, and always for an error. A ring QP's slot goes
 * back to the process first (the SQ holds the WQE's copy), then the CQE, as
 * rdma_rxe's completer does: a process that reaps the CQE may post again at
 * once into the slot it frees, and with an SQ of one WQE it otherwise found
 * the ring still full (ENOMEM). A CQE lost to its full CQ fails the QP
 * (docs/rxe-abi.md 4.4): whoever runs the transport next sees the error state
 * and flushes.
 */
void tbv_send_wqe_complete(struct tbv_qp *qp, struct tbv_send_wqe *wqe,
			   enum ib_wc_status status)
{
	struct ib_wc wc = {
		.wr_id = wqe->wr_id,
		.status = status,
		.opcode = tbv_wc_opcode(wqe->opcode),
		.qp = &qp->ibqp,
		.byte_len = tbv_wqe_wants_response(wqe) ? wqe->length : 0,
	};
	bool shared = tbv_qp_is_shared(qp);

	if (shared)
		tbv_uq_publish(&qp->sq_ring, qp->sq_ring.index + 1);
	if ((wqe->signaled || status != IB_WC_SUCCESS) && !tbv_cq_post(qp->scq, &wc, false) &&
	    shared)
		qp->state = IB_QPS_ERR;
}

/* ---- A ring SQ ---- */

/*
 * Copy what the process posted to a ring SQ (its producer acquired and
 * masked) into the SQ, the ring's shadow, as far as the shadow has room, in
 * order (sq_lock held): each slot once, validated into a send WQE or one
 * that fails with its status (tbv_uwqe_send()). From then on the transport
 * reads only the shadow, also to resend; the slot goes back to the process
 * when the WQE is retired (tbv_send_wqe_complete()). At most until @ahead
 * WQEs wait to be started or sent (the transmitter's budget, tbv_req_output());
 * true if that left slots in the ring which the shadow had room for.
 */
bool tbv_req_fetch(struct tbv_qp *qp, u32 ahead)
{
	struct tbv_uqueue *ring = &qp->sq_ring;
	u32 n;

	if (!tbv_qp_is_shared(qp))
		return false;
	n = (tbv_uq_user_index(ring) - qp->req.sq_fetch) & ring->mask;
	for (; n && qp->sq.prod - qp->sq.cons < qp->sq.size; n--) {
		if (qp->sq.prod - qp->req.sq_next >= ahead)
			return true;
		tbv_uwqe_send(qp, qp->req.sq_fetch, tbv_wq_slot(&qp->sq, qp->sq.prod));
		qp->req.sq_fetch = (qp->req.sq_fetch + 1) & ring->mask;
		qp->sq.prod++;
	}
	return false;
}

/* ---- post_send ---- */

/* The opcodes a QP may post: the same rules as for rings shared with user space. */
static bool tbv_opcode_ok(enum ib_qp_type type, u32 op)
{
	/* every other type (UD, GSI) sends only SENDs, as UD does */
	u32 qpt = type == IB_QPT_RC ? TBV_RXE_QPT_RC :
		  type == IB_QPT_UC ? TBV_RXE_QPT_UC : TBV_RXE_QPT_UD;

	/* FLUSH and ATOMIC_WRITE only where the kernel's verbs have them (tbv_compat.h) */
	return tbv_rxe_opcode_ok(qpt, op, TBV_FLUSH_VERBS);
}

/* Inline data is copied at post time: from the caller's memory (user or kernel). */
static int tbv_copy_inline(struct tbv_qp *qp, const struct tbv_post_wr *p, u8 *buf)
{
	u32 i;

	for (i = 0; i < p->num_sge; i++) {
		const struct ib_sge *sge = &p->sge[i];

		if (qp->ibqp.uobject) {
			if (copy_from_user(buf, u64_to_user_ptr(sge->addr), sge->length))
				return -EFAULT;
		} else {
			memcpy(buf, (void *)(uintptr_t)sge->addr, sge->length);
		}
		buf += sge->length;
	}
	return 0;
}

/* Check one work request and queue it as a send WQE (or fail with -errno). */
int tbv_post_one(struct tbv_qp *qp, const struct tbv_post_wr *p, u8 *inline_buf)
{
	enum ib_qp_type type = qp->ibqp.qp_type;
	bool is_ud = type == IB_QPT_UD || type == IB_QPT_GSI;
	bool is_inline = p->send_flags & IB_SEND_INLINE;
	bool is_local = tbv_wr_is_local(p->opcode);
	/* an atomic write's 8 bytes given by value (ibv_wr_atomic_write()), not by SGE */
	bool by_value = p->opcode == IB_WR_ATOMIC_WRITE && !p->num_sge;
	struct tbv_send_wqe *wqe;
	unsigned long flags;
	u64 length = 0;
	u32 i;
	int ret;

	if (!tbv_opcode_ok(type, p->opcode))
		return -EINVAL;
	/* a READ's data comes back into its SGEs: there is nothing to send inline (as mlx5, rxe) */
	if (is_inline && p->opcode == IB_WR_RDMA_READ)
		return -EINVAL;
	if (p->num_sge > (is_inline ? TBV_MAX_SGE : qp->sq.max_sge) || (is_local && p->num_sge))
		return -EINVAL;
	for (i = 0; i < p->num_sge; i++)
		length += p->sge[i].length;
	if (length > TBV_MAX_MR_SIZE)
		return -EINVAL;
	if (by_value) {
		is_inline = true;
		length = TBV_ATOMIC_LEN;
		memcpy(inline_buf, &p->compare_add, TBV_ATOMIC_LEN);
	} else if (is_inline && !is_local) {
		if (length > qp->max_inline)
			return -EINVAL;
		ret = tbv_copy_inline(qp, p, inline_buf);
		if (ret)
			return ret;
	}
	if (is_ud && length > 2048)	/* the port MTU: one packet */
		return -EINVAL;
	/* an atomic's result lands in 8 local bytes; the remote alignment is the responder's */
	if (tbv_wr_is_atomic(p->opcode) && (length != TBV_ATOMIC_LEN || is_inline))
		return -EINVAL;
	if (p->opcode == IB_WR_ATOMIC_WRITE && length != TBV_ATOMIC_LEN)
		return -EINVAL;
	if (p->opcode == IB_WR_FLUSH &&
	    (p->num_sge || (p->flush_type != TBV_FLUSH_GLOBAL &&
			     p->flush_type != TBV_FLUSH_PERSISTENT) ||
	     (p->flush_level != TBV_FLUSH_RANGE && p->flush_level != TBV_FLUSH_MR)))
		return -EINVAL;

	/* irqsave: a kernel caller may post with interrupts off (tbv_qp_run()) */
	spin_lock_irqsave(&qp->sq_lock, flags);
	if (qp->sq.prod - qp->sq.cons >= qp->sq.size) {
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		return -ENOMEM;
	}
	wqe = tbv_wq_slot(&qp->sq, qp->sq.prod);
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = p->wr_id;
	wqe->opcode = p->opcode;
	wqe->send_flags = p->send_flags;
	wqe->signaled = qp->sig_all || (p->send_flags & IB_SEND_SIGNALED);
	wqe->length = length;
	wqe->imm = p->imm;
	wqe->inv_rkey = p->inv_rkey;
	wqe->remote_addr = p->remote_addr;
	wqe->rkey = p->rkey;
	wqe->swap = p->swap;
	wqe->compare_add = p->compare_add;
	if (p->opcode == IB_WR_FLUSH) {
		wqe->flush_len = p->flush_len;
		wqe->flush_aux = TBV_FLUSH_AUX(p->flush_type, p->flush_level);
	}
	if (p->opcode == IB_WR_BIND_MW)
		wqe->bind = p->bind;
	if (is_ud && !is_local) {
		wqe->ah = *to_tbv_ah(p->ah);
		wqe->remote_qpn = p->remote_qpn;
		/* IBA 10.2.5: a Q_Key with the high bit set means "use the QP's". */
		wqe->remote_qkey = (p->remote_qkey & 0x80000000u) ? qp->qkey : p->remote_qkey;
	}
	wqe->is_inline = is_inline && !is_local;
	if (wqe->is_inline) {
		memcpy(wqe->sge, inline_buf, length);
	} else {
		wqe->num_sge = p->num_sge;
		for (i = 0; i < p->num_sge; i++)
			wqe->sge[i] = (struct tbv_sge){ p->sge[i].addr, p->sge[i].length,
							p->sge[i].lkey };
	}
	qp->sq.prod++;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	return 0;
}

/* ---- Packets ---- */

/*
 * Build and send packet req_pkt of the WQE at sq_next (sq_lock held). Returns
 * 0 when sent, -EAGAIN when no frame is free, or a negative errno for a local
 * protection error, which fails the WQE.
 */
static int tbv_req_packet(struct tbv_qp *qp, struct tbv_send_wqe *wqe)
{
	enum ib_qp_type type = qp->ibqp.qp_type;
	bool is_ud = type == IB_QPT_UD || type == IB_QPT_GSI;
	bool loopback = is_ud ? wqe->ah.loopback : qp->loopback;
	/* multicast reaches the peer and, through a copy, our own attached QPs */
	bool mcast = is_ud && tbv_gid_is_multicast(wqe->ah.dgid);
	struct tbv_rail *rail = tbv_xmit_rail(qp, loopback), *lrail = tbv_xmit_rail(qp, true);
	struct tbv_frame *local = NULL, *payload_frame = NULL;
	u32 full = tbv_qp_full(qp), off = qp->req.pkt * full;
	struct tbv_rdma_hdr h = {
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->dest_qpn,
		.psn = tbv_psn_add(wqe->first_psn, qp->req.pkt),
	};
	/* the payload of this packet, if it carries the message's data (not a READ or FLUSH) */
	u32 data_len = wqe->opcode == IB_WR_RDMA_READ || wqe->opcode == IB_WR_FLUSH ? 0 :
		       tbv_rdma_pkt_payload(wqe->length, qp->req.pkt, full);
	struct tbv_frame *frame;
	bool last;
	int ret;

	frame = tbv_xmit_get_pkt(qp, rail, TBV_TX_REQUEST, loopback, is_ud ? TBV_RF_GRH : 0,
				 data_len, &payload_frame);
	if (!frame)
		return -EAGAIN;
	if (mcast) {
		local = tbv_xmit_get(qp, lrail, TBV_TX_REQUEST, true);
		if (!local) {
			tbv_xmit_unget(qp, rail, frame, loopback);	/* UD: never a payload frame */
			return -EAGAIN;
		}
	}

	switch (wqe->opcode) {
	case IB_WR_RDMA_READ:
		/* the rest of the part: a rewind asks again from a lost response on */
		h.kind = TBV_RK_READ_REQ;
		h.flags = TBV_RF_FIRST | TBV_RF_LAST;
		h.va = wqe->remote_addr + off;
		h.rkey = wqe->rkey;
		h.len = min_t(u64, wqe->length, (u64)tbv_read_part_end(wqe->npkts, wqe->read_part,
									 qp->req.pkt) * full) - off;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		h.kind = TBV_RK_ATOMIC;
		h.flags = TBV_RF_FIRST | TBV_RF_LAST;
		h.va = wqe->remote_addr;
		h.rkey = wqe->rkey;
		h.len = TBV_ATOMIC_LEN;
		h.aux = wqe->opcode == IB_WR_ATOMIC_CMP_AND_SWP ? TBV_ATOMIC_CMP_SWP :
								   TBV_ATOMIC_FETCH_ADD;
		h.payload_len = TBV_ATOMIC_REQ_PAYLOAD;
		break;
	case IB_WR_FLUSH:
		h.kind = TBV_RK_FLUSH;
		h.flags = TBV_RF_FIRST | TBV_RF_LAST | TBV_RF_ACK_REQ;
		h.va = wqe->remote_addr;
		h.rkey = wqe->rkey;
		h.len = wqe->flush_len;
		h.aux = wqe->flush_aux;
		break;
	case IB_WR_ATOMIC_WRITE:
		h.kind = TBV_RK_ATOMIC_WRITE;	/* its 8 bytes: the payload, as a WRITE's */
		h.va = wqe->remote_addr;
		h.rkey = wqe->rkey;
		h.len = TBV_ATOMIC_LEN;
		break;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		h.kind = TBV_RK_WRITE;
		if (qp->req.pkt == 0) {
			h.va = wqe->remote_addr;
			h.rkey = wqe->rkey;
			h.len = wqe->length;
		}
		break;
	default:
		h.kind = is_ud ? TBV_RK_UD_SEND : TBV_RK_SEND;
		break;
	}
	if (h.kind != TBV_RK_READ_REQ && h.kind != TBV_RK_ATOMIC && h.kind != TBV_RK_FLUSH) {
		last = qp->req.pkt + 1 == wqe->npkts;
		h.payload_len = data_len;
		h.flags = (qp->req.pkt == 0 ? TBV_RF_FIRST : 0) | (last ? TBV_RF_LAST : 0);
		if (last && (wqe->opcode == IB_WR_SEND_WITH_IMM ||
			     wqe->opcode == IB_WR_RDMA_WRITE_WITH_IMM)) {
			h.flags |= TBV_RF_IMM;
			h.imm = wqe->imm;
		}
		if (last && wqe->opcode == IB_WR_SEND_WITH_INV) {
			h.flags |= TBV_RF_INV;
			h.rkey = wqe->inv_rkey;
		}
		if (last && (wqe->send_flags & IB_SEND_SOLICITED) && h.kind != TBV_RK_ATOMIC_WRITE)
			h.flags |= TBV_RF_SOLICITED;
		if (type == IB_QPT_RC && (last || (qp->req.pkt + 1) % TBV_ACK_EVERY == 0))
			h.flags |= TBV_RF_ACK_REQ;
	}
	if (is_ud) {
		h.flags |= TBV_RF_GRH;
		h.dst_qpn = wqe->remote_qpn;
		h.qkey = wqe->remote_qkey;
		memcpy(h.sgid, wqe->ah.sgid, 16);
		memcpy(h.dgid, wqe->ah.dgid, 16);
	}

	frame->size = tbv_rdma_encode(frame->data, &h);
	if (h.kind == TBV_RK_ATOMIC) {
		u8 *payload = (u8 *)frame->data + TBV_RDMA_HDR_LEN;

		tbv_rdma_put_u64(payload, h.aux == TBV_ATOMIC_CMP_SWP ? wqe->swap :
								wqe->compare_add);
		tbv_rdma_put_u64(payload + 8, h.aux == TBV_ATOMIC_CMP_SWP ? wqe->compare_add : 0);
	} else if (h.payload_len) {
		u8 *payload = (u8 *)frame->data + tbv_rdma_hdr_len(h.flags);

		if (payload_frame) {
			/* never UD, so never multicast: no local copy */
			payload_frame->size = h.payload_len;
			payload = payload_frame->data;
		}
		if (wqe->is_inline) {
			memcpy(payload, (u8 *)wqe->sge + off, h.payload_len);
		} else if (!payload_frame || loopback ||
			   tbv_sge_page(qp, wqe->sge, wqe->num_sge, off, payload_frame)) {
			ret = tbv_sge_copy(qp, wqe->sge, wqe->num_sge, off, payload,
					   h.payload_len, false);
			if (ret) {
				tbv_xmit_unget(qp, rail, frame, loopback);
				if (payload_frame)
					tbv_xmit_unget(qp, rail, payload_frame, loopback);
				if (local)
					tbv_xmit_unget(qp, lrail, local, true);
				return ret;
			}
		}
	}
	if (local) {
		memcpy(local->data, frame->data, frame->size);
		local->size = frame->size;
		tbv_xmit_send(qp, lrail, local, true);
	}
	if (payload_frame)
		tbv_xmit_send_split(qp, rail, frame, payload_frame, loopback);
	else
		tbv_xmit_send(qp, rail, frame, loopback);
	return 0;
}

/*
 * The WQE failed locally (a protection or length error, a failed bind): nothing
 * after it starts. UC and UD completed everything before it already, so the
 * QP fails now; RC lets the WQEs before it complete first (their requests are
 * out), and the completer fails the QP when it reaches this one (the caller
 * asks for that: TBV_REQ_RETIRE), so the first error completion the
 * application sees is the real one, not a flush.
 */
static void tbv_req_fail_wqe(struct tbv_qp *qp, struct tbv_send_wqe *wqe,
			     enum ib_wc_status status)
{
	wqe->error = status;
	if (qp->ibqp.qp_type != IB_QPT_RC)
		qp->state = IB_QPS_ERR;
}

/*
 * A window bind or a local invalidation, executed when the requester reaches
 * it: after every WQE before it has started, before any after it (sq_lock
 * held). A failure fails the WQE and the QP, like a local protection error.
 */
static void tbv_req_local(struct tbv_qp *qp, struct tbv_send_wqe *wqe)
{
	enum ib_wc_status status;

	if (wqe->opcode == IB_WR_BIND_MW)
		status = tbv_mw_bind(qp, wqe);
	else
		status = tbv_mw_invalidate(qp, wqe->inv_rkey, false) ? IB_WC_LOC_PROT_ERR :
								     IB_WC_SUCCESS;
	if (status != IB_WC_SUCCESS)
		tbv_req_fail_wqe(qp, wqe, status);
}

/*
 * The packet of the WQE at sq_next whose PSN the window must hold: the next
 * one, or for a READ request the last response it asks for (a READ in one
 * part longer than the window, max_rd_atomic 1, goes once nothing is out).
 */
static u32 tbv_req_window_pkt(const struct tbv_qp *qp, const struct tbv_send_wqe *wqe)
{
	if (wqe->opcode != IB_WR_RDMA_READ)
		return qp->req.pkt;
	return min(tbv_read_part_end(wqe->npkts, wqe->read_part, qp->req.pkt) - 1,
		   qp->req.pkt + TBV_TX_WINDOW - 1);
}

/* Can the WQE at sq_next start now? Assigns its PSNs if so (sq_lock held). */
static bool tbv_req_start_wqe(struct tbv_qp *qp, struct tbv_send_wqe *wqe)
{
	if (qp->req.draining || qp->state != IB_QPS_RTS)
		return false;
	if ((wqe->send_flags & IB_SEND_FENCE) && qp->req.reads_outstanding)
		return false;
	if (wqe->error || wqe->unsent || tbv_wr_is_local(wqe->opcode)) {
		/* no PSN: it retires once everything before it is acknowledged */
		wqe->first_psn = qp->req.psn;
		wqe->npkts = 0;
		wqe->read_slots = 0;
		qp->req.sq_started++;
		qp->req.pkt = 0;
		if (wqe->error)		/* refused when copied from a ring: fails in order */
			tbv_req_fail_wqe(qp, wqe, wqe->error);
		else if (!wqe->unsent)
			tbv_req_local(qp, wqe);
		return true;
	}
	wqe->npkts = tbv_rdma_npkts(wqe->length, tbv_qp_full(qp));	/* an atomic's 8 bytes: one */
	wqe->read_part = tbv_read_part_pkts(wqe->npkts, wqe->opcode == IB_WR_RDMA_READ &&
							 qp->max_rd_atomic >= 2);
	/* a READ in parts may have two READ_REQs out, so two jobs at the responder */
	wqe->read_slots = !tbv_wqe_wants_response(wqe) ? 0 : wqe->read_part < wqe->npkts ? 2 : 1;
	if (wqe->read_slots) {
		if (qp->req.reads_outstanding + wqe->read_slots > max(qp->max_rd_atomic, 1u))
			return false;
		qp->req.reads_outstanding += wqe->read_slots;
	}
	wqe->first_psn = qp->req.psn;
	wqe->read_pkts_done = 0;
	qp->req.psn = tbv_psn_add(qp->req.psn, wqe->npkts);
	qp->req.sq_started++;
	qp->req.pkt = 0;
	return true;
}

/*
 * Send what the SQ allows (sq_lock held), at most *@budget packets and WQEs
 * done without one, each taken off *@budget; a ring SQ's WQEs are fetched
 * only as far as that budget reaches. Returns TBV_REQ_SENT if RC packets
 * went out (the completer's ACK timer must run), TBV_REQ_RETIRE when an RC
 * WQE needs no more packets before the completer has looked at it again (a
 * local operation, or a WQE that failed locally): the transmitter then runs
 * tbv_comp_retire() and calls again, and TBV_REQ_MORE when the budget ran
 * out with work the QP could do now: the transmitter must run again.
 */
unsigned int tbv_req_output(struct tbv_qp *qp, unsigned int *budget)
{
	bool reliable = qp->ibqp.qp_type == IB_QPT_RC;
	unsigned int done = 0;
	bool unfetched = false;

	if (qp->state == IB_QPS_RTS || qp->state == IB_QPS_SQD)
		unfetched = tbv_req_fetch(qp, *budget);
	while (qp->req.sq_next != qp->sq.prod && !qp->comp.rnr_waiting) {
		struct tbv_send_wqe *wqe = tbv_wq_slot(&qp->sq, qp->req.sq_next);
		int ret;

		if (qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD)
			break;
		if (!*budget)
			return done | TBV_REQ_MORE;
		/* failed when started: nothing at or after it is sent again (a fresh one fails below) */
		if (wqe->error && qp->req.sq_next != qp->req.sq_started)
			break;
		if (qp->req.sq_next == qp->req.sq_started && !tbv_req_start_wqe(qp, wqe))
			break;
		if (wqe->error || qp->state == IB_QPS_ERR) {
			/* a local operation failed: the WQE fails in order */
			if (reliable && wqe->error)
				done |= TBV_REQ_RETIRE;
			break;
		}
		if (tbv_wr_is_local(wqe->opcode) || wqe->unsent) {
			/* executed (or, unsent, skipped) when started; a rewind passes over it */
			(*budget)--;
			qp->req.sq_next++;
			qp->req.pkt = 0;
			if (reliable)
				return done | TBV_REQ_RETIRE;
			qp->sq.cons++;
			tbv_send_wqe_complete(qp, wqe, IB_WC_SUCCESS);
			continue;
		}
		if (reliable && tbv_psn_diff(tbv_psn_add(wqe->first_psn, tbv_req_window_pkt(qp, wqe)),
					     qp->comp.acked_psn) >= TBV_TX_WINDOW)
			break;
		ret = tbv_req_packet(qp, wqe);
		if (ret == -EAGAIN)
			break;
		if (ret) {
			tbv_req_fail_wqe(qp, wqe, ret == -EINVAL ? IB_WC_LOC_LEN_ERR :
								  IB_WC_LOC_PROT_ERR);
			if (reliable)
				done |= TBV_REQ_RETIRE;
			break;
		}
		if (reliable)
			done |= TBV_REQ_SENT;
		(*budget)--;
		qp->req.pkt++;
		if (wqe->opcode == IB_WR_RDMA_READ)	/* one request asks for the part */
			qp->req.pkt = tbv_read_part_end(wqe->npkts, wqe->read_part, qp->req.pkt - 1);
		if (qp->req.pkt < wqe->npkts)
			continue;
		qp->req.sq_next++;
		qp->req.pkt = 0;
		if (!reliable) {
			/* UC and UD complete once sent, in order. */
			qp->sq.cons++;
			tbv_send_wqe_complete(qp, wqe, IB_WC_SUCCESS);
		}
	}
	/* all it fetched is out, and the ring holds more that the budget left there */
	if (unfetched && qp->req.sq_next == qp->sq.prod)
		done |= TBV_REQ_MORE;
	return done;
}

/* The started, unretired WQE holding @psn: true and its SQ index in *@idx (sq_lock held). */
bool tbv_sq_find_psn(struct tbv_qp *qp, u32 psn, u32 *idx)
{
	u32 i;

	for (i = qp->sq.cons; i != qp->req.sq_started; i++) {
		struct tbv_send_wqe *wqe = tbv_wq_slot(&qp->sq, i);
		s32 into = tbv_psn_diff(psn, wqe->first_psn);

		if (into >= 0 && into < wqe->npkts) {
			*idx = i;
			return true;
		}
	}
	return false;
}

/* Resend from @psn: point the requester at the WQE holding it (sq_lock held). */
void tbv_req_rewind(struct tbv_qp *qp, u32 psn)
{
	struct tbv_send_wqe *wqe;
	u32 i;

	tbv_stripe_tx_restart(qp);
	if (!tbv_sq_find_psn(qp, psn, &i)) {
		qp->req.sq_next = qp->req.sq_started;
		qp->req.pkt = 0;
		return;
	}
	wqe = tbv_wq_slot(&qp->sq, i);
	qp->req.sq_next = i;
	qp->req.pkt = tbv_psn_diff(psn, wqe->first_psn);
}

/* ---- The requester's state (sq_lock held) ---- */

/* The QP is reset: nothing is started or outstanding. */
void tbv_req_reset(struct tbv_qp *qp)
{
	qp->req.sq_next = 0;
	qp->req.sq_started = 0;
	qp->req.pkt = 0;
	qp->req.reads_outstanding = 0;
	qp->req.sq_fetch = qp->sq_ring.index;	/* a ring SQ's consumer, where RESET left it */
}

/* modify_qp to @next (resp_lock held too): the first PSN; SQD stops starting WQEs. */
void tbv_req_modify(struct tbv_qp *qp, const struct ib_qp_attr *attr, int mask,
		    enum ib_qp_state next)
{
	if (mask & IB_QP_SQ_PSN)
		qp->req.psn = attr->sq_psn;
	qp->req.draining = next == IB_QPS_SQD;
}

/* WQEs before sq.cons are retired: a rewound requester never resends them. */
void tbv_req_retired(struct tbv_qp *qp)
{
	if ((s32)(qp->req.sq_next - qp->sq.cons) < 0) {
		qp->req.sq_next = qp->sq.cons;
		qp->req.pkt = 0;
	}
}

/* A READ or atomic is answered, or failed: it no longer counts against max_rd_atomic. */
void tbv_req_read_done(struct tbv_qp *qp, const struct tbv_send_wqe *wqe)
{
	qp->req.reads_outstanding -= wqe->read_slots;
}

/* Every WQE was flushed: nothing is started or outstanding any more. */
void tbv_req_flushed(struct tbv_qp *qp)
{
	qp->req.sq_next = qp->sq.prod;
	qp->req.sq_started = qp->sq.prod;
	qp->req.pkt = 0;
	qp->req.reads_outstanding = 0;
}
