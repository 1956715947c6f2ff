// SPDX-License-Identifier: GPL-2.0
/*
 * One received packet for one QP, decoded and looked up by the RX dispatch
 * (tbv_recv.c), in order if the QP stripes (tbv_stripe_rx.c): requests and UD
 * packets go to the responder, ACKs and READ/atomic responses to the
 * completer; then the QP's transmitter runs in this context for what they
 * owe or allow (ACKs, READ responses, new and rewound requests), and a
 * completer that failed a WQE fails the QP.
 */
#include "tbv.h"

void tbv_deliver(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload,
		 bool from_loopback)
{
	enum ib_qp_type type = qp->ibqp.qp_type;
	bool kick = false, fatal = false;

	if (type == IB_QPT_UD || type == IB_QPT_GSI) {
		if (tbv_resp_rx_ud(qp, h, payload))
			tbv_qp_kick(qp);	/* the QP fails: its output says so */
		return;
	}
	/* A connected QP hears only its partner, and only over its own path. */
	if (h->src_qpn != qp->dest_qpn || from_loopback != qp->loopback || !qp->rail) {
		atomic64_inc(&qp->dev->rstats.rx_stray);
		return;
	}
	switch (h->kind) {
	case TBV_RK_SEND:
	case TBV_RK_WRITE:
	case TBV_RK_READ_REQ:
	case TBV_RK_ATOMIC:
	case TBV_RK_FLUSH:
	case TBV_RK_ATOMIC_WRITE:
		kick = tbv_resp_rx(qp, h, payload);
		break;
	case TBV_RK_ACK:
	case TBV_RK_READ_RESP:
	case TBV_RK_ATOMIC_RESP:
		if (type != IB_QPT_RC) {
			/* UC has no ACKs and no READs or atomics */
			atomic64_inc(&qp->dev->rstats.responses_unmatched);
			break;
		}
		if (h->kind == TBV_RK_ACK)
			fatal = tbv_comp_ack(qp, h);
		else
			fatal = tbv_comp_read_resp(qp, h, payload);
		kick = true;
		break;
	default:
		atomic64_inc(&qp->dev->rstats.rx_stray);	/* a UD packet for a connected QP */
		break;
	}
	if (fatal)
		tbv_qp_error(qp);
	if (kick)
		tbv_qp_kick(qp);
}
