/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Verbs objects of a tbv_dev: MRs, CQs, AHs, SRQs and QPs, and the transport
 * (requester, responder, completer) that moves RDMA packets between QPs.
 *
 * Contexts: verbs are called in process context; RX runs in the rails' NAPI
 * (softirq) or in the loopback work with BH disabled; the retransmit timer is
 * a softirq. Every lock below is therefore taken with BH disabled. Completion
 * and async event handlers are called with the QP's sq_lock or resp_lock held:
 * the core's handlers (uverbs events, ib_alloc_cq's softirq/workqueue polling)
 * only queue work, and a kernel consumer must not post to the same QP from a
 * direct handler.
 */
#ifndef TBV_VERBS_H
#define TBV_VERBS_H

#include <linux/refcount.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "tbv_rdma.h"
#include "tbv_resp_rules.h"
#include "tbv_quota.h"
#include "tbv_uqueue.h"

/* Device limits: reported by query_device and enforced at creation. */
#define TBV_MAX_QP		4096
#define TBV_MAX_QP_WR		4096		/* UCX asks for 4096 receives (UD) */
#define TBV_MAX_SGE		16
#define TBV_MAX_INLINE		512
#define TBV_MAX_CQ		4096
#define TBV_MAX_CQE		65536
#define TBV_MAX_MR		65536
#define TBV_MAX_MR_SIZE		0x80000000ull	/* 2 GiB: the largest message */
#define TBV_MAX_MW		65536
#define TBV_MAX_SRQ		1024
#define TBV_MAX_SRQ_WR		4096
#define TBV_MAX_AH		65536
#define TBV_MAX_RD_ATOMIC	16		/* READs and atomics in flight per QP, each way */
#define TBV_MAX_MCAST_GRP	256
#define TBV_MAX_MCAST_QP_ATTACH	64		/* QPs per group */
#define TBV_MAX_MCAST_ATTACH	1024		/* attachments per device */

/* Transport tuning: ACK requests (the window: TBV_TX_WINDOW, proto/tbv_rdma.h). */
#define TBV_ACK_EVERY		32		/* ACK_REQ on every 32nd packet of a message */

struct tbv_dev;
struct tbv_rail;
struct tbv_frame;

/* A sender waiting for a rail's TX frames or credits (tbv_pool.c): its work runs when they come. */
struct tbv_tx_waiter {
	struct list_head node;		/* on rail->tx_waiters, under that rail's tx_lock */
	struct tbv_rail *rail;		/* the rail it waited on last (still set after a wake) */
	unsigned int turn;		/* frames taken since it last queued (its QP's tx.lock) */
	bool woken;			/* woken, its work not run yet (under rail's tx_lock) */
	struct work_struct work;
};

/* What an RDMA packet's frame is for: the pool's reserve rule (tbv_pool_get()). */
enum tbv_tx_use {
	TBV_TX_REQUEST,		/* a requester packet: leaves TBV_TX_RESERVE frames */
	TBV_TX_ANSWER,		/* an ACK or READ/atomic response: may take the last ones */
};

/* Transport events of a device, from any context. */
struct tbv_rdma_stats {
	atomic64_t rx_malformed;	/* RDMA frames that failed validation */
	atomic64_t rx_no_qp;		/* for a QP that does not exist */
	atomic64_t seq_naks;		/* sequence gaps seen by our responders */
	atomic64_t rx_duplicates;	/* RC requests our responders already had (resent) */
	atomic64_t rnr_naks;		/* receiver-not-ready NAKs we sent */
	atomic64_t ud_no_recv;		/* UD packets dropped: no receive WQE */
	atomic64_t retransmits;		/* retransmission timeouts of our requesters */
	atomic64_t atomic_replays;	/* repeated atomics answered from the replay cache */
	atomic64_t rx_stray;		/* for a connected QP, not from its peer QP or path */
	atomic64_t rejected_access;	/* requests refused: key, PD, range or rights (NAK) */
	atomic64_t rejected_invalid;	/* requests refused: invalid or not executable (NAK) */
	atomic64_t opcode_seq_errors;	/* of those, out of IBA's opcode sequence */
	atomic64_t uc_refused;		/* UC requests refused: key, PD, range or rights (dropped) */
	atomic64_t responses_superseded;/* queued READ/atomic responses a newer request replaced */
	atomic64_t cq_overflows;		/* completions lost to a full CQ */
	atomic64_t ud_qkey_mismatches;	/* UD SENDs dropped for a wrong Q_Key (IBA 10.2.5) */
	atomic64_t mcast_unjoined;	/* multicast UD for a group no QP here joined */
	atomic64_t responses_unmatched;	/* ACKs or READ/atomic responses owed to no request */
	atomic64_t kicks_deferred;	/* kicks that left passes to the work queue (tbv_tx.c) */
	atomic64_t stripe_held;		/* striped packets held until a gap before them filled */
	atomic64_t stripe_gaps;		/* gaps in a striped QP's packets given up on */
	atomic64_t stripe_dropped;	/* striped packets dropped: duplicate, or no spare buffer */
	atomic64_t stripe_late;		/* striped packets that came after their gap was given up */
};

