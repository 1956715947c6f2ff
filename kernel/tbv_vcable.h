/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The virtual cable: two simulated hosts in one kernel joined by an emulated
 * USB4 link with the semantics of the real one (see tbv_link.h). Created and
 * plugged through configfs (tbv_vcable_configfs.c). A module of its own,
 * tbverbs_vcable.ko, that sees only the link API (tbv_link.h).
 */
#ifndef TBV_VCABLE_H
#define TBV_VCABLE_H

#include <linux/completion.h>
#include <linux/configfs.h>
#include <linux/hrtimer.h>
#include <linux/irq_work.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/uuid.h>

#include "tbv_link.h"

/* each end's parent device: what its usb4_rdmaN and usb4_netN hang under */
#define TBV_VCABLE_DRV_NAME		"tbverbs_vcable"
#define TBV_VCABLE_CTL_QUEUE_MAX	64	/* control packets queued per end */
#define TBV_VCABLE_ROUTE		1	/* both hosts: port 1 of their router */
#define TBV_VCABLE_MAX_IRQ_THROTTLE_US	10000
/* rx_sof: the SOF PDF the sender gave; 0 for a frame of one transport packet; 0 always */
#define TBV_VCABLE_RX_SOF_AS_SENT	0
#define TBV_VCABLE_RX_SOF_ZERO_ONE_PACKET	1
#define TBV_VCABLE_RX_SOF_ZERO		2
#define TBV_VCABLE_TRANSPORT_PACKET	256	/* bytes: a USB4 transport packet's payload */

struct tbv_vcable;

/* One emulated NHI ring. */
struct tbv_vring {
	struct tbv_ring ring;
	struct tbv_vend *end;
	spinlock_t lock;		/* everything below; taken in hard IRQ */
	bool running;
	struct list_head queue;		/* TX: waiting for the wire; RX: posted buffers */
	unsigned int queued;
	struct list_head done;		/* RX: filled, waiting for ring_poll() */
	bool irq_masked;		/* RX: start_poll raised, not yet re-armed */
	struct irq_work irq;		/* RX: start_poll in hard-IRQ context */
	struct hrtimer throttle;	/* RX: an interrupt held back by the throttle */
	u64 last_irq_ns;		/* RX: when start_poll last ran */
};

/* Counters of one direction of one rail. */
struct tbv_vcable_dir_stats {
	atomic64_t frames;
	atomic64_t bytes;
	atomic64_t dropped_no_buffer;	/* the receiver had no RX buffer posted (or stalls) */
	atomic64_t dropped_path_closed;	/* a path or ring was not open */
	atomic64_t dropped_fault;	/* lost by an injected fault */
	atomic64_t duplicated;		/* delivered twice by an injected fault */
	atomic64_t reordered;		/* delivered after the frame sent after them */
	atomic64_t corrupted;		/* delivered damaged, flagged as a CRC error */
	atomic64_t irqs_throttled;	/* the receiver's interrupt held back (irq_throttle_us) */
	atomic64_t cut;			/* delivered as several frames (cut, cut_split) */
};

/*
 * Faults injected into the frames one end sends on its rails (not the control
 * channel), set at any time through configfs (endN_faults). Rates are in parts
 * per million of frames.
 */
struct tbv_vcable_faults {
	u32 drop_ppm;			/* a loss starts */
	u32 burst;			/* frames lost in a row once a loss starts (>= 1) */
	u32 dup_ppm;			/* delivered twice */
	u32 reorder_ppm;		/* held back and delivered after the next frame */
	u32 corrupt_ppm;		/* a bit flipped, flagged as a CRC error (as a controller would) */
	u32 stall;			/* 1: the receiver has no RX buffers, every frame is lost */
	u32 delay_us;			/* every frame arrives this long after it was queued */
	u32 rate_mbps;			/* the end sends at most this fast, all rails (0: no limit) */
	u32 rails;			/* bit N: the faults apply to rail N */
	/*
	 * Framing, as a controller that rebuilds frames by the wrong masks: a
	 * frame longer than cut bytes arrives as two frames (cut, then the rest);
	 * with cut_split, a frame with PDFs other than a typed frame's (a split
	 * packet's payload) arrives as frames of cut_split bytes each. 0: off.
	 */
	u32 cut;
	u32 cut_split;
};

#define TBV_PPM			1000000u
#define TBV_FAULT_MAX_BURST	1000
#define TBV_FAULT_MAX_DELAY_US	1000000
#define TBV_FAULT_MAX_RATE_MBPS	1000000
#define TBV_FAULT_ALL_RAILS	((1u << TBV_MAX_RAILS) - 1)

/* A frame of the virtual NHI: the time it was queued, for an injected delay. */
struct tbv_vframe {
	struct tbv_frame frame;
	u64 queued_ns;
};

