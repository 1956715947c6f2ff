// SPDX-License-Identifier: GPL-2.0
/*
 * The USB4 backend: links to the hosts that thunderbolt.ko discovers over
 * USB4/Thunderbolt cables (XDomain), through its service API.
 *
 * We advertise an XDomain service directory; a host that runs this module too
 * shows up here as a tb_service of that key, and we give it one link. Login
 * messages travel as XDomain requests/responses on the controller's control
 * ring; data travels on NHI frame rings, one TX and one RX ring per rail, over
 * DMA paths thunderbolt.ko programs (tb_xdomain_enable_paths). Everything else
 * (login, rails, verbs) is shared with the virtual cable (tbv_link.h).
 *
 * No ring uses the controller's E2E flow control (some controllers never grant
 * E2E credits): a frame that finds no RX buffer posted is lost, and RC
 * retransmits it. Teardown disables the paths before the rings stop
 * (tbv_rails_stop), as some routers need.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/mod_devicetable.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/thunderbolt.h>
#include <linux/uuid.h>

#include "tbv.h"
#include "tbv_frame.h"
#include "tbv_usb4_plan.h"

/* The service: key (at most 8 characters), protocol id and version, as both ends advertise them. */
#define TBV_USB4_KEY		"tbverbs"
#define TBV_USB4_PRTCID		1
#define TBV_USB4_PRTCVERS	1
#define TBV_USB4_PRTCREVS	1
#define TBV_USB4_RING_SIZE	256

/* The service directory's UUID (ours; the login protocol has its own two, tbv_login_protocol_uuid). */
static const uuid_t tbv_usb4_dir_uuid =
	UUID_INIT(0x5b6d3a2e, 0x8c41, 0x4f0a, 0x9e, 0x57, 0x21, 0xd4, 0x6b, 0x0f, 0x93, 0xa8);

static unsigned int usb4_rails = TBV_MAX_RAILS;
module_param(usb4_rails, uint, 0644);
MODULE_PARM_DESC(usb4_rails,
		 "most ring pairs (rails) to use per USB4 peer, 1-4 (default 4; fewer if the controller has fewer free)");

struct tbv_usb4_peer {
	struct tb_service *svc;
	struct tb_xdomain *xd;
	struct tbv_link *link;
	struct list_head list;		/* tbv_usb4_peers */
	int out_hopids[TBV_MAX_RAILS];
	unsigned int nr_out_hopids;
	int in_hopids[TBV_MAX_RAILS];	/* reserved while the paths are open */
	unsigned int nr_paths;
	/* the peer's requests (LOGIN, LOGOUT), handed from the control channel to ctl_work */
	struct list_head ctl_queue;	/* of struct tbv_usb4_ctl_pkt; tbv_usb4_peers_lock */
	unsigned int ctl_queued;
	struct work_struct ctl_work;
	struct work_struct destroy_work;	/* a removal that could not wait for the link */
};

/* At most this many of a peer's requests wait; the peer resends what is lost. */
#define TBV_USB4_CTL_QUEUE	8

struct tbv_usb4_ctl_pkt {
	struct list_head list;
	size_t size;
	u8 data[TBV_CTL_MAX_BYTES];
};

struct tbv_usb4_ring {
	struct tbv_ring base;
	struct tb_ring *ring;
	bool started;		/* tb_ring_stop() on a ring never started warns */
};

struct tbv_usb4_frame {
	struct tbv_frame frame;
	struct ring_frame rf;
	struct tbv_usb4_ring *ring;	/* the TX ring it was queued on */
	struct device *dma_dev;
	dma_addr_t dma;
	dma_addr_t page_dma;		/* TX of an MR's page: its mapping until completion */
	bool page_mapped;
};

/*
 * Peers, for the control-packet handler: thunderbolt.ko calls one handler per
 * protocol UUID for every peer, from the work that serves the controller's
 * whole control channel, so it must not sleep: a spinlock, and the requests
 * queued to the peer's ctl_work.
 */
static LIST_HEAD(tbv_usb4_peers);
static DEFINE_SPINLOCK(tbv_usb4_peers_lock);

static struct tbv_usb4_peer *tbv_usb4_peer_of(struct tbv_link *link)
{
	return tbv_link_backend_priv(link);
}

static struct tbv_usb4_ring *to_uring(struct tbv_ring *ring)
{
	return container_of(ring, struct tbv_usb4_ring, base);
}

static struct tbv_usb4_frame *to_uframe(struct tbv_frame *frame)
{
	return container_of(frame, struct tbv_usb4_frame, frame);
}

