// SPDX-License-Identifier: GPL-2.0
/*
 * A rail's frames, allocated at bring-up (tbv_rail.c) and lent out here: the
 * TX pool, which NET, RDMA and credit frames share, and the spare RX buffers
 * that striping posts in place of frames a QP holds. This file is the only one
 * that takes or returns a TX frame, and the pool's rules live here:
 *
 * - a frame for the wire also takes a credit when the link agreed credits
 *   (the arithmetic is proto/tbv_credit.c; credit frames are tbv_flow.c's);
 * - a requester packet leaves TBV_TX_RESERVE frames to ACKs and READ
 *   responses, so a busy requester cannot starve the answers its peer waits for;
 * - a sender that found nothing waits on the rail and is woken, by its work
 *   item, when frames or credits come back; the netdev's queue is restarted
 *   through rail->net_tx_wake.
 *
 * Locking: the TX pool, its waiters and the TX side of the credits are under
 * the rail's tx_lock; the spares under rx_spare_lock.
 */
#include "tbv.h"

/* A rail starts: empty pools; @net_tx_wake is the netdev's (a call up, hence a pointer). */
void tbv_pool_init(struct tbv_rail *rail, void (*net_tx_wake)(struct tbv_rail *rail))
{
	INIT_LIST_HEAD(&rail->tx_free);
	rail->tx_nfree = 0;
	INIT_LIST_HEAD(&rail->tx_waiters);
	rail->tx_nwoken = 0;
	INIT_LIST_HEAD(&rail->rx_spare);
	rail->rx_nspare = 0;
	rail->net_tx_wake = net_tx_wake;
}

/* The frames the rail lends: @ntx for TX, @nspare spare RX buffers (before traffic). */
void tbv_pool_fill(struct tbv_rail *rail, struct tbv_frame **tx, unsigned int ntx,
		   struct tbv_frame **spare, unsigned int nspare)
{
	unsigned int i;

	for (i = 0; i < ntx; i++) {
		list_add_tail(&tx[i]->list, &rail->tx_free);
		rail->tx_nfree++;
	}
	for (i = 0; i < nspare; i++) {
		list_add_tail(&spare[i]->list, &rail->rx_spare);
		rail->rx_nspare++;
	}
}

/* The rail's frames are freed (tbv_rails_free()): nothing is lent any more. */
void tbv_pool_clear(struct tbv_rail *rail)
{
	INIT_LIST_HEAD(&rail->tx_free);
	rail->tx_nfree = 0;
	INIT_LIST_HEAD(&rail->rx_spare);
	rail->rx_nspare = 0;
}

/* Free TX frames: exact under tx_lock, a hint without it. */
unsigned int tbv_pool_nfree(struct tbv_rail *rail)
{
	return READ_ONCE(rail->tx_nfree);
}

/* ---- Credits on the TX side (tx_lock held) ---- */

static void tbv_pool_arm_credit_timer(struct tbv_rail *rail)
{
	if (rail->credit_timer_armable && !timer_pending(&rail->credit_timer))
		mod_timer(&rail->credit_timer, jiffies + msecs_to_jiffies(TBV_CREDIT_ASK_MS));
}

/* Data frames the pool and the credits allow now (tx_lock held; without it, a hint). */
unsigned int tbv_pool_room(struct tbv_rail *rail)
{
	if (!rail->credits)
		return rail->tx_nfree;
	return min(rail->tx_nfree, tbv_credit_tx_data_room(&rail->credit_tx));
}

/*
 * True if the credits, not the pool, stop @n data frames (tx_lock held); the
 * credit timer (tbv_flow.c's) is then armed, to ask the receiver if no credits come.
 */
bool tbv_pool_starved(struct tbv_rail *rail, unsigned int n)
{
	if (!rail->credits || tbv_credit_tx_data_room(&rail->credit_tx) >= n)
		return false;
	/* the netdev waits for a whole packet's worth, not one */
	rail->credit_wanted = max(rail->credit_wanted, n);
	if (!timer_pending(&rail->credit_timer))
		rail->stats.credit_waits++;
	tbv_pool_arm_credit_timer(rail);
	return true;
}

/* @n data frames were taken for the wire, or -@n given back unsent (tx_lock held). */
static void tbv_pool_credit_take(struct tbv_rail *rail, int n)
{
	if (rail->credits) {
		tbv_credit_tx_take(&rail->credit_tx, n);
		rail->credit_unqueued += n;
	}
}

