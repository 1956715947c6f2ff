// SPDX-License-Identifier: GPL-2.0
/*
 * The ib_device of a link (usb4_rdmaN): device and port attributes, RoCE v2
 * addressing through the link's netdev, user contexts, link statistics.
 */
#include <linux/delay.h>
#include <net/addrconf.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "tbv.h"
#include "tbv_uqueue.h"

#define TBV_VENDOR_ID		0x746276	/* "tbv": not a registered OUI, like siw's */
#define TBV_VENDOR_PART_ID	0x5534		/* "U4": outside perftest's device tables */
#define TBV_GID_TABLE_LEN	128
#define TBV_MAX_MSG_SIZE	0x80000000u
/* rdma_rxe's (drivers/infiniband/sw/rxe/rxe.h): rdma-core's rxe provider binds to it */
#define TBV_RXE_UVERBS_ABI_VERSION	2

static int tbv_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			    struct ib_udata *udata)
{
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;

	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = (u64)TBV_PROTO_VERSION_MAX << 32;
	attr->sys_image_guid = ibdev->node_guid;
	attr->vendor_id = TBV_VENDOR_ID;
	attr->vendor_part_id = TBV_VENDOR_PART_ID;
	attr->hw_ver = 1;
	attr->page_size_cap = PAGE_SIZE;
	/* Every limit here is enforced where the object is created. */
	attr->max_mr_size = TBV_MAX_MR_SIZE;
	attr->max_qp = TBV_MAX_QP;
	attr->max_qp_wr = TBV_MAX_QP_WR;
	attr->device_cap_flags = IB_DEVICE_RC_RNR_NAK_GEN | IB_DEVICE_CURR_QP_STATE_MOD |
				 IB_DEVICE_SHUTDOWN_PORT | IB_DEVICE_MEM_WINDOW |
				 IB_DEVICE_MEM_WINDOW_TYPE_2B | IB_DEVICE_SRQ_RESIZE |
				 TBV_DEVICE_ATOMIC_WRITE |
				 TBV_DEVICE_FLUSH_GLOBAL;	/* no persistent memory here */
	attr->max_mw = TBV_MAX_MW;
	attr->max_send_sge = TBV_MAX_SGE;
	attr->max_recv_sge = TBV_MAX_SGE;
	attr->max_sge_rd = TBV_MAX_SGE;
	attr->max_cq = TBV_MAX_CQ;
	attr->max_cqe = TBV_MAX_CQE;
	attr->max_mr = TBV_MAX_MR;
	attr->max_pd = TBV_MAX_PD;
	attr->max_qp_rd_atom = TBV_MAX_RD_ATOMIC;
	attr->max_qp_init_rd_atom = TBV_MAX_RD_ATOMIC;
	attr->max_res_rd_atom = TBV_MAX_RD_ATOMIC * TBV_MAX_QP;
	/* CPU atomics on the pinned target page: atomic against local CPU atomics too */
	attr->atomic_cap = IB_ATOMIC_GLOB;
	attr->max_ah = TBV_MAX_AH;
	attr->max_srq = TBV_MAX_SRQ;
	attr->max_srq_wr = TBV_MAX_SRQ_WR;
	attr->max_srq_sge = TBV_MAX_SGE;
	attr->max_pkeys = 1;
	attr->max_mcast_grp = TBV_MAX_MCAST_GRP;
	attr->max_mcast_qp_attach = TBV_MAX_MCAST_QP_ATTACH;
	attr->max_total_mcast_qp_attach = TBV_MAX_MCAST_ATTACH;
	attr->local_ca_ack_delay = 15;
	return 0;
}

static int tbv_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *attr)
{
	struct tbv_dev *dev = to_tbv_dev(ibdev);

	/* The core zeroes *attr; fill what a RoCE port reports. */
	attr->state = READ_ONCE(dev->port_state);
	attr->phys_state = attr->state == IB_PORT_ACTIVE ? IB_PORT_PHYS_STATE_LINK_UP :
							   IB_PORT_PHYS_STATE_DISABLED;
	/* A UD message (plus its GIDs) must fit one 4 KiB frame. */
	attr->max_mtu = IB_MTU_2048;
	attr->active_mtu = IB_MTU_2048;
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->gid_tbl_len = TBV_GID_TABLE_LEN;
	attr->pkey_tbl_len = 1;
	attr->max_vl_num = 1;
	attr->max_msg_sz = TBV_MAX_MSG_SIZE;
	attr->active_width = dev->rate.width;
	attr->active_speed = dev->rate.speed;
	return 0;
}