static_assert(TBV_DESC_CRC_ERROR == RING_DESC_CRC_ERROR);
static_assert(TBV_DESC_BUFFER_OVERRUN == RING_DESC_BUFFER_OVERRUN);

static struct device *tbv_usb4_dma_dev(struct tbv_usb4_peer *p)
{
	return tbv_nhi_device(p->xd->tb->nhi);
}

/* ---- control channel ---- */

static int tbv_usb4_ctl_request(struct tbv_link *link, const void *req, size_t size,
				void *resp, size_t resp_size, unsigned int timeout_ms)
{
	/* thunderbolt.ko matches the response by type, route and protocol UUID */
	return tb_xdomain_request(tbv_usb4_peer_of(link)->xd, req, size, TB_CFG_PKG_XDOMAIN_REQ,
				  resp, resp_size, TB_CFG_PKG_XDOMAIN_RESP, timeout_ms);
}

static u64 tbv_usb4_route(struct tbv_link *link)
{
	return READ_ONCE(tbv_usb4_peer_of(link)->xd->route);
}

/*
 * Our answer to a peer's request. tb_xdomain_response() would queue it as a
 * control request that points at our buffer until a work item of thunderbolt.ko's
 * runs, after the call returned, and every XDomain response arriving meanwhile
 * is compared with it (tb_xdomain_match()): nothing tells us when that ends, so
 * no buffer of ours could be freed, with its peer or ever. Sent as a request
 * that waits TBV_USB4_ANSWER_WAIT_MS for a reply that never comes instead,
 * tb_cfg_request_sync() returns only once the request has left the queue (it
 * cancels it and flushes its work: ctl.c, 6.12 and 7.3), so the answer may live
 * on the caller's stack. Only an ERROR packet can match it meanwhile, as it
 * could the queued response: the peer's responses carry the other direction's
 * protocol UUID (tbv_login.h). The packet on the wire is the same.
 */
#define TBV_USB4_ANSWER_WAIT_MS	1

static int tbv_usb4_ctl_response(struct tbv_link *link, const void *resp, size_t size)
{
	u32 none;
	int ret;

	ret = tb_xdomain_request(tbv_usb4_peer_of(link)->xd, resp, size, TB_CFG_PKG_XDOMAIN_RESP,
				 &none, sizeof(none), TB_CFG_PKG_XDOMAIN_RESP,
				 TBV_USB4_ANSWER_WAIT_MS);
	return ret == -ETIMEDOUT ? 0 : ret;
}

/* The peer's requests, in order, to its link (process context, may sleep). */
static void tbv_usb4_ctl_work(struct work_struct *work)
{
	struct tbv_usb4_peer *p = container_of(work, struct tbv_usb4_peer, ctl_work);
	struct tbv_usb4_ctl_pkt *pkt;
	struct tbv_link *link;

	for (;;) {
		spin_lock(&tbv_usb4_peers_lock);
		pkt = list_first_entry_or_null(&p->ctl_queue, struct tbv_usb4_ctl_pkt, list);
		if (pkt) {
			list_del(&pkt->list);
			p->ctl_queued--;
		}
		link = p->link;
		spin_unlock(&tbv_usb4_peers_lock);
		if (!pkt)
			return;
		/* before the link exists the peer's login is lost; it retries */
		if (link)
			tbv_link_ctl_rx(link, pkt->data, pkt->size);
		kfree(pkt);
	}
}

static void tbv_usb4_ctl_flush(struct tbv_usb4_peer *p)
{
	struct tbv_usb4_ctl_pkt *pkt, *tmp;

	list_for_each_entry_safe(pkt, tmp, &p->ctl_queue, list)
		kfree(pkt);
	INIT_LIST_HEAD(&p->ctl_queue);
	p->ctl_queued = 0;
}

/*
 * A control packet with our protocol UUID, from any peer. 1: consumed (a
 * request, queued for the peer's link, or ours but malformed); 0: a response
 * for a waiting request, or not from one of our peers.
 */
