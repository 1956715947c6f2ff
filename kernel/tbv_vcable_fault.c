// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection on the virtual cable: what a real cable and a real receiver
 * do to frames (loss, bursts of loss, duplication, reordering, damage the
 * controller flags, a receiver without buffers, latency, a slower link), per
 * sending end and per rail, settable while traffic runs:
 *
 *   echo "drop_ppm=50000 burst=3 dup_ppm=1000 delay_us=200 rails=1" > .../NAME/end0_faults
 *
 * Keys not named keep their value; "clear" resets all (rails: all). The wire
 * work of the sending end decides each frame's fate (tbv_vcable_fault_plan())
 * and when it may leave (tbv_vcable_fault_wait()); counters are in the
 * cable's stats file.
 */
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "tbv_vcable.h"

static bool tbv_chance(u32 ppm)
{
	return ppm && get_random_u32() % TBV_PPM < ppm;
}

static bool tbv_fault_on_rail(const struct tbv_vend *from, unsigned int rail)
{
	return READ_ONCE(from->faults.rails) & BIT(rail);
}

/* The fate of the next frame @from sends on @rail (its wire work only). */
void tbv_vcable_fault_plan(struct tbv_vend *from, unsigned int rail, struct tbv_fault_plan *plan)
{
	const struct tbv_vcable_faults *f = &from->faults;

	memset(plan, 0, sizeof(*plan));
	if (!tbv_fault_on_rail(from, rail))
		return;
	plan->stall = READ_ONCE(f->stall);
	/* a burst in progress ends early when losses are turned off or the burst shortened */
	from->burst_left = min(from->burst_left, READ_ONCE(f->drop_ppm) ?
						 max(READ_ONCE(f->burst), 1u) - 1 : 0);
	if (from->burst_left) {
		from->burst_left--;
		plan->drop = true;
		return;
	}
	if (tbv_chance(READ_ONCE(f->drop_ppm))) {
		from->burst_left = max(READ_ONCE(f->burst), 1u) - 1;
		plan->drop = true;
		return;
	}
	plan->dup = tbv_chance(READ_ONCE(f->dup_ppm));
	/* only with the buffer to hold it in (set once, before the rate) */
	plan->hold = smp_load_acquire(&from->held_buf) && tbv_chance(READ_ONCE(f->reorder_ppm));
	plan->corrupt = tbv_chance(READ_ONCE(f->corrupt_ppm));
}

/* Whether the receiver of what @from sends on @rail has no RX buffers (a stall). */
bool tbv_vcable_fault_stalled(const struct tbv_vend *from, unsigned int rail)
{
	return tbv_fault_on_rail(from, rail) && READ_ONCE(from->faults.stall);
}

/*
 * Where the controller of the peer cuts the frame @tx that @from sends on
 * @rail: 0 if it does not, else the bytes of its first piece, and *@every
 * whether each following piece is as long (cut_split) or it is the rest (cut).
 */
u32 tbv_vcable_fault_cut(const struct tbv_vend *from, unsigned int rail,
			 const struct tbv_frame *tx, bool *every)
{
	u32 cut, cut_split;

	if (!tbv_fault_on_rail(from, rail))
		return 0;
	cut = READ_ONCE(from->faults.cut);
	cut_split = READ_ONCE(from->faults.cut_split);
	*every = false;
	if (cut_split && !(tx->sof == TBV_PDF_SOF && tx->eof == TBV_PDF_EOF) &&
	    tx->size > cut_split) {
		*every = true;
		return cut_split;
	}
	return cut && tx->size > cut ? cut : 0;
}

/* Whether frames wait on the wire (a delay or a rate limit is set). */
bool tbv_vcable_faults_timed(const struct tbv_vend *end)
{
	return READ_ONCE(end->faults.delay_us) || READ_ONCE(end->faults.rate_mbps);
}

/*
 * How long (ns) the frame @from queued on @rail at @queued_ns must still wait
 * at @now: until its delay has passed and the rate-limited wire is free.
 */
u64 tbv_vcable_fault_wait(struct tbv_vend *from, unsigned int rail, u64 queued_ns, u64 now)
{
	u64 due;

	if (!tbv_fault_on_rail(from, rail))
		return 0;
	due = queued_ns + READ_ONCE(from->faults.delay_us) * NSEC_PER_USEC;
	if (READ_ONCE(from->faults.rate_mbps))
		due = max(due, from->wire_free_ns);
	return due > now ? due - now : 0;
}

/* A frame of @size bytes left on @rail at @now: the rate-limited wire is busy for its bits. */
void tbv_vcable_fault_sent(struct tbv_vend *from, unsigned int rail, u32 size, u64 now)
{
	u32 rate = READ_ONCE(from->faults.rate_mbps);

	if (!rate || !tbv_fault_on_rail(from, rail))
		return;
	/* one megabit per second is one bit per microsecond */
	from->wire_free_ns = max(now, from->wire_free_ns) + div_u64((u64)size * 8 * 1000, rate);
}

/* Damage a received frame as a link error would, flagged as the controller does. */
void tbv_vcable_corrupt(struct tbv_frame *rx)
{
	u32 r = get_random_u32();

	if (rx->size)
		((u8 *)rx->data)[(r >> 3) % rx->size] ^= 1 << (r & 7);
	rx->flags |= TBV_FRAME_F_CRC_ERROR;
}

