// SPDX-License-Identifier: GPL-2.0
/*
 * The link's IP netdev (usb4_netN): Ethernet frames cut into NET fragments and
 * carried over the rails, one TX queue per rail. It gives the RDMA device its
 * RoCE GIDs, ARP/ND and rdma_cm addressing.
 */
#include <linux/etherdevice.h>
#include <linux/jhash.h>
#include <linux/skbuff.h>

#include "tbv.h"

#define TBV_NET_MAX_MTU		(TBV_NET_MAX_PACKET - ETH_HLEN)

static struct tbv_link *tbv_ndev_link(struct net_device *ndev)
{
	return ((struct tbv_netdev_priv *)netdev_priv(ndev))->link;
}

static int tbv_net_open(struct net_device *ndev)
{
	netif_tx_start_all_queues(ndev);
	return 0;
}

static int tbv_net_stop(struct net_device *ndev)
{
	netif_tx_stop_all_queues(ndev);
	return 0;
}

static netdev_tx_t tbv_net_xmit(struct sk_buff *skb, struct net_device *ndev)
{
	struct tbv_link *link = tbv_ndev_link(ndev);
	u16 queue = skb_get_queue_mapping(skb);
	struct tbv_rail *rail = &link->rails[queue < link->nr_rails ? queue : 0];
	unsigned int nfrags = tbv_net_frag_count(skb->len), nfailed = 0, i;
	struct tbv_frame *frames[TBV_NET_MAX_FRAGS];
	u32 packet_id, bytes = 0;

	if (unlikely(skb->len > TBV_NET_MAX_PACKET || !READ_ONCE(link->data_up)))
		goto drop;

	/* the queue stops under tx_lock: a wake (tbv_net_tx_wake()) cannot slip in between */
	spin_lock_bh(&rail->tx_lock);
	if (unlikely(tbv_pool_room(rail) < nfrags)) {
		/* Cannot happen while the queue is stopped early enough; be safe. */
		netif_stop_subqueue(ndev, queue);
		tbv_pool_starved(rail, nfrags);
		spin_unlock_bh(&rail->tx_lock);
		return NETDEV_TX_BUSY;
	}
	tbv_pool_take(rail, frames, nfrags);
	packet_id = rail->tx_packet_id++;
	if (tbv_pool_room(rail) < TBV_NET_MIN_TX_FRAMES) {
		netif_stop_subqueue(ndev, queue);
		tbv_pool_starved(rail, TBV_NET_MIN_TX_FRAMES);
	}
	spin_unlock_bh(&rail->tx_lock);

	for (i = 0; i < nfrags; i++) {
		struct tbv_frame *f = frames[i];
		u16 len = tbv_net_frag_encode(f->data, packet_id, skb->len, i);

		skb_copy_bits(skb, i * TBV_NET_FRAG_PAYLOAD, (u8 *)f->data + TBV_NET_HDR_LEN, len);
		f->size = TBV_NET_HDR_LEN + len;
		f->sof = TBV_PDF_SOF;
		f->eof = TBV_PDF_EOF;
		/* Once queued the frame may complete and be reused at any time. */
		if (tbv_rail_ring_tx(rail, f)) {
			frames[nfailed++] = f;	/* only once the ring is stopped */
			continue;
		}
		bytes += TBV_NET_HDR_LEN + len;
	}

	spin_lock_bh(&rail->tx_lock);
	tbv_pool_queued(rail, nfrags);
	for (i = 0; i < nfailed; i++)
		tbv_pool_return(rail, frames[i]);
	rail->stats.tx_errors += nfailed;
	rail->stats.tx_frames += nfrags - nfailed;
	rail->stats.tx_bytes += bytes;
	rail->stats.net_tx_packets++;
	rail->stats.net_tx_bytes += skb->len;
	spin_unlock_bh(&rail->tx_lock);
	dev_consume_skb_any(skb);
	return NETDEV_TX_OK;

drop:
	spin_lock_bh(&rail->tx_lock);
	rail->stats.net_tx_dropped++;
	spin_unlock_bh(&rail->tx_lock);
	dev_kfree_skb_any(skb);
	return NETDEV_TX_OK;
}

/* TX frames or credits came back: restart a queue that was stopped for lack of them. */
void tbv_net_tx_wake(struct tbv_rail *rail)
{
	struct tbv_link *link = rail->link;
	struct net_device *ndev = link->ndev;
	unsigned int room;

	if (!ndev || !READ_ONCE(link->data_up) ||
	    !__netif_subqueue_stopped(ndev, rail->idx) || !netif_running(ndev))
		return;
	spin_lock_bh(&rail->tx_lock);
	room = tbv_pool_room(rail);
	if (room < TBV_NET_MIN_TX_FRAMES)
		tbv_pool_starved(rail, TBV_NET_MIN_TX_FRAMES);	/* ask, if credits are short */
	spin_unlock_bh(&rail->tx_lock);
	if (room >= TBV_NET_MIN_TX_FRAMES)
		netif_wake_subqueue(ndev, rail->idx);
}

void tbv_net_reasm_reset(struct tbv_rail *rail)
{
	if (rail->reasm_skb) {
		dev_kfree_skb_any(rail->reasm_skb);
		rail->reasm_skb = NULL;
	}
	memset(&rail->reasm, 0, sizeof(rail->reasm));
}