static int tbv_usb4_ctl_rx(const void *buf, size_t size, void *data)
{
	const struct tbv_ctl_hdr *hdr = buf;
	struct tbv_usb4_ctl_pkt *pkt;
	struct tbv_ctl_parsed parsed;
	struct tbv_usb4_peer *p;
	int ret = 0;
	u64 route;

	if (size < sizeof(*hdr) || size > TBV_CTL_MAX_BYTES)
		return 0;
	route = ((u64)hdr->route_hi << 32 | hdr->route_lo) & ~TBV_CTL_ROUTE_CM_BIT;
	spin_lock(&tbv_usb4_peers_lock);
	list_for_each_entry(p, &tbv_usb4_peers, list) {
		/* routes repeat across host controllers (0-1, 1-1): the UUIDs tell them apart */
		if (p->xd->route != route ||
		    memcmp(hdr->sender_uuid, p->xd->remote_uuid, TBV_UUID_LEN) ||
		    memcmp(hdr->target_uuid, p->xd->local_uuid, TBV_UUID_LEN))
			continue;
		ret = tbv_ctl_parse(buf, size, (const u8 *)p->xd->local_uuid,
				    (const u8 *)p->xd->remote_uuid, &parsed);
		if (ret == -ENOENT ||
		    (!ret && (parsed.type == TBV_MSG_LOGIN_RESPONSE ||
			      parsed.type == TBV_MSG_LOGOUT_RESPONSE))) {
			ret = 0;	/* completes our waiting request */
			break;
		}
		/* a request, or ours but malformed: the link answers or counts it */
		ret = 1;
		if (p->ctl_queued >= TBV_USB4_CTL_QUEUE)
			break;
		pkt = kmalloc(sizeof(*pkt), GFP_ATOMIC);
		if (!pkt)
			break;
		pkt->size = size;
		memcpy(pkt->data, buf, size);
		list_add_tail(&pkt->list, &p->ctl_queue);
		p->ctl_queued++;
		queue_work(tbv_wq, &p->ctl_work);
		break;
	}
	spin_unlock(&tbv_usb4_peers_lock);
	return ret;
}

/* One handler per direction of requests (tbv_login.h): both reach tbv_usb4_ctl_rx(). */
static struct tb_protocol_handler tbv_usb4_handlers[] = {
	{ .uuid = (const uuid_t *)tbv_login_protocol_uuid[0], .callback = tbv_usb4_ctl_rx },
	{ .uuid = (const uuid_t *)tbv_login_protocol_uuid[1], .callback = tbv_usb4_ctl_rx },
};

/* ---- HopIDs and paths ---- */

static void tbv_usb4_hopids_release(struct tbv_link *link)
{
	struct tbv_usb4_peer *p = tbv_usb4_peer_of(link);

	while (p->nr_out_hopids)
		tb_xdomain_release_out_hopid(p->xd, p->out_hopids[--p->nr_out_hopids]);
}

static int tbv_usb4_hopids_alloc(struct tbv_link *link, unsigned int rails, u32 *hopids)
{
	struct tbv_usb4_peer *p = tbv_usb4_peer_of(link);
	unsigned int i;
	int hopid;

	for (i = 0; i < rails; i++) {
		hopid = tb_xdomain_alloc_out_hopid(p->xd, -1);
		if (hopid < 0) {
			tbv_usb4_hopids_release(link);
			return hopid;
		}
		p->out_hopids[p->nr_out_hopids++] = hopid;
		hopids[i] = hopid;
	}
	return 0;
}

static int tbv_usb4_ring_hop(struct tbv_ring *ring)
{
	return to_uring(ring)->ring->hop;
}

static void tbv_usb4_paths_disable(struct tbv_link *link)
{
	struct tbv_usb4_peer *p = tbv_usb4_peer_of(link);
	unsigned int i;

	for (i = p->nr_paths; i-- > 0;) {
		struct tbv_rail *rail = &link->rails[i];
		int ret = tb_xdomain_disable_paths(p->xd, p->out_hopids[i],
						   tbv_usb4_ring_hop(rail->tx), p->in_hopids[i],
						   tbv_usb4_ring_hop(rail->rx));

		/* the peer may be gone already: its paths went with it */
		if (ret && !READ_ONCE(p->xd->is_unplugged))
			dev_warn(&p->svc->dev, "rail %u: disabling the DMA paths failed (%d)\n", i, ret);
		tb_xdomain_release_in_hopid(p->xd, p->in_hopids[i]);
	}
	p->nr_paths = 0;
}

#ifdef TBV_TEST_HOOKS
/*
 * Test builds only (`make TBV_TEST_HOOKS=1`, for tests/usb4/test_usb4_unplug.py):
 * a bring-up waits, between its unplug check and opening its first path, until
 * the peer is unplugged or this many ms passed, so that an unplug meets it there
 * on purpose (the window is otherwise a few instructions wide). 0: no wait.
 */
static unsigned int usb4_test_hold_paths_ms;
module_param(usb4_test_hold_paths_ms, uint, 0644);
MODULE_PARM_DESC(usb4_test_hold_paths_ms,
		 "testing: a bring-up waits up to this long for an unplug before it opens its paths (default 0: off)");

