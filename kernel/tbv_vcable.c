// SPDX-License-Identifier: GPL-2.0
/*
 * The virtual cable backend: emulates, between two simulated hosts in one
 * kernel, what USB4 hardware gives the link layer: XDomain control packets
 * (at most 252 bytes, answered by type, size, route and protocol UUID only)
 * and NHI rings (4 KiB frames, fixed sizes, frames dropped when no RX buffer
 * is posted, TX completions from a work item, RX start_poll in hard IRQ).
 */
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/platform_device.h>
#include <linux/slab.h>

#include "tbv_plant.h"
#include "tbv_vcable.h"

static struct tbv_vend *tbv_vend_of(struct tbv_link *link)
{
	return tbv_link_backend_priv(link);
}

static struct tbv_vend *tbv_vend_peer(struct tbv_vend *end)
{
	return &end->cable->end[!end->idx];
}

static struct tbv_vring *to_vring(struct tbv_ring *ring)
{
	return container_of(ring, struct tbv_vring, ring);
}

/* ---- control channel ---- */

struct tbv_vctl_pkt {
	struct list_head list;
	bool response;
	size_t size;
	u8 data[TBV_CTL_MAX_BYTES];
};

static int tbv_vcable_ctl_send(struct tbv_vend *from, bool response, const void *buf,
			       size_t size)
{
	struct tbv_vend *to = tbv_vend_peer(from);
	struct tbv_vctl_pkt *pkt;

	if (size < TBV_CTL_MIN_BYTES || size > TBV_CTL_MAX_BYTES || size % 4)
		return -EINVAL;
	pkt = kmalloc(sizeof(*pkt), GFP_KERNEL);
	if (!pkt)
		return -ENOMEM;
	pkt->response = response;
	pkt->size = size;
	memcpy(pkt->data, buf, size);

	spin_lock(&to->ctl_lock);
	if (!to->alive || to->ctl_queued >= TBV_VCABLE_CTL_QUEUE_MAX) {
		/* Nobody there, or a flood: the packet is lost, as on the wire. */
		spin_unlock(&to->ctl_lock);
		kfree(pkt);
		return 0;
	}
	list_add_tail(&pkt->list, &to->ctl_rx);
	to->ctl_queued++;
	queue_work(system_wq, &to->ctl_work);
	spin_unlock(&to->ctl_lock);
	return 0;
}

/* Match a response to our outstanding request the way thunderbolt.ko does. */
static void tbv_vcable_ctl_match(struct tbv_vend *end, const struct tbv_vctl_pkt *pkt)
{
	const u32 *w = (const u32 *)pkt->data;

	spin_lock(&end->ctl_lock);
	if (end->pending.active && pkt->size >= end->pending.size &&
	    (w[0] & ~BIT(31)) == end->pending.route_hi && w[1] == end->pending.route_lo &&
	    !memcmp(pkt->data + 12, end->pending.uuid, TBV_UUID_LEN)) {
		memcpy(end->pending.buf, pkt->data, end->pending.size);
		end->pending.active = false;
		end->pending.status = 0;
		complete(&end->pending.done);
	}
	spin_unlock(&end->ctl_lock);
}

/* The control ring's RX work: handlers first, then the waiting request. */
static void tbv_vcable_ctl_work(struct work_struct *work)
{
	struct tbv_vend *end = container_of(work, struct tbv_vend, ctl_work);

	for (;;) {
		struct tbv_vctl_pkt *pkt;
		struct tbv_link *link;
		bool consumed = false;

		spin_lock(&end->ctl_lock);
		pkt = list_first_entry_or_null(&end->ctl_rx, struct tbv_vctl_pkt, list);
		if (pkt) {
			list_del(&pkt->list);
			end->ctl_queued--;
		}
		link = end->link;
		spin_unlock(&end->ctl_lock);
		if (!pkt)
			break;
		/* The link is only cleared after this work is canceled. */
		if (link)
			consumed = tbv_link_ctl_rx(link, pkt->data, pkt->size);
		if (!consumed && pkt->response)
			tbv_vcable_ctl_match(end, pkt);
		kfree(pkt);
	}
}

static int tbv_vcable_ctl_request(struct tbv_link *link, const void *req, size_t size,
				  void *resp, size_t resp_size, unsigned int timeout_ms)
{
	struct tbv_vend *end = tbv_vend_of(link);
	const u32 *w = req;
	int ret;

	if (size < TBV_CTL_MIN_BYTES || size > TBV_CTL_MAX_BYTES || resp_size > TBV_CTL_MAX_BYTES)
		return -EINVAL;

	mutex_lock(&end->req_mutex);
	spin_lock(&end->ctl_lock);
	if (!end->alive) {
		spin_unlock(&end->ctl_lock);
		mutex_unlock(&end->req_mutex);
		return -ENODEV;
	}
	end->pending.active = true;
	end->pending.status = -ETIMEDOUT;
	end->pending.buf = resp;
	end->pending.size = resp_size;
	end->pending.route_hi = w[0];
	end->pending.route_lo = w[1];
	memcpy(end->pending.uuid, (const u8 *)req + 12, TBV_UUID_LEN);
	reinit_completion(&end->pending.done);
	memcpy(end->last_req, req, size);
	end->last_req_size = size;
	spin_unlock(&end->ctl_lock);

	ret = tbv_vcable_ctl_send(end, false, req, size);
	if (!ret)
		wait_for_completion_timeout(&end->pending.done, msecs_to_jiffies(timeout_ms));

	spin_lock(&end->ctl_lock);
	if (!ret)
		ret = end->pending.status;
	end->pending.active = false;
	spin_unlock(&end->ctl_lock);
	mutex_unlock(&end->req_mutex);
	return ret;
}

