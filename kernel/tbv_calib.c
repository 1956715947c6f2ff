// SPDX-License-Identifier: GPL-2.0
/*
 * The bring-up self-check (docs/hardware.md, docs/wire-protocol.md
 * "Calibration"). Once the paths are open and before the link carries
 * traffic, each end sends a round of calibration frames on every rail: frames
 * of 12 (our smallest), 255, 256, 257, 4095 and 4096 bytes with a typed
 * frame's PDFs and, on a link that agreed split packets, frames with a split
 * packet's PDFs. The other end judges the first whole round it receives
 * (proto/tbv_calib.c) and says its verdict in the flags of the frames it
 * sends; a round goes again every TBV_CALIB_ROUND_MS until the peer judged
 * one, for at most TBV_CALIB_MS. A rail passes when both ends' rounds came
 * as sent. The link then uses the rails that passed (from rail 0 up), and
 * split packets only if they passed on each of them: tbv_link.c logs in again
 * with what passed, or, with no rail, later.
 *
 * An end whose self-check is over (its link up) answers a new round from
 * the peer (a bring-up of the peer's alone) with one of its own, at most
 * every TBV_CALIB_ROUND_MS, so the peer can judge it.
 *
 * Calibration frames are outside the software credits: neither end counts
 * them, and each end's RX buffers are all posted while no traffic runs.
 */
#include <linux/delay.h>
#include <linux/random.h>

#include "tbv.h"

#define tbv_calib_warn(link, fmt, ...) \
	dev_warn((link)->info.parent, "link %u: " fmt, (link)->index, ##__VA_ARGS__)

/* A rail starts (before its RX buffers are posted): nothing judged yet. */
void tbv_calib_rail_start(struct tbv_rail *rail)
{
	spin_lock_bh(&rail->calib_lock);
	tbv_calib_rx_init(&rail->calib, rail->idx, rail->link->split);
	rail->calib_answered = jiffies - msecs_to_jiffies(TBV_CALIB_ROUND_MS);
	rail->calib_round = 0;
	spin_unlock_bh(&rail->calib_lock);
	/* no answers before our own rounds: tbv_calib_run() ends this */
	WRITE_ONCE(rail->link->calib_running, true);
}

/* Frame @index of round @round on @rail, with our verdict in @flags. */
static void tbv_calib_send(struct tbv_rail *rail, unsigned int index, u8 round, u32 seed,
			   u8 flags)
{
	struct tbv_link *link = rail->link;
	struct tbv_calib_hdr h = { .flags = flags, .rail = rail->idx, .index = index,
				   .round = round, .count = tbv_calib_count(link->split),
				   .seed = seed };
	struct tbv_calib_spec s;
	struct tbv_frame *frame;

	spin_lock_bh(&rail->tx_lock);
	frame = tbv_pool_take_any(rail);
	spin_unlock_bh(&rail->tx_lock);
	if (!frame)
		return;		/* cannot be, before traffic; the round is short of one */
	tbv_calib_spec(index, &s);
	h.size = s.size;
	frame->size = tbv_calib_encode(frame->data, &h);
	frame->sof = s.sof;
	frame->eof = s.eof;
	if (tbv_rail_ring_tx(rail, frame)) {
		tbv_pool_put(rail, frame, true);
		return;
	}
	atomic64_inc(&link->stats.calib_frames_tx);
}

/*
 * A received frame (NAPI), before any other consumer: true if it was a
 * calibration frame or a piece of one, which is the self-check's. On a link
 * with split packets, a frame with a payload's PDFs starts a calibration
 * frame only while no header waits for its payload.
 */
bool tbv_calib_rx(struct tbv_rail *rail, const struct tbv_frame *frame)
{
	struct tbv_link *link = rail->link;
	bool head, taken, answer = false;
	unsigned int f;
	u32 judged;
	u8 flags = 0, round = 0;

	if (frame->flags & (TBV_FRAME_F_CRC_ERROR | TBV_FRAME_F_OVERRUN))
		return false;
	head = !link->split || tbv_pdf_typed(frame->sof, frame->eof) ||
	       rail->split_next == rail->split_count;
	spin_lock(&rail->calib_lock);
	judged = rail->calib.rounds_judged;
	taken = tbv_calib_rx_frame(&rail->calib, frame->data, frame->size, frame->sof,
				   frame->eof, head);
	/*
	 * A round judged while our self-check does not run: the peer brought its
	 * link up again without us. Answer with a round of ours and the verdict,
	 * and again while its rounds say it has not judged one of ours, at most
	 * every TBV_CALIB_ROUND_MS (a peer's frames never cost more).
	 */
	if ((rail->calib.rounds_judged != judged || (taken && rail->calib.peer_waiting)) &&
	    !READ_ONCE(link->calib_running) &&
	    time_after_eq(jiffies, rail->calib_answered + msecs_to_jiffies(TBV_CALIB_ROUND_MS))) {
		answer = true;
		rail->calib_answered = jiffies;
		flags = tbv_calib_rx_flags(&rail->calib);
		round = rail->calib_round++;
	}
	spin_unlock(&rail->calib_lock);
	if (taken)
		atomic64_inc(&link->stats.calib_frames_rx);
	for (f = 0; answer && f < tbv_calib_count(link->split); f++)
		tbv_calib_send(rail, f, round, READ_ONCE(link->calib_seed), flags);
	return taken;
}

/*
 * Run the self-check on the link's rails: process context, link->lock not
 * held, the link OPENING (its rails and paths stay while this runs). Ends when
 * both ends judged every rail and told each other, after TBV_CALIB_MS, or as
 * soon as the link is wanted elsewhere. The results are in link->calib.
 */
void tbv_calib_run(struct tbv_link *link)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(TBV_CALIB_MS), next_round = jiffies;
	unsigned int n = link->nr_rails, count = tbv_calib_count(link->split), i, f;
	bool told[TBV_MAX_RAILS] = { 0 };
	u32 seed = get_random_u32() | 1;
	u8 round = 0;

	WRITE_ONCE(link->calib_seed, seed);
	for (;;) {
		bool resend = time_after_eq(jiffies, next_round), done = true;

		for (i = 0; i < n; i++) {
			struct tbv_rail *rail = &link->rails[i];
			bool peer_judged;
			u8 flags;

			spin_lock_bh(&rail->calib_lock);
			flags = tbv_calib_rx_flags(&rail->calib);
			peer_judged = rail->calib.peer_judged;
			spin_unlock_bh(&rail->calib_lock);
			if (peer_judged && flags && told[i])
				continue;
			done = false;
			/* until the peer judged a round, and once with our verdict */
			if ((!peer_judged && resend) || (flags && !told[i])) {
				for (f = 0; f < count; f++)
					tbv_calib_send(rail, f, round, seed, flags);
				told[i] = flags;
			}
		}
		if (done || time_after(jiffies, deadline) || READ_ONCE(link->next) != TBV_LINK_UP)
			break;
		if (resend) {
			round++;
			next_round = jiffies + msecs_to_jiffies(TBV_CALIB_ROUND_MS);
		}
		usleep_range(2000, 4000);
	}
	WRITE_ONCE(link->calib_running, false);

	mutex_lock(&link->calib.lock);
	link->calib.seed = seed;
	link->calib.rails = n;
	link->calib.split = link->split;
	for (i = 0; i < n; i++) {
		struct tbv_rail *rail = &link->rails[i];

		spin_lock_bh(&rail->calib_lock);
		tbv_calib_rx_finish(&rail->calib);
		link->calib.rx[i] = rail->calib;
		spin_unlock_bh(&rail->calib_lock);
		link->calib.valid[i] = true;
	}
	mutex_unlock(&link->calib.lock);
}