static void tbv_usb4_test_hold_paths(struct tbv_usb4_peer *p)
{
	unsigned int ms = READ_ONCE(usb4_test_hold_paths_ms), waited;

	if (!ms)
		return;
	dev_info(&p->svc->dev, "testing: the bring-up waits up to %u ms for an unplug\n", ms);
	for (waited = 0; waited < ms && !READ_ONCE(p->xd->is_unplugged); waited += 20)
		msleep(20);
}
#else
static inline void tbv_usb4_test_hold_paths(struct tbv_usb4_peer *p)
{
}
#endif

/* Called with the RX rings started and their buffers posted, so nothing arrives unbuffered. */
static int tbv_usb4_paths_enable(struct tbv_link *link, const struct tbv_login_agreed *agreed,
				 unsigned int *opened)
{
	struct tbv_usb4_peer *p = tbv_usb4_peer_of(link);
	unsigned int i;
	int in, ret;

	*opened = 0;
	if (tbv_usb4_check_peer_hopids(agreed->peer_tx_hopid, agreed->rails,
				       p->xd->local_max_hopid, &i)) {
		dev_warn(&p->svc->dev, "rail %u: the peer's HopID %u is not usable here (%u-%d)\n",
			 i, agreed->peer_tx_hopid[i], TBV_MIN_HOPID, p->xd->local_max_hopid);
		return -EINVAL;
	}
	for (i = 0; i < agreed->rails; i++) {
		struct tbv_rail *rail = &link->rails[i];
		int peer_hopid = agreed->peer_tx_hopid[i];

		/*
		 * thunderbolt.ko (6.12) does not look at is_unplugged under its lock
		 * before it tunnels: a peer already gone would get a tunnel nobody
		 * removes. Checked here; a call already waiting for the lock can
		 * still do it (docs/usb4-backend.md).
		 */
		if (READ_ONCE(p->xd->is_unplugged)) {
			ret = -ENODEV;
			goto err;
		}
		if (!i)
			tbv_usb4_test_hold_paths(p);

		/* The peer's out-HopID is our in-HopID: it must be free here too. */
		in = tb_xdomain_alloc_in_hopid(p->xd, peer_hopid);
		if (in != peer_hopid) {
			if (in >= 0)
				tb_xdomain_release_in_hopid(p->xd, in);
			dev_warn(&p->svc->dev, "rail %u: the peer's HopID %d is not free here (%d)\n",
				 i, peer_hopid, in);
			ret = in < 0 ? in : -EBUSY;
			goto err;
		}
		ret = tb_xdomain_enable_paths(p->xd, p->out_hopids[i], tbv_usb4_ring_hop(rail->tx),
					      peer_hopid, tbv_usb4_ring_hop(rail->rx));
		if (ret) {
			tb_xdomain_release_in_hopid(p->xd, in);
			dev_warn(&p->svc->dev, "rail %u: enabling the DMA paths failed (%d)\n", i, ret);
			goto err;
		}
		p->in_hopids[i] = in;
		p->nr_paths = i + 1;
	}
	return 0;
err:
	*opened = p->nr_paths;
	tbv_usb4_paths_disable(link);
	return ret;
}

/* ---- rings ---- */

/* The PDFs of split packets' payload frames (proto/tbv_rdma.h): RX rings admit them if agreed. */
#define TBV_USB4_SPLIT_PDFS	GENMASK(TBV_SPLIT_PDF_FIRST + TBV_SPLIT_PDF_VALUES - 1, \
					TBV_SPLIT_PDF_FIRST)

static void tbv_usb4_start_poll(void *data)
{
	struct tbv_usb4_ring *r = data;

	/* hard IRQ, ring lock held: the link schedules its NAPI */
	r->base.cb->start_poll(r->base.cb->ctx);
}

static struct tbv_ring *tbv_usb4_ring_alloc(struct tbv_link *link, unsigned int rail, bool tx,
					    unsigned int size, const struct tbv_ring_cb *cb)
{
	struct tb_nhi *nhi = tbv_usb4_peer_of(link)->xd->tb->nhi;
	struct tbv_usb4_ring *r = kzalloc(sizeof(*r), GFP_KERNEL);
	/* the masks admit only the PDFs our frames end with (rails start after the login) */
	u16 split = link->split ? TBV_USB4_SPLIT_PDFS : 0;

	if (!r)
		return NULL;
	r->base = (struct tbv_ring){ .link = link, .rail = rail, .tx = tx, .size = size, .cb = cb };
	if (tx)
		r->ring = tb_ring_alloc_tx(nhi, -1, size, RING_FLAG_FRAME);
	else
		r->ring = tb_ring_alloc_rx(nhi, -1, size, RING_FLAG_FRAME, 0,
					   BIT(TBV_PDF_SOF) | split, BIT(TBV_PDF_EOF) | split,
					   tbv_usb4_start_poll, r);
	if (!r->ring) {
		kfree(r);
		return NULL;
	}
	return &r->base;
}

