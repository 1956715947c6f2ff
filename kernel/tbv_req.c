// SPDX-License-Identifier: GPL-2.0
/*
 * The requester and the QP's transmit path: post_send turns work requests into
 * send WQEs; tbv_qp_tx() turns WQEs, pending ACKs and READ responses into
 * packets, one ring frame each, taken from the rail's preallocated pool.
 * RC keeps WQEs until acknowledged and resends from the first lost PSN (go
 * back N, never a whole message); UC and UD complete on transmission.
 */
#include <linux/uaccess.h>

#include "tbv.h"

/* ---- Frames ---- */

/*
 * The rail a QP's next packet leaves on: loopback frames all come from rail 0;
 * a striped QP's move from rail to rail (the transmitter, tx_lock held).
 */
static struct tbv_rail *tbv_tx_rail(struct tbv_qp *qp, bool loopback)
{
	if (loopback)
		return &qp->dev->link->rails[0];
	return qp->stripe_rx ? tbv_stripe_tx_rail(qp) : qp->rail;
}

/*
 * A free TX frame, or NULL with the QP queued to be kicked when one frees up.
 * A frame for the wire (not @loopback) also needs a credit.
 */
static struct tbv_frame *tbv_frame_get(struct tbv_qp *qp, struct tbv_rail *rail,
				       enum tbv_tx_use use, bool loopback)
{
	return tbv_pool_get(rail, use, !loopback, &qp->tx_waiter,
			    READ_ONCE(qp->state) != IB_QPS_ERR);
}

static void tbv_frame_send(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *frame,
			   bool loopback)
{
	struct tbv_dev *dev = qp->dev;

	frame->sof = TBV_PDF_SOF;
	frame->eof = TBV_PDF_EOF;
	if (loopback) {
		spin_lock_bh(&dev->loop_lock);
		list_add_tail(&frame->list, &dev->loop_frames);
		spin_unlock_bh(&dev->loop_lock);
		queue_work(tbv_wq, &dev->loop_work);
		return;
	}
	if (qp->stripe_rx)
		tbv_stripe_tx_sent(qp, frame);
	tbv_pool_send(rail, frame);
}

/* Frames to our own GIDs: received here, in process context with BH off. */
void tbv_loopback_work(struct work_struct *work)
{
	struct tbv_dev *dev = container_of(work, struct tbv_dev, loop_work);
	struct tbv_rail *rail = &dev->link->rails[0];
	struct tbv_frame *frame;

	for (;;) {
		spin_lock_bh(&dev->loop_lock);
		frame = list_first_entry_or_null(&dev->loop_frames, struct tbv_frame, list);
		if (frame)
			list_del(&frame->list);
		spin_unlock_bh(&dev->loop_lock);
		if (!frame)
			return;
		local_bh_disable();
		tbv_rdma_rx(dev, frame->data, frame->size, true);
		local_bh_enable();
		tbv_pool_put(rail, frame, false);
		cond_resched();
	}
}

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

/* A send WQE is done: a completion when signaled, and always for an error. */
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

	if (wqe->signaled || status != IB_WC_SUCCESS)
		tbv_cq_post(qp->scq, &wc, false);
}

/* Flush every WQE not completed yet (sq_lock not held). */
void tbv_sq_flush(struct tbv_qp *qp)
{
	spin_lock_bh(&qp->sq_lock);
	while (qp->sq.cons != qp->sq.prod) {
		struct tbv_send_wqe *wqe = tbv_wq_slot(&qp->sq, qp->sq.cons);

		tbv_send_wqe_complete(qp, wqe, wqe->error ?: IB_WC_WR_FLUSH_ERR);
		qp->sq.cons++;
	}
	qp->sq_next = qp->sq.prod;
	qp->sq_started = qp->sq.prod;
	qp->req_pkt = 0;
	qp->reads_outstanding = 0;
	qp->rnr_waiting = false;
	timer_delete(&qp->timer);
	spin_unlock_bh(&qp->sq_lock);
}