/* " as 256 + 3840 bytes": the pieces of @o. */
static void tbv_calib_pieces(const struct tbv_calib_obs *o, char *buf, size_t len)
{
	unsigned int i, n = min_t(unsigned int, o->npieces, TBV_CALIB_MAX_PIECES);
	size_t at = 0;

	for (i = 0; i < n; i++)
		at += scnprintf(buf + at, len - at, "%s%u", i ? " + " : "", o->pieces[i]);
	if (o->npieces > n)
		scnprintf(buf + at, len - at, " + ... (%u frames, %u bytes)", o->npieces, o->total);
	else
		scnprintf(buf + at, len - at, " bytes");
}

/* What went wrong with frame @o of the round: "came as 256 + 3840 bytes". */
static void tbv_calib_what(const struct tbv_calib_obs *o, char *buf, size_t len)
{
	char pieces[96];

	if (!o->npieces) {
		scnprintf(buf, len, "did not come");
	} else if (o->npieces > 1 || o->total < o->sent || o->total > o->sent + TBV_RX_PAD_MAX) {
		tbv_calib_pieces(o, pieces, sizeof(pieces));
		scnprintf(buf, len, "came as %s", pieces);
	} else if (o->bytes_bad) {
		scnprintf(buf, len, "came with other bytes");
	} else {
		scnprintf(buf, len, "came with PDFs %u/%u", o->sof, o->eof);
	}
}

/*
 * Why rail @r failed for frames of @split kind; false if it did not. The
 * frames' own failure first, then the peer's verdict on ours.
 */
