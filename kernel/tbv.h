/* SPDX-License-Identifier: GPL-2.0 */
/* Internal objects of thunderbolt_ibverbs: a link to a peer, its rails and devices. */
#ifndef TBV_H
#define TBV_H

#include <linux/device.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

#include "tbv_compat.h"
#include "tbv_link.h"
#include "tbv_frame.h"
#include "tbv_credit.h"
#include "tbv_reseq.h"
#include "tbv_link_rate.h"
#include "tbv_peer_limit.h"
#include "tbv_calib.h"
#include "tbv_verbs.h"

#define TBV_DRV_NAME		"thunderbolt_ibverbs"
#define TBV_IBDEV_FMT		"usb4_rdma%u"
#define TBV_NETDEV_FMT		"usb4_net%u"

/* Counters of one rail; each is written from a single context (see the comments). */
struct tbv_rail_stats {
	/* under tx_lock */
	u64 tx_frames;
	u64 tx_bytes;
	u64 tx_errors;		/* the ring refused a frame */
	u64 net_tx_packets;
	u64 net_tx_bytes;
	u64 net_tx_dropped;
	u64 rdma_tx_packets;
	u64 rdma_tx_bytes;	/* their frames' bytes, headers included */
	u64 credit_frames_tx;
	u64 credit_requests;	/* starved senders asking (tbv_flow.c) */
	u64 credit_requests_over; /* of those, sent beyond the receiver's limit */
	u64 credit_waits;	/* times data waited for credits */
	u64 tx_zcopy_bytes;	/* payload sent from the MR's pages (split packets) */
	u64 tx_copied_bytes;	/* payload of split packets copied into a frame */
	/* in the rail's NAPI poll */
	u64 rx_frames;
	u64 rx_bytes;
	u64 rx_hw_errors;	/* CRC or overrun flagged by the controller */
	u64 rx_malformed;	/* failed validation: bad header, unknown type */
	u64 rx_lost;		/* frames the peer sent that never came (tbv_flow.c) */
	u64 net_rx_packets;
	u64 net_rx_bytes;
	u64 net_rx_discards;	/* partial packets abandoned after a gap */
	u64 net_rx_nomem;
	u64 rdma_rx_packets;
	u64 rdma_rx_bytes;
	u64 rx_busy_polled;	/* frames found by a busy poll, not an interrupt */
	u64 rx_rearm_found;	/* frames found right after re-arming the interrupt (tbv_rail.c) */
	u64 credit_frames_rx;
	u64 credit_limits_refused;	/* impossible limits from the peer */
	u64 rx_split_dropped;	/* split packets' header or payload frames without the other */
};

struct tbv_rail {
	struct tbv_link *link;
	unsigned int idx;
	struct tbv_ring *tx;
	struct tbv_ring *rx;
	struct tbv_ring_cb tx_cb;
	struct tbv_ring_cb rx_cb;
	struct tbv_frame **frames;	/* ring_size RX + ring_size TX frames, owned here */
	unsigned int nr_frames;

	spinlock_t tx_lock;		/* the TX pool, tx_packet_id, TX stats */
	/*
	 * Held across every ring_tx of the rail (tbv_split.c), innermost: a split
	 * packet's two frames must leave back to back.
	 */
	spinlock_t ring_lock;
	/* the TX pool: touched only by tbv_pool.c */
	struct list_head tx_free;
	unsigned int tx_nfree;
	struct list_head tx_waiters;	/* struct tbv_tx_waiter: senders waiting for frames */
	unsigned int tx_nwoken;		/* waiters woken whose work has not run yet */
	/* the netdev's: restarts its queue when frames or credits come back (a call up) */
	void (*net_tx_wake)(struct tbv_rail *rail);
	u32 tx_packet_id;

