// SPDX-License-Identifier: GPL-2.0
/*
 * Rails: one TX and one RX ring each, with the frame buffers they use. All
 * buffers are allocated at bring-up; the data path allocates nothing per frame.
 * RX runs in NAPI: the backend's start_poll (hard IRQ) schedules it, the poll
 * drains the ring, hands each frame to its consumer and posts it again.
 */
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <net/gro.h>	/* napi_gro_flush(), an inline there in 7.x */

#include "tbv.h"

/*
 * busy_poll_us: once a rail's RX ring runs dry, its NAPI keeps polling it this
 * long before the ring's interrupt is re-enabled. thunderbolt.ko spaces NHI
 * interrupts 128 us apart, so the first frame after a pause can wait that long
 * to be seen; a poll still running sees it at once. The price: a CPU spinning
 * in softirq for up to this long after each burst, and each idle poll claims a
 * whole NAPI budget (softnet_stat's time_squeeze grows). 0 (default): off.
 */
static unsigned int tbv_busy_poll_us;
#define TBV_BUSY_POLL_MAX_US	10000

static int tbv_busy_poll_us_set(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 0, TBV_BUSY_POLL_MAX_US);
}

static const struct kernel_param_ops tbv_busy_poll_us_ops = {
	.set = tbv_busy_poll_us_set,
	.get = param_get_uint,
};
module_param_cb(busy_poll_us, &tbv_busy_poll_us_ops, &tbv_busy_poll_us, 0644);
MODULE_PARM_DESC(busy_poll_us,
		 "keep polling an idle RX ring this long (us, 0-10000) before re-enabling its interrupt: lower latency for a busy CPU (default 0)");

static void tbv_rail_tx_done(void *ctx, struct tbv_frame *frame, bool canceled)
{
	tbv_pool_put(ctx, frame, canceled);
}

static void tbv_rail_start_poll(void *ctx)
{
	struct tbv_rail *rail = ctx;

	napi_schedule(&rail->napi);
}

/* An RDMA packet (split or not) to the device; what to do with its frame then. */
static enum tbv_rx_fate tbv_rail_rx_rdma(struct tbv_rail *rail, struct tbv_frame *frame)
{
	/* NULL while there is no device, or one is being torn down */
	struct tbv_dev *dev = rcu_dereference_bh(rail->link->rx_dev);

	rail->stats.rdma_rx_packets++;
	rail->stats.rdma_rx_bytes += frame->size;
	return dev ? tbv_rdma_rx_frame(dev, rail, frame) : TBV_RX_REPOST;
}

/* Hand @frame to its consumer by type; what to do with it then. */
static enum tbv_rx_fate tbv_rail_rx_frame(struct tbv_rail *rail, struct tbv_frame *frame)
{
	enum tbv_rx_fate fate = TBV_RX_REPOST;

	/* the bring-up self-check's frames, outside the credits */
	if (tbv_calib_rx(rail, frame))
		return fate;
	tbv_flow_rx_reaped(rail);
	if (frame->flags & (TBV_FRAME_F_CRC_ERROR | TBV_FRAME_F_OVERRUN)) {
		rail->stats.rx_hw_errors++;
		return fate;
	}
	rail->stats.rx_frames++;
	rail->stats.rx_bytes += frame->size;

	switch (tbv_split_rx(rail, frame)) {
	case TBV_SPLIT_CONSUMED:
		return fate;
	case TBV_SPLIT_PACKET:
		return tbv_rail_rx_rdma(rail, frame);
	case TBV_SPLIT_NONE:
		break;
	}
	switch (tbv_frame_type(frame->data, frame->size)) {
	case TBV_FT_NET:
		tbv_net_rx(rail, frame);
		break;
	case TBV_FT_RDMA:
		fate = tbv_rail_rx_rdma(rail, frame);
		break;
	case TBV_FT_CREDIT:
		tbv_flow_rx(rail, frame);
		break;
	default:
		rail->stats.rx_malformed++;
		break;
	}
	return fate;
}

/*
 * True to keep polling: busy_poll_us is set and has not passed since the last
 * frame (or since the interrupt, if it brought none). NAPI poll context.
 */