/*
 * Testing, a hostile peer: @from sends a control request it never made (a
 * crafted one, or a replay of tbv_vcable_ctl_last()); it is lost like any
 * other when the receiver's queue is full.
 */
int tbv_vcable_ctl_inject(struct tbv_vend *from, const void *data, size_t size)
{
	return tbv_vcable_ctl_send(from, false, data, size);
}

/* Testing: a copy of the last control request @end sent; its size (0: none yet). */
size_t tbv_vcable_ctl_last(struct tbv_vend *end, void *buf, size_t size)
{
	size_t n;

	spin_lock(&end->ctl_lock);
	n = end->last_req_size;
	if (buf) {
		/* configfs sized @buf from an earlier call: nothing stale past our bytes */
		memset(buf, 0, size);
		memcpy(buf, end->last_req, min(n, size));
	}
	spin_unlock(&end->ctl_lock);
	return n;
}

static int tbv_vcable_ctl_response(struct tbv_link *link, const void *resp, size_t size)
{
	return tbv_vcable_ctl_send(tbv_vend_of(link), true, resp, size);
}

/* ---- HopIDs and paths ---- */

static int tbv_vcable_hopids_alloc(struct tbv_link *link, unsigned int rails, u32 *hopids)
{
	struct tbv_vend *end = tbv_vend_of(link);
	unsigned int i;

	for (i = 0; i < rails; i++)
		hopids[i] = end->hopids[i] = TBV_MIN_HOPID + i;
	end->nr_hopids = rails;
	return 0;
}

static void tbv_vcable_hopids_release(struct tbv_link *link)
{
	tbv_vend_of(link)->nr_hopids = 0;
}

static int tbv_vcable_paths_enable(struct tbv_link *link, const struct tbv_login_agreed *agreed,
				   unsigned int *opened)
{
	struct tbv_vend *end = tbv_vend_of(link), *peer = tbv_vend_peer(end);
	struct tbv_vcable *cable = end->cable;
	unsigned int tunnels = end->idx == 1 ? READ_ONCE(cable->end1_dma_tunnels) : 0;
	unsigned int delay_ms = end->idx == 1 ? READ_ONCE(cable->end1_paths_delay_ms) : 0;
	unsigned int i;
	int ret = 0;

	*opened = 0;
	/* A HopID the peer did not allocate would route its frames nowhere. */
	for (i = 0; i < agreed->rails; i++) {
		if (i >= peer->nr_hopids || agreed->peer_tx_hopid[i] != peer->hopids[i])
			return -EINVAL;
	}
	if (delay_ms) {
		/* lets a test unplug while a bring-up is about to open its paths */
		dev_info(&end->pdev->dev, "end %u opens its paths in %u ms (testing)\n",
			 end->idx, delay_ms);
		msleep(delay_ms);
	}
	mutex_lock(&cable->cm_lock);
	if (end->idx == 1 && READ_ONCE(cable->end1_rings_busy)) {
		ret = -EBUSY;	/* as when another peer took the controller's free rings */
	} else if (tunnels && agreed->rails > tunnels) {
		/* Like a firmware connection manager: one DMA tunnel per peer, not more. */
		*opened = tunnels;
		ret = -EOPNOTSUPP;
	} else {
		spin_lock(&cable->wire_lock);
		end->paths_open = true;
		spin_unlock(&cable->wire_lock);
	}
	mutex_unlock(&cable->cm_lock);
	return ret;
}

static void tbv_vcable_paths_disable(struct tbv_link *link)
{
	struct tbv_vend *end = tbv_vend_of(link);
	struct tbv_vcable *cable = end->cable;
	bool locked = !READ_ONCE(cable->unplugging);

	if (locked)
		mutex_lock(&cable->cm_lock);
	spin_lock(&cable->wire_lock);
	end->paths_open = false;
	spin_unlock(&cable->wire_lock);
	if (locked)
		mutex_unlock(&cable->cm_lock);
}

/* ---- rings ---- */

/* Like the NHI's MSI-X handler: hard IRQ, ring lock held. */
static void tbv_vring_start_poll(struct tbv_vring *r)
{
	unsigned long flags;

	spin_lock_irqsave(&r->lock, flags);
	if (r->running) {
		r->last_irq_ns = ktime_get_ns();
		r->ring.cb->start_poll(r->ring.cb->ctx);
	}
	spin_unlock_irqrestore(&r->lock, flags);
}