static int tbv_get_port_immutable(struct ib_device *ibdev, u32 port,
				  struct ib_port_immutable *immutable)
{
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	immutable->pkey_tbl_len = 1;
	immutable->gid_tbl_len = TBV_GID_TABLE_LEN;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer tbv_get_link_layer(struct ib_device *ibdev, u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

/*
 * The port's netdev, for the core: RoCE GIDs, netlink, ib_get_eth_speed(). Given
 * through this op, never ib_device_set_netdev(), so that the core's netdev hash
 * never lists ours: rdma_rxe looks devices up there by driver id (every packet
 * to UDP 4791, every netdev event) and must never take ours for one of its own
 * (docs/rxe-abi.md, 1.3, R1). Called in atomic context (ksmbd, under a read
 * lock) and from inside ib_register_device(): no lock, nothing but dev->link.
 * NULL once the netdev is going away, as the op's contract asks.
 */
static struct net_device *tbv_get_netdev(struct ib_device *ibdev, u32 port)
{
	struct net_device *ndev = READ_ONCE(to_tbv_dev(ibdev)->link->ndev);

	if (!ndev || READ_ONCE(ndev->reg_state) != NETREG_REGISTERED)
		return NULL;
	dev_hold(ndev);
	return ndev;
}

static int tbv_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	if (index)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static void tbv_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "protocol %u-%u", TBV_PROTO_VERSION_MIN,
		 TBV_PROTO_VERSION_MAX);
}

static int tbv_alloc_ucontext(struct ib_ucontext *ibuc, struct ib_udata *udata)
{
	struct tbv_ucontext *uc = container_of(ibuc, struct tbv_ucontext, ibuc);
	struct tbv_dev *dev = to_tbv_dev(ibuc->device);
	int ret;

	if (atomic_inc_return(&dev->nr_ucontexts) > TBV_MAX_UCONTEXT) {
		ret = -ENOMEM;
		goto err;
	}
	/* no driver data either way, as rdma_rxe's */
	ret = tbv_quota_open(uc);
	if (ret)
		goto err;
	return 0;
err:
	atomic_dec(&dev->nr_ucontexts);
	return ret;
}

static void tbv_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	tbv_quota_close(container_of(ibuc, struct tbv_ucontext, ibuc));
	atomic_dec(&to_tbv_dev(ibuc->device)->nr_ucontexts);
}

/*
 * The link went away while a process holds the device open: its rings stay
 * mapped, but each mapped page holds a reference of its own (tbv_uqueue.c),
 * so once the core destroyed the user's objects a stale mapping only writes
 * memory nobody reads. Having this op lets unplug complete without waiting
 * for every process to close the device.
 */
static void tbv_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

/* Link statistics, summed over the rails: `rdma statistic show` and hw_counters/. */
enum tbv_hw_counter {
	TBV_CNT_TX_FRAMES, TBV_CNT_TX_BYTES, TBV_CNT_TX_ERRORS,
	TBV_CNT_RX_FRAMES, TBV_CNT_RX_BYTES, TBV_CNT_RX_HW_ERRORS, TBV_CNT_RX_MALFORMED,
	TBV_CNT_RX_LOST,
	TBV_CNT_RX_BUSY_POLLED, TBV_CNT_RX_REARM_FOUND,
	TBV_CNT_TX_ZCOPY_BYTES, TBV_CNT_TX_COPIED_BYTES, TBV_CNT_RX_SPLIT_DROPPED,
	TBV_CNT_CREDIT_FRAMES_TX, TBV_CNT_CREDIT_FRAMES_RX, TBV_CNT_CREDIT_REQUESTS,
	TBV_CNT_CREDIT_REQUESTS_OVER,
	TBV_CNT_CREDIT_WAITS, TBV_CNT_CREDIT_LIMITS_REFUSED,
	TBV_CNT_NET_TX_PACKETS, TBV_CNT_NET_RX_PACKETS, TBV_CNT_NET_RX_DISCARDS,
	TBV_CNT_NET_TX_BYTES, TBV_CNT_NET_RX_BYTES,
	TBV_CNT_CTL_RX_REJECTED, TBV_CNT_LOGIN_ATTEMPTS, TBV_CNT_LINK_UPS, TBV_CNT_PEER_TEARDOWNS,
	TBV_CNT_RDMA_TX_PACKETS, TBV_CNT_RDMA_RX_PACKETS, TBV_CNT_RDMA_TX_BYTES, TBV_CNT_RDMA_RX_BYTES, TBV_CNT_RDMA_RX_MALFORMED,
	TBV_CNT_RDMA_RX_NO_QP, TBV_CNT_SEQ_NAKS, TBV_CNT_RX_DUPLICATES, TBV_CNT_RNR_NAKS, TBV_CNT_UD_NO_RECV,
	TBV_CNT_RETRANSMITS, TBV_CNT_ATOMIC_REPLAYS, TBV_CNT_RX_STRAY, TBV_CNT_REJECTED_ACCESS,
	TBV_CNT_REJECTED_INVALID, TBV_CNT_OPCODE_SEQ_ERRORS, TBV_CNT_UC_REFUSED,
	TBV_CNT_RESPONSES_SUPERSEDED, TBV_CNT_CQ_OVERFLOWS, TBV_CNT_UD_QKEY_MISMATCHES,
	TBV_CNT_MCAST_UNJOINED, TBV_CNT_RESPONSES_UNMATCHED, TBV_CNT_KICKS_DEFERRED,
	TBV_CNT_STRIPE_HELD, TBV_CNT_STRIPE_GAPS, TBV_CNT_STRIPE_DROPPED, TBV_CNT_STRIPE_LATE,
	TBV_CNT_OBJ_QP, TBV_CNT_OBJ_CQ, TBV_CNT_OBJ_MR, TBV_CNT_OBJ_PD, TBV_CNT_OBJ_AH,
	TBV_CNT_OBJ_SRQ, TBV_CNT_OBJ_MW, TBV_CNT_TX_FRAMES_BUSY,
	TBV_CNT_PINNED_BYTES, TBV_CNT_PINNED_BYTES_LIMIT,
	TBV_CNT_CALIB_FRAMES_TX, TBV_CNT_CALIB_FRAMES_RX, TBV_CNT_CALIB_FAILED_RAILS,
	TBV_CNT_CALIB_SPLIT_FAILED,
	TBV_CNT_RAIL0_RDMA_RX,	/* one per rail, TBV_MAX_RAILS of them */
	TBV_NUM_COUNTERS = TBV_CNT_RAIL0_RDMA_RX + TBV_MAX_RAILS
};