/*
 * Keys: MR keys (lkey == rkey) are random with this bit clear; MW rkeys have it
 * set, a random 23-bit index above it and an 8-bit key byte the consumer
 * chooses at each bind (ibv_inc_rkey()), so the two never collide.
 */
#define TBV_KEY_MW_BIT		0x80000000u

struct tbv_mr {
	struct ib_mr ibmr;
	struct tbv_dev *dev;
	struct ib_umem *umem;		/* NULL: kernel DMA MR (addresses are kernel VAs) */
	struct page **pages;		/* pinned pages of umem, in order */
	unsigned long npages;
	unsigned long charged_pages;	/* counted in the device's pinned_pages */
	u32 page_offset;		/* of the first byte within pages[0] */
	u64 iova;
	u64 length;
	int access;
	refcount_t ref;			/* 1 for the registration, +1 per copy in progress */
	struct completion released;
	struct rcu_head rcu;
	atomic_t nr_mws;		/* memory windows bound to it: no deregistration */
	struct tbv_charge charge;	/* its user's: the MR, the pages it pins */
};

/*
 * What RX, binds and invalidations reach of a memory window: found in the
 * device's mws under RCU, used under its lock. It lives apart from the window,
 * whose struct ib_mw the core frees as soon as dealloc_mw returns, and is freed
 * with kfree_rcu(): deallocation marks it dead and returns without waiting for
 * the lookups in flight, which refuse it once they hold the lock.
 */
struct tbv_mw_state {
	spinlock_t lock;		/* all below but type and pd; taken in RX (BH) */
	bool dead;			/* deallocated: refuses everything */
	u32 rkey;			/* the current rkey */
	enum ib_mw_type type;
	struct ib_pd *pd;		/* compared, never followed (it may be gone once dead) */
	struct tbv_mr *mr;		/* bound to (counted in its nr_mws), or NULL */
	u64 addr;
	u64 length;
	int access;
	u32 qpn;			/* type 2: the QP it is bound through */
	struct rcu_head rcu;
};

/* A memory window: remote access to part of an MR, bound and invalidated by WQEs. */
struct tbv_mw {
	struct ib_mw ibmw;		/* ibmw.rkey: the rkey it was allocated with (its index) */
	struct tbv_dev *dev;
	struct tbv_mw_state *state;
	struct tbv_charge charge;
};

/*
 * A completion queue: a kernel CQ keeps a ring of ib_wc that poll_cq drains; a
 * user CQ created with room for rdma_rxe's reply is a ring of ib_uverbs_wc
 * shared with the process, which polls it itself (docs/rxe-abi.md 4.3).
 */
struct tbv_cq {
	struct ib_cq ibcq;
	spinlock_t lock;		/* the queue or ring, notify, overflow */
	struct ib_wc *queue;		/* kernel CQs */
	u32 size;			/* entries: ibcq.cqe */
	u32 head;			/* oldest completion */
	u32 count;
	struct tbv_uqueue ring;		/* user CQs: ring.buf set, queue NULL */
	u8 notify;			/* IB_CQ_SOLICITED or IB_CQ_NEXT_COMP when armed */
	bool overflowed;
	struct tbv_charge charge;	/* its user's: the CQ (the ring's bytes: ring.mmap's) */
};

static inline bool tbv_cq_is_shared(const struct tbv_cq *cq)
{
	return cq->ring.buf;
}

struct tbv_ah {
	struct ib_ah ibah;
	u8 dgid[16];
	u8 sgid[16];
	bool loopback;			/* dgid is one of our own GIDs */
};