static void tbv_vring_irq(struct irq_work *work)
{
	tbv_vring_start_poll(container_of(work, struct tbv_vring, irq));
}

/* The held-back interrupt: raised as any other, so it runs in the same context. */
static enum hrtimer_restart tbv_vring_throttle_expired(struct hrtimer *timer)
{
	irq_work_queue(&container_of(timer, struct tbv_vring, throttle)->irq);
	return HRTIMER_NORESTART;
}

/* The SOF PDF the receiving controller reports for @tx (the cable's rx_sof). */
static u8 tbv_vcable_rx_sof(const struct tbv_vcable *cable, const struct tbv_frame *tx)
{
	switch (READ_ONCE(cable->rx_sof)) {
	case TBV_VCABLE_RX_SOF_ZERO_ONE_PACKET:
		return tx->size <= TBV_VCABLE_TRANSPORT_PACKET ? 0 : tx->sof;
	case TBV_VCABLE_RX_SOF_ZERO:
		return 0;
	default:
		return tx->sof;
	}
}

/*
 * Raise the RX interrupt (r->lock held). thunderbolt.ko programs the NHI to
 * space a vector's interrupts at least 128 us apart; with irq_throttle_us set
 * the cable does the same, so the cost of that throttle can be seen here.
 */
static void tbv_vring_raise(struct tbv_vring *r)
{
	struct tbv_vcable *cable = r->end->cable;
	u64 throttle_ns = (u64)READ_ONCE(cable->irq_throttle_us) * NSEC_PER_USEC;
	u64 now;

	r->irq_masked = true;
	if (throttle_ns) {
		now = ktime_get_ns();
		if (now - r->last_irq_ns < throttle_ns) {
			hrtimer_start(&r->throttle, ns_to_ktime(r->last_irq_ns + throttle_ns - now),
				      HRTIMER_MODE_REL_HARD);
			atomic64_inc(&cable->stats[!r->end->idx][r->ring.rail].irqs_throttled);
			return;
		}
	}
	irq_work_queue(&r->irq);
}

static struct tbv_ring *tbv_vcable_ring_alloc(struct tbv_link *link, unsigned int rail,
					      bool tx, unsigned int size,
					      const struct tbv_ring_cb *cb)
{
	struct tbv_vend *end = tbv_vend_of(link);
	struct tbv_vring *r;

	if (rail >= TBV_MAX_RAILS || !size || (tx && !cb->tx_done) || (!tx && !cb->start_poll))
		return NULL;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return NULL;
	r->ring = (struct tbv_ring){ .link = link, .rail = rail, .tx = tx, .size = size,
				     .cb = cb };
	r->end = end;
	spin_lock_init(&r->lock);
	INIT_LIST_HEAD(&r->queue);
	INIT_LIST_HEAD(&r->done);
	init_irq_work(&r->irq, tbv_vring_irq);
	hrtimer_setup(&r->throttle, tbv_vring_throttle_expired, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);

	spin_lock(&end->cable->wire_lock);
	if (end->rings[rail][tx]) {
		spin_unlock(&end->cable->wire_lock);
		kfree(r);
		return NULL;	/* ring in use */
	}
	end->rings[rail][tx] = r;
	spin_unlock(&end->cable->wire_lock);
	return &r->ring;
}

static void tbv_vcable_ring_start(struct tbv_ring *ring)
{
	struct tbv_vring *r = to_vring(ring);
	unsigned long flags;

	spin_lock_irqsave(&r->lock, flags);
	r->running = true;
	r->irq_masked = false;
	spin_unlock_irqrestore(&r->lock, flags);
}

static void tbv_vcable_ring_stop(struct tbv_ring *ring)
{
	struct tbv_vring *r = to_vring(ring);
	struct tbv_frame *f, *tmp;
	unsigned long flags;
	LIST_HEAD(canceled);

	spin_lock_irqsave(&r->lock, flags);
	r->running = false;
	list_splice_init(&r->queue, &canceled);
	r->queued = 0;
	INIT_LIST_HEAD(&r->done);	/* RX frames without callback: the owner has them */
	spin_unlock_irqrestore(&r->lock, flags);

	if (ring->tx) {
		list_for_each_entry_safe(f, tmp, &canceled, list) {
			list_del(&f->list);
			ring->cb->tx_done(ring->cb->ctx, f, true);
		}
		/* Frames the wire already took complete there; wait for them. */
		flush_delayed_work(&r->end->wire_work);
	} else {
		hrtimer_cancel(&r->throttle);
		irq_work_sync(&r->irq);
	}
}

static void tbv_vcable_ring_free(struct tbv_ring *ring)
{
	struct tbv_vring *r = to_vring(ring);
	struct tbv_vend *end = r->end;

	spin_lock(&end->cable->wire_lock);
	end->rings[ring->rail][ring->tx] = NULL;
	spin_unlock(&end->cable->wire_lock);
	/* a wire work kicked after ring_stop() (a fault setting) may hold the ring */
	if (ring->tx)
		flush_delayed_work(&end->wire_work);
	kfree(r);
}