static const struct rdma_stat_desc tbv_counter_descs[TBV_NUM_COUNTERS] = {
	[TBV_CNT_TX_FRAMES].name = "tx_frames",
	[TBV_CNT_TX_BYTES].name = "tx_bytes",
	[TBV_CNT_TX_ERRORS].name = "tx_errors",
	[TBV_CNT_RX_FRAMES].name = "rx_frames",
	[TBV_CNT_RX_BYTES].name = "rx_bytes",
	[TBV_CNT_RX_HW_ERRORS].name = "rx_hw_errors",
	[TBV_CNT_RX_MALFORMED].name = "rx_malformed",
	[TBV_CNT_RX_LOST].name = "rx_frames_lost",
	/* frames a busy poll (module parameter busy_poll_us) found, not an interrupt */
	[TBV_CNT_RX_BUSY_POLLED].name = "rx_busy_polled",
	[TBV_CNT_RX_REARM_FOUND].name = "rx_rearm_found",
	/* split packets (TBV_CAP_SPLIT): payload sent from the MR's pages, or copied */
	[TBV_CNT_TX_ZCOPY_BYTES].name = "tx_zcopy_bytes",
	[TBV_CNT_TX_COPIED_BYTES].name = "tx_copied_bytes",
	[TBV_CNT_RX_SPLIT_DROPPED].name = "rx_split_dropped",
	/* software credits (module parameter credits, agreed at login) */
	[TBV_CNT_CREDIT_FRAMES_TX].name = "credit_frames_tx",
	[TBV_CNT_CREDIT_FRAMES_RX].name = "credit_frames_rx",
	[TBV_CNT_CREDIT_REQUESTS].name = "credit_requests",
	/* of those, sent beyond the receiver's limit: the only frames that may find no buffer */
	[TBV_CNT_CREDIT_REQUESTS_OVER].name = "credit_requests_over",
	[TBV_CNT_CREDIT_WAITS].name = "credit_waits",
	[TBV_CNT_CREDIT_LIMITS_REFUSED].name = "credit_limits_refused",
	[TBV_CNT_NET_TX_PACKETS].name = "net_tx_packets",
	[TBV_CNT_NET_RX_PACKETS].name = "net_rx_packets",
	[TBV_CNT_NET_RX_DISCARDS].name = "net_rx_discards",
	[TBV_CNT_NET_TX_BYTES].name = "net_tx_bytes",
	[TBV_CNT_NET_RX_BYTES].name = "net_rx_bytes",
	[TBV_CNT_CTL_RX_REJECTED].name = "ctl_rx_rejected",
	[TBV_CNT_LOGIN_ATTEMPTS].name = "login_attempts",
	[TBV_CNT_LINK_UPS].name = "link_ups",
	/* devices taken down because the peer restarted, sent an offer we refuse, logged out */
	[TBV_CNT_PEER_TEARDOWNS].name = "peer_teardowns",
	[TBV_CNT_RDMA_TX_PACKETS].name = "rdma_tx_packets",
	[TBV_CNT_RDMA_RX_PACKETS].name = "rdma_rx_packets",
	[TBV_CNT_RDMA_TX_BYTES].name = "rdma_tx_bytes",
	[TBV_CNT_RDMA_RX_BYTES].name = "rdma_rx_bytes",
	[TBV_CNT_RDMA_RX_MALFORMED].name = "rdma_rx_malformed",
	[TBV_CNT_RDMA_RX_NO_QP].name = "rdma_rx_no_qp",
	[TBV_CNT_SEQ_NAKS].name = "seq_naks",
	[TBV_CNT_RX_DUPLICATES].name = "rdma_rx_duplicates",
	[TBV_CNT_RNR_NAKS].name = "rnr_naks",
	[TBV_CNT_UD_NO_RECV].name = "ud_no_recv",
	[TBV_CNT_RETRANSMITS].name = "retransmits",
	[TBV_CNT_ATOMIC_REPLAYS].name = "atomic_replays",
	[TBV_CNT_RX_STRAY].name = "rdma_rx_stray",
	[TBV_CNT_REJECTED_ACCESS].name = "rejected_access",
	[TBV_CNT_REJECTED_INVALID].name = "rejected_invalid",
	[TBV_CNT_OPCODE_SEQ_ERRORS].name = "opcode_seq_errors",
	[TBV_CNT_UC_REFUSED].name = "uc_refused",
	[TBV_CNT_RESPONSES_SUPERSEDED].name = "responses_superseded",
	[TBV_CNT_CQ_OVERFLOWS].name = "cq_overflows",
	[TBV_CNT_UD_QKEY_MISMATCHES].name = "ud_qkey_mismatches",
	[TBV_CNT_MCAST_UNJOINED].name = "mcast_unjoined",
	[TBV_CNT_RESPONSES_UNMATCHED].name = "responses_unmatched",
	[TBV_CNT_KICKS_DEFERRED].name = "tx_kicks_deferred",
	/* striping (module parameter stripe, agreed at login): packets put back in order */
	[TBV_CNT_STRIPE_HELD].name = "stripe_held",
	[TBV_CNT_STRIPE_GAPS].name = "stripe_gaps",
	[TBV_CNT_STRIPE_DROPPED].name = "stripe_dropped",
	[TBV_CNT_STRIPE_LATE].name = "stripe_late",
	/* live objects: each returns to zero once its users are gone */
	[TBV_CNT_OBJ_QP].name = "objects_qp",
	[TBV_CNT_OBJ_CQ].name = "objects_cq",
	[TBV_CNT_OBJ_MR].name = "objects_mr",
	[TBV_CNT_OBJ_MW].name = "objects_mw",
	[TBV_CNT_OBJ_PD].name = "objects_pd",
	[TBV_CNT_OBJ_AH].name = "objects_ah",
	[TBV_CNT_OBJ_SRQ].name = "objects_srq",
	/* TX frames not in the pool: in a ring, in the loopback queue or being built */
	[TBV_CNT_TX_FRAMES_BUSY].name = "tx_frames_in_flight",
	/* memory user MRs pin, and how much they may (module parameter max_pinned_mb) */
	[TBV_CNT_PINNED_BYTES].name = "pinned_bytes",
	[TBV_CNT_PINNED_BYTES_LIMIT].name = "pinned_bytes_limit",
	/* the bring-up self-check (tbv_calib.c), over the link's life */
	[TBV_CNT_CALIB_FRAMES_TX].name = "calibration_frames_tx",
	[TBV_CNT_CALIB_FRAMES_RX].name = "calibration_frames_rx",
	[TBV_CNT_CALIB_FAILED_RAILS].name = "calibration_failed_rails",
	[TBV_CNT_CALIB_SPLIT_FAILED].name = "calibration_split_failed",
	/* how a link spreads its RDMA packets over its rails (4 names) */
	[TBV_CNT_RAIL0_RDMA_RX + 0].name = "rail0_rdma_rx_packets",
	[TBV_CNT_RAIL0_RDMA_RX + 1].name = "rail1_rdma_rx_packets",
	[TBV_CNT_RAIL0_RDMA_RX + 2].name = "rail2_rdma_rx_packets",
	[TBV_CNT_RAIL0_RDMA_RX + 3].name = "rail3_rdma_rx_packets",
};