/* @n data frames taken for the wire are in the TX ring now (tx_lock held). */
void tbv_pool_queued(struct tbv_rail *rail, unsigned int n)
{
	if (rail->credits)
		rail->credit_unqueued -= n;
}

/* ---- Waking who waits (tx_lock held) ---- */

/* Frames or credits came back: queue the work of the senders that waited, beyond the reserve. */
void tbv_pool_wake(struct tbv_rail *rail)
{
	while (rail->tx_nfree > TBV_TX_RESERVE && !list_empty(&rail->tx_waiters)) {
		struct tbv_tx_waiter *w = list_first_entry(&rail->tx_waiters, struct tbv_tx_waiter,
							   node);

		list_del_init(&w->node);
		w->woken = true;
		rail->tx_nwoken++;
		queue_work(tbv_wq, &w->work);
	}
}

/* @w, if woken on @rail, is no longer owed a turn there (tx_lock held). */
static void tbv_pool_unwake(struct tbv_rail *rail, struct tbv_tx_waiter *w)
{
	if (w->woken) {
		w->woken = false;
		rail->tx_nwoken--;
	}
}

/* @w leaves @rail: off its waiters, and no longer woken-not-run (tx_lock held). */
static void tbv_pool_leave(struct tbv_rail *rail, struct tbv_tx_waiter *w)
{
	list_del_init(&w->node);
	tbv_pool_unwake(rail, w);
}

/*
 * A woken waiter's work runs (before it kicks its QP): it is no longer owed a
 * turn. Its QP's transmitter may run meanwhile (a kick from RX) and move it to
 * another rail: only the rail it is on when locked counts it.
 */
void tbv_pool_woken_runs(struct tbv_tx_waiter *w)
{
	struct tbv_rail *rail;

	while ((rail = READ_ONCE(w->rail))) {
		spin_lock_bh(&rail->tx_lock);
		if (READ_ONCE(w->rail) == rail) {
			tbv_pool_unwake(rail, w);
			spin_unlock_bh(&rail->tx_lock);
			return;
		}
		spin_unlock_bh(&rail->tx_lock);
	}
}

/* The same for the netdev's queue (tx_lock not held). */
void tbv_pool_wake_net(struct tbv_rail *rail)
{
	rail->net_tx_wake(rail);
}

/* ---- Frames of the netdev (tx_lock held) ---- */

/* @n frames for one packet, with their credits; the caller checked tbv_pool_room(). */
void tbv_pool_take(struct tbv_rail *rail, struct tbv_frame **frames, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		frames[i] = list_first_entry(&rail->tx_free, struct tbv_frame, list);
		list_del(&frames[i]->list);
	}
	rail->tx_nfree -= n;
	tbv_pool_credit_take(rail, n);
}

/* A frame the ring refused (only while it stops): back, waking nobody. */
void tbv_pool_return(struct tbv_rail *rail, struct tbv_frame *frame)
{
	list_add(&frame->list, &rail->tx_free);
	rail->tx_nfree++;
}

/* ---- Credit frames (tbv_flow.c, tx_lock held) ---- */

/* Any free frame, reserve and credits aside: a credit frame is what brings credits. */
struct tbv_frame *tbv_pool_take_any(struct tbv_rail *rail)
{
	struct tbv_frame *frame;

	frame = list_first_entry_or_null(&rail->tx_free, struct tbv_frame, list);
	if (frame) {
		list_del(&frame->list);
		rail->tx_nfree--;
	}
	return frame;
}

/* ---- Frames of RDMA packets (no lock held) ---- */

/*
 * Does a sender other than @w wait for @rail's frames (tx_lock held)? One that
 * was woken waits too until its work runs: tbv_pool_wake() takes every waiter
 * off the list at once, and the sender running then must not take all the
 * frames before their works get to run.
 */
static bool tbv_pool_others_wait(struct tbv_rail *rail, struct tbv_tx_waiter *w)
{
	if (rail->tx_nwoken > (w->rail == rail && w->woken))
		return true;
	return !list_empty(&rail->tx_waiters) &&
	       (list_first_entry(&rail->tx_waiters, struct tbv_tx_waiter, node) != w ||
		!list_is_singular(&rail->tx_waiters));
}

/*
 * @w waits for @rail, at the back, unless it waits already or must not
 * (tx_lock held). It was on no other rail (tbv_pool_get() left that one), so
 * if it is still counted as woken, that is here: it waits again instead.
 */