static const struct {
	const char *key;
	size_t offset;
	u32 min;
	u32 max;
} tbv_fault_keys[] = {
	{ "drop_ppm", offsetof(struct tbv_vcable_faults, drop_ppm), 0, TBV_PPM },
	{ "burst", offsetof(struct tbv_vcable_faults, burst), 0, TBV_FAULT_MAX_BURST },
	{ "dup_ppm", offsetof(struct tbv_vcable_faults, dup_ppm), 0, TBV_PPM },
	{ "reorder_ppm", offsetof(struct tbv_vcable_faults, reorder_ppm), 0, TBV_PPM },
	{ "corrupt_ppm", offsetof(struct tbv_vcable_faults, corrupt_ppm), 0, TBV_PPM },
	{ "stall", offsetof(struct tbv_vcable_faults, stall), 0, 1 },
	{ "delay_us", offsetof(struct tbv_vcable_faults, delay_us), 0, TBV_FAULT_MAX_DELAY_US },
	{ "rate_mbps", offsetof(struct tbv_vcable_faults, rate_mbps), 0, TBV_FAULT_MAX_RATE_MBPS },
	{ "rails", offsetof(struct tbv_vcable_faults, rails), 1, TBV_FAULT_ALL_RAILS },
	{ "cut", offsetof(struct tbv_vcable_faults, cut), 0, TBV_FRAME_SIZE },
	{ "cut_split", offsetof(struct tbv_vcable_faults, cut_split), 0, TBV_FRAME_SIZE },
};

void tbv_vcable_faults_clear(struct tbv_vcable_faults *f)
{
	memset(f, 0, sizeof(*f));
	f->rails = TBV_FAULT_ALL_RAILS;
}

static u32 *tbv_fault_field(struct tbv_vcable_faults *f, unsigned int i)
{
	return (u32 *)((u8 *)f + tbv_fault_keys[i].offset);
}

/* "key=value ..." (or "clear") applied to *@f; -EINVAL for anything else. */
int tbv_vcable_faults_parse(const char *page, struct tbv_vcable_faults *f)
{
	char *buf, *cur, *tok;
	int ret = 0;

	buf = kstrndup(page, PAGE_SIZE, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	cur = buf;
	while (!ret && (tok = strsep(&cur, " \t\n"))) {
		char *val = strchr(tok, '=');
		unsigned int i;
		u32 v;

		if (!*tok)
			continue;
		if (!strcmp(tok, "clear")) {
			tbv_vcable_faults_clear(f);
			continue;
		}
		ret = -EINVAL;
		if (!val)
			break;
		*val++ = '\0';
		for (i = 0; i < ARRAY_SIZE(tbv_fault_keys); i++) {
			if (strcmp(tok, tbv_fault_keys[i].key))
				continue;
			if (!kstrtou32(val, 0, &v) && v >= tbv_fault_keys[i].min &&
			    v <= tbv_fault_keys[i].max) {
				*tbv_fault_field(f, i) = v;
				ret = 0;
			}
			break;
		}
	}
	kfree(buf);
	return ret;
}

ssize_t tbv_vcable_faults_show(const struct tbv_vcable_faults *f, char *page)
{
	struct tbv_vcable_faults copy = *f;
	ssize_t n = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(tbv_fault_keys); i++)
		n += scnprintf(page + n, PAGE_SIZE - n, "%s%s=%u", i ? " " : "",
			       tbv_fault_keys[i].key, *tbv_fault_field(&copy, i));
	n += scnprintf(page + n, PAGE_SIZE - n, "\n");
	return n;
}

/* Install @f as @end's faults (cable->lock held); reordering needs its hold buffer. */
int tbv_vcable_faults_set(struct tbv_vend *end, const struct tbv_vcable_faults *f)
{
	if (f->reorder_ppm && !end->held_buf) {
		u8 *buf = kcalloc(TBV_MAX_RAILS, TBV_FRAME_SIZE, GFP_KERNEL);

		if (!buf)
			return -ENOMEM;
		/* pairs with the acquire in tbv_vcable_fault_plan(): the buffer before its use */
		smp_store_release(&end->held_buf, buf);
	}
	WRITE_ONCE(end->faults.drop_ppm, f->drop_ppm);
	WRITE_ONCE(end->faults.burst, f->burst);
	WRITE_ONCE(end->faults.dup_ppm, f->dup_ppm);
	WRITE_ONCE(end->faults.reorder_ppm, f->reorder_ppm);
	WRITE_ONCE(end->faults.corrupt_ppm, f->corrupt_ppm);
	WRITE_ONCE(end->faults.stall, f->stall);
	WRITE_ONCE(end->faults.delay_us, f->delay_us);
	WRITE_ONCE(end->faults.rate_mbps, f->rate_mbps);
	WRITE_ONCE(end->faults.rails, f->rails);
	WRITE_ONCE(end->faults.cut, f->cut);
	WRITE_ONCE(end->faults.cut_split, f->cut_split);
	/* frames waiting for a longer delay or a slower rate are looked at again now */
	mod_delayed_work(system_unbound_wq, &end->wire_work, 0);
	return 0;
}