/* ---- post_send ---- */

static bool tbv_opcode_ok(enum ib_qp_type type, u32 op)
{
	switch (op) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		return true;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_SEND_WITH_INV:
	case IB_WR_LOCAL_INV:
		return type == IB_QPT_RC || type == IB_QPT_UC;
	case IB_WR_BIND_MW:
		return type == IB_QPT_RC || type == IB_QPT_UC;
	case IB_WR_RDMA_READ:
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return type == IB_QPT_RC;
	case IB_WR_FLUSH:
	case IB_WR_ATOMIC_WRITE:
		/* only where the kernel's verbs have them (tbv_compat.h) */
		return type == IB_QPT_RC && TBV_FLUSH_VERBS;
	default:
		return false;	/* masked atomics, LSO, fast registration */
	}
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

	spin_lock_bh(&qp->sq_lock);
	if (qp->sq.prod - qp->sq.cons >= qp->sq.size) {
		spin_unlock_bh(&qp->sq_lock);
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
	spin_unlock_bh(&qp->sq_lock);
	return 0;
}

/* Posting is allowed from RTS on (and in SQD, SQE and ERR, where WQEs flush). */
bool tbv_post_send_allowed(struct tbv_qp *qp)
{
	enum ib_qp_state state = READ_ONCE(qp->state);

	return state != IB_QPS_RESET && state != IB_QPS_INIT && state != IB_QPS_RTR;
}

/* After posting: flush in the error state, else start the transmitter. */
void tbv_post_send_done(struct tbv_qp *qp)
{
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		tbv_sq_flush(qp);
	else
		tbv_qp_kick(qp);
}

/* A kernel work request in the driver's own terms. */
static void tbv_post_from_ib(struct tbv_post_wr *p, const struct ib_send_wr *wr)
{
	*p = (struct tbv_post_wr){
		.wr_id = wr->wr_id,
		.opcode = wr->opcode,
		.send_flags = wr->send_flags,
		.sge = wr->sg_list,
		.num_sge = wr->num_sge,
	};
	switch (wr->opcode) {
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		p->imm = be32_to_cpu(wr->ex.imm_data);	/* a number on the wire */
		break;
	case IB_WR_SEND_WITH_INV:
	case IB_WR_LOCAL_INV:
		p->inv_rkey = wr->ex.invalidate_rkey;
		break;
	default:
		break;
	}
	if (wr->opcode == IB_WR_RDMA_WRITE || wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_READ || wr->opcode == IB_WR_ATOMIC_WRITE) {
		p->remote_addr = rdma_wr(wr)->remote_addr;
		p->rkey = rdma_wr(wr)->rkey;
	} else if (tbv_wr_is_atomic(wr->opcode)) {
		p->remote_addr = atomic_wr(wr)->remote_addr;
		p->rkey = atomic_wr(wr)->rkey;
		p->swap = atomic_wr(wr)->swap;
		p->compare_add = atomic_wr(wr)->compare_add;
	}
}

int tbv_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	bool is_ud = ibqp->qp_type == IB_QPT_UD || ibqp->qp_type == IB_QPT_GSI;
	u8 inline_buf[TBV_MAX_INLINE];
	struct tbv_post_wr p;
	int ret = 0;

	if (!tbv_post_send_allowed(qp)) {
		*bad_wr = wr;
		return -EINVAL;
	}
	for (; wr; wr = wr->next) {
		/* no kernel verb binds windows: the user's post method does */
		if (wr->num_sge < 0 || wr->opcode == IB_WR_BIND_MW) {
			ret = -EINVAL;
		} else {
			tbv_post_from_ib(&p, wr);
			if (is_ud) {
				p.ah = ud_wr(wr)->ah;
				p.remote_qpn = ud_wr(wr)->remote_qpn;
				p.remote_qkey = ud_wr(wr)->remote_qkey;
			}
			ret = tbv_post_one(qp, &p, inline_buf);
		}
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	tbv_post_send_done(qp);
	return ret;
}