static bool tbv_rail_busy_poll(struct tbv_rail *rail, int done)
{
	unsigned int us = READ_ONCE(tbv_busy_poll_us);
	u64 now;

	if (!us)
		return false;
	now = ktime_get_ns();
	if (done || !rail->busy_polling)
		rail->busy_poll_until = now + (u64)us * NSEC_PER_USEC;
	else if (now >= rail->busy_poll_until)
		return false;
	return true;
}

/* The ring's next received frame: first the one the last re-arm found. NAPI poll context. */
static struct tbv_frame *tbv_rail_rx_next(struct tbv_rail *rail)
{
	struct tbv_frame *frame = rail->rx_stash;

	if (frame) {
		rail->rx_stash = NULL;
		return frame;
	}
	return rail->link->info.ops->ring_poll(rail->rx);
}

/*
 * NAPI is done and the ring's interrupt is on again: look at the ring once
 * more. A frame that completed after the last ring_poll() but before the
 * interrupt was unmasked may raise no interrupt at all: nothing in the USB4
 * host interface or thunderbolt.ko says a controller replays an event that
 * came while the ring's interrupt was masked (docs/hardware.md). Whatever
 * completes from now on interrupts. To look we must own the NAPI context
 * again; if someone else scheduled it meanwhile, that poll will look.
 */
static void tbv_rail_rearm(struct tbv_rail *rail)
{
	const struct tbv_link_ops *ops = rail->link->info.ops;
	struct tbv_frame *frame;

	ops->ring_poll_complete(rail->rx);
	if (!napi_schedule_prep(&rail->napi))
		return;
	frame = ops->ring_poll(rail->rx);
	if (frame) {
		rail->stats.rx_rearm_found++;
		rail->rx_stash = frame;
		__napi_schedule(&rail->napi);
		return;
	}
	/* an interrupt meanwhile found NAPI ours: then this schedules the poll it asked for */
	napi_complete_done(&rail->napi, 0);
}

static int tbv_rail_poll(struct napi_struct *napi, int budget)
{
	struct tbv_rail *rail = container_of(napi, struct tbv_rail, napi);
	const struct tbv_link_ops *ops = rail->link->info.ops;
	struct tbv_frame *frame;
	bool keep_polling;
	int done = 0;

	while (done < budget && (frame = tbv_rail_rx_next(rail))) {
		done++;
		/* a kept frame's QP made sure a spare is there (tbv_pool_rx_spare_ready()) */
		if (tbv_rail_rx_frame(rail, frame) == TBV_RX_KEPT)
			frame = tbv_pool_rx_spare_take(rail);
		if (WARN_ON_ONCE(!frame))
			continue;
		frame->has_prefix = false;
		/* Fails only once the ring is stopped; the frame stays in our pool. */
		ops->ring_rx(rail->rx, frame);
	}
	if (rail->busy_polling)
		rail->stats.rx_busy_polled += done;
	tbv_flow_rx_done(rail);
	keep_polling = tbv_rail_busy_poll(rail, done);
	if (done == budget)
		return done;	/* more waiting: NAPI polls again */
	if (keep_polling) {
		/* claim the whole budget: NAPI polls again, the interrupt stays off */
		rail->busy_polling = true;
		napi_gro_flush(napi, false);	/* nothing waits for the next frame */
		return budget;
	}
	rail->busy_polling = false;
	if (napi_complete_done(napi, done))
		tbv_rail_rearm(rail);
	return done;
}