static int tbv_vcable_ring_tx(struct tbv_ring *ring, struct tbv_frame *frame)
{
	struct tbv_vring *r = to_vring(ring);
	unsigned long flags;
	bool timed;

	if (!ring->tx || !frame->size || frame->size > TBV_FRAME_SIZE)
		return -EINVAL;
	spin_lock_irqsave(&r->lock, flags);
	if (!r->running) {
		spin_unlock_irqrestore(&r->lock, flags);
		return -ESHUTDOWN;
	}
	/* Like the NHI, frames beyond the ring size wait in a software queue. */
	timed = tbv_vcable_faults_timed(r->end);
	/* the clock only when it matters: a frame queued at 0 is never delayed */
	container_of(frame, struct tbv_vframe, frame)->queued_ns = timed ? ktime_get_ns() : 0;
	list_add_tail(&frame->list, &r->queue);
	r->queued++;
	spin_unlock_irqrestore(&r->lock, flags);
	/* a wire waiting for a delayed frame of another rail looks again now */
	if (timed)
		mod_delayed_work(system_unbound_wq, &r->end->wire_work, 0);
	else
		queue_delayed_work(system_unbound_wq, &r->end->wire_work, 0);
	return 0;
}

static int tbv_vcable_ring_rx(struct tbv_ring *ring, struct tbv_frame *frame)
{
	struct tbv_vring *r = to_vring(ring);
	unsigned long flags;
	int ret = 0;

	if (ring->tx)
		return -EINVAL;
	spin_lock_irqsave(&r->lock, flags);
	if (!r->running)
		ret = -ESHUTDOWN;
	else if (r->queued >= ring->size)
		ret = -ENOBUFS;		/* every descriptor already holds a buffer */
	else {
		list_add_tail(&frame->list, &r->queue);
		r->queued++;
	}
	spin_unlock_irqrestore(&r->lock, flags);
	return ret;
}

static struct tbv_frame *tbv_vcable_ring_poll(struct tbv_ring *ring)
{
	struct tbv_vring *r = to_vring(ring);
	struct tbv_frame *f;
	unsigned long flags;

	spin_lock_irqsave(&r->lock, flags);
	f = list_first_entry_or_null(&r->done, struct tbv_frame, list);
	if (f)
		list_del(&f->list);
	spin_unlock_irqrestore(&r->lock, flags);
	return f;
}

static void tbv_vcable_ring_poll_complete(struct tbv_ring *ring)
{
	struct tbv_vring *r = to_vring(ring);
	unsigned long flags;

	spin_lock_irqsave(&r->lock, flags);
	r->irq_masked = false;
	/* Completions that arrived while masked raise the interrupt again, if replayed. */
	if (r->running && READ_ONCE(r->end->cable->irq_replay) && !list_empty(&r->done))
		tbv_vring_raise(r);
	spin_unlock_irqrestore(&r->lock, flags);
}

/*
 * A TX frame's bytes, as the controller's DMA reads them: from its buffer, or
 * for zero-copy TX from the MR's page it names.
 */
static void tbv_vcable_frame_read(const struct tbv_frame *tx, void *to)
{
	void *p;

	if (!tx->page) {
		memcpy(to, tx->data, tx->size);
		return;
	}
	p = kmap_local_page(tx->page);
	memcpy(to, p + tx->page_off, tx->size);
	kunmap_local(p);
}

/*
 * Put one frame from @from on the wire of @rail: into the peer's next RX
 * buffer, damaged if @corrupt; lost as if no buffer were posted if @stall.
 */
static void tbv_vcable_deliver(struct tbv_vend *from, unsigned int rail,
			       const struct tbv_frame *tx, bool corrupt, bool stall)
{
	struct tbv_vcable *cable = from->cable;
	struct tbv_vcable_dir_stats *st = &cable->stats[from->idx][rail];
	struct tbv_vend *to = tbv_vend_peer(from);
	struct tbv_vring *r;
	struct tbv_frame *rx;
	unsigned long flags;

	spin_lock(&cable->wire_lock);
	r = to->rings[rail][0];
	if (!from->paths_open || !to->paths_open || !r) {
		spin_unlock(&cable->wire_lock);
		atomic64_inc(&st->dropped_path_closed);
		return;
	}
	spin_lock_irqsave(&r->lock, flags);
	rx = r->running && !stall ? list_first_entry_or_null(&r->queue, struct tbv_frame, list) :
				    NULL;
	if (!rx) {
		spin_unlock_irqrestore(&r->lock, flags);
		spin_unlock(&cable->wire_lock);
		atomic64_inc(&st->dropped_no_buffer);
		return;
	}
	list_del(&rx->list);
	r->queued--;
	tbv_vcable_frame_read(tx, rx->data);	/* the "DMA" */
	rx->size = tx->size;
	rx->sof = tbv_vcable_rx_sof(cable, tx);
	rx->eof = tx->eof;
	rx->flags = 0;
	if (corrupt)
		tbv_vcable_corrupt(rx);
	list_add_tail(&rx->list, &r->done);
	if (!r->irq_masked)
		tbv_vring_raise(r);
	spin_unlock_irqrestore(&r->lock, flags);
	spin_unlock(&cable->wire_lock);
	atomic64_inc(&st->frames);
	atomic64_add(tx->size, &st->bytes);
	if (corrupt)
		atomic64_inc(&st->corrupted);
}