	struct napi_struct napi;	/* RX polling, on the link's netdev */
	bool napi_enabled;
	bool busy_polling;		/* NAPI: the ring ran dry, polled on (busy_poll_us) */
	u64 busy_poll_until;		/* NAPI: ns, when busy polling gives up */
	/* NAPI: a frame found by the look after re-arming, for the next poll (tbv_rail_rearm()) */
	struct tbv_frame *rx_stash;
	struct tbv_net_reasm reasm;
	struct sk_buff *reasm_skb;
	/* NAPI: the last header frame's entries, until their payload frames came */
	u8 split_hdrs[TBV_SPLIT_BATCH][TBV_SPLIT_ENTRY_LEN];
	u8 split_count;			/* entries held */
	u8 split_next;			/* the first whose payload has not come */
	u32 split_tag;			/* ring_lock: the next split packet's tag */

	/* Software credits (tbv_flow.c), if agreed at login */
	bool credits;
	struct tbv_credit_tx credit_tx;	/* tx_lock */
	bool credit_timer_armable;	/* tx_lock */
	unsigned int credit_wanted;	/* tx_lock: data frames a waiting sender needs */
	unsigned int credit_unqueued;	/* tx_lock: counted, not yet in the TX ring */
	struct timer_list credit_timer;	/* starved: ask the receiver */
	struct tbv_credit_rx credit_rx;	/* NAPI */
	bool credit_owed;		/* an advertisement waits for a TX frame or credit */

	/* Striping: RX buffers a QP keeps out of order are replaced by spares (tbv_pool.c) */
	spinlock_t rx_spare_lock;
	struct list_head rx_spare;
	unsigned int rx_nspare;

	struct tbv_rail_stats stats;

	/* The bring-up self-check (tbv_calib.c): what the peer sent us, judged in NAPI */
	spinlock_t calib_lock;
	struct tbv_calib_rx calib;
	unsigned long calib_answered;	/* calib_lock: jiffies of our last answering round */
	u8 calib_round;			/* calib_lock: the round number of our next answer */
};

/*
 * A link's life (docs/architecture.md, "Link life cycle", draws it). OPENING and
 * CLOSING mean a work is in the backend's paths_enable or paths_disable without
 * link->lock; anyone who wants the link elsewhere meanwhile says so in
 * link->next, and that work takes it there once the call returns.
 */
enum tbv_link_state {
	TBV_LINK_LOGIN,		/* logging in (retrying until the peer answers); no devices */
	TBV_LINK_REFUSED,	/* login refused; waits for a new peer session; no devices */
	TBV_LINK_STARTING,	/* login done: up_work allocates the netdev, starts the rails */
	TBV_LINK_OPENING,	/* up_work is in paths_enable, without the lock */
	TBV_LINK_UP,		/* paths open, netdev and ib device registered */
	TBV_LINK_CLOSING,	/* a teardown is in paths_disable, without the lock */
	TBV_LINK_SUSPENDED,	/* host suspended: no devices, silent until resume */
	TBV_LINK_DEAD,		/* stopped or being destroyed: nothing starts again */
};

struct tbv_link_stats {
	atomic64_t ctl_rx_rejected;	/* control packets of ours that failed validation */
	atomic64_t login_attempts;
	atomic64_t link_ups;
	atomic64_t peer_teardowns;	/* devices taken down because the peer said so */
	atomic64_t calib_frames_tx;	/* the bring-up self-check's (tbv_calib.c) */
	atomic64_t calib_frames_rx;
	atomic64_t calib_failed_rails;	/* rails a self-check took out */
	atomic64_t calib_split_failed;	/* self-checks that took split packets out */
};

/* The last self-check of each rail, for `tbv calibration` (under its own lock) */
struct tbv_calib_report {
	struct mutex lock;
	u32 seed;			/* ours, in the frames we sent */
	unsigned int rails;		/* rails of the last self-check */
	bool split;			/* split packets were calibrated */
	bool split_failed;		/* and failed: the link logged in again without */
	bool valid[TBV_MAX_RAILS];
	struct tbv_calib_rx rx[TBV_MAX_RAILS];
};

