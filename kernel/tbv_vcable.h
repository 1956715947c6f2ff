/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The virtual cable: two simulated hosts in one kernel joined by an emulated
 * USB4 link with the semantics of the real one (see tbv_link.h). Created and
 * plugged through configfs (tbv_vcable_configfs.c).
 */
#ifndef TBV_VCABLE_H
#define TBV_VCABLE_H

#include <linux/completion.h>
#include <linux/configfs.h>
#include <linux/irq_work.h>
#include <linux/uuid.h>

#include "tbv.h"

#define TBV_VCABLE_CTL_QUEUE_MAX	64	/* control packets queued per end */
#define TBV_VCABLE_ROUTE		1	/* both hosts: port 1 of their router */

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
};

/* Counters of one direction of one rail. */
struct tbv_vcable_dir_stats {
	atomic64_t frames;
	atomic64_t bytes;
	atomic64_t dropped_no_buffer;	/* the receiver had no RX buffer posted */
	atomic64_t dropped_path_closed;	/* a path or ring was not open */
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
	u32 hopids[TBV_MAX_RAILS];
	unsigned int nr_hopids;
	struct tbv_vring *rings[TBV_MAX_RAILS][2];	/* [rail][tx]; under cable->wire_lock */
	struct work_struct wire_work;	/* moves our TX frames to the peer */

	spinlock_t ctl_lock;
	struct list_head ctl_rx;	/* packets for our protocol handler */
	unsigned int ctl_queued;
	struct work_struct ctl_work;
	struct mutex req_mutex;		/* one outstanding request, like tb_xdomain_request() */
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
	unsigned int end1_proto_version;	/* testing: make end 1 an incompatible peer */
	spinlock_t wire_lock;		/* the ends' rings[] and paths_open */
	struct tbv_vend end[2];
	struct tbv_vcable_dir_stats stats[2][TBV_MAX_RAILS];	/* [from end][rail] */
};

void tbv_vcable_setup(struct tbv_vcable *cable);
int tbv_vcable_plug(struct tbv_vcable *cable);
void tbv_vcable_unplug(struct tbv_vcable *cable);

#endif /* TBV_VCABLE_H */
