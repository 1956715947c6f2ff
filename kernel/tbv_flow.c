// SPDX-License-Identifier: GPL-2.0
/*
 * Software credits on a rail (the arithmetic is proto/tbv_credit.c): data
 * frames go only while the receiver has buffers for them, so a busy receiver
 * slows its sender down instead of losing its frames. The NAPI poll counts
 * every frame it reaps and tells the peer its new limit in a credit frame; a
 * sender starved for TBV_CREDIT_ASK_MS sends a credit request, which the
 * receiver answers once it has reaped everything before it; while it stays
 * starved, requests beyond the limit back off (proto/tbv_credit.h).
 *
 * Data frames take their credits with their frames from the TX pool
 * (tbv_pool.c), which arms the request timer when credits stop them; this file
 * sends and receives credit frames.
 *
 * Locking: the TX side (struct tbv_credit_tx, the timer's arming) is under the
 * rail's tx_lock; the RX side (struct tbv_credit_rx) belongs to the NAPI poll.
 * Credit frames are queued with tx_lock held, so a request's count is exact:
 * it is sent only with no data frame counted but not yet queued
 * (credit_unqueued), and no frame can be counted before it and queued after.
 */
#include <linux/moduleparam.h>
#include <linux/timer.h>

#include "tbv.h"

static bool tbv_credits = true;
module_param_named(credits, tbv_credits, bool, 0644);
MODULE_PARM_DESC(credits,
		 "offer software credits at login (links made later; both ends must offer them): a sender waits for the receiver's RX buffers instead of losing frames (default Y)");

/* A netdev packet's fragments must fit in the credits of one ring: smaller ones go without. */
static bool tbv_flow_ring_fits(u32 ring_size)
{
	return tbv_credit_capacity(ring_size) >= TBV_NET_MIN_TX_FRAMES + TBV_CREDIT_RESERVE;
}

u32 tbv_flow_caps(void)
{
	return READ_ONCE(tbv_credits) ? TBV_CAP_CREDITS : 0;
}

enum tbv_credit_kind {
	TBV_CREDIT_ADVERT,	/* buffers were freed: may use the reserve, not beyond */
	TBV_CREDIT_ANSWER,	/* to a request: the peer is starved, send it anyway */
	TBV_CREDIT_REQUEST,	/* we are starved: exact count, nothing counted unqueued */
};

/* Queue a credit frame (tx_lock held); false if it cannot go now. */
static bool tbv_flow_send(struct tbv_rail *rail, enum tbv_credit_kind kind)
{
	struct tbv_credit_frame c = { 0 };
	struct tbv_frame *frame;
	bool over = false;

	lockdep_assert_held(&rail->tx_lock);
	if (!tbv_pool_nfree(rail))
		return false;
	if (kind == TBV_CREDIT_ADVERT && tbv_credit_tx_left(&rail->credit_tx) <= 0)
		return false;
	/* an answer beyond the limit waits for the frames counted before it (credit_owed) */
	if (!tbv_credit_tx_frame_may_go(&rail->credit_tx, rail->credit_unqueued))
		return false;
	if (kind == TBV_CREDIT_REQUEST) {
		if (rail->credit_unqueued || !tbv_credit_tx_request_due(&rail->credit_tx))
			return false;
		c.flags = TBV_CREDIT_F_REQUEST;
		/* advertised is written under tx_lock (here); reaped belongs to NAPI */
		c.limit = rail->credit_rx.advertised;
	} else {
		c.limit = tbv_credit_rx_advertise(&rail->credit_rx);
	}
	frame = tbv_pool_take_any(rail);
	c.seq = tbv_credit_tx_take(&rail->credit_tx, 1);
	if (kind == TBV_CREDIT_REQUEST)
		over = tbv_credit_tx_request_sent(&rail->credit_tx, c.seq);
	frame->size = tbv_credit_frame_encode(frame->data, &c);
	frame->sof = TBV_PDF_SOF;
	frame->eof = TBV_PDF_EOF;
	if (tbv_rail_ring_tx(rail, frame)) {
		/* only while the ring stops; the count no longer matters */
		tbv_pool_return(rail, frame);
		rail->stats.tx_errors++;
		return true;
	}
	rail->stats.tx_frames++;
	rail->stats.tx_bytes += frame->size;
	rail->stats.credit_frames_tx++;
	if (kind == TBV_CREDIT_REQUEST)
		rail->stats.credit_requests++;
	if (over)
		rail->stats.credit_requests_over++;
	return true;
}