static void tbv_usb4_ring_free(struct tbv_ring *ring)
{
	struct tbv_usb4_ring *r = to_uring(ring);

	tb_ring_free(r->ring);
	kfree(r);
}

static void tbv_usb4_ring_start(struct tbv_ring *ring)
{
	struct tbv_usb4_ring *r = to_uring(ring);

	tb_ring_start(r->ring);
	r->started = true;
}

/*
 * Unmask what NAPI may have left masked: thunderbolt.ko masks a polled ring's
 * interrupt before start_poll and unmasks it only in tb_ring_poll_complete(),
 * which a NAPI context disabled mid-poll never calls, and tb_ring_stop() warns
 * on a masked ring. Unmasking may raise an event that came while masked (the
 * NHI holds it), and its handler would mask the ring again: the vector stays
 * off until the ring is stopped, then the replayed interrupt finds it stopped.
 * Without MSI-X (no ring->irq) the window is the few instructions between.
 */
static void tbv_usb4_rx_ring_stop(struct tb_ring *ring)
{
	int irq = ring->irq;

	if (irq > 0)
		disable_irq(irq);
	tb_ring_poll_complete(ring);
	tb_ring_stop(ring);
	if (irq > 0)
		enable_irq(irq);
}

/* Also on a ring that a failed bring-up allocated but never started. */
static void tbv_usb4_ring_stop(struct tbv_ring *ring)
{
	struct tbv_usb4_ring *r = to_uring(ring);

	if (!r->started)
		return;
	if (ring->tx)
		tb_ring_stop(r->ring);
	else
		tbv_usb4_rx_ring_stop(r->ring);
	r->started = false;
}

/* TX completion or cancellation: thunderbolt.ko's ring work, process context. */
static void tbv_usb4_tx_callback(struct tb_ring *ring, struct ring_frame *rf, bool canceled)
{
	struct tbv_usb4_frame *uf = container_of(rf, struct tbv_usb4_frame, rf);
	const struct tbv_ring_cb *cb = uf->ring->base.cb;

	if (uf->page_mapped) {
		/* the controller is done with the MR's page; the link drops its reference */
		dma_unmap_page(uf->dma_dev, uf->page_dma, uf->frame.size, DMA_TO_DEVICE);
		uf->page_mapped = false;
	} else {
		/* the buffer is ours again, to be rewritten */
		dma_sync_single_for_cpu(uf->dma_dev, uf->dma, uf->frame.size, DMA_TO_DEVICE);
	}
	cb->tx_done(cb->ctx, &uf->frame, canceled);
}

static int tbv_usb4_ring_tx(struct tbv_ring *ring, struct tbv_frame *frame)
{
	struct tbv_usb4_frame *uf = to_uframe(frame);
	int ret;

	if (!frame->size || frame->size > TBV_FRAME_SIZE)
		return -EINVAL;
	uf->ring = to_uring(ring);
	if (frame->page) {
		/* zero-copy: the controller reads the MR's pinned page itself */
		uf->page_dma = dma_map_page(uf->dma_dev, frame->page, frame->page_off, frame->size,
					    DMA_TO_DEVICE);
		if (dma_mapping_error(uf->dma_dev, uf->page_dma))
			return -ENOMEM;
		uf->page_mapped = true;
		uf->rf.buffer_phy = uf->page_dma;
	} else {
		uf->rf.buffer_phy = uf->dma;
		dma_sync_single_for_device(uf->dma_dev, uf->dma, frame->size, DMA_TO_DEVICE);
	}
	uf->rf.size = tbv_usb4_desc_len(frame->size);
	uf->rf.sof = frame->sof;
	uf->rf.eof = frame->eof;
	uf->rf.flags = 0;
	uf->rf.callback = tbv_usb4_tx_callback;
	ret = tb_ring_tx(uf->ring->ring, &uf->rf);
	if (ret && uf->page_mapped) {
		dma_unmap_page(uf->dma_dev, uf->page_dma, frame->size, DMA_TO_DEVICE);
		uf->page_mapped = false;
	}
	return ret;
}

