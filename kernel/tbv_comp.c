// SPDX-License-Identifier: GPL-2.0
/*
 * The completer of an RC requester: ACKs and NAKs retire send WQEs in order,
 * READ responses and atomic results are placed into the WQE's scatter list
 * (one response stream, in request order), and errors the
 * responder reports fail the WQE they name and move the QP to error. It owns
 * the retransmission/RNR timer's arming; what runs when it expires is the
 * transmitter's (tbv_tx_timer(), which calls tbv_comp_timeout()). Everything
 * here runs under sq_lock; a lost packet is resent by rewinding the requester.
 */
#include "tbv.h"

/* ---- The retransmission/RNR timer ---- */

/* At QP creation: @expired runs when the timer does (the transmitter's, above us). */
void tbv_comp_init(struct tbv_qp *qp, void (*expired)(struct timer_list *t))
{
	timer_setup(&qp->comp.timer, expired, 0);
}

/* Reset or destroy: the timer is stopped and not running (no lock held). */
void tbv_comp_stop(struct tbv_qp *qp)
{
	timer_delete_sync(&qp->comp.timer);
}

/* The QP is reset (sq_lock held; tbv_comp_stop() follows, unlocked). */
void tbv_comp_reset(struct tbv_qp *qp)
{
	qp->comp.rnr_waiting = false;
	qp->comp.read_gap_asked = false;
}

/*
 * modify_qp from @cur to @next (resp_lock held too): nothing is acknowledged
 * before the first PSN; entering RTS refills the retry budgets.
 */
void tbv_comp_modify(struct tbv_qp *qp, const struct ib_qp_attr *attr, int mask,
		     enum ib_qp_state cur, enum ib_qp_state next)
{
	if (mask & IB_QP_SQ_PSN)
		qp->comp.acked_psn = attr->sq_psn;
	if (next == IB_QPS_RTS && cur != IB_QPS_RTS) {
		qp->comp.retries_left = qp->retry_cnt;
		qp->comp.rnr_left = qp->rnr_retry;
	}
}

/*
 * The wait for ACKs is counted in ticks of the timer, a quarter of the wait
 * each (tbv_ack_tick_ms()), each worth its length however late it came: a
 * tick that comes late means this CPU was away (a VM's vCPU descheduled, a
 * long stall) and the ACKs that arrived meanwhile have not been polled yet,
 * so the time it was away counts as one tick, not as a lost packet. Ticks
 * keep coming, so a lost packet is still resent after the wait's worth.
 */
static unsigned int tbv_ack_tick_of(struct tbv_qp *qp)
{
	return tbv_ack_tick_ms(tbv_ack_wait_ms(qp->timeout));
}

static void tbv_ack_tick(struct tbv_qp *qp)
{
	mod_timer(&qp->comp.timer, jiffies + msecs_to_jiffies(tbv_ack_tick_of(qp)));
}

/* The wait for ACKs starts over: something was acknowledged, or sent with nothing awaited. */
static void tbv_ack_wait_restart(struct tbv_qp *qp)
{
	qp->comp.ack_waited_ms = 0;
	tbv_ack_tick(qp);
}

/* RC packets went out (sq_lock held): their ACKs are awaited, if not already. */
void tbv_comp_sent(struct tbv_qp *qp)
{
	if (!timer_pending(&qp->comp.timer))
		tbv_ack_wait_restart(qp);
}

/* The first READ or atomic WQE still awaiting responses, at or after sq.cons; NULL if none. */
static struct tbv_send_wqe *tbv_first_read(struct tbv_qp *qp)
{
	u32 i;

	for (i = qp->sq.cons; i != qp->req.sq_started; i++) {
		struct tbv_send_wqe *wqe = tbv_wq_slot(&qp->sq, i);

		if (tbv_wqe_wants_response(wqe) && wqe->read_pkts_done < wqe->npkts)
			return wqe;
	}
	return NULL;
}