/* The ib_device of one link. */
struct tbv_dev {
	struct ib_device ibdev;		/* first: ib_alloc_device() */
	struct tbv_link *link;
	struct tbv_ib_rate rate;
	enum ib_port_state port_state;
	/*
	 * Our own teardown is unregistering it (tbv_ibdev_unregister()), or the
	 * core took it away without us (ib_unregister_driver(): dealloc_driver ran).
	 */
	bool unregistering;
	bool gone;
	atomic_t nr_ucontexts;
	atomic_t nr_pds;
	atomic_t nr_qps;
	atomic_t nr_cqs;
	atomic_t nr_mrs;
	atomic_t nr_mws;
	atomic_t nr_ahs;
	atomic_t nr_srqs;
	atomic64_t pinned_pages;	/* by user MRs, bounded by tbv_pinned_pages_limit() */

	struct tbv_rdma_stats rstats;
	spinlock_t probe_lock;		/* UC refusals of this peer's requests: */
	struct tbv_probe_watch probe;
	struct tbv_log_limit probe_log;
	bool probe_logged;		/* the first was logged */

	struct xarray qps;		/* qpn -> tbv_qp; RX looks up under its (BH) lock */
	u32 next_qpn;
	struct xarray mrs;		/* lkey == rkey -> tbv_mr */
	struct xarray mws;		/* rkey >> 8 -> tbv_mw_state */
	struct xarray ahs;		/* ah_num -> tbv_ah_obj: user AHs (rdma_rxe's ah_num) */

	spinlock_t mcast_lock;		/* mcast_list, nr_mcast_attach */
	struct list_head mcast_list;	/* struct tbv_mcast_attach */
	unsigned int nr_mcast_attach;

	/* Packets to our own GIDs: delivered by a work item, never recursively. */
	spinlock_t loop_lock;
	struct list_head loop_frames;
	struct work_struct loop_work;
};

static inline struct tbv_dev *to_tbv_dev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct tbv_dev, ibdev);
}

struct tbv_link {
	struct tbv_link_info info;
	unsigned int index;		/* usb4_rdma<index>, usb4_net<index> */

	/*
	 * State, login, bring-up and teardown; never held across a paths call or
	 * a control request (docs/architecture.md, "Locks" of the link).
	 */
	struct mutex lock;
	enum tbv_link_state state;
	/* UP, OPENING, CLOSING: where the link goes next (UP: it stays or goes up) */
	enum tbv_link_state next;
	struct tbv_login_state login;
	unsigned int login_tries;
	unsigned long relogin_at;	/* jiffies: our next login starts no earlier */
	bool refusal_logged;		/* one refusal line per peer session */
	unsigned int bringup_failures;	/* in a row: the next retry waits longer */
	bool silence_logged;		/* one line when the peer never answers our login */
	u32 last_peer_session;
	bool peer_session_seen;		/* last_peer_session holds a login's session */
	struct tbv_log_limit peer_log;	/* lines about what the peer did */
	struct tbv_churn churn;		/* teardowns the peer forced */
	u8 ctl_sequence;
	u32 local_hopids[TBV_MAX_RAILS];
	struct delayed_work login_work;
	struct work_struct up_work;	/* STARTING -> OPENING -> UP */
	struct work_struct down_work;	/* UP -> CLOSING -> LOGIN or REFUSED, as the peer said */

	unsigned int nr_rails;		/* agreed at login */
	bool stripe;			/* QPs stripe over the rails (tbv_stripe.c) */
	bool split;			/* page-sized packets, sent as two frames (tbv_split.c) */
	u32 rdma_full;			/* payload bytes of a full RDMA packet (tbv_rdma.h) */
	struct tbv_rail rails[TBV_MAX_RAILS];
	struct net_device *ndev;
	/* registered by us, with a device reference of ours; written under the lock */
	struct tbv_dev *dev;
	/* what RX delivers to: set before registering, cleared by dealloc_driver */
	struct tbv_dev __rcu *rx_dev;
	/* the core unregistered dev without us: drop it, register a new one later */
	struct delayed_work dev_lost_work;
	unsigned long dev_lost_at;	/* jiffies of the last loss */
	unsigned int dev_lost_delay_ms;	/* before registering again; doubles while it recurs */
	bool data_up;			/* state == UP, for the data path's lockless reads */