/* Starved for a while: ask the receiver, and again later until enough credits come. */
static void tbv_flow_timer(struct timer_list *t)
{
	struct tbv_rail *rail = timer_container_of(rail, t, credit_timer);
	bool starved;

	spin_lock_bh(&rail->tx_lock);
	starved = rail->credit_timer_armable &&
		  tbv_credit_tx_data_room(&rail->credit_tx) < rail->credit_wanted;
	if (starved) {
		tbv_credit_tx_starved_tick(&rail->credit_tx);
		tbv_flow_send(rail, TBV_CREDIT_REQUEST);
		mod_timer(&rail->credit_timer, jiffies + msecs_to_jiffies(TBV_CREDIT_ASK_MS));
	} else {
		rail->credit_wanted = 0;
		tbv_pool_wake(rail);
	}
	spin_unlock_bh(&rail->tx_lock);
	/* credits came back some way that woke nobody (a frame given back unsent) */
	if (!starved)
		tbv_pool_wake_net(rail);
}

/* At link creation, for every rail slot (started or not, its timer is stopped). */
void tbv_flow_setup(struct tbv_rail *rail)
{
	timer_setup(&rail->credit_timer, tbv_flow_timer, 0);
}

/* A rail starts (before its rings): credits if agreed and both rings are large enough. */
void tbv_flow_start(struct tbv_rail *rail)
{
	struct tbv_link *link = rail->link;
	u32 ours = link->info.ring_size, peers = link->login.agreed.tx_credits;

	rail->credits = (link->login.agreed.caps & TBV_CAP_CREDITS) &&
			tbv_flow_ring_fits(ours) && tbv_flow_ring_fits(peers);
	tbv_credit_tx_init(&rail->credit_tx, tbv_credit_capacity(peers));
	tbv_credit_rx_init(&rail->credit_rx, tbv_credit_capacity(ours));
	rail->credit_owed = false;
	rail->credit_wanted = 0;
	rail->credit_unqueued = 0;
	rail->credit_timer_armable = rail->credits;
}

/* The rail stops (NAPI already disabled, before the rings stop). */
void tbv_flow_stop(struct tbv_rail *rail)
{
	spin_lock_bh(&rail->tx_lock);
	rail->credit_timer_armable = false;
	spin_unlock_bh(&rail->tx_lock);
	timer_delete_sync(&rail->credit_timer);
}

/* Every frame reaped, flagged or not (NAPI): its buffer is posted again. */
void tbv_flow_rx_reaped(struct tbv_rail *rail)
{
	if (rail->credits)
		tbv_credit_rx_reaped(&rail->credit_rx);
}

/* An intact credit frame (NAPI). */
void tbv_flow_rx(struct tbv_rail *rail, const struct tbv_frame *frame)
{
	struct tbv_credit_frame c;
	int ret;

	if (!rail->credits || tbv_credit_frame_decode(frame->data, frame->size, &c)) {
		rail->stats.rx_malformed++;
		return;
	}
	rail->stats.credit_frames_rx++;
	if (c.flags & TBV_CREDIT_F_REQUEST)
		rail->stats.rx_lost += tbv_credit_rx_request(&rail->credit_rx, c.seq);

	spin_lock(&rail->tx_lock);
	ret = tbv_credit_tx_update(&rail->credit_tx, c.limit);
	if (ret > 0)
		tbv_pool_wake(rail);
	spin_unlock(&rail->tx_lock);
	if (ret < 0)
		rail->stats.credit_limits_refused++;
	if (ret > 0)
		tbv_pool_wake_net(rail);
}

/* After a NAPI poll drained what it could: tell the peer about freed buffers. */
void tbv_flow_rx_done(struct tbv_rail *rail)
{
	enum tbv_credit_kind kind;

	if (!rail->credits || !tbv_credit_rx_should_advertise(&rail->credit_rx))
		return;
	kind = rail->credit_rx.answer_owed ? TBV_CREDIT_ANSWER : TBV_CREDIT_ADVERT;
	spin_lock(&rail->tx_lock);
	/* no frame or credit: retried when a frame comes back or credits arrive */
	WRITE_ONCE(rail->credit_owed, !tbv_flow_send(rail, kind));
	spin_unlock(&rail->tx_lock);
}