/* Deliver the frame held back on @rail, if any (wire_work). */
static void tbv_vcable_release_held(struct tbv_vend *from, unsigned int rail)
{
	struct tbv_frame *held = &from->held[rail];

	if (!held->size)
		return;
	tbv_vcable_deliver(from, rail, held, false, tbv_vcable_fault_stalled(from, rail));
	held->size = 0;
}

/*
 * Testing: @from "sends" a frame it never queued (a crafted one, from a
 * hostile-peer test) on @rail: it reaches the peer's RX ring like any other.
 */
int tbv_vcable_inject(struct tbv_vend *from, unsigned int rail, const void *data, u32 size,
		      u8 sof, u8 eof)
{
	struct tbv_frame f = { .data = (void *)data, .size = size, .sof = sof, .eof = eof };

	/* what a real NHI could put on the wire: 1..4096 bytes; a stalled receiver loses it */
	if (rail >= TBV_MAX_RAILS || !size || size > TBV_FRAME_SIZE)
		return -EINVAL;
	tbv_vcable_deliver(from, rail, &f, false, tbv_vcable_fault_stalled(from, rail));
	return 0;
}

/*
 * The frame @tx arrives cut into several (the cut and cut_split faults), as a
 * controller that rebuilds frames by masks that end one at the wrong packet
 * would deliver it: true if it was.
 */
static bool tbv_vcable_deliver_cut(struct tbv_vend *from, unsigned int rail,
				   const struct tbv_frame *tx, bool stall)
{
	struct tbv_frame piece = { .sof = tx->sof, .eof = tx->eof };
	bool every;
	u32 cut = tbv_vcable_fault_cut(from, rail, tx, &every), off;
	u8 *bytes;

	if (!cut)
		return false;
	bytes = tx->page ? kmap_local_page(tx->page) + tx->page_off : tx->data;
	for (off = 0; off < tx->size; off += piece.size) {
		piece.data = bytes + off;
		piece.size = off && !every ? tx->size - off : min(cut, tx->size - off);
		tbv_vcable_deliver(from, rail, &piece, false, stall);
	}
	if (tx->page)
		kunmap_local(bytes);
	atomic64_inc(&from->cable->stats[from->idx][rail].cut);
	return true;
}

/* One frame through the injected faults (tbv_vcable_fault.c), then onto the wire. */
static void tbv_vcable_transmit(struct tbv_vend *from, unsigned int rail,
				const struct tbv_frame *tx)
{
	struct tbv_vcable_dir_stats *st = &from->cable->stats[from->idx][rail];
	struct tbv_frame *held = &from->held[rail];
	struct tbv_fault_plan plan;

	tbv_vcable_fault_plan(from, rail, &plan);
	if (plan.drop) {
		atomic64_inc(&st->dropped_fault);
		return;
	}
	if (plan.hold && !held->size) {
		/* sent after the next frame of this rail (or when the ring runs dry) */
		held->data = from->held_buf + rail * TBV_FRAME_SIZE;
		tbv_vcable_frame_read(tx, held->data);
		held->size = tx->size;
		held->sof = tx->sof;
		held->eof = tx->eof;
		atomic64_inc(&st->reordered);
		return;
	}
	if (tbv_vcable_deliver_cut(from, rail, tx, plan.stall)) {
		tbv_vcable_release_held(from, rail);
		return;
	}
	tbv_vcable_deliver(from, rail, tx, plan.corrupt, plan.stall);
	if (plan.dup) {
		atomic64_inc(&st->duplicated);
		tbv_vcable_deliver(from, rail, tx, false, plan.stall);
	}
	tbv_vcable_release_held(from, rail);
}

/*
 * Send every frame queued on TX ring @r (no delay or rate limit is set; if one
 * is set meanwhile, it applies from the wire work's next pass).
 */
static void tbv_vcable_drain(struct tbv_vend *end, unsigned int rail, struct tbv_vring *r)
{
	for (;;) {
		struct tbv_frame *f;
		unsigned long flags;

		spin_lock_irqsave(&r->lock, flags);
		f = list_first_entry_or_null(&r->queue, struct tbv_frame, list);
		if (f) {
			list_del(&f->list);
			r->queued--;
		}
		spin_unlock_irqrestore(&r->lock, flags);
		if (!f)
			return;
		tbv_vcable_transmit(end, rail, f);
		r->ring.cb->tx_done(r->ring.cb->ctx, f, false);
	}
}