static int tbv_usb4_ring_rx(struct tbv_ring *ring, struct tbv_frame *frame)
{
	struct tbv_usb4_frame *uf = to_uframe(frame);

	uf->rf.buffer_phy = uf->dma;
	uf->rf.callback = NULL;	/* polled: completions come back through ring_poll */
	dma_sync_single_for_device(uf->dma_dev, uf->dma, TBV_FRAME_SIZE, DMA_FROM_DEVICE);
	return tb_ring_rx(to_uring(ring)->ring, &uf->rf);
}

static struct tbv_frame *tbv_usb4_ring_poll(struct tbv_ring *ring)
{
	struct ring_frame *rf = tb_ring_poll(to_uring(ring)->ring);
	struct tbv_usb4_frame *uf;

	if (!rf)
		return NULL;
	uf = container_of(rf, struct tbv_usb4_frame, rf);
	uf->frame.size = tbv_usb4_frame_len(rf->size);
	uf->frame.sof = rf->sof;
	uf->frame.eof = rf->eof;
	/* what the controller flags is counted and dropped by the rail, never delivered */
	uf->frame.flags = tbv_usb4_rx_flags(rf->flags);
	dma_sync_single_for_cpu(uf->dma_dev, uf->dma, uf->frame.size, DMA_FROM_DEVICE);
	return &uf->frame;
}

static void tbv_usb4_ring_poll_complete(struct tbv_ring *ring)
{
	tb_ring_poll_complete(to_uring(ring)->ring);
}

/* ---- frames: one page each, mapped once for the controller (works behind an IOMMU) ---- */

static struct tbv_frame *tbv_usb4_frame_alloc(struct tbv_link *link)
{
	struct device *dev = tbv_usb4_dma_dev(tbv_usb4_peer_of(link));
	struct tbv_usb4_frame *uf = kzalloc(sizeof(*uf), GFP_KERNEL);

	BUILD_BUG_ON(TBV_FRAME_SIZE > PAGE_SIZE);
	if (!uf)
		return NULL;
	uf->frame.data = (void *)__get_free_page(GFP_KERNEL);
	if (!uf->frame.data)
		goto err;
	uf->dma_dev = dev;
	uf->dma = dma_map_single(dev, uf->frame.data, TBV_FRAME_SIZE, DMA_BIDIRECTIONAL);
	if (dma_mapping_error(dev, uf->dma)) {
		free_page((unsigned long)uf->frame.data);
		goto err;
	}
	INIT_LIST_HEAD(&uf->frame.list);
	return &uf->frame;
err:
	kfree(uf);
	return NULL;
}

static void tbv_usb4_frame_free(struct tbv_link *link, struct tbv_frame *frame)
{
	struct tbv_usb4_frame *uf = to_uframe(frame);

	dma_unmap_single(uf->dma_dev, uf->dma, TBV_FRAME_SIZE, DMA_BIDIRECTIONAL);
	free_page((unsigned long)frame->data);
	kfree(uf);
}

static const struct tbv_link_ops tbv_usb4_ops = {
	.ctl_request = tbv_usb4_ctl_request,
	.ctl_response = tbv_usb4_ctl_response,
	.route = tbv_usb4_route,
	.hopids_alloc = tbv_usb4_hopids_alloc,
	.hopids_release = tbv_usb4_hopids_release,
	.ring_alloc = tbv_usb4_ring_alloc,
	.ring_free = tbv_usb4_ring_free,
	.ring_start = tbv_usb4_ring_start,
	.ring_stop = tbv_usb4_ring_stop,
	.ring_tx = tbv_usb4_ring_tx,
	.ring_rx = tbv_usb4_ring_rx,
	.ring_poll = tbv_usb4_ring_poll,
	.ring_poll_complete = tbv_usb4_ring_poll_complete,
	.frame_alloc = tbv_usb4_frame_alloc,
	.frame_free = tbv_usb4_frame_free,
	.paths_enable = tbv_usb4_paths_enable,
	.paths_disable = tbv_usb4_paths_disable,
};

/* ---- the service driver ---- */

/*
 * Rails we can offer: ring pairs the controller has free now (each ring also
 * takes one of its MSI-X vectors), capped by usb4_rails. Others (the control
 * channel, thunderbolt_net) may take rings later: bring-up then logs in again
 * with the rails it could open, or fails cleanly with none.
 */
