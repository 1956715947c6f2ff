// SPDX-License-Identifier: GPL-2.0
/*
 * The posting verbs: post_send checks each work request and queues it as a
 * send WQE (the requester's tbv_post_one()), then kicks the QP's transmitter;
 * on a QP with rings shared with user space it is only the doorbell.
 * post_recv queues receive WQEs for the responder. In the error state both
 * complete what was posted at once, flushed.
 */
#include "tbv.h"

/* Posting is allowed from RTS on (and in SQD, SQE and ERR, where WQEs flush). */
bool tbv_post_send_allowed(struct tbv_qp *qp)
{
	enum ib_qp_state state = READ_ONCE(qp->state);

	return state != IB_QPS_RESET && state != IB_QPS_INIT && state != IB_QPS_RTR;
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

/*
 * post_send on a ring QP is rdma_rxe's doorbell (docs/rxe-abi.md 4.1): the
 * provider wrote its WQEs into the SQ ring and sends no work request. As
 * rxe's, it fails with EINVAL before RTS (the WQEs wait in the ring for the
 * transition's kick); in the error state it flushes what was posted, the
 * receives too: they have no doorbell of their own (4.5).
 */
static int tbv_post_doorbell(struct tbv_qp *qp, const struct ib_send_wr *wr,
			     const struct ib_send_wr **bad_wr)
{
	if (wr || !tbv_post_send_allowed(qp)) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		tbv_qp_flush(qp);
	else
		tbv_qp_kick(qp);
	return 0;
}

int tbv_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	bool is_ud = ibqp->qp_type == IB_QPT_UD || ibqp->qp_type == IB_QPT_GSI;
	u8 inline_buf[TBV_MAX_INLINE];
	struct tbv_post_wr p;
	int ret = 0;

	if (tbv_qp_is_shared(qp))
		return tbv_post_doorbell(qp, wr, bad_wr);
	if (!tbv_post_send_allowed(qp)) {
		*bad_wr = wr;
		return -EINVAL;
	}
	for (; wr; wr = wr->next) {
		/* no kernel verb binds windows: a user binds them through the SQ ring */
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
	tbv_qp_run(qp);
	return ret;
}

/* ---- post_recv ---- */

int tbv_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr)
{
	struct tbv_qp *qp = to_tbv_qp(ibqp);
	int ret = 0;

	if (qp->srq) {
		*bad_wr = wr;
		return -EINVAL;
	}
	/* the process posts into a ring QP's RQ itself; rxe offers no command either */
	if (tbv_qp_is_shared(qp)) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	spin_lock_bh(&qp->resp_lock);
	if (qp->state == IB_QPS_RESET) {
		ret = -EINVAL;
		*bad_wr = wr;
	}
	for (; wr && !ret; wr = wr->next) {
		ret = tbv_recv_wqe_fill(&qp->rq, wr);
		if (ret)
			*bad_wr = wr;
	}
	spin_unlock_bh(&qp->resp_lock);
	/* In the error state every receive completes at once, flushed. */
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		tbv_rq_flush(qp);	/* a QP of its own RQ: no SRQ to report on */
	return ret;
}