/* Retire every WQE acknowledged before acked_psn, in order (sq_lock held). */
void tbv_comp_retire(struct tbv_qp *qp)
{
	while (qp->sq.cons != qp->req.sq_started) {
		struct tbv_send_wqe *wqe = tbv_wq_slot(&qp->sq, qp->sq.cons);
		u32 last = tbv_psn_add(wqe->first_psn, wqe->npkts - 1);

		if (wqe->error) {
			/* failed locally, everything before it done: the flush reports it */
			qp->state = IB_QPS_ERR;
			break;
		}
		if (tbv_wqe_wants_response(wqe)) {
			if (wqe->read_pkts_done < wqe->npkts)
				break;
			tbv_req_read_done(qp, wqe);
		} else if (tbv_psn_diff(last, qp->comp.acked_psn) >= 0) {
			break;
		}
		qp->sq.cons++;
		tbv_send_wqe_complete(qp, wqe, IB_WC_SUCCESS);
	}
	/* A rewound requester never resends what is already acknowledged. */
	tbv_req_retired(qp);
	if (qp->sq.cons == qp->req.sq_started)
		timer_delete(&qp->comp.timer);
	else
		tbv_ack_wait_restart(qp);
}

/*
 * Where a retransmission starts: the first unacknowledged PSN, or earlier the
 * first READ response still missing (an ACK of a later request may have
 * overtaken the responses of a READ, which a lost response must not hide).
 */
static u32 tbv_comp_resume_psn(struct tbv_qp *qp)
{
	struct tbv_send_wqe *read = tbv_first_read(qp);
	u32 psn = qp->comp.acked_psn;

	if (read) {
		u32 want = tbv_psn_add(read->first_psn, read->read_pkts_done);

		if (tbv_psn_diff(want, psn) < 0)
			psn = want;
	}
	return psn;
}

/* Everything before @psn is acknowledged; true if that is news. */
static bool tbv_comp_advance(struct tbv_qp *qp, u32 psn)
{
	if (tbv_psn_diff(psn, qp->comp.acked_psn) <= 0 || tbv_psn_diff(psn, qp->req.psn) > 0)
		return false;
	qp->comp.acked_psn = psn;
	/* progress refills both retry budgets (7 RNR retries means infinite anyway) */
	qp->comp.retries_left = qp->retry_cnt;
	qp->comp.rnr_left = qp->rnr_retry;
	return true;
}

/* The WQE holding @psn, or NULL. */
static struct tbv_send_wqe *tbv_wqe_of_psn(struct tbv_qp *qp, u32 psn)
{
	u32 i;

	return tbv_sq_find_psn(qp, psn, &i) ? tbv_wq_slot(&qp->sq, i) : NULL;
}

static enum ib_wc_status tbv_nak_status(u8 syndrome)
{
	switch (syndrome) {
	case TBV_NAK_ACCESS:
		return IB_WC_REM_ACCESS_ERR;
	case TBV_NAK_OPERATIONAL:
		return IB_WC_REM_OP_ERR;
	default:
		return IB_WC_REM_INV_REQ_ERR;
	}
}

/*
 * @wqe fails with @status and the QP with it (sq_lock held; the caller
 * flushes the rest). If it is the oldest WQE it completes now; otherwise the
 * flush reports it, after the older ones (a local error keeps its own status).
 */
static void tbv_comp_fail_wqe(struct tbv_qp *qp, struct tbv_send_wqe *wqe,
			      enum ib_wc_status status)
{
	if (tbv_wq_slot(&qp->sq, qp->sq.cons) == wqe) {
		qp->sq.cons++;
		if (tbv_wqe_wants_response(wqe))
			tbv_req_read_done(qp, wqe);
		tbv_send_wqe_complete(qp, wqe, status);
	} else if (!wqe->error) {
		wqe->error = status;
	}
	qp->state = IB_QPS_ERR;
}

