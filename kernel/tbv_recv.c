// SPDX-License-Identifier: GPL-2.0
/*
 * RX dispatch of RDMA packets: a frame from a rail's RX ring (its NAPI poll,
 * tbv_rail.c) or from the device's loopback queue is decoded and its QP looked
 * up, with a reference for the packet's duration; a multicast packet goes to
 * every QP attached to its group; a striped QP's packet goes through
 * resequencing (tbv_stripe_rx.c); the packet then goes on to its QP
 * (tbv_deliver.c). Malformed packets and those for no QP are counted and dropped.
 */
#include "tbv.h"

struct tbv_qp *tbv_qp_get(struct tbv_dev *dev, u32 qpn)
{
	struct tbv_qp *qp;

	xa_lock_bh(&dev->qps);
	qp = xa_load(&dev->qps, qpn);
	if (qp && !refcount_inc_not_zero(&qp->ref))
		qp = NULL;
	xa_unlock_bh(&dev->qps);
	return qp;
}

void tbv_qp_put(struct tbv_qp *qp)
{
	if (refcount_dec_and_test(&qp->ref))
		complete(&qp->released);
}

/*
 * Deliver a multicast UD packet to every attached QP (BH disabled). A QP that
 * fails on it (a malformed ring WQE) is not kicked under the group lock: it
 * enters the error state at its transmitter's next run.
 */
static void tbv_mcast_rx(struct tbv_dev *dev, const struct tbv_rdma_hdr *h, const u8 *payload)
{
	struct tbv_mcast_attach *a;
	bool joined = false;

	spin_lock(&dev->mcast_lock);
	list_for_each_entry(a, &dev->mcast_list, list) {
		if (!memcmp(a->mgid, h->dgid, 16)) {
			tbv_resp_rx_ud(a->qp, h, payload);
			joined = true;
		}
	}
	spin_unlock(&dev->mcast_lock);
	if (!joined)
		atomic64_inc(&dev->rstats.mcast_unjoined);
}

/*
 * Decode a received RDMA frame and find its QP (with a reference), or
 * NULL when it has none here: malformed, multicast (delivered now), no QP.
 */
static struct tbv_qp *tbv_rdma_rx_lookup(struct tbv_dev *dev, const struct tbv_frame *frame,
					 struct tbv_rdma_hdr *h)
{
	struct tbv_qp *qp;

	if (tbv_frame_decode(dev->link, frame, h)) {
		atomic64_inc(&dev->rstats.rx_malformed);
		return NULL;
	}
	if (h->dst_qpn == TBV_QPN_MASK) {
		/* the multicast QPN: UD to a multicast GID only */
		if (h->kind == TBV_RK_UD_SEND && tbv_gid_is_multicast(h->dgid))
			tbv_mcast_rx(dev, h, tbv_frame_payload(frame, h));
		else
			atomic64_inc(&dev->rstats.rx_no_qp);
		return NULL;
	}
	qp = tbv_qp_get(dev, h->dst_qpn);
	if (!qp)
		atomic64_inc(&dev->rstats.rx_no_qp);
	return qp;
}

/* One RDMA frame from our own loopback queue (process context, BH disabled). */
static void tbv_rdma_rx_loopback(struct tbv_dev *dev, const struct tbv_frame *frame)
{
	struct tbv_rdma_hdr h;
	struct tbv_qp *qp = tbv_rdma_rx_lookup(dev, frame, &h);

	if (!qp)
		return;
	tbv_deliver(qp, &h, tbv_frame_payload(frame, &h), true);
	tbv_qp_put(qp);
}

/* Frames to our own GIDs (tbv_xmit_send()): received here, in process context with BH off. */
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
		tbv_rdma_rx_loopback(dev, frame);
		local_bh_enable();
		tbv_pool_put(rail, frame, false);
		cond_resched();
	}
}

/*
 * One RDMA frame from @rail's RX ring (its NAPI poll). A striped QP's packet
 * may be held for its turn: the frame then stays with the QP (TBV_RX_KEPT).
 */
enum tbv_rx_fate tbv_rdma_rx_frame(struct tbv_dev *dev, struct tbv_rail *rail,
				   struct tbv_frame *frame)
{
	enum tbv_rx_fate fate = TBV_RX_REPOST;
	struct tbv_rdma_hdr h;
	struct tbv_qp *qp = tbv_rdma_rx_lookup(dev, frame, &h);

	if (!qp)
		return fate;
	if ((h.flags & TBV_RF_SEQ) && tbv_stripe_rx_wanted(qp, &h))
		fate = tbv_stripe_rx(qp, rail, frame, &h);
	else
		tbv_deliver(qp, &h, tbv_frame_payload(frame, &h), false);
	tbv_qp_put(qp);
	return fate;
}