static unsigned int tbv_usb4_free_rails(struct tb_nhi *nhi)
{
	struct tb_ring *rings[2 * TBV_MAX_RAILS];
	unsigned int want = tbv_usb4_rails_offer(TBV_MAX_RAILS, usb4_rails);
	unsigned int n = 0, i;

	while (n < 2 * want) {
		rings[n] = tb_ring_alloc_tx(nhi, -1, 1, RING_FLAG_FRAME);
		if (!rings[n])
			break;
		n++;
		rings[n] = tb_ring_alloc_rx(nhi, -1, 1, RING_FLAG_FRAME, 0, 0, 0, NULL, NULL);
		if (!rings[n])
			break;
		n++;
	}
	for (i = 0; i < n; i++)
		tb_ring_free(rings[i]);
	return tbv_usb4_rails_offer(n / 2, usb4_rails);
}

/* Off the list, its queued requests dropped: no control packet reaches the link after this. */
static void tbv_usb4_forget(struct tbv_usb4_peer *p)
{
	spin_lock(&tbv_usb4_peers_lock);
	list_del(&p->list);
	spin_unlock(&tbv_usb4_peers_lock);
	cancel_work_sync(&p->ctl_work);
	tbv_usb4_ctl_flush(p);
}

static int tbv_usb4_probe(TBV_SERVICE_PROBE_PARAMS)
{
	struct tb_xdomain *xd = tb_service_parent(svc);
	struct tbv_link_info info = {
		.ops = &tbv_usb4_ops,
		.parent = &svc->dev,
		.backend_name = "usb4",
		.route = xd->route,
		.ring_size = TBV_USB4_RING_SIZE,
		.lanes = xd->link_width == 2 ? 2 : 1,	/* TB_LINK_WIDTH_DUAL, 2 in 6.1 and 6.12 */
		.lane_gbps = xd->link_speed,
	};
	struct tbv_usb4_peer *p;
	struct tbv_link *link;

	/* later versions are fine: the login agrees on a protocol version or refuses, loudly */
	if (svc->prtcvers < TBV_USB4_PRTCVERS) {
		dev_warn(&svc->dev, "peer %pUb advertises %s service version %u; we need %u or later: not connecting\n",
			 xd->remote_uuid, TBV_USB4_KEY, svc->prtcvers, TBV_USB4_PRTCVERS);
		return -EPROTONOSUPPORT;
	}
	info.max_rails = tbv_usb4_free_rails(xd->tb->nhi);
	if (!info.max_rails) {
		/* tb_ring_alloc_*() returns NULL for both causes */
		dev_warn(&svc->dev, "no free DMA rings on this controller for peer %pUb (all taken, or out of memory)\n",
			 xd->remote_uuid);
		return -EBUSY;
	}
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	p->svc = svc;
	p->xd = xd;
	INIT_LIST_HEAD(&p->ctl_queue);
	INIT_WORK(&p->ctl_work, tbv_usb4_ctl_work);
	info.backend_priv = p;
	memcpy(info.local_uuid, xd->local_uuid, TBV_UUID_LEN);
	memcpy(info.peer_uuid, xd->remote_uuid, TBV_UUID_LEN);

	spin_lock(&tbv_usb4_peers_lock);
	list_add(&p->list, &tbv_usb4_peers);
	spin_unlock(&tbv_usb4_peers_lock);
	/* the peer's first login may arrive before we set p->link: it retries */
	link = tbv_link_create(&info);
	if (IS_ERR(link)) {
		tbv_usb4_forget(p);
		kfree(p);
		return PTR_ERR(link);
	}
	spin_lock(&tbv_usb4_peers_lock);
	p->link = link;
	spin_unlock(&tbv_usb4_peers_lock);
	tb_service_set_drvdata(svc, p);
	dev_info(&svc->dev, "peer %pUb (%s): %ux%u Gb/s, up to %u rail(s)\n", xd->remote_uuid,
		 xd->device_name ?: "unnamed host", info.lanes, info.lane_gbps, info.max_rails);
	return 0;
}

static void tbv_usb4_destroy_work(struct work_struct *work)
{
	struct tbv_usb4_peer *p = container_of(work, struct tbv_usb4_peer, destroy_work);
	struct tb_service *svc = p->svc;
	struct tb_xdomain *xd = p->xd;

	tbv_link_destroy(p->link);
	kfree(p);
	/* the service first: its release frees its id in the XDomain's table */
	put_device(&svc->dev);
	tb_xdomain_put(xd);
}

/*
 * thunderbolt.ko removes a service holding its domain lock (a hot-unplug, the
 * domain going away), and a bring-up opening its paths waits for that lock: if
 * a bring-up or teardown work is in progress, remove() must not wait for it.
 * The link is then destroyed by a work item once that work ended, holding the
 * XDomain (its HopIDs and paths) and the service (the link's devices' parent)
 * until then.
 */