static void tbv_pool_wait(struct tbv_rail *rail, struct tbv_tx_waiter *w, bool wait)
{
	if (!list_empty(&w->node) || !wait)
		return;
	tbv_pool_unwake(rail, w);
	list_add_tail(&w->node, &rail->tx_waiters);
	WRITE_ONCE(w->rail, rail);
	w->turn = 0;
}

/*
 * A frame for one RDMA packet (@wire: with its credit), or NULL with @w queued
 * on the rail (if @wait) to be woken when frames or credits come back. A
 * request leaves TBV_TX_RESERVE frames to answers. With @second, two frames
 * (a split packet's), both or none: a sender holding one while it waits for
 * the other could wait for ever, its starvation asking the receiver for one
 * credit only.
 *
 * While others wait, a sender takes at most TBV_TX_TURN frames in a row, then
 * queues behind them: the rail is shared in turns. Without that, one QP's run
 * (a READ's many responses, a requester kicked by RX while others wait) took
 * every frame that came back, and the QPs behind it saw nothing for longer than
 * their peers' ACK timeout: retransmissions on a lossless cable.
 */
struct tbv_frame *tbv_pool_get(struct tbv_rail *rail, enum tbv_tx_use use, bool wire,
			       struct tbv_tx_waiter *w, bool wait, struct tbv_frame **second)
{
	unsigned int reserve = use == TBV_TX_REQUEST ? TBV_TX_RESERVE : 0, n = second ? 2 : 1;
	struct tbv_rail *waited = READ_ONCE(w->rail);
	struct tbv_frame *frame = NULL;

	/*
	 * A striped QP may still wait on the rail it used before: the waiter is
	 * only ever touched under the lock of the rail whose list it is on.
	 */
	if (waited && waited != rail) {
		spin_lock_bh(&waited->tx_lock);
		tbv_pool_leave(waited, w);
		spin_unlock_bh(&waited->tx_lock);
		WRITE_ONCE(w->rail, NULL);
	}
	spin_lock_bh(&rail->tx_lock);
	if (rail->tx_nfree < reserve + n) {
		tbv_pool_wait(rail, w, wait);
	} else if (w->turn >= TBV_TX_TURN && tbv_pool_others_wait(rail, w)) {
		/* its turn is over: behind the others, the first of whom runs now */
		tbv_pool_wait(rail, w, wait);
		tbv_pool_wake(rail);
	} else if (wire && tbv_pool_starved(rail, n)) {
		tbv_pool_wait(rail, w, wait);
	} else {
		frame = list_first_entry(&rail->tx_free, struct tbv_frame, list);
		list_del(&frame->list);
		if (second) {
			*second = list_first_entry(&rail->tx_free, struct tbv_frame, list);
			list_del(&(*second)->list);
		}
		rail->tx_nfree -= n;
		if (wire)
			tbv_pool_credit_take(rail, n);
		w->turn += n;
	}
	spin_unlock_bh(&rail->tx_lock);
	return frame;
}

/* @w waits no more (its QP is destroyed). */
void tbv_pool_unwait(struct tbv_tx_waiter *w)
{
	if (w->rail) {
		spin_lock_bh(&w->rail->tx_lock);
		tbv_pool_leave(w->rail, w);
		spin_unlock_bh(&w->rail->tx_lock);
	}
}

/*
 * Return a TX frame to the pool and wake whoever waits for one. A payload
 * frame that named an MR's page drops its reference now: the controller is
 * done with the page (or never got it).
 */
void tbv_pool_put(struct tbv_rail *rail, struct tbv_frame *frame, bool canceled)
{
	if (frame->page) {
		put_page(frame->page);
		frame->page = NULL;
	}
	frame->has_prefix = false;	/* a loopback packet's */
	spin_lock_bh(&rail->tx_lock);
	list_add(&frame->list, &rail->tx_free);
	rail->tx_nfree++;
	tbv_pool_wake(rail);
	/* an advertisement waited for a frame: NAPI sends it (softirq at unlock) */
	if (READ_ONCE(rail->credit_owed))
		napi_schedule(&rail->napi);
	spin_unlock_bh(&rail->tx_lock);
	if (!canceled)
		tbv_pool_wake_net(rail);
}

/* A frame from tbv_pool_get() goes back unsent, with its credit. */
void tbv_pool_unget(struct tbv_rail *rail, struct tbv_frame *frame, bool wire)
{
	if (wire) {
		spin_lock_bh(&rail->tx_lock);
		tbv_pool_credit_take(rail, -1);
		spin_unlock_bh(&rail->tx_lock);
	}
	tbv_pool_put(rail, frame, true);
	tbv_pool_wake_net(rail);	/* the credit may be what the netdev waits for */
}