/* An address handle as allocated: the address (UD WQEs copy it) and its user's charge. */
struct tbv_ah_obj {
	struct tbv_ah ah;
	struct tbv_charge charge;
	u32 num;			/* user AHs: its ah_num in dev->ahs (from 1); 0: none */
	refcount_t ref;			/* numbered AHs: tbv_ah_get() holders, and 1 until destroyed */
	struct completion released;
};

struct tbv_sge {
	u64 addr;
	u32 length;
	u32 lkey;
};

/* A ring of fixed-size WQE slots; prod and cons only grow (mod 2^32). */
struct tbv_wq {
	void *buf;
	u32 size;			/* slots */
	u32 slot;			/* bytes per slot */
	u32 max_sge;
	u32 prod;
	u32 cons;
};

static inline void *tbv_wq_slot(struct tbv_wq *wq, u32 idx)
{
	return wq->buf + (size_t)(idx % wq->size) * wq->slot;
}

/* A memory-window bind: the window, its next rkey, and the part of an MR it grants. */
struct tbv_bind {
	u32 mw_rkey;			/* the window's rkey now */
	u32 new_rkey;
	u32 mr_lkey;
	int access;
	u64 addr;
	u64 length;
};

struct tbv_recv_wqe {
	u64 wr_id;
	u32 num_sge;
	u32 length;			/* sum of the SGE lengths */
	struct tbv_sge sge[];
};

struct tbv_send_wqe {
	u64 wr_id;
	u32 opcode;			/* enum ib_wr_opcode */
	u32 send_flags;
	u32 imm;			/* __be32 bits, carried opaque */
	u32 length;
	u64 remote_addr;
	u32 rkey;
	u64 swap;			/* atomics: swap value (CMP_AND_SWP) */
	u64 compare_add;		/* atomics: compare value, or the addend */
	u32 inv_rkey;			/* SEND_WITH_INV, LOCAL_INV */
	u32 flush_len;			/* FLUSH: length, TBV_FLUSH_AUX(type, level) */
	u32 flush_aux;
	struct tbv_bind bind;		/* BIND_MW */
	u32 remote_qpn;			/* UD */
	u32 remote_qkey;
	struct tbv_ah ah;		/* UD: copied, the AH may be destroyed after posting */
	/* transport, owned by the requester under sq_lock */
	u32 first_psn;
	u32 npkts;
	u32 read_pkts_done;		/* READ, atomics: response packets placed */
	u32 read_part;			/* READ: response packets a READ_REQ asks for */
	u8 read_slots;			/* of max_rd_atomic it holds: requests it may have out */
	u8 error;			/* enum ib_wc_status a flush reports instead */
	bool unsent;			/* UD longer than the path MTU: completes unsent (ring WQEs) */
	bool signaled;
	bool is_inline;
	u16 num_sge;
	struct tbv_sge sge[];		/* or, when is_inline, the data itself */
};

/* One send work request, from a kernel ib_send_wr. */
struct tbv_post_wr {
	u64 wr_id;
	u32 opcode;			/* enum ib_wr_opcode */
	u32 send_flags;
	const struct ib_sge *sge;
	u32 num_sge;
	u32 imm;			/* the __be32 bits of imm_data as a number */
	u32 inv_rkey;
	u64 remote_addr;
	u32 rkey;
	u64 swap;
	u64 compare_add;
	u32 flush_len;			/* FLUSH */
	u8 flush_type;			/* enum ib_uverbs_flush_type (IB_FLUSH_GLOBAL, ...) */
	u8 flush_level;			/* enum ib_uverbs_flush_level (IB_FLUSH_RANGE, ...) */
	struct ib_ah *ah;		/* UD */
	u32 remote_qpn;
	u32 remote_qkey;
	struct tbv_bind bind;		/* BIND_MW */
};

struct tbv_srq {
	struct ib_srq ibsrq;
	spinlock_t lock;		/* the queue or ring (the kernel's side), limit */
	struct tbv_wq rq;		/* kernel SRQs; for a ring only max_sge is used */
	struct tbv_uqueue ring;		/* user SRQs: ring.buf set, rq.buf NULL */
	u32 limit;			/* SRQ_LIMIT_REACHED below this many WQEs; 0 = off */
	struct tbv_charge charge;	/* its user's: the SRQ (the ring's bytes: ring.mmap's) */
};

static inline bool tbv_srq_is_shared(const struct tbv_srq *srq)
{
	return srq->ring.buf;
}

