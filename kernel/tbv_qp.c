// SPDX-License-Identifier: GPL-2.0
/*
 * Queue pairs: creation with validated capabilities, the state machine of
 * modify_qp (transitions and attribute masks checked by ib_modify_qp_is_ok(),
 * values checked here), reset and destruction. The transport's parts of a QP
 * are set up, reset and stopped by the files that own them.
 */
#include <linux/slab.h>

#include "tbv.h"
#include "tbv_rxe_wqe.h"

static int tbv_check_caps(struct ib_qp_init_attr *init)
{
	struct ib_qp_cap *cap = &init->cap;

	if (cap->max_send_wr > TBV_MAX_QP_WR || cap->max_send_sge > TBV_MAX_SGE ||
	    cap->max_inline_data > TBV_MAX_INLINE)
		return -EINVAL;
	if (init->srq) {
		cap->max_recv_wr = 0;	/* the SRQ's, not ours */
		cap->max_recv_sge = 0;
	} else if (cap->max_recv_wr > TBV_MAX_QP_WR || cap->max_recv_sge > TBV_MAX_SGE) {
		return -EINVAL;
	}
	return 0;
}

/* The kernel's send queue: @entries tbv_send_wqe of @max_sge SGEs or qp->max_inline bytes. */
static int tbv_qp_sq_init(struct tbv_qp *qp, u32 entries, u32 max_sge)
{
	/* at least one SGE's room: an atomic write's 8 bytes by value are kept inline */
	u32 slot = sizeof(struct tbv_send_wqe) +
		   max3(max_sge * (u32)sizeof(struct tbv_sge), qp->max_inline,
			(u32)sizeof(struct tbv_sge));

	return tbv_wq_init(&qp->charge, &qp->sq, entries, slot, max_sge);
}

/* The kernel's queues of a QP: tbv_send_wqe and tbv_recv_wqe, filled by post_send/post_recv. */
static int tbv_qp_queues_init(struct tbv_qp *qp, struct ib_qp_init_attr *init)
{
	int ret;

	ret = tbv_qp_sq_init(qp, init->cap.max_send_wr, init->cap.max_send_sge);
	if (ret)
		return ret;
	ret = tbv_wq_init(&qp->charge, &qp->rq, init->cap.max_recv_wr, sizeof(struct tbv_recv_wqe) +
			  init->cap.max_recv_sge * sizeof(struct tbv_sge), init->cap.max_recv_sge);
	if (ret) {
		kvfree(qp->sq.buf);
		return ret;
	}
	/* the queues may be larger than asked for: report what they hold */
	init->cap.max_send_wr = qp->sq.size;
	if (!qp->srq)
		init->cap.max_recv_wr = qp->rq.size;
	return 0;
}

/*
 * A user QP's rings (docs/rxe-abi.md 3, section 8 step 6), sized as rdma_rxe
 * sizes them, the RQ's only without an SRQ; the caps reported are what the
 * slots hold (proto/tbv_rxe_wqe.c), which the provider checks its posts
 * against and the parser checks the WQEs against. The responder takes from
 * the RQ ring; the requester copies the SQ ring's WQEs into the kernel's SQ,
 * its shadow (as many slots: the whole ring fits), through sq_copy.
 */
static int tbv_qp_rings_init(struct tbv_qp *qp, struct ib_qp_init_attr *init,
			     struct ib_udata *udata)
{
	struct ib_qp_cap *cap = &init->cap;
	struct rxe_create_qp_resp resp = {};
	struct tbv_rxe_caps caps;
	int ret;

	/* a queue asked for 0 entries still gets a ring, as rxe's: the provider maps both */
	ret = tbv_uq_init(&qp->sq_ring, &qp->charge, udata, max(cap->max_send_wr, 1u),
			  tbv_rxe_send_elem(cap->max_send_sge, cap->max_inline_data),
			  TBV_UQ_KERNEL_CONSUMES, &resp.sq_mi);
	if (ret)
		return ret;
	if (!qp->srq) {
		ret = tbv_uq_init(&qp->rq_ring, &qp->charge, udata, max(cap->max_recv_wr, 1u),
				  tbv_rxe_recv_elem(cap->max_recv_sge), TBV_UQ_KERNEL_CONSUMES,
				  &resp.rq_mi);
		if (ret)
			goto err;
	}
	ret = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (ret)
		goto err;