/* ---- Packets ---- */

unsigned long tbv_ack_timeout_jiffies(struct tbv_qp *qp)
{
	u64 usec = tbv_ack_timeout_usec(qp->timeout);

	if (!usec)
		usec = 10 * USEC_PER_SEC;	/* "infinite": still probe now and then */
	return max(usecs_to_jiffies(usec), msecs_to_jiffies(TBV_MIN_ACK_TIMEOUT_MS));
}

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
	struct tbv_rail *rail = tbv_tx_rail(qp, loopback), *lrail = tbv_tx_rail(qp, true);
	struct tbv_frame *local = NULL;
	u32 off = qp->req_pkt * TBV_RDMA_MAX_PAYLOAD;
	struct tbv_rdma_hdr h = {
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->dest_qpn,
		.psn = tbv_psn_add(wqe->first_psn, qp->req_pkt),
	};
	struct tbv_frame *frame;
	bool last;
	int ret;

	frame = tbv_frame_get(qp, rail, TBV_TX_REQUEST, loopback);
	if (!frame)
		return -EAGAIN;
	if (mcast) {
		local = tbv_frame_get(qp, lrail, TBV_TX_REQUEST, true);
		if (!local) {
			tbv_pool_unget(rail, frame, !loopback);
			return -EAGAIN;
		}
	}

	switch (wqe->opcode) {
	case IB_WR_RDMA_READ:
		h.kind = TBV_RK_READ_REQ;
		h.flags = TBV_RF_FIRST | TBV_RF_LAST;
		h.va = wqe->remote_addr + off;
		h.rkey = wqe->rkey;
		h.len = wqe->length - off;
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
		if (qp->req_pkt == 0) {
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
		last = qp->req_pkt + 1 == wqe->npkts;
		h.payload_len = tbv_rdma_pkt_payload(wqe->length, qp->req_pkt);
		h.flags = (qp->req_pkt == 0 ? TBV_RF_FIRST : 0) | (last ? TBV_RF_LAST : 0);
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
		if (type == IB_QPT_RC && (last || (qp->req_pkt + 1) % TBV_ACK_EVERY == 0))
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

		if (wqe->is_inline) {
			memcpy(payload, (u8 *)wqe->sge + off, h.payload_len);
		} else {
			ret = tbv_sge_copy(qp, wqe->sge, wqe->num_sge, off, payload,
					   h.payload_len, false);
			if (ret) {
				tbv_pool_unget(rail, frame, !loopback);
				if (local)
					tbv_pool_unget(lrail, local, false);
				return ret;
			}
		}
	}
	if (local) {
		memcpy(local->data, frame->data, frame->size);
		local->size = frame->size;
		tbv_frame_send(qp, lrail, local, true);
	}
	tbv_frame_send(qp, rail, frame, loopback);
	return 0;
}

/*
 * The WQE failed locally (a protection or length error, a failed bind): nothing
 * after it starts. UC and UD completed everything before it already, so the
 * QP fails now; RC lets the WQEs before it complete first (their requests are
 * out), and the completer fails the QP when it reaches this one, so the first
 * error completion the application sees is the real one, not a flush.
 */