/*
 * A READ the responder is answering, streamed from its MR by the TX path, or
 * the response of an executed atomic (one packet carrying its result).
 */
struct tbv_read_job {
	u32 rkey;			/* looked up again for every response packet */
	u64 va;
	u32 len;
	u32 psn;			/* of the first response packet */
	u32 npkts;
	u32 sent;			/* packets sent so far */
	bool atomic;			/* an atomic's response: atomic_orig, no MR access */
	u64 atomic_orig;
};

/*
 * An executed atomic, kept so that a repeated request (its response was lost)
 * is answered with the same result instead of being executed twice.
 */
struct tbv_atomic_result {
	u32 psn;
	bool valid;
	u64 orig;
};

enum tbv_qp_tx_bits {
	TBV_TX_PENDING,			/* somebody wants tbv_qp_tx() to run */
};

/*
 * The transport's state of a QP, one part per role, each written (and reset)
 * only by its own file; the lock that protects it is named with each.
 */

/* The requester (tbv_req.c), under sq_lock; the completer reads psn, sq_started. */
struct tbv_req {
	u32 sq_next;			/* WQE being sent (== sq_started unless rewound) */
	u32 sq_started;			/* WQEs before this have PSNs */
	u32 pkt;			/* next packet of the WQE at sq_next */
	u32 psn;			/* PSN of the next new packet */
	u32 reads_outstanding;		/* READs and atomics awaiting responses */
	u32 sq_fetch;			/* a ring SQ's next slot to copy into the SQ (its shadow) */
	bool draining;			/* SQD requested: start no new WQE */
};

/* The completer (tbv_comp.c), under sq_lock; the requester reads acked_psn, rnr_waiting. */
struct tbv_comp {
	u32 acked_psn;			/* everything before this PSN is acknowledged */
	u8 retries_left;
	u8 rnr_left;
	bool rnr_waiting;		/* the timer runs the RNR delay */
	unsigned int ack_waited_ms;	/* for ACKs, in the timer's ticks */
	bool read_gap_asked;		/* READ responses asked again from read_gap_psn */
	u32 read_gap_psn;
	struct timer_list timer;	/* ACK ticks or RNR delay; runs tbv_tx.c's function */
};

/* The responder (tbv_resp.c), under resp_lock. */
struct tbv_resp {
	u32 epsn;			/* next request PSN expected */
	u32 msn;
	bool nak_sent;			/* one sequence NAK per gap */
	bool uc_dropping;		/* UC: rest of a message after a gap */
	u8 fatal;			/* RC: NAK of a refused request; error once it is sent */
	bool recv_active;		/* recv_wqe holds a WQE taken from the RQ or SRQ */
	bool srq_done;			/* in error, Last WQE Reached reported (SRQ QPs) */
	struct tbv_recv_wqe *recv_wqe;	/* copy of the WQE being filled */
	struct tbv_uwqe_buf *ring_copy;	/* a ring RQ's or SRQ's slot as copied; NULL: no ring */
	struct tbv_resp_msg msg;	/* the SEND or WRITE in progress and its bytes */
	u32 write_rkey;			/* the WRITE in progress: its key and next address */
	u64 write_va;
	bool ack_pending;
	u8 ack_syndrome;
	u32 ack_psn;
	u32 ack_aux;
	struct tbv_read_job reads[TBV_MAX_RD_ATOMIC];
	u32 read_head;			/* oldest job */
	u32 read_count;
	/* the last TBV_MAX_RD_ATOMIC atomics executed: at least every one still unanswered */
	struct tbv_atomic_result atomics[TBV_MAX_RD_ATOMIC];
	u32 atomic_next;		/* slot the next result goes to */
};

/*
 * Split packets the transmitter built and has not queued yet (tbv_xmit.c):
 * a header frame whose entries are their headers, and their payload frames,
 * all for one rail. Queued together (tbv_xmit_flush()) when full, before the
 * QP sends anything else, and at the end of each tbv_qp_tx(): empty outside it.
 */
struct tbv_split_batch {
	struct tbv_rail *rail;
	struct tbv_frame *hdr;
	struct tbv_frame *payload[TBV_SPLIT_BATCH];
	unsigned int n;
	/* the next entry, handed to the packet builders as a frame: data only, in @hdr */
	struct tbv_frame entry;
};

