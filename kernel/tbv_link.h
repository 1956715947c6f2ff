/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The link interface: what a backend (the in-kernel virtual cable, or USB4 NHI
 * rings through thunderbolt.ko) provides to the rest of the module. It mirrors
 * the real Thunderbolt primitives so both backends behave alike:
 *  - a control channel of XDomain request/response packets of at most 252
 *    bytes; a response is matched to the one outstanding request only by type,
 *    size, route and protocol UUID;
 *  - rails, each a TX and an RX ring of fixed size carrying frames of at most
 *    4 KiB with SOF/EOF marks; a frame that arrives while no RX buffer is
 *    posted is silently dropped;
 *  - TX completions are called back in process context; RX rings run in
 *    polling mode: the backend calls start_poll() in hard-IRQ context with the
 *    ring's lock held, and the consumer then drains the ring with ring_poll()
 *    and re-arms it with ring_poll_complete().
 *
 * The usb4 backend is part of the main module; the virtual cable is a module
 * of its own (tbverbs_vcable.ko, as netdevsim is for netdev), so the
 * "Backend -> link" calls below are exported to it, GPL-only, in the namespace
 * TBV_LINK_NS (tbv_compat.h): a backend module says MODULE_IMPORT_NS(TBV_LINK_NS).
 * Its symbol use pins the main module; a backend module must destroy every
 * link it created before its exit returns, since the link calls its ops.
 */
#ifndef TBV_LINK_H
#define TBV_LINK_H

#include <linux/types.h>
#include <linux/list.h>

#include "tbv_compat.h"
#include "tbv_frame.h"
#include "tbv_login.h"

struct tbv_link;
struct page;


struct tbv_frame {
	void *data;		/* TBV_FRAME_SIZE bytes */
	u32 size;		/* TX: bytes to send; RX: bytes received */
	/*
	 * TX: when set, the frame's bytes are @size bytes at @page_off in @page
	 * (a pinned page of an MR, with a reference the link drops once the
	 * frame is done), not at @data: the backend maps or copies that page.
	 */
	struct page *page;
	u32 page_off;
	u8 sof;			/* PDF values (TBV_PDF_SOF/EOF) */
	u8 eof;
	u16 flags;		/* RX: TBV_FRAME_F_* */
	u8 rail;		/* the rail whose pool the frame is in (set by tbv_rail.c) */
	struct list_head list;	/* owned by whoever holds the frame */
	void *backend_priv;	/* e.g. the DMA mapping */
	/* RX, the link's own: a split packet's header, which came in the frame before */
	bool has_prefix;
	u8 prefix[TBV_FRAME_PREFIX_MAX];
};

struct tbv_ring_cb;

/* A ring as the link layer sees it; backends embed it in their own ring. */
struct tbv_ring {
	struct tbv_link *link;
	unsigned int rail;
	bool tx;
	unsigned int size;		/* descriptors */
	const struct tbv_ring_cb *cb;
};

struct tbv_ring_cb {
	void *ctx;
	/* TX ring: a frame left the ring (or was canceled by ring_stop). Process context. */
	void (*tx_done)(void *ctx, struct tbv_frame *frame, bool canceled);
	/* RX ring: frames are waiting. Hard-IRQ context, ring lock held: schedule only. */
	void (*start_poll)(void *ctx);
};

struct tbv_link_ops {
	/*
	 * Control channel. ctl_request sleeps until the response or the timeout;
	 * ctl_response never waits for the peer or the connection manager. The
	 * link calls neither with its lock held.
	 */
	int (*ctl_request)(struct tbv_link *link, const void *req, size_t size,
			   void *resp, size_t resp_size, unsigned int timeout_ms);
	int (*ctl_response)(struct tbv_link *link, const void *resp, size_t size);
	/* The peer's route now, if it can change after probe (NULL: info.route stays). */
	u64 (*route)(struct tbv_link *link);