/* One simulated host: its NHI, control channel and the link it runs. */
struct tbv_vend {
	struct tbv_vcable *cable;
	unsigned int idx;
	uuid_t uuid;
	struct platform_device *pdev;
	struct tbv_link *link;		/* under ctl_lock */
	bool alive;			/* under ctl_lock: receives control packets */
	bool paths_open;		/* under cable->wire_lock */
	bool suspended;			/* testing: the host sleeps (under cable->lock) */
	u32 hopids[TBV_MAX_RAILS];
	unsigned int nr_hopids;
	struct tbv_vring *rings[TBV_MAX_RAILS][2];	/* [rail][tx]; under cable->wire_lock */
	struct delayed_work wire_work;	/* moves our TX frames to the peer */
	/* faults on what we send: set under cable->lock, read by wire_work (READ_ONCE) */
	struct tbv_vcable_faults faults;
	u32 burst_left;			/* wire_work only: frames still to lose */
	u64 wire_free_ns;		/* wire_work only: rate limit, the wire is busy until */
	u8 *held_buf;			/* reordering: one frame per rail; kept until release */
	struct tbv_frame held[TBV_MAX_RAILS];	/* wire_work only: size 0 = nothing held */

	spinlock_t ctl_lock;
	struct list_head ctl_rx;	/* packets for our protocol handler */
	unsigned int ctl_queued;
	struct work_struct ctl_work;
	struct mutex req_mutex;		/* one outstanding request, like tb_xdomain_request() */
	u8 last_req[TBV_CTL_MAX_BYTES];	/* testing: the last request we sent (ctl_lock) */
	size_t last_req_size;
	struct {
		bool active;
		int status;
		void *buf;
		size_t size;
		u32 route_hi;
		u32 route_lo;
		u8 uuid[TBV_UUID_LEN];
		struct completion done;
	} pending;
};

struct tbv_vcable {
	struct config_group group;
	struct mutex lock;		/* plugged and the parameters */
	bool plugged;
	unsigned int rails;
	unsigned int lanes;
	unsigned int lane_gbps;
	unsigned int ring_size;
	unsigned int irq_throttle_us;	/* RX interrupts at least this far apart, as the NHI's */
	/*
	 * What a controller may do that the module must not depend on
	 * (docs/hardware.md): the RX SOF it reports (TBV_VCABLE_RX_SOF_*), and
	 * whether an interrupt that came while the ring's was masked is raised
	 * when it is unmasked (irq_replay 1) or lost (0).
	 */
	unsigned int rx_sof;
	unsigned int irq_replay;
	unsigned int end1_proto_version;	/* testing: make end 1 an incompatible peer */
	unsigned int end1_dma_tunnels;	/* testing: end 1 opens at most this many rails (0: all) */
	bool end1_rings_busy;		/* testing: end 1 opens no rail (another peer has the rings) */
	unsigned int end1_paths_delay_ms;	/* testing: end 1 waits before opening its paths */
	/*
	 * The connection manager's lock, as thunderbolt.ko's domain lock: paths
	 * are opened under it, and unplug holds it while it stops the links.
	 * Closing paths skips it once the cable is being unplugged (as
	 * thunderbolt.ko skips it for an unplugged XDomain).
	 */
	struct mutex cm_lock;
	bool unplugging;
	spinlock_t wire_lock;		/* the ends' rings[] and paths_open */
	struct tbv_vend end[2];
	struct tbv_vcable_dir_stats stats[2][TBV_MAX_RAILS];	/* [from end][rail] */
};

void tbv_vcable_setup(struct tbv_vcable *cable);
void tbv_vcable_cleanup(struct tbv_vcable *cable);
int tbv_vcable_end_set_suspended(struct tbv_vcable *cable, unsigned int idx, bool suspended);
int tbv_vcable_inject(struct tbv_vend *from, unsigned int rail, const void *data, u32 size,
		      u8 sof, u8 eof);
int tbv_vcable_ctl_inject(struct tbv_vend *from, const void *data, size_t size);
size_t tbv_vcable_ctl_last(struct tbv_vend *end, void *buf, size_t size);

/* tbv_vcable_fault.c */
struct tbv_fault_plan {
	bool drop;
	bool dup;
	bool hold;
	bool corrupt;
	bool stall;
};

void tbv_vcable_fault_plan(struct tbv_vend *from, unsigned int rail, struct tbv_fault_plan *plan);
u64 tbv_vcable_fault_wait(struct tbv_vend *from, unsigned int rail, u64 queued_ns, u64 now);
void tbv_vcable_fault_sent(struct tbv_vend *from, unsigned int rail, u32 size, u64 now);
bool tbv_vcable_faults_timed(const struct tbv_vend *end);
bool tbv_vcable_fault_stalled(const struct tbv_vend *from, unsigned int rail);
u32 tbv_vcable_fault_cut(const struct tbv_vend *from, unsigned int rail,
			 const struct tbv_frame *tx, bool *every);
void tbv_vcable_corrupt(struct tbv_frame *rx);
void tbv_vcable_faults_clear(struct tbv_vcable_faults *f);
int tbv_vcable_faults_parse(const char *page, struct tbv_vcable_faults *f);
ssize_t tbv_vcable_faults_show(const struct tbv_vcable_faults *f, char *page);
int tbv_vcable_faults_set(struct tbv_vend *end, const struct tbv_vcable_faults *f);
int tbv_vcable_plug(struct tbv_vcable *cable);
void tbv_vcable_unplug(struct tbv_vcable *cable);
int tbv_vcable_end_set_running(struct tbv_vcable *cable, unsigned int idx, bool running);

#endif /* TBV_VCABLE_H */