static void tbv_usb4_remove(struct tb_service *svc)
{
	struct tbv_usb4_peer *p = tb_service_get_drvdata(svc);

	tbv_usb4_forget(p);
	if (!tbv_link_stop(p->link)) {
		dev_info(&svc->dev, "removing the link to %pUb once its bring-up or teardown ends\n",
			 p->xd->remote_uuid);
		tb_xdomain_get(p->xd);
		get_device(&svc->dev);
		INIT_WORK(&p->destroy_work, tbv_usb4_destroy_work);
		queue_work(tbv_wq, &p->destroy_work);
		return;
	}
	tbv_link_destroy(p->link);
	kfree(p);
}

/* The host shuts down or suspends: the peer hears a LOGOUT and drops its devices now. */
static void tbv_usb4_shutdown(struct tb_service *svc)
{
	struct tbv_usb4_peer *p = tb_service_get_drvdata(svc);

	tbv_link_suspend(p->link);
}

static int tbv_usb4_suspend(struct device *dev)
{
	tbv_usb4_shutdown(tb_to_service(dev));
	return 0;
}

/* The peer may be gone or another host now: the login finds out, as a new session. */
static int tbv_usb4_resume(struct device *dev)
{
	struct tbv_usb4_peer *p = tb_service_get_drvdata(tb_to_service(dev));

	tbv_link_resume(p->link);
	return 0;
}

static DEFINE_SIMPLE_DEV_PM_OPS(tbv_usb4_pm_ops, tbv_usb4_suspend, tbv_usb4_resume);

static const struct tb_service_id tbv_usb4_ids[] = {
	{ TB_SERVICE(TBV_USB4_KEY, TBV_USB4_PRTCID) },
	{ },
};
MODULE_DEVICE_TABLE(tbsvc, tbv_usb4_ids);

static struct tb_service_driver tbv_usb4_driver = {
	.driver = {
		.owner = THIS_MODULE,
		.name = TBV_DRV_NAME,
		.pm = pm_sleep_ptr(&tbv_usb4_pm_ops),
	},
	.probe = tbv_usb4_probe,
	.remove = tbv_usb4_remove,
	.shutdown = tbv_usb4_shutdown,
	.id_table = tbv_usb4_ids,
};

static struct tb_property_dir *tbv_usb4_dir;

static void tbv_usb4_handlers_unregister(unsigned int count)
{
	while (count--)
		tb_unregister_protocol_handler(&tbv_usb4_handlers[count]);
}

static int tbv_usb4_handlers_register(void)
{
	unsigned int i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(tbv_usb4_handlers); i++) {
		ret = tb_register_protocol_handler(&tbv_usb4_handlers[i]);
		if (ret) {
			tbv_usb4_handlers_unregister(i);
			return ret;
		}
	}
	return 0;
}

int tbv_usb4_init(void)
{
	int ret = -ENOMEM;

	tbv_usb4_dir = tb_property_create_dir(&tbv_usb4_dir_uuid);
	if (!tbv_usb4_dir)
		return -ENOMEM;
	if (tb_property_add_immediate(tbv_usb4_dir, "prtcid", TBV_USB4_PRTCID) ||
	    tb_property_add_immediate(tbv_usb4_dir, "prtcvers", TBV_USB4_PRTCVERS) ||
	    tb_property_add_immediate(tbv_usb4_dir, "prtcrevs", TBV_USB4_PRTCREVS) ||
	    tb_property_add_immediate(tbv_usb4_dir, "prtcstns", 0))
		goto err_dir;
	ret = tbv_usb4_handlers_register();
	if (ret)
		goto err_dir;
	ret = tb_register_service_driver(&tbv_usb4_driver);
	if (ret)
		goto err_handler;
	/* last: once advertised, peers start probing us */
	ret = tb_register_property_dir(TBV_USB4_KEY, tbv_usb4_dir);
	if (ret)
		goto err_driver;
	return 0;

err_driver:
	tb_unregister_service_driver(&tbv_usb4_driver);
	flush_workqueue(tbv_wq);	/* removals handed to destroy_work */
err_handler:
	tbv_usb4_handlers_unregister(ARRAY_SIZE(tbv_usb4_handlers));
err_dir:
	tb_property_free_dir(tbv_usb4_dir);
	return ret;
}

void tbv_usb4_exit(void)
{
	tb_unregister_property_dir(TBV_USB4_KEY, tbv_usb4_dir);
	tb_unregister_service_driver(&tbv_usb4_driver);
	tbv_usb4_handlers_unregister(ARRAY_SIZE(tbv_usb4_handlers));
	tb_property_free_dir(tbv_usb4_dir);
}