/*
 * With a delay or a rate limit set, the rails share one timed wire: of the
 * frames whose time has come, the one queued first leaves first, whatever its
 * rail. Draining rail by rail would let a backlogged rail 0 take every free
 * moment of a rate-limited wire and starve rail 1, and striped packets wait
 * for each other (a gap on one rail holds the packets of all behind it) long
 * enough for ACK timeouts. Returns how long (ns) the next frame must still
 * wait, or 0 when every queue is empty.
 */
static u64 tbv_vcable_drain_timed(struct tbv_vend *end)
{
	for (;;) {
		struct tbv_vring *rings[TBV_MAX_RAILS], *ready = NULL;
		u64 now = ktime_get_ns(), wait = 0, ready_ns = 0;
		unsigned int rail, ready_rail = 0;
		struct tbv_frame *f;
		unsigned long flags;

		spin_lock(&end->cable->wire_lock);
		for (rail = 0; rail < TBV_MAX_RAILS; rail++)
			rings[rail] = end->rings[rail][1];
		spin_unlock(&end->cable->wire_lock);
		/* A TX ring is freed only after this work is flushed (ring_free()). */
		for (rail = 0; rail < TBV_MAX_RAILS; rail++) {
			u64 queued_ns = 0, w = 0;

			f = NULL;
			if (rings[rail]) {
				spin_lock_irqsave(&rings[rail]->lock, flags);
				f = list_first_entry_or_null(&rings[rail]->queue, struct tbv_frame, list);
				if (f)
					queued_ns = container_of(f, struct tbv_vframe, frame)->queued_ns;
				spin_unlock_irqrestore(&rings[rail]->lock, flags);
			}
			if (!f) {
				tbv_vcable_release_held(end, rail);
				continue;
			}
			w = tbv_vcable_fault_wait(end, rail, queued_ns, now);
			if (w)
				wait = wait ? min(wait, w) : w;
			else if (!ready || queued_ns < ready_ns)
				ready = rings[rail], ready_ns = queued_ns, ready_rail = rail;
		}
		if (!ready)
			return wait;
		/* only this work takes frames off a TX queue: the head is still the one seen */
		spin_lock_irqsave(&ready->lock, flags);
		f = list_first_entry_or_null(&ready->queue, struct tbv_frame, list);
		if (f) {
			list_del(&f->list);
			ready->queued--;
		}
		spin_unlock_irqrestore(&ready->lock, flags);
		if (!f)
			continue;
		tbv_vcable_fault_sent(end, ready_rail, f->size, now);
		tbv_vcable_transmit(end, ready_rail, f);
		ready->ring.cb->tx_done(ready->ring.cb->ctx, f, false);
	}
}

/* Every TX ring of this end in turn, in order per ring (no delay or rate limit). */
static void tbv_vcable_drain_rails(struct tbv_vend *end)
{
	unsigned int rail;

	for (rail = 0; rail < TBV_MAX_RAILS; rail++) {
		struct tbv_vring *r;

		spin_lock(&end->cable->wire_lock);
		r = end->rings[rail][1];
		spin_unlock(&end->cable->wire_lock);
		/* A TX ring is freed only after this work is flushed (ring_free()). */
		if (r)
			tbv_vcable_drain(end, rail, r);
		tbv_vcable_release_held(end, rail);
	}
}

/*
 * The sending end's DMA engine: drain every TX ring of this end (in order per
 * ring; with a delay or a rate limit, in order over all rails). Frames held by
 * a delay or a rate limit are looked at again when due: short waits sleep
 * here, longer ones come back as a timer.
 */
static void tbv_vcable_wire_work(struct work_struct *work)
{
	struct tbv_vend *end = container_of(to_delayed_work(work), struct tbv_vend, wire_work);
	u64 wait;

	do {
		wait = 0;
		if (tbv_vcable_faults_timed(end))
			wait = tbv_vcable_drain_timed(end);
		else
			tbv_vcable_drain_rails(end);
		if (wait > 2 * NSEC_PER_MSEC) {
			queue_delayed_work(system_unbound_wq, &end->wire_work,
					   nsecs_to_jiffies(wait) + 1);
			return;
		}
		if (wait)
			usleep_range(div_u64(wait, NSEC_PER_USEC) + 1,
				     div_u64(wait, NSEC_PER_USEC) + 50);
	} while (wait);
}

/* ---- frames ---- */

static struct tbv_frame *tbv_vcable_frame_alloc(struct tbv_link *link)
{
	struct tbv_vframe *vf = kzalloc(sizeof(*vf), GFP_KERNEL);

	if (!vf)
		return NULL;
	vf->frame.data = kmalloc(TBV_FRAME_SIZE, GFP_KERNEL);
	if (!vf->frame.data) {
		kfree(vf);
		return NULL;
	}
	INIT_LIST_HEAD(&vf->frame.list);
	return &vf->frame;
}

static void tbv_vcable_frame_free(struct tbv_link *link, struct tbv_frame *frame)
{
	kfree(frame->data);
	kfree(container_of(frame, struct tbv_vframe, frame));
}