static void tbv_req_fail_wqe(struct tbv_qp *qp, struct tbv_send_wqe *wqe,
			     enum ib_wc_status status)
{
	wqe->error = status;
	if (qp->ibqp.qp_type == IB_QPT_RC)
		tbv_comp_retire(qp);
	else
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

/* Can the WQE at sq_next start now? Assigns its PSNs if so (sq_lock held). */
static bool tbv_req_start_wqe(struct tbv_qp *qp, struct tbv_send_wqe *wqe)
{
	if (qp->sq_draining || qp->state != IB_QPS_RTS)
		return false;
	if ((wqe->send_flags & IB_SEND_FENCE) && qp->reads_outstanding)
		return false;
	if (tbv_wr_is_local(wqe->opcode)) {
		/* no PSN: it retires once everything before it is acknowledged */
		wqe->first_psn = qp->req_psn;
		wqe->npkts = 0;
		qp->sq_started++;
		qp->req_pkt = 0;
		tbv_req_local(qp, wqe);
		return true;
	}
	if (tbv_wqe_wants_response(wqe)) {
		if (qp->reads_outstanding >= max(qp->max_rd_atomic, 1u))
			return false;
		qp->reads_outstanding++;
	}
	wqe->first_psn = qp->req_psn;
	wqe->npkts = tbv_rdma_npkts(wqe->length);	/* an atomic's 8 bytes: one */
	wqe->read_pkts_done = 0;
	qp->req_psn = tbv_psn_add(qp->req_psn, wqe->npkts);
	qp->sq_started++;
	qp->req_pkt = 0;
	return true;
}

/* Send what the SQ allows; sq_lock held. */
static void tbv_req_tx(struct tbv_qp *qp)
{
	bool reliable = qp->ibqp.qp_type == IB_QPT_RC;
	bool sent = false;

	while (qp->sq_next != qp->sq.prod && !qp->rnr_waiting) {
		struct tbv_send_wqe *wqe = tbv_wq_slot(&qp->sq, qp->sq_next);
		int ret;

		if (qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD)
			break;
		if (wqe->error)
			break;		/* failed locally: nothing at or after it is sent again */
		if (qp->sq_next == qp->sq_started && !tbv_req_start_wqe(qp, wqe))
			break;
		if (wqe->error || qp->state == IB_QPS_ERR)
			break;		/* a local operation failed: the WQE fails in order */
		if (tbv_wr_is_local(wqe->opcode)) {
			/* executed when started; a rewind passes over it */
			qp->sq_next++;
			qp->req_pkt = 0;
			if (!reliable) {
				qp->sq.cons++;
				tbv_send_wqe_complete(qp, wqe, IB_WC_SUCCESS);
			} else {
				tbv_comp_retire(qp);
			}
			continue;
		}
		if (reliable && tbv_psn_diff(tbv_psn_add(wqe->first_psn, qp->req_pkt),
					     qp->acked_psn) >= TBV_TX_WINDOW)
			break;
		ret = tbv_req_packet(qp, wqe);
		if (ret == -EAGAIN)
			break;
		if (ret) {
			tbv_req_fail_wqe(qp, wqe, ret == -EINVAL ? IB_WC_LOC_LEN_ERR :
								  IB_WC_LOC_PROT_ERR);
			break;
		}
		sent = true;
		qp->req_pkt++;
		if (wqe->opcode == IB_WR_RDMA_READ)
			qp->req_pkt = wqe->npkts;	/* one request asks for them all */
		if (qp->req_pkt < wqe->npkts)
			continue;
		qp->sq_next++;
		qp->req_pkt = 0;
		if (!reliable) {
			/* UC and UD complete once sent, in order. */
			qp->sq.cons++;
			tbv_send_wqe_complete(qp, wqe, IB_WC_SUCCESS);
		}
	}
	if (reliable && sent && !timer_pending(&qp->timer))
		mod_timer(&qp->timer, jiffies + tbv_ack_timeout_jiffies(qp));
}

/* The started, unretired WQE holding @psn: true and its SQ index in *@idx (sq_lock held). */
bool tbv_sq_find_psn(struct tbv_qp *qp, u32 psn, u32 *idx)
{
	u32 i;

	for (i = qp->sq.cons; i != qp->sq_started; i++) {
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
		qp->sq_next = qp->sq_started;
		qp->req_pkt = 0;
		return;
	}
	wqe = tbv_wq_slot(&qp->sq, i);
	qp->sq_next = i;
	qp->req_pkt = tbv_psn_diff(psn, wqe->first_psn);
}

/* ---- Responder output: ACKs and READ responses (resp_lock held) ---- */

static int tbv_resp_tx_ack(struct tbv_qp *qp)
{
	struct tbv_rail *rail = tbv_tx_rail(qp, qp->loopback);
	struct tbv_rdma_hdr h = {
		.kind = TBV_RK_ACK,
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->dest_qpn,
		.psn = qp->ack_psn,
		.syndrome = qp->ack_syndrome,
		.aux = qp->ack_aux,
	};
	struct tbv_frame *frame = tbv_frame_get(qp, rail, TBV_TX_ANSWER, qp->loopback);

	if (!frame)
		return -EAGAIN;
	frame->size = tbv_rdma_encode(frame->data, &h);
	qp->ack_pending = false;
	tbv_frame_send(qp, rail, frame, qp->loopback);
	return 0;
}

static int tbv_resp_tx_read(struct tbv_qp *qp, struct tbv_read_job *job)
{
	struct tbv_rail *rail = tbv_tx_rail(qp, qp->loopback);
	u32 off = job->sent * TBV_RDMA_MAX_PAYLOAD;
	struct tbv_rdma_hdr h = {
		.kind = TBV_RK_READ_RESP,
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->dest_qpn,
		.psn = tbv_psn_add(job->psn, job->sent),
		.payload_len = tbv_rdma_pkt_payload(job->len, job->sent),
		.flags = (job->sent == 0 ? TBV_RF_FIRST : 0) |
			 (job->sent + 1 == job->npkts ? TBV_RF_LAST : 0),
	};
	struct tbv_frame *frame = tbv_frame_get(qp, rail, TBV_TX_ANSWER, qp->loopback);

	if (!frame)
		return -EAGAIN;
	if (job->atomic) {
		h.kind = TBV_RK_ATOMIC_RESP;
		h.payload_len = TBV_ATOMIC_RESP_PAYLOAD;
		frame->size = tbv_rdma_encode(frame->data, &h);
		tbv_rdma_put_u64((u8 *)frame->data + TBV_RDMA_HDR_LEN, job->atomic_orig);
		job->sent++;
		tbv_frame_send(qp, rail, frame, qp->loopback);
		return 0;
	}
	frame->size = tbv_rdma_encode(frame->data, &h);
	if (h.payload_len &&
	    tbv_mr_remote(qp, job->rkey, job->va + off, h.payload_len, IB_ACCESS_REMOTE_READ,
			  (u8 *)frame->data + TBV_RDMA_HDR_LEN, h.payload_len, false)) {
		/* deregistered meanwhile: stop answering; the requester times out */
		tbv_pool_unget(rail, frame, !qp->loopback);
		job->sent = job->npkts;
		return 0;
	}
	job->sent++;
	tbv_frame_send(qp, rail, frame, qp->loopback);
	return 0;
}

static void tbv_resp_tx(struct tbv_qp *qp)
{
	/*
	 * A refusal's NAK goes out after the responses still owed to the READs and
	 * atomics before it (the QP stops right after it): the requester must see
	 * them complete, then the refused request fail.
	 */
	bool nak_last = qp->resp_fatal && qp->read_count;

	if (qp->ack_pending && !nak_last && tbv_resp_tx_ack(qp))
		return;
	while (qp->read_count) {
		struct tbv_read_job *job = &qp->reads[qp->read_head];

		if (tbv_resp_tx_read(qp, job))
			return;
		if (job->sent == job->npkts) {
			qp->read_head = (qp->read_head + 1) % TBV_MAX_RD_ATOMIC;
			qp->read_count--;
		}
	}
	if (nak_last && qp->ack_pending)
		tbv_resp_tx_ack(qp);
}

/* ---- The QP's transmitter ---- */

/* The responder refused a request and its NAK is out: the QP goes to error. */
static void tbv_resp_fatal(struct tbv_qp *qp, u8 syndrome)
{
	spin_lock(&qp->sq_lock);
	spin_lock(&qp->resp_lock);
	if (qp->state == IB_QPS_ERR || qp->state == IB_QPS_RESET || !qp->resp_fatal)
		syndrome = 0;	/* already there, or reset (and maybe re-armed) meanwhile */
	else
		qp->state = IB_QPS_ERR;
	spin_unlock(&qp->resp_lock);
	spin_unlock(&qp->sq_lock);
	if (syndrome == TBV_NAK_ACCESS)
		tbv_qp_async_event(qp, IB_EVENT_QP_ACCESS_ERR);
	else if (syndrome == TBV_NAK_INVALID)
		tbv_qp_async_event(qp, IB_EVENT_QP_REQ_ERR);
	else if (syndrome)
		tbv_qp_async_event(qp, IB_EVENT_QP_FATAL);
}

static void tbv_qp_tx(struct tbv_qp *qp)
{
	struct tbv_link *link = qp->dev->link;
	u8 fatal = 0;

	if (!qp->rail || !READ_ONCE(link->data_up))
		return;
	spin_lock(&qp->resp_lock);
	if (qp->state != IB_QPS_ERR && qp->state != IB_QPS_RESET) {
		tbv_resp_tx(qp);
		if (qp->resp_fatal && !qp->ack_pending)
			fatal = qp->resp_fatal;
	}
	spin_unlock(&qp->resp_lock);
	if (fatal)
		tbv_resp_fatal(qp, fatal);

	spin_lock(&qp->sq_lock);
	tbv_req_tx(qp);
	spin_unlock(&qp->sq_lock);
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		tbv_qp_error(qp);
}

/*
 * Run the transmitter now, in this context, unless it runs elsewhere: then
 * that run sees TBV_TX_PENDING and goes round once more.
 */
void tbv_qp_kick(struct tbv_qp *qp)
{
	set_bit(TBV_TX_PENDING, &qp->tx_bits);
	do {
		if (!spin_trylock_bh(&qp->tx_lock))
			return;
		clear_bit(TBV_TX_PENDING, &qp->tx_bits);
		tbv_qp_tx(qp);
		spin_unlock_bh(&qp->tx_lock);
	} while (test_bit(TBV_TX_PENDING, &qp->tx_bits));
}

void tbv_qp_tx_work(struct work_struct *work)
{
	tbv_qp_kick(container_of(work, struct tbv_qp, tx_waiter.work));
}

/* ---- Retransmission timer ---- */

void tbv_qp_timer(struct timer_list *t)
{
	struct tbv_qp *qp = timer_container_of(qp, t, timer);
	struct tbv_send_wqe *failed = NULL;

	spin_lock_bh(&qp->sq_lock);
	if (qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD) {
		spin_unlock_bh(&qp->sq_lock);
		return;
	}
	if (qp->rnr_waiting) {
		qp->rnr_waiting = false;
		tbv_req_rewind(qp, qp->acked_psn);
	} else if (qp->sq.cons != qp->sq_started) {
		/* timeout 0 is infinite (IBA): probe on, never give up */
		if (!qp->retries_left && qp->timeout) {
			failed = tbv_wq_slot(&qp->sq, qp->sq.cons);
			qp->sq.cons++;
			tbv_send_wqe_complete(qp, failed, IB_WC_RETRY_EXC_ERR);
			qp->state = IB_QPS_ERR;
		} else {
			if (qp->retries_left)
				qp->retries_left--;
			atomic64_inc(&qp->dev->rstats.retransmits);
			tbv_req_rewind(qp, tbv_comp_resume_psn(qp));
		}
	}
	spin_unlock_bh(&qp->sq_lock);
	if (failed) {
		tbv_qp_async_event(qp, IB_EVENT_QP_FATAL);
		tbv_qp_error(qp);
		return;
	}
	tbv_qp_kick(qp);
}