/* An ACK or NAK (RC); true if it failed a WQE: the caller then fails the QP. */
bool tbv_comp_ack(struct tbv_qp *qp, const struct tbv_rdma_hdr *h)
{
	struct tbv_send_wqe *wqe;
	bool fatal = false;

	spin_lock(&qp->sq_lock);
	if (qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD && qp->state != IB_QPS_SQE)
		goto out;
	switch (h->syndrome) {
	case TBV_ACK_OK:
		if (tbv_comp_advance(qp, tbv_psn_add(h->psn, 1)))
			tbv_comp_retire(qp);
		break;
	case TBV_NAK_SEQ:
		/* the responder wants h->psn next: all before it arrived */
		if (tbv_psn_diff(h->psn, qp->req.psn) > 0)
			break;
		tbv_comp_advance(qp, h->psn);
		tbv_comp_retire(qp);
		tbv_req_rewind(qp, h->psn);
		break;
	case TBV_NAK_RNR:
		wqe = tbv_wqe_of_psn(qp, h->psn);
		if (!wqe || qp->comp.rnr_waiting)
			break;
		tbv_comp_advance(qp, h->psn);
		tbv_comp_retire(qp);
		if (!qp->comp.rnr_left) {
			fatal = true;	/* the WQE is the oldest now: failed below */
			break;
		}
		if (qp->rnr_retry != 7)
			qp->comp.rnr_left--;
		qp->comp.rnr_waiting = true;
		qp->comp.acked_psn = h->psn;
		mod_timer(&qp->comp.timer, jiffies + usecs_to_jiffies(tbv_rnr_timer_usec(h->aux)));
		break;
	default:
		wqe = tbv_wqe_of_psn(qp, h->psn);
		if (!wqe)
			break;
		tbv_comp_advance(qp, h->psn);
		tbv_comp_retire(qp);
		fatal = true;
		break;
	}
	if (fatal) {
		/*
		 * The WQE holding h->psn fails, the rest flush. Normally it is the
		 * oldest now; if an older one is still owed READ responses (lost) or
		 * failed locally, that one reports first: a local error its own
		 * status (in the flush), a READ a flush, as IBA allows.
		 */
		tbv_comp_fail_wqe(qp, wqe, h->syndrome == TBV_NAK_RNR ? IB_WC_RNR_RETRY_EXC_ERR :
									 tbv_nak_status(h->syndrome));
	}
out:
	spin_unlock(&qp->sq_lock);
	return fatal;
}

/* Is @h the response packet @idx of @wqe (a READ's data or an atomic's result)? */
static bool tbv_comp_resp_fits(const struct tbv_send_wqe *wqe, const struct tbv_rdma_hdr *h,
			       u32 idx, u32 full)
{
	if (tbv_wr_is_atomic(wqe->opcode))
		return h->kind == TBV_RK_ATOMIC_RESP;
	/* the last of a part is the last its READ_REQ asked for */
	return h->kind == TBV_RK_READ_RESP &&
	       h->payload_len == tbv_rdma_pkt_payload(wqe->length, idx, full) &&
	       !!(h->flags & TBV_RF_LAST) ==
		       (idx + 1 == tbv_read_part_end(wqe->npkts, wqe->read_part, idx));
}

/* A READ response or an atomic's (RC); true if it failed a WQE: the caller then fails the QP. */
bool tbv_comp_read_resp(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	struct tbv_send_wqe *wqe;
	bool fatal = false;
	u32 idx, expected;
	u64 orig;
	int ret;

	spin_lock(&qp->sq_lock);
	if (qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD && qp->state != IB_QPS_SQE)
		goto out;
	wqe = tbv_first_read(qp);
	if (!wqe) {
		/* a late duplicate after a retransmission, or a confused peer */
		atomic64_inc(&qp->dev->rstats.responses_unmatched);
		goto out;
	}
	expected = tbv_psn_add(wqe->first_psn, wqe->read_pkts_done);
	if (h->psn != expected) {
		/*
		 * A response was lost: ask again from the first one missing, once.
		 * The responses after it that were already on the way arrive next;
		 * each asking again would make the responder start over each time,
		 * and with many READs out that never ends. If what we asked for is
		 * lost too, the ACK timer resends.
		 */
		if (tbv_psn_diff(h->psn, expected) > 0 && tbv_psn_diff(h->psn, qp->req.psn) < 0 &&
		    !qp->comp.rnr_waiting &&
		    !(qp->comp.read_gap_asked && qp->comp.read_gap_psn == expected)) {
			qp->comp.read_gap_asked = true;
			qp->comp.read_gap_psn = expected;
			tbv_comp_advance(qp, expected);
			tbv_comp_retire(qp);
			tbv_req_rewind(qp, expected);
		}
		goto out;
	}
	qp->comp.read_gap_asked = false;
	idx = wqe->read_pkts_done;
	if (!tbv_comp_resp_fits(wqe, h, idx, tbv_qp_full(qp))) {
		/* not the packet we asked for: drop it */
		atomic64_inc(&qp->dev->rstats.responses_unmatched);
		goto out;
	}
	/* Everything sent before this request was executed before its response. */
	tbv_comp_advance(qp, h->psn);
	tbv_comp_retire(qp);
	if (h->kind == TBV_RK_ATOMIC_RESP) {
		orig = tbv_rdma_get_u64(payload);	/* to host order, as the memory held it */
		ret = tbv_sge_copy(qp, wqe->sge, wqe->num_sge, 0, &orig, sizeof(orig), true);
		if (ret) {
			fatal = true;
			goto out;
		}
	} else if (h->payload_len) {
		ret = tbv_sge_copy(qp, wqe->sge, wqe->num_sge, idx * tbv_qp_full(qp),
				   (void *)payload, h->payload_len, true);
		if (ret) {
			fatal = true;
			goto out;
		}
	}
	wqe->read_pkts_done++;
	tbv_comp_advance(qp, tbv_psn_add(h->psn, 1));
	tbv_comp_retire(qp);
out:
	if (fatal) {
		/* the READ or atomic is the oldest WQE now, unless an older one failed locally */
		tbv_comp_fail_wqe(qp, wqe, IB_WC_LOC_PROT_ERR);
	}
	spin_unlock(&qp->sq_lock);
	return fatal;
}