/* The transmitter (tbv_tx.c). */
struct tbv_tx {
	spinlock_t lock;		/* one tbv_qp_tx() at a time */
	unsigned long bits;		/* enum tbv_qp_tx_bits */
	struct tbv_tx_waiter waiter;	/* for a rail's frames (tbv_xmit.c); its work kicks */
	struct work_struct post_work;	/* tbv_qp_run() for a post with interrupts off */
	struct work_struct kick_work;	/* the passes a kick leaves to the work queue */
	struct tbv_split_batch batch;	/* lock */
};

/* Striping (tbv_stripe.c sends, tbv_stripe_rx.c receives): RC QPs on links that agreed it. */
struct tbv_qp_stripe {
	struct tbv_stripe_rx *rx;	/* receive resequencing; NULL: no striping */
	u32 tsn;			/* tx.lock: the next packet's TSN */
	u8 rail;			/* tx.lock: the rail the next packet leaves on */
	u8 sent;			/* tx.lock: packets sent on it in this chunk */
	bool restart;			/* the next packet restarts the TSNs (tbv_stripe_tx_restart()) */
};

struct tbv_qp {
	struct ib_qp ibqp;
	struct tbv_dev *dev;
	refcount_t ref;			/* 1 for existence, +1 per RX/timer user */
	struct completion released;
	struct mutex modify_lock;	/* modify_qp, destroy */
	struct tbv_charge charge;	/* its user's: the QP (the rings' bytes: their mmap's) */
	enum ib_qp_state state;		/* written under sq_lock (and resp_lock by verbs) */
	bool sig_all;
	u32 max_inline;
	struct tbv_cq *scq;
	struct tbv_cq *rcq;
	struct tbv_srq *srq;
	struct tbv_rail *rail;		/* chosen when the QP gets an address */
	bool loopback;

	/* attributes (modify_lock; read by the data path once RTR/RTS) */
	u32 dest_qpn;
	u32 qkey;
	int access;			/* qp_access_flags */
	u8 timeout;
	u8 retry_cnt;
	u8 rnr_retry;
	u8 min_rnr_timer;
	u8 path_mtu;
	u16 pkey_index;
	u32 max_rd_atomic;
	u32 max_dest_rd_atomic;
	u32 sq_psn;
	u32 rq_psn;
	struct rdma_ah_attr ah_attr;
	u8 dgid[16];
	u8 sgid[16];

	/*
	 * The queues: post_send and post_recv produce, the completer (or, for UC
	 * and UD, the requester) and the responder consume.
	 */
	spinlock_t sq_lock;		/* sq, req, comp */
	struct tbv_wq sq;
	spinlock_t resp_lock;		/* rq, resp */
	struct tbv_wq rq;
	/*
	 * A user QP made with room for rdma_rxe's reply: rings the process posts
	 * into (rq_ring not with an SRQ). Then sq is the SQ ring's shadow: the
	 * requester copies each WQE once, validated, into it (sq_copy is its
	 * buffer for the slot, under sq_lock) and works only from there; rq
	 * keeps only max_sge (docs/rxe-abi.md 4.1, 4.2).
	 */
	struct tbv_uqueue sq_ring;
	struct tbv_uqueue rq_ring;
	struct tbv_uwqe_buf *sq_copy;

	struct tbv_req req;
	struct tbv_comp comp;
	struct tbv_resp resp;
	struct tbv_tx tx;
	struct tbv_qp_stripe stripe;
};

static inline bool tbv_qp_is_shared(const struct tbv_qp *qp)
{
	return qp->sq_ring.buf;
}

/* Work requests executed locally by the requester: no packets, no PSNs. */
static inline bool tbv_wr_is_local(u32 opcode)
{
	return opcode == IB_WR_BIND_MW || opcode == IB_WR_LOCAL_INV;
}

static inline bool tbv_wr_is_atomic(u32 opcode)
{
	return opcode == IB_WR_ATOMIC_CMP_AND_SWP || opcode == IB_WR_ATOMIC_FETCH_AND_ADD;
}

/* WQEs the responder answers with data (READ responses, atomic results), not just ACKs. */
static inline bool tbv_wqe_wants_response(const struct tbv_send_wqe *wqe)
{
	return wqe->opcode == IB_WR_RDMA_READ || tbv_wr_is_atomic(wqe->opcode);
}

static inline struct tbv_qp *to_tbv_qp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct tbv_qp, ibqp);
}

static inline struct tbv_cq *to_tbv_cq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct tbv_cq, ibcq);
}