static int tbv_rail_start(struct tbv_link *link, struct tbv_rail *rail)
{
	const struct tbv_link_ops *ops = link->info.ops;
	unsigned int n = link->info.ring_size, ntx = tbv_rail_tx_frames(link), i;
	/* RX buffers, TX buffers and, when striping, a ring's worth of spares */
	unsigned int nr = n + ntx + (link->stripe ? n : 0);

	tbv_pool_init(rail, tbv_net_tx_wake);
	memset(&rail->reasm, 0, sizeof(rail->reasm));
	memset(&rail->stats, 0, sizeof(rail->stats));
	rail->busy_polling = false;
	rail->rx_stash = NULL;
	rail->split_count = 0;
	rail->split_next = 0;
	tbv_flow_start(rail);
	tbv_calib_rail_start(rail);

	rail->frames = kcalloc(nr, sizeof(*rail->frames), GFP_KERNEL);
	if (!rail->frames)
		return -ENOMEM;
	for (i = 0; i < nr; i++) {
		rail->frames[i] = ops->frame_alloc(link);
		if (!rail->frames[i])
			return -ENOMEM;
		rail->frames[i]->rail = rail->idx;
		rail->nr_frames++;
	}

	rail->tx_cb = (struct tbv_ring_cb){ .ctx = rail, .tx_done = tbv_rail_tx_done };
	rail->rx_cb = (struct tbv_ring_cb){ .ctx = rail, .start_poll = tbv_rail_start_poll };
	rail->tx = ops->ring_alloc(link, rail->idx, true, n, &rail->tx_cb);
	if (!rail->tx)
		return -ENOMEM;
	rail->rx = ops->ring_alloc(link, rail->idx, false, n, &rail->rx_cb);
	if (!rail->rx)
		return -ENOMEM;

	/* NAPI must be able to run before the first RX interrupt can fire. */
	netif_napi_add(link->ndev, &rail->napi, tbv_rail_poll);
	napi_enable(&rail->napi);
	rail->napi_enabled = true;

	ops->ring_start(rail->tx);
	ops->ring_start(rail->rx);
	for (i = 0; i < n; i++) {
		int ret = ops->ring_rx(rail->rx, rail->frames[i]);

		if (ret)
			return ret;
	}
	tbv_pool_fill(rail, &rail->frames[n], ntx, &rail->frames[n + ntx], nr - n - ntx);
	return 0;
}

int tbv_rails_start(struct tbv_link *link, unsigned int *started)
{
	unsigned int i;
	int ret;

	for (i = 0; i < link->nr_rails; i++) {
		*started = i;
		ret = tbv_rail_start(link, &link->rails[i]);
		if (ret)
			return ret;	/* the caller tears down what was started */
	}
	*started = i;
	return 0;
}

/*
 * Stop traffic, step one: NAPI and the credit timers. The link closes the paths
 * next (without its lock: the backend may wait for its connection manager),
 * then stops the rings with tbv_rails_stop(), as the hardware wants.
 */
void tbv_rails_quiesce(struct tbv_link *link)
{
	unsigned int i;

	for (i = 0; i < TBV_MAX_RAILS; i++) {
		struct tbv_rail *rail = &link->rails[i];

		if (rail->napi_enabled) {
			napi_disable(&rail->napi);
			rail->napi_enabled = false;
		}
		tbv_flow_stop(rail);
	}
}

/* Stop traffic, step two, once the paths are closed: the rings. */
void tbv_rails_stop(struct tbv_link *link)
{
	const struct tbv_link_ops *ops = link->info.ops;
	unsigned int i;

	for (i = 0; i < TBV_MAX_RAILS; i++) {
		struct tbv_rail *rail = &link->rails[i];

		if (rail->tx)
			ops->ring_stop(rail->tx);
		if (rail->rx)
			ops->ring_stop(rail->rx);
		tbv_net_reasm_reset(rail);
	}
}

/* After tbv_rails_stop() and after the netdev (which owns the NAPI contexts) is gone. */
void tbv_rails_free(struct tbv_link *link)
{
	const struct tbv_link_ops *ops = link->info.ops;
	unsigned int i, f;

	for (i = 0; i < TBV_MAX_RAILS; i++) {
		struct tbv_rail *rail = &link->rails[i];

		if (rail->rx)
			ops->ring_free(rail->rx);
		if (rail->tx)
			ops->ring_free(rail->tx);
		rail->rx = NULL;
		rail->tx = NULL;
		for (f = 0; f < rail->nr_frames; f++)
			ops->frame_free(link, rail->frames[f]);
		kfree(rail->frames);
		rail->frames = NULL;
		rail->nr_frames = 0;
		tbv_pool_clear(rail);
	}
}