	tbv_rxe_send_caps(tbv_uq_slot_size(&qp->sq_ring), TBV_MAX_SGE, TBV_MAX_INLINE, &caps);
	qp->max_inline = caps.max_inline;
	ret = tbv_qp_sq_init(qp, tbv_uq_capacity(&qp->sq_ring), caps.max_sge);
	if (ret)
		goto err;
	qp->sq_copy = tbv_uwqe_buf_alloc(tbv_uq_slot_size(&qp->sq_ring), tbv_quota_gfp(&qp->charge));
	if (!qp->sq_copy) {
		ret = -ENOMEM;
		goto err;
	}
	cap->max_send_wr = tbv_uq_capacity(&qp->sq_ring);
	cap->max_send_sge = caps.max_sge;
	cap->max_inline_data = caps.max_inline;
	if (!qp->srq) {
		cap->max_recv_wr = tbv_uq_capacity(&qp->rq_ring);
		cap->max_recv_sge = tbv_rxe_recv_caps(tbv_uq_slot_size(&qp->rq_ring), TBV_MAX_SGE);
		qp->rq.max_sge = cap->max_recv_sge;
	}
	return 0;
err:
	kvfree(qp->sq.buf);
	qp->sq.buf = NULL;
	tbv_uq_destroy(&qp->rq_ring);
	tbv_uq_destroy(&qp->sq_ring);
	return ret;
}

/* The slot size of the ring the responder takes receive WQEs from: the SRQ's or ours; 0: none. */
static u32 tbv_qp_recv_ring_slot(struct tbv_qp *qp)
{
	if (qp->srq)
		return tbv_srq_is_shared(qp->srq) ? tbv_uq_slot_size(&qp->srq->ring) : 0;
	return tbv_qp_is_shared(qp) ? tbv_uq_slot_size(&qp->rq_ring) : 0;
}

/* The queues or rings of a QP (destroy, or a failed create). */
static void tbv_qp_queues_free(struct tbv_qp *qp)
{
	tbv_uq_destroy(&qp->rq_ring);	/* nothing for a kernel QP */
	tbv_uq_destroy(&qp->sq_ring);
	tbv_uwqe_buf_free(qp->sq_copy);
	kvfree(qp->rq.buf);				/* NULL for a ring QP */
	kvfree(qp->sq.buf);				/* a ring QP's: the SQ ring's shadow */
}

int tbv_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init, struct ib_udata *udata)
{
	struct tbv_dev *dev = to_tbv_dev(ibqp->device);
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	u32 recv_sge, qpn;
	int ring, ret;

	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
	case IB_QPT_GSI:
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags)
		return -EOPNOTSUPP;
	if (udata && udata->inlen)
		return -EINVAL;
	ring = tbv_uq_wanted(udata, sizeof(struct rxe_create_qp_resp));
	if (ring < 0)
		return ring;
	ret = tbv_check_caps(init) ?: tbv_quota_charge(&qp->charge, udata, TBV_QUOTA_QP);
	if (ret)
		return ret;
	if (atomic_inc_return(&dev->nr_qps) > TBV_MAX_QP) {
		ret = -ENOMEM;
		goto err_count;
	}

	qp->dev = dev;
	refcount_set(&qp->ref, 1);
	init_completion(&qp->released);
	mutex_init(&qp->modify_lock);
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->resp_lock);
	tbv_tx_init(qp);
	qp->state = IB_QPS_RESET;
	qp->sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	qp->max_inline = init->cap.max_inline_data;
	qp->scq = to_tbv_cq(init->send_cq);
	qp->rcq = to_tbv_cq(init->recv_cq);
	qp->srq = init->srq ? to_tbv_srq(init->srq) : NULL;
	qp->path_mtu = IB_MTU_2048;
	qp->retry_cnt = 7;
	qp->rnr_retry = 7;
	qp->timeout = 14;

	ret = tbv_qp_stripe_create(qp);
	if (ret)
		goto err_count;
	ret = ring ? tbv_qp_rings_init(qp, init, udata) : tbv_qp_queues_init(qp, init);
	if (ret)
		goto err_stripe;
	recv_sge = qp->srq ? qp->srq->rq.max_sge : init->cap.max_recv_sge;
	ret = tbv_resp_create(qp, recv_sge, tbv_qp_recv_ring_slot(qp));
	if (ret)
		goto err_queues;

	if (init->qp_type == IB_QPT_GSI) {
		qpn = 1;
		ret = xa_insert_bh(&dev->qps, qpn, qp, GFP_KERNEL);
	} else {
		ret = xa_alloc_cyclic_bh(&dev->qps, &qpn, qp, XA_LIMIT(2, TBV_QPN_MASK),
					 &dev->next_qpn, GFP_KERNEL);
		ret = ret < 0 ? ret : 0;
	}
	if (ret)
		goto err_wqe;
	ibqp->qp_num = qpn;
	tbv_stripe_tx_start(qp);
	return 0;