static inline struct tbv_mr *to_tbv_mr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct tbv_mr, ibmr);
}

static inline struct tbv_mw *to_tbv_mw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct tbv_mw, ibmw);
}

static inline struct tbv_ah *to_tbv_ah(struct ib_ah *ibah)
{
	return container_of(ibah, struct tbv_ah, ibah);
}

static inline struct tbv_srq *to_tbv_srq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct tbv_srq, ibsrq);
}

/* tbv_uwqe.c: WQEs taken from rings shared with user space (copied once, parsed) */
struct tbv_uwqe_buf;
struct tbv_uwqe_buf *tbv_uwqe_buf_alloc(u32 slot_size, gfp_t gfp);
void tbv_uwqe_buf_free(struct tbv_uwqe_buf *buf);
enum ib_wc_status tbv_uwqe_recv(const struct tbv_uqueue *q, struct tbv_uwqe_buf *buf,
				u32 max_sge, struct tbv_recv_wqe *out);
void tbv_uwqe_send(struct tbv_qp *qp, u32 idx, struct tbv_send_wqe *wqe);

/* tbv_wq.c */
int tbv_wq_init(struct tbv_charge *c, struct tbv_wq *wq, u32 size, u32 slot, u32 max_sge);
int tbv_recv_wqe_fill(struct tbv_wq *wq, const struct ib_recv_wr *wr);

/* tbv_mr.c */
struct ib_mr *tbv_get_dma_mr(struct ib_pd *pd, int access);
struct ib_mr *tbv_reg_user_mr(struct ib_pd *pd, u64 start, u64 length, u64 iova,
			      int access, TBV_DMAH_PARAM struct ib_udata *udata);
struct ib_mr *tbv_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length, u64 iova,
				int access, struct ib_pd *pd, struct ib_udata *udata);
int tbv_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct tbv_mr *tbv_mr_get(struct tbv_dev *dev, u32 key);
void tbv_mr_put(struct tbv_mr *mr);
int tbv_mr_check(struct tbv_mr *mr, struct ib_pd *pd, u64 va, u64 len, int access);
void tbv_mr_copy(struct tbv_mr *mr, u64 va, void *buf, u32 len, bool to_mr);
int tbv_sge_copy(struct tbv_qp *qp, const struct tbv_sge *sge, u32 num_sge, u32 offset,
		 void *buf, u32 len, bool to_sge);
int tbv_mr_page(struct tbv_mr *mr, u64 va, struct tbv_frame *frame);
int tbv_sge_page(struct tbv_qp *qp, const struct tbv_sge *sge, u32 num_sge, u32 offset,
		 struct tbv_frame *frame);
typedef int (*tbv_remote_fn)(struct tbv_mr *mr, u64 va, void *arg);

/* tbv_rkey.c: remote access through an MR's or a window's rkey */
int tbv_mr_remote(struct tbv_qp *qp, u32 rkey, u64 va, u64 len, int access, void *buf, u32 n,
		  bool to_mr);
int tbv_mr_remote_page(struct tbv_qp *qp, u32 rkey, u64 va, int access, struct tbv_frame *frame);
int tbv_mr_atomic(struct tbv_qp *qp, u32 rkey, u64 va, u32 op, u64 swap_add, u64 compare,
		  u64 *orig);
int tbv_mr_atomic_write(struct tbv_qp *qp, u32 rkey, u64 va, u64 value);

/* tbv_mw.c */
int tbv_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int tbv_dealloc_mw(struct ib_mw *ibmw);
int tbv_mw_remote(struct tbv_qp *qp, u32 rkey, u64 va, u64 len, int access, tbv_remote_fn fn,
		  void *arg);
enum ib_wc_status tbv_mw_bind(struct tbv_qp *qp, const struct tbv_send_wqe *wqe);
int tbv_mw_invalidate(struct tbv_qp *qp, u32 rkey, bool remote);
void tbv_mw_qp_gone(struct tbv_qp *qp);

/* tbv_cq.c */
int tbv_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		  tbv_create_cq_ctx_t ctx);
int tbv_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int tbv_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc);
int tbv_resize_cq(struct ib_cq *ibcq, tbv_cqe_t cqe, struct ib_udata *udata);
int tbv_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
bool tbv_cq_post(struct tbv_cq *cq, const struct ib_wc *wc, bool solicited);
void tbv_cq_clean(struct tbv_cq *cq, struct ib_qp *qp);
bool tbv_cq_ring_unpolled(struct tbv_cq *cq);