static_assert(TBV_MAX_RAILS == 4, "one railN_rdma_rx_packets name per rail");

static struct rdma_hw_stats *tbv_alloc_hw_port_stats(struct ib_device *ibdev, u32 port)
{
	return rdma_alloc_hw_stats_struct(tbv_counter_descs, TBV_NUM_COUNTERS,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int tbv_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			    u32 port, int index)
{
	struct tbv_dev *dev = to_tbv_dev(ibdev);
	struct tbv_link *link = dev->link;
	struct tbv_rail_stats sum;
	u64 *v = stats->value;
	unsigned int i, busy = 0;

	if (!port)
		return -EINVAL;
	tbv_rail_stats_sum(link, &sum);
	v[TBV_CNT_TX_FRAMES] = sum.tx_frames;
	v[TBV_CNT_TX_BYTES] = sum.tx_bytes;
	v[TBV_CNT_TX_ERRORS] = sum.tx_errors;
	v[TBV_CNT_RX_FRAMES] = sum.rx_frames;
	v[TBV_CNT_RX_BYTES] = sum.rx_bytes;
	v[TBV_CNT_RX_HW_ERRORS] = sum.rx_hw_errors;
	v[TBV_CNT_RX_MALFORMED] = sum.rx_malformed;
	v[TBV_CNT_RX_LOST] = sum.rx_lost;
	v[TBV_CNT_RX_BUSY_POLLED] = sum.rx_busy_polled;
	v[TBV_CNT_RX_REARM_FOUND] = sum.rx_rearm_found;
	v[TBV_CNT_TX_ZCOPY_BYTES] = sum.tx_zcopy_bytes;
	v[TBV_CNT_TX_COPIED_BYTES] = sum.tx_copied_bytes;
	v[TBV_CNT_RX_SPLIT_DROPPED] = sum.rx_split_dropped;
	v[TBV_CNT_CREDIT_FRAMES_TX] = sum.credit_frames_tx;
	v[TBV_CNT_CREDIT_FRAMES_RX] = sum.credit_frames_rx;
	v[TBV_CNT_CREDIT_REQUESTS] = sum.credit_requests;
	v[TBV_CNT_CREDIT_REQUESTS_OVER] = sum.credit_requests_over;
	v[TBV_CNT_CREDIT_WAITS] = sum.credit_waits;
	v[TBV_CNT_CREDIT_LIMITS_REFUSED] = sum.credit_limits_refused;
	v[TBV_CNT_NET_TX_PACKETS] = sum.net_tx_packets;
	v[TBV_CNT_NET_RX_PACKETS] = sum.net_rx_packets;
	v[TBV_CNT_NET_RX_DISCARDS] = sum.net_rx_discards;
	v[TBV_CNT_NET_TX_BYTES] = sum.net_tx_bytes;
	v[TBV_CNT_NET_RX_BYTES] = sum.net_rx_bytes;
	v[TBV_CNT_CTL_RX_REJECTED] = atomic64_read(&link->stats.ctl_rx_rejected);
	v[TBV_CNT_LOGIN_ATTEMPTS] = atomic64_read(&link->stats.login_attempts);
	v[TBV_CNT_LINK_UPS] = atomic64_read(&link->stats.link_ups);
	v[TBV_CNT_PEER_TEARDOWNS] = atomic64_read(&link->stats.peer_teardowns);
	v[TBV_CNT_RDMA_TX_PACKETS] = sum.rdma_tx_packets;
	v[TBV_CNT_RDMA_RX_PACKETS] = sum.rdma_rx_packets;
	v[TBV_CNT_RDMA_TX_BYTES] = sum.rdma_tx_bytes;
	v[TBV_CNT_RDMA_RX_BYTES] = sum.rdma_rx_bytes;
	v[TBV_CNT_RDMA_RX_MALFORMED] = atomic64_read(&dev->rstats.rx_malformed);
	v[TBV_CNT_RDMA_RX_NO_QP] = atomic64_read(&dev->rstats.rx_no_qp);
	v[TBV_CNT_SEQ_NAKS] = atomic64_read(&dev->rstats.seq_naks);
	v[TBV_CNT_RX_DUPLICATES] = atomic64_read(&dev->rstats.rx_duplicates);
	v[TBV_CNT_RNR_NAKS] = atomic64_read(&dev->rstats.rnr_naks);
	v[TBV_CNT_UD_NO_RECV] = atomic64_read(&dev->rstats.ud_no_recv);
	v[TBV_CNT_RETRANSMITS] = atomic64_read(&dev->rstats.retransmits);
	v[TBV_CNT_ATOMIC_REPLAYS] = atomic64_read(&dev->rstats.atomic_replays);
	v[TBV_CNT_RX_STRAY] = atomic64_read(&dev->rstats.rx_stray);
	v[TBV_CNT_REJECTED_ACCESS] = atomic64_read(&dev->rstats.rejected_access);
	v[TBV_CNT_REJECTED_INVALID] = atomic64_read(&dev->rstats.rejected_invalid);
	v[TBV_CNT_OPCODE_SEQ_ERRORS] = atomic64_read(&dev->rstats.opcode_seq_errors);
	v[TBV_CNT_UC_REFUSED] = atomic64_read(&dev->rstats.uc_refused);
	v[TBV_CNT_RESPONSES_SUPERSEDED] = atomic64_read(&dev->rstats.responses_superseded);
	v[TBV_CNT_CQ_OVERFLOWS] = atomic64_read(&dev->rstats.cq_overflows);
	v[TBV_CNT_UD_QKEY_MISMATCHES] = atomic64_read(&dev->rstats.ud_qkey_mismatches);
	v[TBV_CNT_MCAST_UNJOINED] = atomic64_read(&dev->rstats.mcast_unjoined);
	v[TBV_CNT_RESPONSES_UNMATCHED] = atomic64_read(&dev->rstats.responses_unmatched);
	v[TBV_CNT_KICKS_DEFERRED] = atomic64_read(&dev->rstats.kicks_deferred);
	v[TBV_CNT_STRIPE_HELD] = atomic64_read(&dev->rstats.stripe_held);
	v[TBV_CNT_STRIPE_GAPS] = atomic64_read(&dev->rstats.stripe_gaps);
	v[TBV_CNT_STRIPE_DROPPED] = atomic64_read(&dev->rstats.stripe_dropped);
	v[TBV_CNT_STRIPE_LATE] = atomic64_read(&dev->rstats.stripe_late);
	v[TBV_CNT_OBJ_QP] = atomic_read(&dev->nr_qps);
	v[TBV_CNT_OBJ_CQ] = atomic_read(&dev->nr_cqs);
	v[TBV_CNT_OBJ_MR] = atomic_read(&dev->nr_mrs);
	v[TBV_CNT_OBJ_MW] = atomic_read(&dev->nr_mws);
	v[TBV_CNT_OBJ_PD] = atomic_read(&dev->nr_pds);
	v[TBV_CNT_OBJ_AH] = atomic_read(&dev->nr_ahs);
	v[TBV_CNT_OBJ_SRQ] = atomic_read(&dev->nr_srqs);
	for (i = 0; i < link->nr_rails; i++)
		busy += tbv_rail_tx_frames(link) - tbv_pool_nfree(&link->rails[i]);
	v[TBV_CNT_TX_FRAMES_BUSY] = busy;
	v[TBV_CNT_PINNED_BYTES] = (u64)atomic64_read(&dev->pinned_pages) << PAGE_SHIFT;
	v[TBV_CNT_PINNED_BYTES_LIMIT] = (u64)tbv_pinned_pages_limit() << PAGE_SHIFT;
	v[TBV_CNT_CALIB_FRAMES_TX] = atomic64_read(&link->stats.calib_frames_tx);
	v[TBV_CNT_CALIB_FRAMES_RX] = atomic64_read(&link->stats.calib_frames_rx);
	v[TBV_CNT_CALIB_FAILED_RAILS] = atomic64_read(&link->stats.calib_failed_rails);
	v[TBV_CNT_CALIB_SPLIT_FAILED] = atomic64_read(&link->stats.calib_split_failed);
	for (i = 0; i < TBV_MAX_RAILS; i++)
		v[TBV_CNT_RAIL0_RDMA_RX + i] = READ_ONCE(link->rails[i].stats.rdma_rx_packets);
	return TBV_NUM_COUNTERS;
}

/*
 * The core's last call for the device (its "new flow": it frees the device
 * itself, once the last reference goes). Three callers, none of which lets us
 * take link->lock: our teardown's ib_unregister_device(), which holds it;
 * ib_unregister_driver() of another module (rdma_rxe's exit unregisters every
 * device of its driver id), which holds only the device's unregistration
 * lock, that our own unregistration may be waiting for under link->lock; and
 * ib_dealloc_device() after a failed registration. Every user object is gone
 * by now; RX must stop looking at the device before its tables go.
 */
static void tbv_dealloc_driver(struct ib_device *ibdev)
{
	struct tbv_dev *dev = to_tbv_dev(ibdev);
	struct tbv_link *link = dev->link;

	/* a link has one device at a time: rx_dev is this one or NULL */
	if (rcu_access_pointer(link->rx_dev) == dev)
		RCU_INIT_POINTER(link->rx_dev, NULL);
	synchronize_rcu();	/* NAPI polls run with BH disabled: an RCU reader */
	cancel_work_sync(&dev->loop_work);
	while (!list_empty(&dev->loop_frames)) {
		struct tbv_frame *frame = list_first_entry(&dev->loop_frames, struct tbv_frame, list);

		list_del(&frame->list);
		tbv_pool_put(&link->rails[0], frame, true);
	}
	xa_destroy(&dev->qps);
	xa_destroy(&dev->mrs);
	xa_destroy(&dev->mws);
	xa_destroy(&dev->ahs);
	WRITE_ONCE(dev->gone, true);
	/* Not our teardown: like an unplug, but the link is up; it registers a new one. */
	if (!READ_ONCE(dev->unregistering))
		mod_delayed_work(tbv_wq, &link->dev_lost_work, 0);
}

/* The link's last bring-up self-check, for `tbverbs selftest` (tbv_calib.c). */
static ssize_t calibration_show(struct device *device, struct device_attribute *attr, char *buf)
{
	struct tbv_dev *dev = rdma_device_to_drv_device(device, struct tbv_dev, ibdev);

	return tbv_calib_show(dev->link, buf);
}
static DEVICE_ATTR_RO(calibration);

static struct attribute *tbv_dev_attrs[] = {
	&dev_attr_calibration.attr,
	NULL,
};

static const struct attribute_group tbv_dev_attr_group = {
	.attrs = tbv_dev_attrs,
};

static const struct ib_device_ops tbv_dev_ops = {
	.owner = THIS_MODULE,
	.device_group = &tbv_dev_attr_group,
	/* rdma_rxe's user ABI (docs/rxe-abi.md): rdma-core's stock rxe provider drives us */
	.driver_id = RDMA_DRIVER_RXE,
	.uverbs_abi_ver = TBV_RXE_UVERBS_ABI_VERSION,

	.alloc_hw_port_stats = tbv_alloc_hw_port_stats,
	.alloc_pd = tbv_alloc_pd,
	.alloc_ucontext = tbv_alloc_ucontext,
	.attach_mcast = tbv_attach_mcast,
	.create_ah = tbv_create_ah,
	.create_cq = tbv_create_cq,
	TBV_OPS_CREATE_USER_CQ
	.create_qp = tbv_create_qp,
	.dealloc_driver = tbv_dealloc_driver,
	.create_srq = tbv_create_srq,
	.create_user_ah = tbv_create_ah,
	.dealloc_pd = tbv_dealloc_pd,
	.dealloc_ucontext = tbv_dealloc_ucontext,
	.dereg_mr = tbv_dereg_mr,
	.rereg_user_mr = tbv_rereg_user_mr,
	.alloc_mw = tbv_alloc_mw,
	.dealloc_mw = tbv_dealloc_mw,
	.destroy_ah = tbv_destroy_ah,
	.destroy_cq = tbv_destroy_cq,
	.destroy_qp = tbv_destroy_qp,
	.destroy_srq = tbv_destroy_srq,
	.detach_mcast = tbv_detach_mcast,
	.disassociate_ucontext = tbv_disassociate_ucontext,
	.get_dev_fw_str = tbv_get_dev_fw_str,
	.get_dma_mr = tbv_get_dma_mr,
	.get_hw_stats = tbv_get_hw_stats,
	.get_link_layer = tbv_get_link_layer,
	.get_netdev = tbv_get_netdev,
	.get_port_immutable = tbv_get_port_immutable,
	.mmap = tbv_uq_mmap,
	.mmap_free = tbv_uq_mmap_free,
	.modify_qp = tbv_modify_qp,
	.modify_srq = tbv_modify_srq,
	.poll_cq = tbv_poll_cq,
	.post_recv = tbv_post_recv,
	.post_send = tbv_post_send,
	.post_srq_recv = tbv_post_srq_recv,
	.query_ah = tbv_query_ah,
	.query_device = tbv_query_device,
	.query_pkey = tbv_query_pkey,
	.query_port = tbv_query_port,
	.query_qp = tbv_query_qp,
	.query_srq = tbv_query_srq,
	.reg_user_mr = tbv_reg_user_mr,
	.req_notify_cq = tbv_req_notify_cq,
	TBV_OPS_RESIZE_CQ

	INIT_RDMA_OBJ_SIZE(ib_ah, tbv_ah_obj, ah.ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, tbv_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, tbv_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, tbv_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, tbv_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, tbv_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, tbv_ucontext, ibuc),
};

static void tbv_dispatch_port_event(struct tbv_dev *dev, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &dev->ibdev,
		.element.port_num = 1,
		.event = type,
	};

