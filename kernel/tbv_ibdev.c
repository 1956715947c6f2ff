// SPDX-License-Identifier: GPL-2.0
/*
 * The ib_device of a link (usb4_rdmaN): device and port attributes, RoCE v2
 * addressing through the link's netdev, user contexts, link statistics.
 */
#include <net/addrconf.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "tbv.h"
#include "tbverbs-abi.h"

#define TBV_VENDOR_ID		0x746276	/* "tbv": not a registered OUI, like siw's */
#define TBV_VENDOR_PART_ID	0x5534		/* "U4": outside perftest's device tables */
#define TBV_GID_TABLE_LEN	128
#define TBV_MAX_MSG_SIZE	0x80000000u

struct tbv_ucontext {
	struct ib_ucontext ibuc;
};

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
	/* Only what works today is reported; QPs, CQs and MRs come with the data path. */
	attr->max_pd = TBV_MAX_PD;
	attr->max_pkeys = 1;
	return 0;
}

static int tbv_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *attr)
{
	struct tbv_dev *dev = to_tbv_dev(ibdev);

	/* The core zeroes *attr; fill what a RoCE port reports. */
	attr->state = READ_ONCE(dev->port_state);
	attr->phys_state = attr->state == IB_PORT_ACTIVE ? IB_PORT_PHYS_STATE_LINK_UP :
							   IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = IB_MTU_4096;
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
	struct tbv_dev *dev = to_tbv_dev(ibuc->device);
	struct tbverbs_alloc_ucontext_resp resp = {
		.abi_version = TBVERBS_UVERBS_ABI_VERSION,
	};
	int ret;

	if (atomic_inc_return(&dev->nr_ucontexts) > TBV_MAX_UCONTEXT) {
		ret = -ENOMEM;
		goto err;
	}
	if (udata && udata->outlen) {
		ret = ib_copy_to_udata(udata, &resp, min(udata->outlen, sizeof(resp)));
		if (ret)
			goto err;
	}
	return 0;
err:
	atomic_dec(&dev->nr_ucontexts);
	return ret;
}

static void tbv_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	atomic_dec(&to_tbv_dev(ibuc->device)->nr_ucontexts);
}

/*
 * The link went away while a process holds the device open: we keep no user
 * mappings of our own, so once the core destroyed the user's objects there is
 * nothing left to detach. Having this op lets unplug complete without waiting
 * for every process to close the device.
 */
static void tbv_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

/* Link statistics, summed over the rails: `rdma statistic show` and hw_counters/. */
enum tbv_hw_counter {
	TBV_CNT_TX_FRAMES, TBV_CNT_TX_BYTES, TBV_CNT_TX_ERRORS,
	TBV_CNT_RX_FRAMES, TBV_CNT_RX_BYTES, TBV_CNT_RX_HW_ERRORS, TBV_CNT_RX_MALFORMED,
	TBV_CNT_NET_TX_PACKETS, TBV_CNT_NET_RX_PACKETS, TBV_CNT_NET_RX_DISCARDS,
	TBV_CNT_CTL_RX_REJECTED, TBV_CNT_LOGIN_ATTEMPTS, TBV_CNT_LINK_UPS,
	TBV_NUM_COUNTERS
};

static const struct rdma_stat_desc tbv_counter_descs[TBV_NUM_COUNTERS] = {
	[TBV_CNT_TX_FRAMES].name = "tx_frames",
	[TBV_CNT_TX_BYTES].name = "tx_bytes",
	[TBV_CNT_TX_ERRORS].name = "tx_errors",
	[TBV_CNT_RX_FRAMES].name = "rx_frames",
	[TBV_CNT_RX_BYTES].name = "rx_bytes",
	[TBV_CNT_RX_HW_ERRORS].name = "rx_hw_errors",
	[TBV_CNT_RX_MALFORMED].name = "rx_malformed",
	[TBV_CNT_NET_TX_PACKETS].name = "net_tx_packets",
	[TBV_CNT_NET_RX_PACKETS].name = "net_rx_packets",
	[TBV_CNT_NET_RX_DISCARDS].name = "net_rx_discards",
	[TBV_CNT_CTL_RX_REJECTED].name = "ctl_rx_rejected",
	[TBV_CNT_LOGIN_ATTEMPTS].name = "login_attempts",
	[TBV_CNT_LINK_UPS].name = "link_ups",
};

static struct rdma_hw_stats *tbv_alloc_hw_port_stats(struct ib_device *ibdev, u32 port)
{
	return rdma_alloc_hw_stats_struct(tbv_counter_descs, TBV_NUM_COUNTERS,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int tbv_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			    u32 port, int index)
{
	struct tbv_link *link = to_tbv_dev(ibdev)->link;
	struct tbv_rail_stats sum;
	u64 *v = stats->value;

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
	v[TBV_CNT_NET_TX_PACKETS] = sum.net_tx_packets;
	v[TBV_CNT_NET_RX_PACKETS] = sum.net_rx_packets;
	v[TBV_CNT_NET_RX_DISCARDS] = sum.net_rx_discards;
	v[TBV_CNT_CTL_RX_REJECTED] = atomic64_read(&link->stats.ctl_rx_rejected);
	v[TBV_CNT_LOGIN_ATTEMPTS] = atomic64_read(&link->stats.login_attempts);
	v[TBV_CNT_LINK_UPS] = atomic64_read(&link->stats.link_ups);
	return TBV_NUM_COUNTERS;
}

static const struct ib_device_ops tbv_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = TBVERBS_UVERBS_ABI_VERSION,
	.uverbs_no_driver_id_binding = 1,

	.alloc_hw_port_stats = tbv_alloc_hw_port_stats,
	.alloc_pd = tbv_alloc_pd,
	.alloc_ucontext = tbv_alloc_ucontext,
	.dealloc_pd = tbv_dealloc_pd,
	.dealloc_ucontext = tbv_dealloc_ucontext,
	.disassociate_ucontext = tbv_disassociate_ucontext,
	.get_dev_fw_str = tbv_get_dev_fw_str,
	.get_hw_stats = tbv_get_hw_stats,
	.get_link_layer = tbv_get_link_layer,
	.get_port_immutable = tbv_get_port_immutable,
	.query_device = tbv_query_device,
	.query_pkey = tbv_query_pkey,
	.query_port = tbv_query_port,

	INIT_RDMA_OBJ_SIZE(ib_pd, tbv_pd, ibpd),
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
	atomic_set(&dev->nr_ucontexts, 0);
	atomic_set(&dev->nr_pds, 0);
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

	ret = ib_device_set_netdev(ibdev, link->ndev, 1);
	if (ret)
		goto err_dealloc;
	dev->port_state = IB_PORT_ACTIVE;
	snprintf(name, sizeof(name), TBV_IBDEV_FMT, link->index);
	ret = ib_register_device(ibdev, name, NULL);
	if (ret)
		goto err_dealloc;
	link->dev = dev;
	tbv_dispatch_port_event(dev, IB_EVENT_PORT_ACTIVE);
	return 0;

err_dealloc:
	ib_dealloc_device(ibdev);
	return ret;
}

void tbv_ibdev_unregister(struct tbv_link *link)
{
	struct tbv_dev *dev = link->dev;

	WRITE_ONCE(dev->port_state, IB_PORT_DOWN);
	tbv_dispatch_port_event(dev, IB_EVENT_PORT_ERR);
	/* Returns once every user context is disassociated; users see the device gone. */
	ib_unregister_device(&dev->ibdev);
	ib_dealloc_device(&dev->ibdev);
	link->dev = NULL;
}