	struct tbv_link_stats stats;
	struct tbv_calib_report calib;
	u32 calib_seed;			/* ours, of the last self-check (the answers' too) */
	bool calib_running;		/* tbv_calib_run() sends our rounds itself */
};

struct tbv_netdev_priv {
	struct tbv_link *link;
};

/* tbv_shared.c: the module's workqueue and device numbers */
int tbv_shared_init(void);
void tbv_shared_exit(void);
int tbv_index_alloc(void);
void tbv_index_free(unsigned int index);
extern struct workqueue_struct *tbv_wq;

/*
 * A rail's TX frames: one less than its ring's descriptors, which is all an NHI
 * ring holds at once (one stays empty). One more would wait in thunderbolt.ko's
 * software queue, behind the ring, until the host CPU handles a TX completion:
 * under load that held a striped QP's packet back for long after the packets it
 * preceded had crossed on other rails.
 */
static inline unsigned int tbv_rail_tx_frames(const struct tbv_link *link)
{
	return link->info.ring_size - 1;
}

/* tbv_rail.c: rings, NAPI RX and dispatch by frame type */
int tbv_rails_start(struct tbv_link *link, unsigned int *started);
void tbv_rails_quiesce(struct tbv_link *link);
void tbv_rails_stop(struct tbv_link *link);
void tbv_rails_free(struct tbv_link *link);

/* tbv_pool.c: a rail's frames, the only way to take or return them */
#define TBV_TX_RESERVE		4	/* TX frames left to ACKs and READ responses */
#define TBV_TX_TURN		16	/* frames a sender takes in a row while others wait */
#define TBV_CREDIT_ASK_MS	10	/* starved this long: ask the receiver for credits */

void tbv_pool_init(struct tbv_rail *rail, void (*net_tx_wake)(struct tbv_rail *rail));
void tbv_pool_fill(struct tbv_rail *rail, struct tbv_frame **tx, unsigned int ntx,
		   struct tbv_frame **spare, unsigned int nspare);
void tbv_pool_clear(struct tbv_rail *rail);
unsigned int tbv_pool_nfree(struct tbv_rail *rail);
/* the netdev's and credit frames' side, tx_lock held */
unsigned int tbv_pool_room(struct tbv_rail *rail);
bool tbv_pool_starved(struct tbv_rail *rail, unsigned int n);
void tbv_pool_take(struct tbv_rail *rail, struct tbv_frame **frames, unsigned int n);
void tbv_pool_queued(struct tbv_rail *rail, unsigned int n);
void tbv_pool_return(struct tbv_rail *rail, struct tbv_frame *frame);
struct tbv_frame *tbv_pool_take_any(struct tbv_rail *rail);
void tbv_pool_wake(struct tbv_rail *rail);
/* no lock held */
void tbv_pool_wake_net(struct tbv_rail *rail);
struct tbv_frame *tbv_pool_get(struct tbv_rail *rail, enum tbv_tx_use use, bool wire,
			       struct tbv_tx_waiter *w, bool wait, struct tbv_frame **second);
void tbv_pool_unwait(struct tbv_tx_waiter *w);
void tbv_pool_woken_runs(struct tbv_tx_waiter *w);
void tbv_pool_put(struct tbv_rail *rail, struct tbv_frame *frame, bool canceled);
void tbv_pool_unget(struct tbv_rail *rail, struct tbv_frame *frame, bool wire);
void tbv_pool_send(struct tbv_rail *rail, struct tbv_frame *frame);
void tbv_pool_send_batch(struct tbv_rail *rail, struct tbv_frame *hdr, struct tbv_frame **payload,
			 unsigned int n);
/* spare RX buffers, kept by a striped QP */
bool tbv_pool_rx_spare_ready(struct tbv_rail *rail);
struct tbv_frame *tbv_pool_rx_spare_take(struct tbv_rail *rail);
void tbv_pool_rx_release(struct tbv_link *link, struct tbv_frame *frame);
void tbv_rail_stats_sum(struct tbv_link *link, struct tbv_rail_stats *sum);