	ib_dispatch_event(&ev);
}

int tbv_ibdev_register(struct tbv_link *link)
{
	char name[IB_DEVICE_NAME_MAX];
	struct ib_device *ibdev;
	struct tbv_dev *dev;
	int ret;

	dev = ib_alloc_device(tbv_dev, ibdev);
	if (!dev)
		return -ENOMEM;
	ibdev = &dev->ibdev;
	dev->link = link;
	dev->port_state = IB_PORT_DOWN;
	xa_init_flags(&dev->qps, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_BH);
	/* BH-safe like qps: lockdep gives both xarrays' locks one class */
	xa_init_flags(&dev->mrs, XA_FLAGS_LOCK_BH);
	xa_init_flags(&dev->mws, XA_FLAGS_LOCK_BH);
	xa_init_flags(&dev->ahs, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_BH);
	spin_lock_init(&dev->mcast_lock);
	spin_lock_init(&dev->probe_lock);
	INIT_LIST_HEAD(&dev->mcast_list);
	dev->next_qpn = 2;
	spin_lock_init(&dev->loop_lock);
	INIT_LIST_HEAD(&dev->loop_frames);
	INIT_WORK(&dev->loop_work, tbv_loopback_work);
	ret = tbv_link_rate(link->info.lanes, link->info.lane_gbps, &dev->rate);
	if (ret) {
		dev_warn(link->info.parent, "link %u: unknown link rate %ux%u Gb/s\n",
			 link->index, link->info.lanes, link->info.lane_gbps);
		dev->rate = (struct tbv_ib_rate){ TBV_IB_WIDTH_1X, TBV_IB_SPEED_SDR, 2500 };
	}

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = 1;
	ibdev->dev.parent = link->info.parent;
	/* Unique per device: EUI-64 of the netdev's MAC, itself derived from the host UUID. */
	addrconf_addr_eui48((u8 *)&ibdev->node_guid, link->ndev->dev_addr);
	snprintf(ibdev->node_desc, sizeof(ibdev->node_desc), "tbverbs %s link to %pUb",
		 link->info.backend_name, link->info.peer_uuid);
	ib_set_device_ops(ibdev, &tbv_dev_ops);
	/*
	 * Of the opt-in data-path commands, rdma_rxe's two: POST_SEND is the SQ
	 * ring's doorbell, REQ_NOTIFY_CQ arms a CQ. Receives and completions go
	 * through the rings alone.
	 */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);

	dev->port_state = IB_PORT_ACTIVE;
	snprintf(name, sizeof(name), TBV_IBDEV_FMT, link->index);
	/*
	 * Ours until tbv_ibdev_unregister(): another module may unregister the
	 * device, and the core then frees it, as soon as it is registered.
	 */
	get_device(&ibdev->dev);
	rcu_assign_pointer(link->rx_dev, dev);
	ret = ib_register_device(ibdev, name, NULL);
	if (ret)
		goto err_dealloc;
	link->dev = dev;
	if (!READ_ONCE(dev->gone))
		tbv_dispatch_port_event(dev, IB_EVENT_PORT_ACTIVE);
	return 0;