/* One NET fragment from the rail's NAPI poll. */
void tbv_net_rx(struct tbv_rail *rail, const struct tbv_frame *frame)
{
	struct net_device *ndev = rail->link->ndev;
	struct tbv_net_frag f;
	bool discarded, complete;
	struct sk_buff *skb;

	if (tbv_net_frag_decode(frame->data, frame->size, &f)) {
		rail->stats.rx_malformed++;
		return;
	}

	switch (tbv_net_reasm_push(&rail->reasm, &f, &discarded, &complete)) {
	case TBV_REASM_START:
		if (rail->reasm_skb) {
			dev_kfree_skb_any(rail->reasm_skb);
			rail->reasm_skb = NULL;
		}
		rail->reasm_skb = napi_alloc_skb(&rail->napi, tbv_net_packet_room(&f));
		if (!rail->reasm_skb) {
			rail->stats.net_rx_nomem++;
			rail->reasm.active = false;
			return;
		}
		break;
	case TBV_REASM_APPEND:
		break;
	case TBV_REASM_DROP:
	default:
		if (rail->reasm_skb) {
			dev_kfree_skb_any(rail->reasm_skb);
			rail->reasm_skb = NULL;
		}
		rail->stats.net_rx_discards++;
		return;
	}
	if (discarded)
		rail->stats.net_rx_discards++;
	if (!rail->reasm_skb)
		return;	/* the start of this packet was dropped for lack of memory */

	skb_put_data(rail->reasm_skb, (const u8 *)frame->data + TBV_NET_HDR_LEN, f.len);
	if (!complete)
		return;

	skb = rail->reasm_skb;
	rail->reasm_skb = NULL;
	if (skb->len < ETH_HLEN) {
		rail->stats.rx_malformed++;
		dev_kfree_skb_any(skb);
		return;
	}
	skb->protocol = eth_type_trans(skb, ndev);
	rail->stats.net_rx_packets++;
	rail->stats.net_rx_bytes += skb->len + ETH_HLEN;
	napi_gro_receive(&rail->napi, skb);
}

static void tbv_net_get_stats64(struct net_device *ndev, struct rtnl_link_stats64 *st)
{
	struct tbv_rail_stats sum;

	tbv_rail_stats_sum(tbv_ndev_link(ndev), &sum);
	st->tx_packets = sum.net_tx_packets;
	st->tx_bytes = sum.net_tx_bytes;
	st->tx_dropped = sum.net_tx_dropped;
	st->rx_packets = sum.net_rx_packets;
	st->rx_bytes = sum.net_rx_bytes;
	st->rx_dropped = sum.net_rx_discards + sum.net_rx_nomem;
	st->rx_errors = sum.rx_malformed + sum.rx_hw_errors;
	st->rx_crc_errors = sum.rx_hw_errors;
}

static const struct net_device_ops tbv_netdev_ops = {
	.ndo_open = tbv_net_open,
	.ndo_stop = tbv_net_stop,
	.ndo_start_xmit = tbv_net_xmit,
	.ndo_get_stats64 = tbv_net_get_stats64,
	.ndo_validate_addr = eth_validate_addr,
};

/* A stable, locally administered unicast MAC derived from a host UUID. */
static void tbv_uuid_to_mac(const u8 *uuid, u8 *mac)
{
	u32 h = jhash(uuid, TBV_UUID_LEN, 0x74627662);
	u16 l = jhash(uuid, TBV_UUID_LEN, 0x6e657464) & 0xffff;

	mac[0] = 0x02;
	mac[1] = h >> 24;
	mac[2] = h >> 16;
	mac[3] = h >> 8;
	mac[4] = l >> 8;
	mac[5] = l;
}

struct net_device *tbv_netdev_alloc(struct tbv_link *link)
{
	struct net_device *ndev;
	u8 mac[ETH_ALEN];

	ndev = alloc_etherdev_mqs(sizeof(struct tbv_netdev_priv), link->nr_rails,
				  link->nr_rails);
	if (!ndev)
		return NULL;
	((struct tbv_netdev_priv *)netdev_priv(ndev))->link = link;
	snprintf(ndev->name, sizeof(ndev->name), TBV_NETDEV_FMT, link->index);
	ndev->netdev_ops = &tbv_netdev_ops;
	ndev->min_mtu = ETH_MIN_MTU;
	ndev->max_mtu = TBV_NET_MAX_MTU;
	ndev->mtu = TBV_NET_MAX_MTU;
	ndev->hw_features = NETIF_F_SG;
	ndev->features = NETIF_F_SG;
	tbv_uuid_to_mac(link->info.local_uuid, mac);
	eth_hw_addr_set(ndev, mac);
	SET_NETDEV_DEV(ndev, link->info.parent);
	return ndev;
}

int tbv_netdev_register(struct tbv_link *link)
{
	int ret;

	netif_carrier_off(link->ndev);
	ret = register_netdev(link->ndev);
	if (ret)
		return ret;
	netif_carrier_on(link->ndev);
	return 0;
}

void tbv_netdev_unregister(struct tbv_link *link)
{
	struct net_device *ndev = link->ndev;

	if (!ndev)
		return;
	if (ndev->reg_state == NETREG_REGISTERED)
		unregister_netdev(ndev);
	free_netdev(ndev);	/* also deletes the rails' NAPI contexts */
	link->ndev = NULL;
}