/* tbv_split.c: split packets, zero-copy TX, and every frame's way into a TX ring */
u32 tbv_split_caps(void);
bool tbv_split_agreed(const struct tbv_link *link);
int tbv_rail_ring_tx(struct tbv_rail *rail, struct tbv_frame *frame);
unsigned int tbv_rail_ring_tx_batch(struct tbv_rail *rail, struct tbv_frame *hdr,
				    struct tbv_frame **payload, unsigned int n);
void tbv_split_entry(u8 *entry, const struct tbv_frame *payload);
void tbv_split_join(struct tbv_frame *hdr, struct tbv_frame *payload);

enum tbv_split_rx {
	TBV_SPLIT_NONE,		/* not part of a split packet: dispatch by type */
	TBV_SPLIT_CONSUMED,	/* a header kept aside, or a frame dropped */
	TBV_SPLIT_PACKET,	/* a split packet, whole: an RDMA packet with a prefix */
};

enum tbv_split_rx tbv_split_rx(struct tbv_rail *rail, struct tbv_frame *frame);
int tbv_frame_decode(const struct tbv_link *link, const struct tbv_frame *frame,
		     struct tbv_rdma_hdr *h);
const u8 *tbv_frame_payload(const struct tbv_frame *frame, const struct tbv_rdma_hdr *h);

/* tbv_stripe.c */
u32 tbv_stripe_caps(void);
bool tbv_stripe_agreed(const struct tbv_link *link);

/* tbv_flow.c */
u32 tbv_flow_caps(void);
void tbv_flow_setup(struct tbv_rail *rail);
void tbv_flow_start(struct tbv_rail *rail);
void tbv_flow_stop(struct tbv_rail *rail);
void tbv_flow_rx_reaped(struct tbv_rail *rail);
void tbv_flow_rx(struct tbv_rail *rail, const struct tbv_frame *frame);
void tbv_flow_rx_done(struct tbv_rail *rail);

/* tbv_calib.c: the bring-up self-check */
#define TBV_CALIB_MS		2000	/* the longest a self-check waits for the peer */
#define TBV_CALIB_ROUND_MS	100	/* a round again while the peer has not judged one */

void tbv_calib_rail_start(struct tbv_rail *rail);
bool tbv_calib_rx(struct tbv_rail *rail, const struct tbv_frame *frame);
void tbv_calib_run(struct tbv_link *link);
unsigned int tbv_calib_verdict(struct tbv_link *link, bool *split_ok);
ssize_t tbv_calib_show(struct tbv_link *link, char *buf);

/* tbv_netdev.c */
struct net_device *tbv_netdev_alloc(struct tbv_link *link);
int tbv_netdev_register(struct tbv_link *link);
void tbv_netdev_unregister(struct tbv_link *link);
void tbv_net_rx(struct tbv_rail *rail, const struct tbv_frame *frame);
void tbv_net_tx_wake(struct tbv_rail *rail);
void tbv_net_reasm_reset(struct tbv_rail *rail);
#define TBV_NET_MIN_TX_FRAMES	TBV_NET_MAX_FRAGS

/* Per-device limits: reported by query_device and enforced. */
#define TBV_MAX_PD		4096
#define TBV_MAX_UCONTEXT	1024

struct tbv_pd {
	struct ib_pd ibpd;
	struct tbv_charge charge;
};

/* tbv_mr.c */
unsigned long tbv_pinned_pages_limit(void);

/* tbv_pd.c */
int tbv_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int tbv_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);

/* tbv_ibdev.c */
int tbv_ibdev_register(struct tbv_link *link);
void tbv_ibdev_unregister(struct tbv_link *link);

/* tbv_usb4.c */
int tbv_usb4_init(void);
void tbv_usb4_exit(void);

/* Payload bytes of a full RDMA packet on @qp's link (proto/tbv_rdma.h) */
static inline u32 tbv_qp_full(const struct tbv_qp *qp)
{
	return qp->dev->link->rdma_full;
}

#endif /* TBV_H */