static const struct tbv_link_ops tbv_vcable_ops = {
	.ctl_request = tbv_vcable_ctl_request,
	.ctl_response = tbv_vcable_ctl_response,
	.hopids_alloc = tbv_vcable_hopids_alloc,
	.hopids_release = tbv_vcable_hopids_release,
	.ring_alloc = tbv_vcable_ring_alloc,
	.ring_free = tbv_vcable_ring_free,
	.ring_start = tbv_vcable_ring_start,
	.ring_stop = tbv_vcable_ring_stop,
	.ring_tx = tbv_vcable_ring_tx,
	.ring_rx = tbv_vcable_ring_rx,
	.ring_poll = tbv_vcable_ring_poll,
	.ring_poll_complete = tbv_vcable_ring_poll_complete,
	.frame_alloc = tbv_vcable_frame_alloc,
	.frame_free = tbv_vcable_frame_free,
	.paths_enable = tbv_vcable_paths_enable,
	.paths_disable = tbv_vcable_paths_disable,
};

/* ---- plugging ---- */

/* The cable is going away (unplugged, its works idle). */
void tbv_vcable_cleanup(struct tbv_vcable *cable)
{
	/* setting faults kicks the wire even while unplugged */
	cancel_delayed_work_sync(&cable->end[0].wire_work);
	cancel_delayed_work_sync(&cable->end[1].wire_work);
	kfree(cable->end[0].held_buf);
	kfree(cable->end[1].held_buf);
}

void tbv_vcable_setup(struct tbv_vcable *cable)
{
	unsigned int i;

	mutex_init(&cable->lock);
	mutex_init(&cable->cm_lock);
	spin_lock_init(&cable->wire_lock);
	cable->rails = 1;
	cable->lanes = 2;
	cable->lane_gbps = 20;
	cable->ring_size = 256;
	cable->irq_replay = 1;
	for (i = 0; i < 2; i++) {
		struct tbv_vend *end = &cable->end[i];

		end->cable = cable;
		end->idx = i;
		uuid_gen(&end->uuid);
		INIT_DELAYED_WORK(&end->wire_work, tbv_vcable_wire_work);
		tbv_vcable_faults_clear(&end->faults);
		INIT_WORK(&end->ctl_work, tbv_vcable_ctl_work);
		spin_lock_init(&end->ctl_lock);
		INIT_LIST_HEAD(&end->ctl_rx);
		mutex_init(&end->req_mutex);
		init_completion(&end->pending.done);
	}
}

static void tbv_vend_stop_ctl(struct tbv_vend *end)
{
	struct tbv_vctl_pkt *pkt, *tmp;

	spin_lock(&end->ctl_lock);
	end->alive = false;
	if (end->pending.active) {
		end->pending.active = false;
		end->pending.status = -ENODEV;
		complete(&end->pending.done);
	}
	spin_unlock(&end->ctl_lock);
	cancel_work_sync(&end->ctl_work);
	list_for_each_entry_safe(pkt, tmp, &end->ctl_rx, list) {
		list_del(&pkt->list);
		kfree(pkt);
	}
	end->ctl_queued = 0;
}

/*
 * Nothing of a previous session stays on the wire: a burst, a held frame, the
 * rate. The end has no rings; a fault setting may still have kicked its work.
 */
static void tbv_vend_reset_wire(struct tbv_vend *end)
{
	unsigned int rail;

	cancel_delayed_work_sync(&end->wire_work);
	end->burst_left = 0;
	end->wire_free_ns = 0;
	for (rail = 0; rail < TBV_MAX_RAILS; rail++)
		end->held[rail].size = 0;
}

/* The host at @end boots: its link to the peer starts logging in. */
static int tbv_vend_start(struct tbv_vend *end)
{
	struct tbv_vcable *cable = end->cable;
	struct tbv_link_info info = {
		.ops = &tbv_vcable_ops,
		.backend_priv = end,
		.parent = &end->pdev->dev,
		.backend_name = "vcable",
		.route = TBV_VCABLE_ROUTE,
		.max_rails = cable->rails,
		.ring_size = cable->ring_size,
		.lanes = cable->lanes,
		.lane_gbps = cable->lane_gbps,
		.proto_version = end->idx == 1 ? cable->end1_proto_version : 0,
	};
	struct tbv_link *link;

	memcpy(info.local_uuid, &end->uuid, TBV_UUID_LEN);
	memcpy(info.peer_uuid, &tbv_vend_peer(end)->uuid, TBV_UUID_LEN);
	spin_lock(&end->ctl_lock);
	end->alive = true;
	spin_unlock(&end->ctl_lock);
	link = tbv_link_create(&info);
	if (IS_ERR(link)) {
		spin_lock(&end->ctl_lock);
		end->alive = false;
		spin_unlock(&end->ctl_lock);
		return PTR_ERR(link);
	}
	spin_lock(&end->ctl_lock);
	end->link = link;
	spin_unlock(&end->ctl_lock);
	return 0;
}