err_dealloc:
	ib_dealloc_device(ibdev);	/* calls tbv_dealloc_driver() */
	put_device(&ibdev->dev);
	return ret;
}

/*
 * How long the processes of a going device may take to poll the completions
 * its QPs were flushed with, before unregistering unmaps their rings. A
 * process that polls reads them within a scheduling round; one that does not
 * poll (stopped, or busy elsewhere) costs the teardown this once.
 */
#define TBV_FLUSH_POLL_MS	1000

/*
 * Flush every user QP into its CQ ring (tbv_qps_fail_user()) and give the
 * processes that poll those rings a moment to read what they say.
 */
static void tbv_ibdev_flush_users(struct tbv_dev *dev)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(TBV_FLUSH_POLL_MS);

	tbv_qps_fail_user(dev);
	while (tbv_qps_ring_unpolled(dev) && time_before(jiffies, deadline))
		msleep(20);
}

/*
 * Our teardown, under link->lock; the device may already be gone (dev->gone),
 * in which case only our reference is left to drop.
 */
void tbv_ibdev_unregister(struct tbv_link *link)
{
	struct tbv_dev *dev = link->dev;

	WRITE_ONCE(dev->unregistering, true);
	if (!READ_ONCE(dev->gone)) {
		WRITE_ONCE(dev->port_state, IB_PORT_DOWN);
		tbv_dispatch_port_event(dev, IB_EVENT_PORT_ERR);
		/*
		 * ib_dispatch_event() only queues the event on ib_wq: deliver it while
		 * the device's users still listen, not after unregistering dropped them.
		 */
		flush_workqueue(ib_wq);
		tbv_ibdev_flush_users(dev);
	}
	/*
	 * Returns once every user context is disassociated and tbv_dealloc_driver()
	 * ran; at once if another module's ib_unregister_driver() did it already.
	 */
	ib_unregister_device(&dev->ibdev);
	link->dev = NULL;
	put_device(&dev->ibdev.dev);	/* the core frees the device with the last one */
}