static bool tbv_calib_why(const struct tbv_calib_rx *r, bool split, char *buf, size_t len)
{
	unsigned int i;
	char what[128];

	if (!r->started) {
		scnprintf(buf, len, "no calibration frames came from the peer in %u ms",
			  TBV_CALIB_MS);
		return true;
	}
	for (i = 0; i < r->count; i++) {
		const struct tbv_calib_obs *o = &r->obs[i];
		struct tbv_calib_spec s;

		tbv_calib_spec(i, &s);
		if (s.split != split || o->ok)
			continue;
		tbv_calib_what(o, what, sizeof(what));
		if (split)
			scnprintf(buf, len, "calibration frame of %u bytes with PDFs %u/%u %s",
				  o->sent, s.sof, s.eof, what);
		else
			scnprintf(buf, len, "calibration frame of %u bytes %s", o->sent, what);
		return true;
	}
	if (!r->peer_judged) {
		scnprintf(buf, len, "the peer judged none of our calibration frames in %u ms",
			  TBV_CALIB_MS);
		return true;
	}
	if (split ? !r->peer_split_ok : !r->peer_plain_ok) {
		scnprintf(buf, len, "the peer saw our calibration frames%s differ (its log says how)",
			  split ? " with split packets' PDFs" : "");
		return true;
	}
	return false;
}

/*
 * After tbv_calib_run(), link->lock held: one line for each rail that failed,
 * and what the link can use: the rails that passed from rail 0 up (returned),
 * and *@split_ok, whether split packets passed on each of them.
 */
unsigned int tbv_calib_verdict(struct tbv_link *link, bool *split_ok)
{
	unsigned int i, usable = 0;
	bool prefix = true;
	char why[192];

	*split_ok = true;
	mutex_lock(&link->calib.lock);
	for (i = 0; i < link->calib.rails; i++) {
		const struct tbv_calib_rx *r = &link->calib.rx[i];

		if (tbv_calib_why(r, false, why, sizeof(why))) {
			atomic64_inc(&link->stats.calib_failed_rails);
			tbv_calib_warn(link, "rail %u: %s: not using this rail\n", i, why);
			prefix = false;
			continue;
		}
		if (!prefix)
			continue;
		usable++;
		if (link->calib.split && tbv_calib_why(r, true, why, sizeof(why))) {
			tbv_calib_warn(link, "rail %u: %s: not using split packets\n", i, why);
			*split_ok = false;
		}
	}
	if (!*split_ok) {
		atomic64_inc(&link->stats.calib_split_failed);
		link->calib.split_failed = true;
	}
	mutex_unlock(&link->calib.lock);
	return usable;
}

/*
 * The last self-check, for `tbverbs selftest`: a line for the link, one per
 * rail, one per frame of each rail's round as it came (sysfs, one page).
 */
ssize_t tbv_calib_show(struct tbv_link *link, char *buf)
{
	struct tbv_calib_report *c = &link->calib;
	unsigned int i, f;
	ssize_t n;

	mutex_lock(&c->lock);
	n = sysfs_emit(buf, "seed=0x%08x rails=%u split=%s\n", c->seed, c->rails,
		       c->split_failed ? "failed" : link->split ? "on" : "off");
	/* a rail left out since (after its failure) keeps its last result: current=no */
	for (i = 0; i < TBV_MAX_RAILS; i++) {
		const struct tbv_calib_rx *r = &c->rx[i];
		char why[192];
		bool plain_bad, split_bad = false;

		if (!c->valid[i])
			continue;
		plain_bad = tbv_calib_why(r, false, why, sizeof(why));
		if (c->split)
			split_bad = tbv_calib_why(r, true, why, sizeof(why));
		n += sysfs_emit_at(buf, n,
				   "rail=%u current=%s result=%s split=%s peer=%s received=%u stray=%u\n",
				   i, i < c->rails ? "yes" : "no", plain_bad ? "fail" : "pass",
				   !c->split ? "n/a" : split_bad ? "fail" : "pass",
				   !r->peer_judged ? "none" :
				   r->peer_plain_ok && (!c->split || r->peer_split_ok) ? "pass" :
				   "fail", r->frames, r->stray);
		for (f = 0; f < r->count; f++) {
			const struct tbv_calib_obs *o = &r->obs[f];
			struct tbv_calib_spec s;
			char got[96];

			tbv_calib_spec(f, &s);
			if (!o->npieces) {
				strscpy(got, "missing", sizeof(got));
			} else {
				unsigned int p, np = min_t(unsigned int, o->npieces,
							   TBV_CALIB_MAX_PIECES);
				size_t at = 0;

				for (p = 0; p < np; p++)
					at += scnprintf(got + at, sizeof(got) - at, "%s%u",
							p ? "+" : "", o->pieces[p]);
				if (o->npieces > np)
					scnprintf(got + at, sizeof(got) - at, "+...(%u)",
						  o->npieces);
			}
			n += sysfs_emit_at(buf, n,
					   "rail=%u frame=%u sent=%u pdf=%u/%u got=%s total=%u result=%s\n",
					   i, f, o->sent, s.sof, s.eof, got, o->total,
					   o->ok ? "pass" : "fail");
		}
	}
	mutex_unlock(&c->lock);
	return n;
}