	/* Out-HopIDs for our TX paths, advertised in the login. */
	int (*hopids_alloc)(struct tbv_link *link, unsigned int rails, u32 *hopids);
	void (*hopids_release)(struct tbv_link *link);

	/* Rings: allocation returns NULL on failure, like tb_ring_alloc_*(). */
	struct tbv_ring *(*ring_alloc)(struct tbv_link *link, unsigned int rail, bool tx,
				       unsigned int size, const struct tbv_ring_cb *cb);
	void (*ring_free)(struct tbv_ring *ring);
	void (*ring_start)(struct tbv_ring *ring);
	/*
	 * TX: cancels queued frames. RX: its interrupt may still be masked by a
	 * start_poll() whose NAPI was disabled before ring_poll_complete().
	 */
	void (*ring_stop)(struct tbv_ring *ring);
	int (*ring_tx)(struct tbv_ring *ring, struct tbv_frame *frame);
	int (*ring_rx)(struct tbv_ring *ring, struct tbv_frame *frame);
	struct tbv_frame *(*ring_poll)(struct tbv_ring *ring);
	void (*ring_poll_complete)(struct tbv_ring *ring);

	/* Frame buffers usable by this link's rings (DMA-mapped where needed). */
	struct tbv_frame *(*frame_alloc)(struct tbv_link *link);
	void (*frame_free)(struct tbv_link *link, struct tbv_frame *frame);

	/*
	 * Open the paths once both ends agreed; RX buffers are posted before.
	 * On failure *@opened says how many rails (the first ones) did open
	 * before it, and the backend has closed them again. Both calls are made
	 * without the link's lock and may wait for the backend's connection
	 * manager (thunderbolt.ko's domain lock), even while it removes the link.
	 */
	int (*paths_enable)(struct tbv_link *link, const struct tbv_login_agreed *agreed,
			    unsigned int *opened);
	void (*paths_disable)(struct tbv_link *link);
};

/* What a backend knows about a link when it creates it. */
struct tbv_link_info {
	const struct tbv_link_ops *ops;
	void *backend_priv;
	struct device *parent;		/* parent of the ib_device and the netdev */
	const char *backend_name;	/* "vcable", "usb4" */
	u8 local_uuid[TBV_UUID_LEN];
	u8 peer_uuid[TBV_UUID_LEN];
	u64 route;
	unsigned int max_rails;
	unsigned int ring_size;
	unsigned int lanes;		/* trained link: lanes x lane_gbps */
	unsigned int lane_gbps;
	u16 proto_version;		/* testing only: offer just this version (0: normal) */
};

/* Backend -> link. */
struct tbv_link *tbv_link_create(const struct tbv_link_info *info);
/*
 * Stop @link from a context that may hold the lock the backend's paths_enable
 * or paths_disable waits for (remove() under thunderbolt.ko's domain lock): it
 * waits for no such call. True: stopped, and tbv_link_destroy() will not wait
 * on one either. False: a work is in one of those calls, and takes the link
 * down once it returns; call tbv_link_destroy() later, from a context that
 * holds no such lock.
 */
bool tbv_link_stop(struct tbv_link *link);
void tbv_link_destroy(struct tbv_link *link);
/*
 * The host suspends (or shuts down): tell the peer (LOGOUT, best effort), take
 * the devices down and stay silent. Resume logs in again as a new session.
 * Process context, no backend lock held.
 */
void tbv_link_suspend(struct tbv_link *link);
void tbv_link_resume(struct tbv_link *link);
/* An incoming control packet; returns true if it was ours and consumed. Process context. */
bool tbv_link_ctl_rx(struct tbv_link *link, const void *buf, size_t size);
void *tbv_link_backend_priv(struct tbv_link *link);
unsigned int tbv_link_index(struct tbv_link *link);
/* Names of the link's devices once up ("" otherwise). */
void tbv_link_dev_names(struct tbv_link *link, char *ibdev, char *netdev, size_t len);

#endif /* TBV_LINK_H */