/* An ACK tick (sq_lock held): has the wait reached the QP's timeout? If not, wait on. */
static bool tbv_ack_overdue(struct tbv_qp *qp)
{
	qp->comp.ack_waited_ms += tbv_ack_tick_of(qp);
	if (qp->comp.ack_waited_ms >= tbv_ack_wait_ms(qp->timeout))
		return true;
	tbv_ack_tick(qp);
	return false;
}

/*
 * The timer expired (tbv_tx_timer()): the RNR delay is over, or the ACKs of
 * what was sent are overdue. Either rewinds the requester (TBV_EXPIRY_KICK),
 * or, with no retries left, fails the oldest WQE (TBV_EXPIRY_FATAL: the
 * caller fails the QP). An ACK tick short of the timeout only counts.
 */
enum tbv_comp_expiry tbv_comp_timeout(struct tbv_qp *qp)
{
	enum tbv_comp_expiry ret = TBV_EXPIRY_KICK;

	spin_lock_bh(&qp->sq_lock);
	/* re-armed since it fired (an ACK came): that wait is a new one */
	if ((qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD) || timer_pending(&qp->comp.timer)) {
		spin_unlock_bh(&qp->sq_lock);
		return TBV_EXPIRY_IGNORED;
	}
	if (qp->comp.rnr_waiting) {
		qp->comp.rnr_waiting = false;
		tbv_req_rewind(qp, qp->comp.acked_psn);
	} else if (qp->sq.cons != qp->req.sq_started && !tbv_ack_overdue(qp)) {
		ret = TBV_EXPIRY_IGNORED;
	} else if (qp->sq.cons != qp->req.sq_started) {
		/* timeout 0 is infinite (IBA): probe on, never give up */
		if (!qp->comp.retries_left && qp->timeout) {
			struct tbv_send_wqe *failed = tbv_wq_slot(&qp->sq, qp->sq.cons);

			qp->sq.cons++;
			tbv_send_wqe_complete(qp, failed, IB_WC_RETRY_EXC_ERR);
			qp->state = IB_QPS_ERR;
			ret = TBV_EXPIRY_FATAL;
		} else {
			if (qp->comp.retries_left)
				qp->comp.retries_left--;
			atomic64_inc(&qp->dev->rstats.retransmits);
			tbv_req_rewind(qp, tbv_comp_resume_psn(qp));
		}
	}
	spin_unlock_bh(&qp->sq_lock);
	return ret;
}

/*
 * Flush every WQE not completed yet (sq_lock not held): the QP is in error.
 * A ring SQ's are flushed up to the process's producer as it is now
 * (docs/rxe-abi.md 4.5): two rounds of copying into the emptied shadow reach
 * it, since the shadow holds the whole ring; later posts wait for the next
 * doorbell.
 */
void tbv_comp_flush(struct tbv_qp *qp)
{
	int round;

	spin_lock_bh(&qp->sq_lock);
	for (round = 0; round < 2; round++) {
		tbv_req_fetch(qp, U32_MAX);
		while (qp->sq.cons != qp->sq.prod) {
			struct tbv_send_wqe *wqe = tbv_wq_slot(&qp->sq, qp->sq.cons);

			/* left the SQ first, then its slot goes back and the CQE is posted */
			qp->sq.cons++;
			tbv_send_wqe_complete(qp, wqe, wqe->error ?: IB_WC_WR_FLUSH_ERR);
		}
	}
	tbv_req_flushed(qp);
	qp->comp.rnr_waiting = false;
	timer_delete(&qp->comp.timer);
	spin_unlock_bh(&qp->sq_lock);
}