err_wqe:
	tbv_resp_destroy(qp);
err_queues:
	tbv_qp_queues_free(qp);
err_stripe:
	tbv_qp_stripe_free(qp);
err_count:
	atomic_dec(&dev->nr_qps);
	tbv_quota_uncharge(&qp->charge);	/* the rings' bytes go with their mappings */
	return ret;
}

/* The QP's completions not polled yet leave its kernel CQs (reset, destroy; not rings: 3.3). */
static void tbv_qp_clean_cqs(struct tbv_qp *qp)
{
	tbv_cq_clean(qp->scq, &qp->ibqp);
	if (qp->rcq != qp->scq)
		tbv_cq_clean(qp->rcq, &qp->ibqp);
}

/*
 * A ring QP's part of RESET (both locks held): what the process posted is
 * gone, without completions, as on any device: our consumer indexes move to
 * its producers (docs/rxe-abi.md 3.3). rdma_rxe instead keeps the indexes and
 * zeroes the slots, so what was posted stays posted, as zeroed WQEs.
 */
static void tbv_qp_rings_reset(struct tbv_qp *qp)
{
	if (!tbv_qp_is_shared(qp))
		return;
	tbv_uq_publish(&qp->sq_ring, tbv_uq_user_index(&qp->sq_ring));
	if (!qp->srq)
		tbv_uq_publish(&qp->rq_ring, tbv_uq_user_index(&qp->rq_ring));
}

static void tbv_qp_reset(struct tbv_qp *qp)
{
	spin_lock_bh(&qp->sq_lock);
	spin_lock(&qp->resp_lock);
	qp->sq.prod = qp->sq.cons = 0;
	qp->rq.prod = qp->rq.cons = 0;
	tbv_qp_rings_reset(qp);
	tbv_req_reset(qp);
	tbv_comp_reset(qp);
	tbv_resp_reset(qp);
	qp->state = IB_QPS_RESET;
	spin_unlock(&qp->resp_lock);
	spin_unlock_bh(&qp->sq_lock);
	tbv_comp_stop(qp);
	tbv_qp_stripe_reset(qp);
	tbv_stripe_tx_reset(qp);
	tbv_qp_clean_cqs(qp);
}

static int tbv_check_attr(struct tbv_qp *qp, struct ib_qp_attr *attr, int mask)
{
	if ((mask & IB_QP_PORT) && attr->port_num != 1)
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) && attr->pkey_index)
		return -EINVAL;
	if ((mask & IB_QP_PATH_MTU) && (attr->path_mtu < IB_MTU_256 ||
					attr->path_mtu > IB_MTU_4096))
		return -EINVAL;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > TBV_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > TBV_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IB_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IB_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IB_QP_TIMEOUT) && attr->timeout > 31)
		return -EINVAL;
	if ((mask & IB_QP_DEST_QPN) && attr->dest_qp_num > TBV_QPN_MASK)
		return -EINVAL;
	if ((mask & IB_QP_SQ_PSN) && attr->sq_psn > TBV_PSN_MASK)
		return -EINVAL;
	if ((mask & IB_QP_RQ_PSN) && attr->rq_psn > TBV_PSN_MASK)
		return -EINVAL;
	if (mask & (IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE))
		return -EOPNOTSUPP;	/* one path per link: no path migration */
	/* Only remote read/write are enforced here; other known flags are accepted. */
	if ((mask & IB_QP_ACCESS_FLAGS) && (attr->qp_access_flags & ~TBV_QP_ACCESS_SUPPORTED))
		return -EINVAL;
	return 0;
}