/* @packets packets in @frames frames of @size bytes in all went to the ring. */
static void tbv_pool_sent(struct tbv_rail *rail, unsigned int frames, unsigned int packets,
			  u32 size, u32 zcopy_bytes, u32 copied_bytes)
{
	spin_lock_bh(&rail->tx_lock);
	tbv_pool_queued(rail, frames);
	rail->stats.tx_frames += frames;
	rail->stats.tx_bytes += size;
	rail->stats.rdma_tx_packets += packets;
	rail->stats.rdma_tx_bytes += size;
	rail->stats.tx_zcopy_bytes += zcopy_bytes;
	rail->stats.tx_copied_bytes += copied_bytes;
	spin_unlock_bh(&rail->tx_lock);
}

/* An RDMA packet in a frame from tbv_pool_get(@wire) goes to the rail's TX ring. */
void tbv_pool_send(struct tbv_rail *rail, struct tbv_frame *frame)
{
	u32 size = frame->size;	/* once queued, the frame may complete and be reused */
	int ret;

	ret = tbv_rail_ring_tx(rail, frame);
	tbv_pool_sent(rail, 1, 1, size, 0, 0);
	/* Fails only while the link stops: the packet is lost, RC resends it. */
	if (ret)
		tbv_pool_put(rail, frame, true);
}

/* @n split packets: a header frame with their headers, then their payload frames. */
void tbv_pool_send_batch(struct tbv_rail *rail, struct tbv_frame *hdr, struct tbv_frame **payload,
			 unsigned int n)
{
	/* once queued, the frames may complete and be reused */
	u32 size = hdr->size, zcopy = 0, copied = 0;
	unsigned int i, queued;

	for (i = 0; i < n; i++) {
		size += payload[i]->size;
		if (payload[i]->page)
			zcopy += payload[i]->size;
		else
			copied += payload[i]->size;
	}
	queued = tbv_rail_ring_tx_batch(rail, hdr, payload, n);
	tbv_pool_sent(rail, n + 1, n, size, zcopy, copied);
	/* as above; payloads without their header are dropped by the receiver */
	if (!queued)
		tbv_pool_put(rail, hdr, true);
	for (i = queued ? queued - 1 : 0; i < n; i++)
		tbv_pool_put(rail, payload[i], true);
}

/* ---- Spare RX buffers (striping) ---- */

/*
 * NAPI of @rail: is a spare there to post in place of a frame a striped QP
 * keeps? Spares of a rail are taken only in its own NAPI poll
 * (tbv_pool_rx_spare_take()), so a yes holds until the poll takes one.
 */
bool tbv_pool_rx_spare_ready(struct tbv_rail *rail)
{
	bool ready;

	spin_lock(&rail->rx_spare_lock);
	ready = rail->rx_nspare;
	spin_unlock(&rail->rx_spare_lock);
	return ready;
}

/* NAPI of @rail: a spare, to post in place of a frame a striped QP keeps; NULL if none. */
struct tbv_frame *tbv_pool_rx_spare_take(struct tbv_rail *rail)
{
	struct tbv_frame *spare;

	spin_lock(&rail->rx_spare_lock);
	spare = list_first_entry_or_null(&rail->rx_spare, struct tbv_frame, list);
	if (spare) {
		list_del(&spare->list);
		rail->rx_nspare--;
	}
	spin_unlock(&rail->rx_spare_lock);
	return spare;
}

/* A kept frame is done with: it becomes a spare of its rail again. Not in hard IRQ. */
void tbv_pool_rx_release(struct tbv_link *link, struct tbv_frame *frame)
{
	struct tbv_rail *rail = &link->rails[frame->rail];

	spin_lock_bh(&rail->rx_spare_lock);
	list_add(&frame->list, &rail->rx_spare);
	rail->rx_nspare++;
	spin_unlock_bh(&rail->rx_spare_lock);
}

/* ---- Counters ---- */

void tbv_rail_stats_sum(struct tbv_link *link, struct tbv_rail_stats *sum)
{
	unsigned int i, k;

	memset(sum, 0, sizeof(*sum));
	for (i = 0; i < TBV_MAX_RAILS; i++) {
		const u64 *src = (const u64 *)&link->rails[i].stats;
		u64 *dst = (u64 *)sum;

		for (k = 0; k < sizeof(*sum) / sizeof(u64); k++)
			dst[k] += READ_ONCE(src[k]);
	}
}