/* The host at @end is gone without a word (a crash, a power cut): no logout. */
static void tbv_vend_vanish(struct tbv_vend *end)
{
	struct tbv_link *link;

	tbv_vend_stop_ctl(end);
	link = end->link;
	end->link = NULL;
	end->suspended = false;
	if (link)
		tbv_link_destroy(link);
	cancel_delayed_work_sync(&end->wire_work);
}

/*
 * Testing: the host at end @idx suspends (its link says LOGOUT and takes its
 * devices down, as the USB4 backend's PM hooks do) or resumes (logs in again).
 */
int tbv_vcable_end_set_suspended(struct tbv_vcable *cable, unsigned int idx, bool suspended)
{
	struct tbv_vend *end = &cable->end[idx];

	lockdep_assert_held(&cable->lock);
	if (!cable->plugged || !end->link)
		return -ENOTCONN;
	if (suspended == end->suspended)
		return 0;
	if (suspended)
		tbv_link_suspend(end->link);
	else
		tbv_link_resume(end->link);
	end->suspended = suspended;
	return 0;
}

/*
 * Testing, "peer vanishes": the host at end @idx stops (its link destroyed with
 * no logout, the cable still plugged) or boots again (a new login session, which
 * makes the other end reset its devices). Its faults and the cable stay as set.
 */
int tbv_vcable_end_set_running(struct tbv_vcable *cable, unsigned int idx, bool running)
{
	struct tbv_vend *end = &cable->end[idx];

	lockdep_assert_held(&cable->lock);
	if (!cable->plugged)
		return -ENOTCONN;
	if (running == !!end->link)
		return 0;
	if (!running) {
		tbv_vend_vanish(end);
		return 0;
	}
	tbv_vend_reset_wire(end);
	return tbv_vend_start(end);
}

void tbv_vcable_unplug(struct tbv_vcable *cable)
{
	struct tbv_link *links[2];
	unsigned int i;

	lockdep_assert_held(&cable->lock);
	if (!cable->plugged)
		return;
	/*
	 * As thunderbolt.ko removes services, under the connection manager's
	 * lock, and as the USB4 backend's remove() does: each end's control
	 * channel is stopped (its work waited for), then its link.
	 */
	mutex_lock(&cable->cm_lock);
	WRITE_ONCE(cable->unplugging, true);
	for (i = 0; i < 2; i++) {
		tbv_vend_stop_ctl(&cable->end[i]);
		links[i] = cable->end[i].link;
		cable->end[i].link = NULL;
		cable->end[i].suspended = false;
		if (links[i] && !tbv_link_stop(links[i]))
			dev_info(&cable->end[i].pdev->dev,
				 "end %u: removing the link once its bring-up or teardown ends\n", i);
	}
	mutex_unlock(&cable->cm_lock);
	for (i = 0; i < 2; i++) {
		if (links[i])
			tbv_link_destroy(links[i]);
	}
	WRITE_ONCE(cable->unplugging, false);
	for (i = 0; i < 2; i++) {
		struct tbv_vend *end = &cable->end[i];

		cancel_delayed_work_sync(&end->wire_work);
		platform_device_unregister(end->pdev);
		end->pdev = NULL;
	}
	cable->plugged = false;
}

int tbv_vcable_plug(struct tbv_vcable *cable)
{
	unsigned int i, r;
	int ret;

	lockdep_assert_held(&cable->lock);
	if (cable->plugged)
		return 0;
	tbv_plant_bug();
	for (i = 0; i < 2; i++) {
		for (r = 0; r < TBV_MAX_RAILS; r++) {
			struct tbv_vcable_dir_stats *st = &cable->stats[i][r];

			atomic64_set(&st->frames, 0);
			atomic64_set(&st->bytes, 0);
			atomic64_set(&st->dropped_no_buffer, 0);
			atomic64_set(&st->dropped_path_closed, 0);
			atomic64_set(&st->dropped_fault, 0);
			atomic64_set(&st->duplicated, 0);
			atomic64_set(&st->reordered, 0);
			atomic64_set(&st->corrupted, 0);
			atomic64_set(&st->irqs_throttled, 0);
		}
		tbv_vend_reset_wire(&cable->end[i]);
	}
	for (i = 0; i < 2; i++) {
		struct tbv_vend *end = &cable->end[i];

		end->pdev = platform_device_register_simple(TBV_VCABLE_DRV_NAME,
							    PLATFORM_DEVID_AUTO, NULL, 0);
		if (IS_ERR(end->pdev)) {
			ret = PTR_ERR(end->pdev);
			end->pdev = NULL;
			goto err;
		}
		end->alive = true;
	}
	cable->plugged = true;	/* from here on, unplug undoes whatever exists */
	for (i = 0; i < 2; i++) {
		ret = tbv_vend_start(&cable->end[i]);
		if (ret) {
			tbv_vcable_unplug(cable);
			return ret;
		}
	}
	return 0;

err:
	for (i = 0; i < 2; i++) {
		cable->end[i].alive = false;
		if (cable->end[i].pdev)
			platform_device_unregister(cable->end[i].pdev);
		cable->end[i].pdev = NULL;
	}
	return ret;
}