int tbv_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_udata *udata)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	struct tbv_link *link = qp->dev->link;
	enum ib_qp_state cur, next;
	u8 sgid[16], dgid[16];
	bool loopback = false;
	int ret;

	if (udata && udata->inlen)
		return -EINVAL;
	mutex_lock(&qp->modify_lock);
	cur = (mask & IB_QP_CUR_STATE) ? attr->cur_qp_state : READ_ONCE(qp->state);
	next = (mask & IB_QP_STATE) ? attr->qp_state : cur;
	ret = -EINVAL;
	if (cur != READ_ONCE(qp->state))
		goto out;
	if (!ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask))
		goto out;
	ret = tbv_check_attr(qp, attr, mask);
	if (ret)
		goto out;
	if ((mask & IB_QP_AV) && ibqp->qp_type != IB_QPT_UD && ibqp->qp_type != IB_QPT_GSI) {
		ret = tbv_resolve_gids(qp->dev, &attr->ah_attr, sgid, dgid, &loopback);
		if (ret)
			goto out;
	}

	if (next == IB_QPS_RESET) {
		tbv_qp_reset(qp);
		ret = 0;
		goto out;
	}

	spin_lock_bh(&qp->sq_lock);
	spin_lock(&qp->resp_lock);
	if (qp->state != cur) {
		/* the transport failed the QP meanwhile: only RESET (or ERR) leaves that */
		spin_unlock(&qp->resp_lock);
		spin_unlock_bh(&qp->sq_lock);
		ret = next == IB_QPS_ERR ? 0 : -EINVAL;
		goto out;
	}
	if (mask & IB_QP_ACCESS_FLAGS)
		qp->access = attr->qp_access_flags;
	if (mask & IB_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IB_QP_AV) {
		qp->ah_attr = attr->ah_attr;
		memcpy(qp->sgid, sgid, 16);
		memcpy(qp->dgid, dgid, 16);
		qp->loopback = loopback;
	}
	if (mask & IB_QP_PATH_MTU)
		qp->path_mtu = attr->path_mtu;
	if (mask & IB_QP_TIMEOUT)
		qp->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		qp->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		qp->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		qp->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		qp->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_DEST_QPN)
		qp->dest_qpn = attr->dest_qp_num;
	if (mask & IB_QP_RQ_PSN)
		qp->rq_psn = attr->rq_psn;
	if (mask & IB_QP_SQ_PSN)
		qp->sq_psn = attr->sq_psn;
	tbv_resp_modify(qp, attr, mask);
	tbv_req_modify(qp, attr, mask, next);
	tbv_comp_modify(qp, attr, mask, cur, next);
	if (next == IB_QPS_RTR || next == IB_QPS_RTS)
		qp->rail = &link->rails[ibqp->qp_num % link->nr_rails];
	if (next != IB_QPS_ERR)
		qp->state = next;
	spin_unlock(&qp->resp_lock);
	spin_unlock_bh(&qp->sq_lock);

	if (next == IB_QPS_ERR && cur != IB_QPS_ERR)
		tbv_qp_error(qp);
	if (next == IB_QPS_RTS)
		tbv_qp_kick(qp);	/* WQEs may wait from SQD or SQE */
	ret = 0;
out:
	mutex_unlock(&qp->modify_lock);
	return ret;
}

int tbv_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		 struct ib_qp_init_attr *init)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	mutex_lock(&qp->modify_lock);
	attr->qp_state = READ_ONCE(qp->state);
	attr->cur_qp_state = attr->qp_state;
	attr->path_mtu = qp->path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qkey = qp->qkey;
	attr->rq_psn = qp->rq_psn;
	attr->sq_psn = qp->sq_psn;
	attr->dest_qp_num = qp->dest_qpn;
	attr->qp_access_flags = qp->access;
	attr->cap.max_send_wr = tbv_qp_is_shared(qp) ? tbv_uq_capacity(&qp->sq_ring) : qp->sq.size;
	attr->cap.max_recv_wr = qp->srq ? 0 : tbv_qp_is_shared(qp) ?
				tbv_uq_capacity(&qp->rq_ring) : qp->rq.size;
	attr->cap.max_send_sge = qp->sq.max_sge;
	attr->cap.max_recv_sge = qp->srq ? 0 : qp->rq.max_sge;
	attr->cap.max_inline_data = qp->max_inline;
	if (ibqp->qp_type == IB_QPT_RC || ibqp->qp_type == IB_QPT_UC)
		attr->ah_attr = qp->ah_attr;
	attr->sq_draining = qp->req.draining;
	attr->max_rd_atomic = qp->max_rd_atomic;
	attr->max_dest_rd_atomic = qp->max_dest_rd_atomic;
	attr->min_rnr_timer = qp->min_rnr_timer;
	attr->port_num = 1;
	attr->timeout = qp->timeout;
	attr->retry_cnt = qp->retry_cnt;
	attr->rnr_retry = qp->rnr_retry;
	mutex_unlock(&qp->modify_lock);

	init->event_handler = ibqp->event_handler;
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->sq_sig_type = qp->sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	init->qp_type = ibqp->qp_type;
	init->port_num = 1;
	return 0;
}