/* tbv_ah.c */
int tbv_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init, struct ib_udata *udata);
int tbv_destroy_ah(struct ib_ah *ibah, u32 flags);
int tbv_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);
struct tbv_ah *tbv_ah_get(struct tbv_dev *dev, u32 ah_num, struct ib_pd *pd);
void tbv_ah_put(struct tbv_ah *ah);
int tbv_resolve_gids(struct tbv_dev *dev, const struct rdma_ah_attr *attr, u8 *sgid,
		     u8 *dgid, bool *loopback);

/* tbv_srq.c */
int tbv_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init, struct ib_udata *udata);
int tbv_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		   enum ib_srq_attr_mask mask, struct ib_udata *udata);
int tbv_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int tbv_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int tbv_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr);
bool tbv_srq_take(struct tbv_srq *srq, struct tbv_recv_wqe *out, struct tbv_uwqe_buf *copy,
		  enum ib_wc_status *status);

/* tbv_mcast.c: multicast groups (the fan-out of received packets is tbv_recv.c's) */
struct tbv_mcast_attach {
	struct list_head list;		/* on the device's mcast_list (mcast_lock) */
	u8 mgid[16];
	struct tbv_qp *qp;
};

int tbv_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int tbv_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
void tbv_mcast_detach_all(struct tbv_qp *qp);
bool tbv_gid_is_multicast(const u8 *gid);

/*
 * The transport, top to bottom (docs/architecture.md, "Layers"): each file
 * calls only files below it.
 */

/* tbv_post.c: the posting verbs */
int tbv_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		  const struct ib_send_wr **bad_wr);
bool tbv_post_send_allowed(struct tbv_qp *qp);
int tbv_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		  const struct ib_recv_wr **bad_wr);

/* tbv_qp.c: the QP verbs */
int tbv_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init, struct ib_udata *udata);
int tbv_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_udata *udata);
int tbv_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		 struct ib_qp_init_attr *init);
int tbv_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
void tbv_qps_fail_user(struct tbv_dev *dev);
bool tbv_qps_ring_unpolled(struct tbv_dev *dev);

/* What the RX poll does with a frame once its consumer is done with it (tbv_rail.c). */
enum tbv_rx_fate {
	TBV_RX_REPOST,		/* post it to the ring again */
	TBV_RX_KEPT,		/* a striped QP holds it: post a spare in its place */
};

/* tbv_recv.c: RX dispatch */
struct tbv_qp *tbv_qp_get(struct tbv_dev *dev, u32 qpn);
void tbv_qp_put(struct tbv_qp *qp);
void tbv_loopback_work(struct work_struct *work);
enum tbv_rx_fate tbv_rdma_rx_frame(struct tbv_dev *dev, struct tbv_rail *rail,
				   struct tbv_frame *frame);

/* tbv_stripe_rx.c: striping, the receiving side */
int tbv_qp_stripe_create(struct tbv_qp *qp);
void tbv_qp_stripe_reset(struct tbv_qp *qp);
void tbv_qp_stripe_stop(struct tbv_qp *qp);
void tbv_qp_stripe_free(struct tbv_qp *qp);
bool tbv_stripe_rx_wanted(struct tbv_qp *qp, const struct tbv_rdma_hdr *h);
enum tbv_rx_fate tbv_stripe_rx(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *frame,
			       const struct tbv_rdma_hdr *h);

/* tbv_deliver.c: one packet for one QP */
void tbv_deliver(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload,
		 bool from_loopback);

/* tbv_tx.c: the QP's transmitter */
void tbv_tx_init(struct tbv_qp *qp);
void tbv_tx_stop(struct tbv_qp *qp);
void tbv_qp_kick(struct tbv_qp *qp);
void tbv_qp_run(struct tbv_qp *qp);
void tbv_qp_enter_error(struct tbv_qp *qp);
void tbv_qp_error(struct tbv_qp *qp);
void tbv_qp_flush(struct tbv_qp *qp);

/* tbv_comp.c: the completer */
enum tbv_comp_expiry {
	TBV_EXPIRY_IGNORED,	/* the QP does not send, or waits on: nothing to do */
	TBV_EXPIRY_KICK,	/* rewound, or RNR delay over: run the transmitter */
	TBV_EXPIRY_FATAL,	/* no retries left: the oldest WQE failed, the QP fails */
};