int tbv_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	struct tbv_dev *dev = qp->dev;

	mutex_lock(&qp->modify_lock);
	tbv_qp_enter_error(qp);
	/* while the QP still owns its number: a new QP never inherits its windows */
	tbv_mw_qp_gone(qp);
	/* After this no RX lookup finds the QP; those in flight hold a reference. */
	xa_erase_bh(&dev->qps, ibqp->qp_num);
	tbv_mcast_detach_all(qp);
	tbv_qp_put(qp);
	wait_for_completion(&qp->released);
	tbv_qp_stripe_stop(qp);	/* held packets are not handed over any more */
	tbv_tx_stop(qp);
	tbv_qp_stripe_free(qp);
	tbv_resp_destroy(qp);
	tbv_qp_clean_cqs(qp);
	mutex_unlock(&qp->modify_lock);

	tbv_qp_queues_free(qp);
	atomic_dec(&dev->nr_qps);
	tbv_quota_uncharge(&qp->charge);	/* the rings' bytes go with their mappings */
	return 0;
}

/* The QP numbered @*qpn or the next one, with a reference (tbv_qp_put()); NULL after the last. */
static struct tbv_qp *tbv_qp_get_from(struct tbv_dev *dev, unsigned long *qpn)
{
	struct tbv_qp *qp;

	xa_lock_bh(&dev->qps);
	for (;;) {
		qp = xa_find(&dev->qps, qpn, ULONG_MAX, XA_PRESENT);
		if (!qp || refcount_inc_not_zero(&qp->ref))
			break;
		(*qpn)++;	/* being destroyed */
	}
	xa_unlock_bh(&dev->qps);
	return qp;
}

/*
 * The device is going (tbv_ibdev_unregister()): every user QP past RESET to
 * the error state, as a modify to ERR would, so that its outstanding work
 * completes with IB_WC_WR_FLUSH_ERR into the CQ rings its process polls.
 * Polling a ring makes no system call that could fail, and unregistering soon
 * maps a zeroed page where the rings were: a process that only polls (a full
 * send queue waiting for completions) would otherwise wait for good. Kernel
 * consumers learn from the port event and their client's removal instead.
 * No modify_lock: destroy_qp holds it while it waits for our reference; the
 * transport fails a QP the same way, and modify_qp sees it (tbv_modify_qp()).
 */
void tbv_qps_fail_user(struct tbv_dev *dev)
{
	unsigned long qpn = 0;
	struct tbv_qp *qp;

	while ((qp = tbv_qp_get_from(dev, &qpn))) {
		enum ib_qp_state state = READ_ONCE(qp->state);

		if (tbv_qp_is_shared(qp) && state != IB_QPS_RESET && state != IB_QPS_ERR)
			tbv_qp_error(qp);
		tbv_qp_put(qp);
		qpn++;
	}
}

static bool tbv_qp_cq_unpolled(struct ib_cq *ibcq)
{
	return ibcq && tbv_cq_ring_unpolled(to_tbv_cq(ibcq));
}

/* Whether a user QP's CQ ring still holds completions its process has not polled. */
bool tbv_qps_ring_unpolled(struct tbv_dev *dev)
{
	unsigned long qpn = 0;
	struct tbv_qp *qp;
	bool unpolled = false;

	/* our reference keeps the QP, and the QP its CQs, from being destroyed */
	while (!unpolled && (qp = tbv_qp_get_from(dev, &qpn))) {
		unpolled = tbv_qp_is_shared(qp) &&
			   (tbv_qp_cq_unpolled(qp->ibqp.send_cq) ||
			    tbv_qp_cq_unpolled(qp->ibqp.recv_cq));
		tbv_qp_put(qp);
		qpn++;
	}
	return unpolled;
}