void tbv_comp_init(struct tbv_qp *qp, void (*expired)(struct timer_list *t));
void tbv_comp_reset(struct tbv_qp *qp);
void tbv_comp_modify(struct tbv_qp *qp, const struct ib_qp_attr *attr, int mask,
		     enum ib_qp_state cur, enum ib_qp_state next);
void tbv_comp_stop(struct tbv_qp *qp);
void tbv_comp_sent(struct tbv_qp *qp);
void tbv_comp_retire(struct tbv_qp *qp);
bool tbv_comp_ack(struct tbv_qp *qp, const struct tbv_rdma_hdr *h);
bool tbv_comp_read_resp(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload);
enum tbv_comp_expiry tbv_comp_timeout(struct tbv_qp *qp);
void tbv_comp_flush(struct tbv_qp *qp);

/* tbv_resp.c: the responder */
int tbv_resp_create(struct tbv_qp *qp, u32 recv_sge, u32 ring_slot);
void tbv_resp_reset(struct tbv_qp *qp);
void tbv_resp_modify(struct tbv_qp *qp, const struct ib_qp_attr *attr, int mask);
void tbv_resp_destroy(struct tbv_qp *qp);
bool tbv_resp_rx_ud(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload);
bool tbv_resp_rx(struct tbv_qp *qp, const struct tbv_rdma_hdr *h, const u8 *payload);
u8 tbv_resp_output(struct tbv_qp *qp);
u8 tbv_resp_fail_qp(struct tbv_qp *qp, u8 syndrome);
bool tbv_rq_flush(struct tbv_qp *qp);

/* tbv_req.c: the requester; what tbv_req_output() asks of the transmitter */
#define TBV_REQ_SENT		BIT(0)	/* RC packets went out: the ACK timer must run */
#define TBV_REQ_RETIRE		BIT(1)	/* the completer must retire first, then call again */
#define TBV_REQ_MORE		BIT(2)	/* the budget ran out: the transmitter must run again */

void tbv_send_wqe_complete(struct tbv_qp *qp, struct tbv_send_wqe *wqe,
			   enum ib_wc_status status);
int tbv_post_one(struct tbv_qp *qp, const struct tbv_post_wr *p, u8 *inline_buf);
bool tbv_req_fetch(struct tbv_qp *qp, u32 ahead);
void tbv_req_reset(struct tbv_qp *qp);
void tbv_req_modify(struct tbv_qp *qp, const struct ib_qp_attr *attr, int mask,
		    enum ib_qp_state next);
unsigned int tbv_req_output(struct tbv_qp *qp, unsigned int *budget);
bool tbv_sq_find_psn(struct tbv_qp *qp, u32 psn, u32 *idx);
void tbv_req_rewind(struct tbv_qp *qp, u32 psn);
void tbv_req_retired(struct tbv_qp *qp);
void tbv_req_read_done(struct tbv_qp *qp, const struct tbv_send_wqe *wqe);
void tbv_req_flushed(struct tbv_qp *qp);

/* tbv_xmit.c: a QP's packets onto the wire */
struct tbv_rail *tbv_xmit_rail(struct tbv_qp *qp, bool loopback);
struct tbv_frame *tbv_xmit_get(struct tbv_qp *qp, struct tbv_rail *rail, enum tbv_tx_use use,
			       bool loopback);
struct tbv_frame *tbv_xmit_get_pkt(struct tbv_qp *qp, struct tbv_rail *rail, enum tbv_tx_use use,
				   bool loopback, u8 flags, u32 payload_len,
				   struct tbv_frame **payload);
void tbv_xmit_unget(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *frame,
		    bool loopback);
void tbv_xmit_flush(struct tbv_qp *qp);
void tbv_xmit_send(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *frame,
		   bool loopback);
void tbv_xmit_send_split(struct tbv_qp *qp, struct tbv_rail *rail, struct tbv_frame *hdr,
			 struct tbv_frame *payload, bool loopback);

/* tbv_stripe.c: striping, the sending side */
void tbv_stripe_tx_start(struct tbv_qp *qp);
struct tbv_rail *tbv_stripe_tx_rail(struct tbv_qp *qp);
void tbv_stripe_tx_sent(struct tbv_qp *qp, struct tbv_frame *frame);
void tbv_stripe_tx_restart(struct tbv_qp *qp);
void tbv_stripe_tx_reset(struct tbv_qp *qp);

#endif /* TBV_VERBS_H */
