// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * usb4-nhi: an emulated USB4 host interface (NHI) with its host router, for QEMU 7.2.
 *
 * Linux's unmodified thunderbolt.ko binds to it by PCI class 0x0c0340 and runs its software
 * connection manager against the router in router.c. The router's lane adapter is a "cable": a
 * chardev speaking the framing below to a relay (tests/harness/cable.py), which joins two VMs.
 *
 *   BAR0  the NHI registers the driver uses: TX/RX ring descriptors and options, interrupt
 *         enable/mask/clear/vector/throttle registers, capabilities (rings=, USB4 v1)
 *   BAR2  MSI-X (msix-vectors=; below 6 the driver falls back to the MSI capability)
 *
 * A profile (profile=lenient|intel|amd|strix) sets how strict the device is: transport
 * packets and mask-based frame rebuilding, drops when no RX buffer is posted, interrupt
 * semantics, ring and vector counts. Every setting is a property of its own that overrides
 * the profile's value; docs/emulator.md says which behaviour comes from where.
 *   ring 0  raw control packets to/from the router; rings 1..15 carry frames along the paths
 *         (HOPS) the driver programs into the router
 *
 * All work runs in QEMU's main loop: MMIO, a bottom half that walks the rings, chardev callbacks.
 * What is modelled and what is not: docs/emulator.md.
 */
#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/main-loop.h"
#include "qemu/queue.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "hw/pci/pci.h"
#include "hw/pci/msi.h"
#include "hw/pci/msix.h"
#include "qemu/timer.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "chardev/char-fe.h"
#include "migration/vmstate.h"
#include "qom/object.h"

#include "router.h"

#define TYPE_USB4_NHI "usb4-nhi"
OBJECT_DECLARE_SIMPLE_TYPE(Usb4NhiState, USB4_NHI)

#define NHI_RINGS		16	/* the most rings= may be: the interrupt bits fit one dword */
#define NHI_VECTORS		16	/* the most vectors the driver uses (MSIX_MAX_VECS) */
#define NHI_MSIX_MIN		6	/* fewer and the driver uses one MSI (nhi_init_msi) */
#define NHI_PACKET_MAX		256	/* USB4 transport packet payload */
#define UNSET			UINT32_MAX	/* a setting the profile decides */
#define NHI_BAR_SIZE		(256 * KiB)
#define NHI_FRAME_MAX		4096

/* BAR0 layout (offsets the driver uses; see docs/emulator.md). */
#define R_TX_RING		0x00000	/* 16 bytes per ring: base lo, base hi, prod<<16|cons, size */
#define R_RX_RING		0x08000	/* base lo, base hi, tail<<16|head, frame_size<<16|size */
#define R_TX_OPTIONS		0x19800	/* 32 bytes per ring: flags, (unused) */
#define R_RX_OPTIONS		0x29800	/* flags, sof_mask<<16|eof_mask */
#define R_NOTIFY		0x37800	/* 2 dwords, read-to-clear: TX, RX, RX overflow bits */
#define R_INT_CLEAR		0x37808	/* 2 dwords, write-1-to-clear the notify bits */
#define R_INT_ENABLE		0x38200	/* TX ring n: bit n, RX ring n: bit rings+n */
#define R_INT_MASK_CLEAR	0x38208	/* write-1-to-clear enable bits (not on Intel) */
#define R_INT_THROTTLE		0x38c00	/* per vector, in 256 ns units */
#define R_INT_VECTOR		0x38c40	/* 4 bits per interrupt index: its MSI-X vector */
#define R_CAPS			0x39640
#define R_DMA_MISC		0x39864
#define DMA_MISC_INT_AUTO_CLEAR	(1u << 2)	/* Intel: issuing the MSI-X clears the status bit */

#define RING_ENABLE		(1u << 31)
#define RING_RAW		(1u << 30)

/* Descriptor dword 2: length:12 eof:4 sof:4 flags:12. */
#define DESC_CRC_ERROR		0x1
#define DESC_COMPLETED		0x2
#define DESC_BUFFER_OVERRUN	0x4	/* RX; on TX the driver's "posted" bit */
#define DESC_INTERRUPT		0x8

/* Cable framing: little-endian header, then the payload. */
#define CABLE_MAGIC		0x5534
#define CABLE_VERSION		1
#define CABLE_HDR		8
#define CABLE_MAX_PAYLOAD	(NHI_FRAME_MAX + 64)
/*
 * The link pushes back, it does not drop: with this much waiting for the relay the TX
 * rings stop taking descriptors (their frames stay in guest memory, the ring fills and
 * the driver waits), as a controller's DMA waits for link credits. Control packets are
 * never held; past CABLE_TX_LIMIT (the relay not reading at all) anything is dropped.
 */
#define CABLE_TX_HIGH		(1 * MiB)
#define CABLE_TX_LIMIT		(4 * MiB)
enum { CABLE_HELLO = 1, CABLE_LINK = 2, CABLE_CTL = 3, CABLE_DATA = 4 };
#define CABLE_DATA_CRC_ERROR	0x1

typedef struct NhiFrame {
	QSIMPLEQ_ENTRY(NhiFrame) next;
	uint16_t len;
	uint8_t sof, eof, flags;
	uint8_t data[];
} NhiFrame;

typedef struct NhiRing {
	uint64_t base;
	uint32_t size;		/* descriptors */
	uint32_t frame_size;	/* RX buffer size (0 means 4096) */
	uint32_t flags;		/* options dword 0 */
	uint32_t masks;		/* RX options dword 1 */
	uint32_t sw;		/* TX: producer; RX: head (first descriptor not posted) */
	uint32_t hw;		/* the next descriptor we complete */
	QSIMPLEQ_HEAD(, NhiFrame) queue;	/* RX frames waiting for a posted buffer */
	uint32_t queued;
	/* RX frame being rebuilt from transport packets (transport-packets=1) */
	uint8_t *part;
	uint32_t part_len;	/* bytes of it so far (all of them, even past NHI_FRAME_MAX) */
	uint32_t part_packets;
	uint8_t part_sof;	/* its first packet's PDF */
	uint8_t part_flags;
} NhiRing;

enum { SOF_FIRST, SOF_ONE_PACKET_ZERO, SOF_ZERO };
static const char *const sof_names[] = { "first", "one-packet-zero", "zero" };

/* The settings a profile gives; UNSET in a property means "the profile's". */
typedef struct NhiSettings {
	uint32_t vendor_id, device_id;
	uint32_t rings, vectors;
	uint32_t packets;	/* split frames into transport packets, rebuild by the RX masks */
	uint32_t sof;		/* SOF_*: the RX descriptor's sof of a rebuilt frame */
	uint32_t rx_queue;	/* frames held when no buffer is posted; 0: dropped at once */
	uint32_t replay;	/* a notify bit set while the interrupt was off fires on enable */
	uint32_t status_gate;	/* a set notify bit holds back the ring's next MSI-X (AMD) */
	uint32_t auto_clear;	/* Intel: MSI-X clears the notify bit; no mask-clear register */
	uint32_t throttle;	/* honour REG_INT_THROTTLING_RATE */
	uint32_t tx_stall;	/* a data frame with a path waits, not completed, while the link is down */
} NhiSettings;

static const struct { const char *name; size_t offset; } nhi_settings[] = {
#define SETTING(f, name) { name, offsetof(NhiSettings, f) }
	SETTING(vendor_id, "vendor-id"), SETTING(device_id, "device-id"), SETTING(rings, "rings"),
	SETTING(vectors, "msix-vectors"), SETTING(packets, "transport-packets"),
	SETTING(rx_queue, "rx-queue"), SETTING(replay, "replay-on-unmask"),
	SETTING(status_gate, "status-gates-msix"), SETTING(auto_clear, "auto-clear"),
	SETTING(throttle, "throttle"), SETTING(tx_stall, "tx-stall-link-down"),
#undef SETTING
};

static uint32_t *nhi_setting(NhiSettings *set, size_t offset)
{
	return (uint32_t *)((char *)set + offset);
}

static const struct { const char *name; NhiSettings set; } nhi_profiles[] = {
	/* today's device: whole frames, a 1024-frame RX queue, replay on unmask */
	{ "lenient", { 0x1b36, 0x4e48, 16, 16, 0, SOF_FIRST, 1024, 1, 0, 0, 0, 0 } },
	/* Intel's vendor ID (auto-clear quirk), a device ID thunderbolt.ko does not know (no ICM) */
	/*
	 * The strict ones still raise a notify bit set while the ring's interrupt was off when it
	 * is enabled again (replay 1: interrupt = notify AND enable): thunderbolt_net unmasks
	 * without looking at its ring and loses no frame on Intel or AMD hosts.
	 * replay-on-unmask=0 is stricter than that (docs/emulator.md).
	 */
	{ "intel", { 0x8086, 0x4e48, 12, 16, 1, SOF_ONE_PACKET_ZERO, 0, 1, 0, 1, 1, 1 } },
	{ "amd", { 0x1b36, 0x4e48, 16, 16, 1, SOF_ONE_PACKET_ZERO, 0, 1, 1, 0, 1, 1 } },
	{ "strix", { 0x1b36, 0x4e48, 3, 16, 1, SOF_ONE_PACKET_ZERO, 0, 1, 1, 0, 1, 1 } },
};

struct Usb4NhiState {
	PCIDevice parent_obj;
	MemoryRegion mmio;
	CharBackend chr;
	QEMUBH *bh;

	NhiRing tx[NHI_RINGS], rx[NHI_RINGS];
	uint32_t int_enable;
	uint32_t int_pending;	/* events while their interrupt was disabled: fired on enable */
	uint32_t notify[2];	/* 3 x rings bits: TX, RX, RX overflow */
	uint32_t raised;	/* status-gates-msix: notify bits set by an MSI-X not yet cleared */
	uint32_t vector[4];
	uint32_t dma_misc;
	uint32_t throttle_rate[NHI_VECTORS];
	int64_t last_fired[NHI_VECTORS];	/* virtual clock, ns */
	uint32_t deferred;	/* vectors waiting for their throttle interval's end */
	QEMUTimer *throttle_timer;
	uint64_t lose_state;	/* the packet-loss fault's random state */

	struct u4_router router;

	/* the cable */
	bool cable_open;
	uint8_t rxbuf[CABLE_HDR + CABLE_MAX_PAYLOAD];
	uint32_t rxlen;
	GByteArray *txbuf;
	guint tx_watch;

	/* settings (QOM properties); set: the resolved ones, prop: as given (UNSET: the profile's) */
	uint64_t uid;
	uint8_t max_gbps, max_lanes;
	char *profile, *sof_name;
	NhiSettings set, prop;
	uint32_t lose_packet_ppm;

	/* statistics (read-only QOM properties "stat-*") */
	uint64_t data_tx, data_rx, data_tx_no_path, data_rx_no_path;
	uint64_t rx_overrun, rx_crc_error, rx_truncated, cable_tx_dropped, cable_bad;
	uint64_t tx_held_back;	/* TX ring passes that stopped for a full cable */
	uint64_t tx_stalled;	/* TX ring passes that stopped for a link that is down */
	uint64_t rx_packets, rx_packet_no_mask, rx_packet_lost, rx_no_buffer;
	uint64_t irq_not_replayed, irq_gated, irq_throttled, irq_coalesced, irq_no_vector;
	unsigned int tx_turn;	/* the data ring served first in the next pass */
};

static const struct { const char *name; size_t offset; } nhi_stats[] = {
#define STAT(f) { "stat-" #f, offsetof(Usb4NhiState, f) }
	STAT(data_tx), STAT(data_rx), STAT(data_tx_no_path), STAT(data_rx_no_path),
	STAT(rx_overrun), STAT(rx_crc_error), STAT(rx_truncated), STAT(cable_tx_dropped),
	STAT(cable_bad), STAT(tx_held_back), STAT(tx_stalled), STAT(rx_packets), STAT(rx_packet_no_mask),
	STAT(rx_packet_lost), STAT(rx_no_buffer), STAT(irq_not_replayed), STAT(irq_gated),
	STAT(irq_throttled), STAT(irq_coalesced), STAT(irq_no_vector),
#undef STAT
};

static const struct { const char *name; size_t offset; } router_stats[] = {
#define STAT(f) { "stat-" #f, offsetof(struct u4r_stats, f) }
	STAT(ctl_from_host), STAT(ctl_to_host), STAT(ctl_bad), STAT(ctl_to_cable),
	STAT(ctl_from_cable), STAT(ctl_dropped_no_link), STAT(plug_events), STAT(unplug_events),
#undef STAT
};

/* ---- interrupts ---- */

static void nhi_send_vector(Usb4NhiState *s, unsigned int vec)
{
	PCIDevice *pdev = PCI_DEVICE(s);

	if (msix_enabled(pdev))
		msix_notify(pdev, vec);
	else if (msi_enabled(pdev))
		msi_notify(pdev, 0);
}

static int64_t nhi_throttle_ns(Usb4NhiState *s, unsigned int vec)
{
	return s->set.throttle ? (int64_t)s->throttle_rate[vec] * 256 : 0;
}

static void nhi_throttle_arm(Usb4NhiState *s)
{
	int64_t when = INT64_MAX;
	unsigned int vec;

	for (vec = 0; vec < NHI_VECTORS; vec++)
		if (s->deferred & (1u << vec))
			when = MIN(when, s->last_fired[vec] + nhi_throttle_ns(s, vec));
	if (when != INT64_MAX)
		timer_mod(s->throttle_timer, when);
}

static void nhi_throttle_timer(void *opaque)
{
	Usb4NhiState *s = opaque;
	int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
	unsigned int vec;

	for (vec = 0; vec < NHI_VECTORS; vec++) {
		if ((s->deferred & (1u << vec)) && now >= s->last_fired[vec] + nhi_throttle_ns(s, vec)) {
			s->deferred &= ~(1u << vec);
			s->last_fired[vec] = now;
			nhi_send_vector(s, vec);
		}
	}
	nhi_throttle_arm(s);
}

/* A vector fires at most once per throttle interval; later events wait for its end, as one. */
static void nhi_fire_vector(Usb4NhiState *s, unsigned int vec)
{
	int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL), gap = nhi_throttle_ns(s, vec);

	if (s->deferred & (1u << vec)) {
		s->irq_coalesced++;
		return;
	}
	if (gap && now < s->last_fired[vec] + gap) {
		s->irq_throttled++;
		s->deferred |= 1u << vec;
		nhi_throttle_arm(s);
		return;
	}
	s->last_fired[vec] = now;
	nhi_send_vector(s, vec);
}

static void nhi_ring_event(Usb4NhiState *s, unsigned int index)
{
	uint32_t bit = 1u << index;
	unsigned int vec = (s->vector[index / 8] >> (index % 8 * 4)) & 0xf;

	s->notify[index / 32] |= 1u << index % 32;
	if (!(s->int_enable & bit)) {
		if (s->set.replay)
			s->int_pending |= bit;
		else
			s->irq_not_replayed++;	/* silicon raises nothing for it later */
		return;
	}
	/*
	 * The gate holds while the status an MSI-X set is not cleared. A status bit set while
	 * the interrupt was off gates nothing: with no replay it would never be cleared (the
	 * driver clears in its MSI-X handler) and a ring polled with its interrupt off (NAPI)
	 * would go deaf for good, which thunderbolt_net on AMD hosts does not.
	 */
	if (s->set.status_gate && (s->raised & bit)) {
		s->irq_gated++;	/* the driver has not cleared the last one (REG_RING_INT_CLEAR) */
		return;
	}
	if (msix_enabled(PCI_DEVICE(s)) && vec >= s->set.vectors) {
		s->irq_no_vector++;
		return;
	}
	if (s->set.auto_clear && (s->dma_misc & DMA_MISC_INT_AUTO_CLEAR))
		s->notify[index / 32] &= ~(1u << index % 32);
	else
		s->raised |= bit;
	nhi_fire_vector(s, msix_enabled(PCI_DEVICE(s)) ? vec : 0);
}

static void nhi_set_int_enable(Usb4NhiState *s, uint32_t val)
{
	uint32_t fire = val & ~s->int_enable & s->int_pending;
	unsigned int index;

	s->int_enable = val;
	/* a ring polled with its interrupt off must hear about what came meanwhile (NAPI) */
	for (index = 0; index < 32; index++) {
		if (fire & (1u << index)) {
			s->int_pending &= ~(1u << index);
			nhi_ring_event(s, index);
		}
	}
}

/* ---- the cable ---- */

static gboolean nhi_cable_writable(void *do_not_use, GIOCondition cond, void *opaque);

static void nhi_cable_flush(Usb4NhiState *s)
{
	int n;

	while (s->txbuf->len) {
		n = qemu_chr_fe_write(&s->chr, s->txbuf->data, s->txbuf->len);
		if (n <= 0)
			break;
		g_byte_array_remove_range(s->txbuf, 0, n);
	}
	if (s->txbuf->len && !s->tx_watch)
		s->tx_watch = qemu_chr_fe_add_watch(&s->chr, G_IO_OUT | G_IO_HUP,
						    nhi_cable_writable, s);
}

static gboolean nhi_cable_writable(void *do_not_use, GIOCondition cond, void *opaque)
{
	Usb4NhiState *s = opaque;

	s->tx_watch = 0;
	nhi_cable_flush(s);
	if (s->txbuf->len < CABLE_TX_HIGH)
		qemu_bh_schedule(s->bh);	/* TX rings held back by a full cable go on */
	return G_SOURCE_REMOVE;
}

/* Never block the main loop on the cable (two QEMUs would wait on each other): queue, bounded. */
static void nhi_cable_send(Usb4NhiState *s, uint8_t type, const void *head, size_t head_len,
			   const void *payload, size_t payload_len)
{
	uint8_t hdr[CABLE_HDR];
	uint32_t len = head_len + payload_len;

	if (!s->cable_open)
		return;
	if (s->txbuf->len + CABLE_HDR + len > CABLE_TX_LIMIT) {
		s->cable_tx_dropped++;
		return;
	}
	stw_le_p(hdr, CABLE_MAGIC);
	hdr[2] = CABLE_VERSION;
	hdr[3] = type;
	stl_le_p(hdr + 4, len);
	g_byte_array_append(s->txbuf, hdr, sizeof(hdr));
	if (head_len)
		g_byte_array_append(s->txbuf, head, head_len);
	if (payload_len)
		g_byte_array_append(s->txbuf, payload, payload_len);
	nhi_cable_flush(s);
}

static void nhi_rx_enqueue(Usb4NhiState *s, unsigned int ring, const uint8_t *data, size_t len,
			   uint8_t sof, uint8_t eof, uint8_t flags)
{
	NhiRing *r = &s->rx[ring];
	NhiFrame *f;

	if (!(r->flags & RING_ENABLE)) {
		s->data_rx_no_path++;
		return;
	}
	if (!s->set.rx_queue) {
		uint32_t posted = r->size ? (r->sw + r->size - r->hw) % r->size : 0;

		if (r->queued >= posted) {
			/* no buffer posted for it: silicon drops the frame and says so */
			s->rx_overrun++;
			s->rx_no_buffer++;
			s->notify[(2 * s->set.rings + ring) / 32] |= 1u << (2 * s->set.rings + ring) % 32;
			return;
		}
	} else if (r->queued >= s->set.rx_queue) {
		/* what a controller does when the host posts no buffers: the frame is lost */
		s->rx_overrun++;
		return;
	}
	f = g_malloc(sizeof(*f) + len);
	f->len = len;
	f->sof = sof;
	f->eof = eof;
	f->flags = flags;
	memcpy(f->data, data, len);
	QSIMPLEQ_INSERT_TAIL(&r->queue, f, next);
	r->queued++;
	qemu_bh_schedule(s->bh);
}

static void nhi_rx_flush(NhiRing *r)
{
	NhiFrame *f;

	while ((f = QSIMPLEQ_FIRST(&r->queue))) {
		QSIMPLEQ_REMOVE_HEAD(&r->queue, next);
		g_free(f);
	}
	r->queued = 0;
	r->part_len = r->part_packets = 0;
}

static bool nhi_lose_packet(Usb4NhiState *s)
{
	if (!s->lose_packet_ppm)
		return false;
	/* xorshift64: reproducible from the uid */
	s->lose_state ^= s->lose_state << 13;
	s->lose_state ^= s->lose_state >> 7;
	s->lose_state ^= s->lose_state << 17;
	return s->lose_state % 1000000 < s->lose_packet_ppm;
}

/*
 * transport-packets=1: a frame crossed the link as packets of at most 256 bytes, each with
 * one PDF: the frame's SOF PDF on all but the last, its EOF PDF on the last (the cable
 * carries the whole frame and both PDFs; the packets are cut here). The RX ring rebuilds
 * frames by its masks (RX options dword 1): a packet whose PDF is in the EOF mask ends a
 * frame, one in the SOF mask adds to it, one in neither is dropped. A lost packet that
 * ended a frame merges it with the next one, as on silicon.
 */
static void nhi_rx_packets(Usb4NhiState *s, unsigned int ring, const uint8_t *data, size_t len,
			   uint8_t sof, uint8_t eof, uint8_t flags)
{
	NhiRing *r = &s->rx[ring];
	uint16_t sof_mask = r->masks >> 16, eof_mask = r->masks;
	size_t off, n;
	uint8_t pdf, d_sof;

	if (!r->part)
		r->part = g_malloc(NHI_FRAME_MAX);
	for (off = 0; off < len; off += n) {
		n = MIN(len - off, NHI_PACKET_MAX);
		pdf = off + n < len ? sof : eof;
		s->rx_packets++;
		if (nhi_lose_packet(s)) {
			s->rx_packet_lost++;
			continue;
		}
		if (r->flags & RING_RAW) {	/* a raw ring gets every packet as it is */
			nhi_rx_enqueue(s, ring, data + off, n, 0, pdf, flags);
			continue;
		}
		if (!((eof_mask | sof_mask) & (1u << pdf))) {
			s->rx_packet_no_mask++;
			continue;
		}
		if (!r->part_packets++) {
			r->part_sof = pdf;
			r->part_flags = 0;
		}
		if (r->part_len < NHI_FRAME_MAX)
			memcpy(r->part + r->part_len, data + off, MIN(n, NHI_FRAME_MAX - r->part_len));
		r->part_len += n;
		if (!(eof_mask & (1u << pdf)))
			continue;
		r->part_flags |= flags;
		if (r->part_len > NHI_FRAME_MAX) {
			r->part_flags |= DESC_BUFFER_OVERRUN;
			s->rx_truncated++;
		}
		d_sof = s->set.sof == SOF_ZERO ? 0 :
			s->set.sof == SOF_ONE_PACKET_ZERO && r->part_packets == 1 ? 0 : r->part_sof;
		nhi_rx_enqueue(s, ring, r->part, MIN(r->part_len, NHI_FRAME_MAX), d_sof, pdf,
			       r->part_flags);
		r->part_len = r->part_packets = 0;
	}
}

static void nhi_cable_message(Usb4NhiState *s, uint8_t type, const uint8_t *p, uint32_t len)
{
	int ring;

	switch (type) {
	case CABLE_LINK:
		if (len < 3)
			goto bad;
		u4r_set_link(&s->router, p[0], p[1], p[2]);
		qemu_bh_schedule(s->bh);	/* TX stalled for the link goes on */
		return;
	case CABLE_CTL:
		if (len < 4)
			goto bad;
		u4r_from_cable(&s->router, p[0], p + 4, len - 4);
		return;
	case CABLE_DATA:
		if (len < 8 + 1 || len > 8 + NHI_FRAME_MAX)
			goto bad;
		ring = u4r_route_rx(&s->router, lduw_le_p(p));
		if (ring <= 0) {	/* ring 0 is the control ring: never a path's end */
			s->data_rx_no_path++;
			return;
		}
		s->data_rx++;
		(s->set.packets ? nhi_rx_packets : nhi_rx_enqueue)(s, ring, p + 8, len - 8,
			p[2] & 0xf, p[3] & 0xf, p[4] & CABLE_DATA_CRC_ERROR ? DESC_CRC_ERROR : 0);
		return;
	default:
		return;	/* HELLO is for the relay; unknown types are for later versions */
	}
bad:
	s->cable_bad++;
}

static int nhi_cable_can_receive(void *opaque)
{
	Usb4NhiState *s = opaque;

	return sizeof(s->rxbuf) - s->rxlen;
}

static void nhi_cable_receive(void *opaque, const uint8_t *buf, int size)
{
	Usb4NhiState *s = opaque;
	uint32_t len, used = 0;

	size = MIN(size, (int)(sizeof(s->rxbuf) - s->rxlen));
	memcpy(s->rxbuf + s->rxlen, buf, size);
	s->rxlen += size;
	while (s->rxlen - used >= CABLE_HDR) {
		const uint8_t *h = s->rxbuf + used;

		len = ldl_le_p(h + 4);
		if (lduw_le_p(h) != CABLE_MAGIC || h[2] != CABLE_VERSION || len > CABLE_MAX_PAYLOAD) {
			/* out of step with the relay: drop what we have; the relay resynchronises */
			s->cable_bad++;
			s->rxlen = 0;
			return;
		}
		if (s->rxlen - used < CABLE_HDR + len)
			break;
		nhi_cable_message(s, h[3], h + CABLE_HDR, len);
		used += CABLE_HDR + len;
	}
	memmove(s->rxbuf, s->rxbuf + used, s->rxlen - used);
	s->rxlen -= used;
}

static void nhi_cable_event(void *opaque, QEMUChrEvent event)
{
	Usb4NhiState *s = opaque;
	uint8_t hello[12] = { 0 };

	if (event == CHR_EVENT_OPENED) {
		s->cable_open = true;
		s->rxlen = 0;
		stq_le_p(hello, s->uid);
		hello[8] = s->max_gbps;
		hello[9] = s->max_lanes;
		nhi_cable_send(s, CABLE_HELLO, hello, sizeof(hello), NULL, 0);
	} else if (event == CHR_EVENT_CLOSED) {
		s->cable_open = false;
		s->rxlen = 0;
		g_byte_array_set_size(s->txbuf, 0);
		u4r_set_link(&s->router, false, 0, 0);
		qemu_bh_schedule(s->bh);	/* TX rings held back go on (into nothing) */
	}
}

/* Router callbacks. */
static void nhi_ctl_to_host(void *opaque, uint8_t pdf, const uint8_t *pkt, size_t len)
{
	/* raw ring: the PDF travels in eof, sof stays 0 (the driver checks) */
	nhi_rx_enqueue(opaque, 0, pkt, len, 0, pdf, 0);
}

static void nhi_ctl_to_cable(void *opaque, uint8_t pdf, const uint8_t *pkt, size_t len)
{
	uint8_t head[4] = { pdf };

	nhi_cable_send(opaque, CABLE_CTL, head, sizeof(head), pkt, len);
}

static const struct u4r_ops nhi_router_ops = {
	.to_host = nhi_ctl_to_host,
	.to_cable = nhi_ctl_to_cable,
};

/* ---- rings ---- */

#define NHI_BH_BUDGET 256	/* descriptors per ring per pass; then let the main loop breathe */

/* Ring @hop has descriptors to send. */
static bool nhi_tx_pending(Usb4NhiState *s, unsigned int hop)
{
	NhiRing *r = &s->tx[hop];

	return (r->flags & RING_ENABLE) && r->size && r->hw != r->sw;
}

/* A full cable holds data rings back, never control. */
static bool nhi_tx_held(Usb4NhiState *s, unsigned int hop)
{
	return hop && s->cable_open && s->txbuf->len >= CABLE_TX_HIGH;
}

/*
 * Unplugged, a path's frames have no link credits to go with (tx-stall-link-down):
 * they wait in the ring, never completed, until the link is back or the driver
 * stops the ring (whose software then cancels them). Frames with no path are
 * dropped and completed as before.
 */
static bool nhi_tx_stalled(Usb4NhiState *s, unsigned int hop)
{
	return hop && s->set.tx_stall && !s->router.link_up && u4r_tx_path_set(&s->router, hop);
}

/* Send ring @hop's next descriptor, if it has one and may; *irq when it asked for an interrupt. */
static bool nhi_tx_one(Usb4NhiState *s, unsigned int hop, bool *irq)
{
	NhiRing *r = &s->tx[hop];
	uint8_t buf[NHI_FRAME_MAX];
	dma_addr_t desc = r->base + 16ull * r->hw;
	uint32_t d2, len;
	uint64_t phys;
	uint8_t head[8];
	int hopid;

	if (!nhi_tx_pending(s, hop))
		return false;
	if (nhi_tx_held(s, hop)) {
		s->tx_held_back++;	/* nhi_cable_writable() schedules us again */
		return false;
	}
	if (nhi_tx_stalled(s, hop)) {
		s->tx_stalled++;	/* the link's return schedules us again */
		return false;
	}
	if (ldq_le_pci_dma(PCI_DEVICE(s), desc, &phys, MEMTXATTRS_UNSPECIFIED) ||
	    ldl_le_pci_dma(PCI_DEVICE(s), desc + 8, &d2, MEMTXATTRS_UNSPECIFIED))
		return false;	/* the ring's memory is gone: stop, as a DMA error would */
	len = d2 & 0xfff;
	if (!len)
		len = NHI_FRAME_MAX;
	pci_dma_read(PCI_DEVICE(s), phys, buf, len);
	if (hop == 0) {
		u4r_from_host(&s->router, (d2 >> 12) & 0xf, buf, len);
	} else if ((hopid = u4r_route_tx(&s->router, hop)) >= 0) {
		stw_le_p(head, hopid);
		head[2] = (d2 >> 16) & 0xf;	/* sof */
		head[3] = (d2 >> 12) & 0xf;	/* eof */
		head[4] = 0;
		head[5] = head[6] = head[7] = 0;
		s->data_tx++;
		nhi_cable_send(s, CABLE_DATA, head, sizeof(head), buf, len);
	} else {
		s->data_tx_no_path++;	/* hardware drops it too; the descriptor completes */
	}
	if (d2 & (DESC_INTERRUPT << 20))
		*irq = true;
	d2 |= DESC_COMPLETED << 20;
	stl_le_pci_dma(PCI_DEVICE(s), desc + 8, d2, MEMTXATTRS_UNSPECIFIED);
	r->hw = (r->hw + 1) % r->size;
	return true;
}

/*
 * Control first, then the data rings take turns a frame at a time, as a
 * controller's TX arbiter does: when the cable is the bottleneck every ring
 * gets its share of it. (Serving the rings one after the other lets the first
 * fill the cable each time it drains, and the others' frames wait behind: rails
 * far behind each other, which real controllers do not do.) Returns true when
 * a ring could send more now.
 */
static bool nhi_tx_rings(Usb4NhiState *s)
{
	bool irq[NHI_RINGS] = { false }, sent = true, more = false;
	unsigned int done, i, hop;

	for (done = 0; done < NHI_BH_BUDGET && nhi_tx_one(s, 0, &irq[0]); done++)
		;
	for (done = 0; sent && done < NHI_BH_BUDGET; done++) {
		sent = false;
		for (i = 0; i < s->set.rings - 1; i++) {
			hop = 1 + (s->tx_turn + i) % (s->set.rings - 1);
			sent |= nhi_tx_one(s, hop, &irq[hop]);
		}
	}
	s->tx_turn = (s->tx_turn + 1) % MAX(s->set.rings - 1, 1);	/* a round cut short favours none */
	for (hop = 0; hop < s->set.rings; hop++) {
		if (irq[hop])
			nhi_ring_event(s, hop);
		more |= nhi_tx_pending(s, hop) && !nhi_tx_held(s, hop) && !nhi_tx_stalled(s, hop);
	}
	return more;
}

static bool nhi_rx_ring(Usb4NhiState *s, unsigned int hop)
{
	NhiRing *r = &s->rx[hop];
	uint32_t bufsize = r->frame_size ? r->frame_size : NHI_FRAME_MAX;
	unsigned int done = 0;
	uint32_t len, flags, d2;
	uint64_t phys;
	NhiFrame *f;

	if (!(r->flags & RING_ENABLE) || !r->size)
		return false;
	while ((f = QSIMPLEQ_FIRST(&r->queue)) && r->hw != r->sw && done < NHI_BH_BUDGET) {
		dma_addr_t desc = r->base + 16ull * r->hw;

		QSIMPLEQ_REMOVE_HEAD(&r->queue, next);
		r->queued--;
		if (ldq_le_pci_dma(PCI_DEVICE(s), desc, &phys, MEMTXATTRS_UNSPECIFIED))
			phys = 0;
		len = MIN(f->len, bufsize);
		flags = DESC_COMPLETED | f->flags;
		if (len < f->len) {
			flags |= DESC_BUFFER_OVERRUN;
			s->rx_truncated++;
		}
		if (f->flags & DESC_CRC_ERROR)
			s->rx_crc_error++;
		pci_dma_write(PCI_DEVICE(s), phys, f->data, len);
		d2 = (len & 0xfff) | (uint32_t)f->eof << 12 | (uint32_t)f->sof << 16 | flags << 20;
		stl_le_pci_dma(PCI_DEVICE(s), desc + 8, d2, MEMTXATTRS_UNSPECIFIED);
		stl_le_pci_dma(PCI_DEVICE(s), desc + 12, 0, MEMTXATTRS_UNSPECIFIED);
		g_free(f);
		r->hw = (r->hw + 1) % r->size;
		done++;
	}
	if (done)
		nhi_ring_event(s, s->set.rings + hop);
	return done == NHI_BH_BUDGET;
}

static void nhi_bh(void *opaque)
{
	Usb4NhiState *s = opaque;
	bool more = nhi_tx_rings(s);
	unsigned int hop;

	for (hop = 0; hop < s->set.rings; hop++)
		more |= nhi_rx_ring(s, hop);
	if (more)
		qemu_bh_schedule(s->bh);
}

/* ---- registers ---- */

static void nhi_ring_options(Usb4NhiState *s, NhiRing *r, uint32_t val)
{
	bool was = r->flags & RING_ENABLE;

	r->flags = val;
	if (!!(val & RING_ENABLE) != was) {
		/* a (re)started ring begins at descriptor 0 with nothing stale queued */
		r->hw = 0;
		r->sw = 0;
		nhi_rx_flush(r);
	}
	qemu_bh_schedule(s->bh);
}

static uint64_t nhi_mmio_read(void *opaque, hwaddr addr, unsigned int size)
{
	Usb4NhiState *s = opaque;
	NhiRing *r;
	uint32_t val;

	if (addr < R_TX_RING + 16 * s->set.rings ||
	    (addr >= R_RX_RING && addr < R_RX_RING + 16 * s->set.rings)) {
		bool tx = addr < R_RX_RING;

		r = tx ? &s->tx[addr / 16] : &s->rx[(addr - R_RX_RING) / 16];
		switch (addr % 16) {
		case 0: return (uint32_t)r->base;
		case 4: return r->base >> 32;
		case 8: return tx ? r->sw << 16 | r->hw : r->hw << 16 | r->sw;
		default: return tx ? r->size : r->frame_size << 16 | r->size;
		}
	}
	if (addr >= R_TX_OPTIONS && addr < R_TX_OPTIONS + 32 * s->set.rings)
		return addr % 32 == 0 ? s->tx[(addr - R_TX_OPTIONS) / 32].flags : 0;
	if (addr >= R_RX_OPTIONS && addr < R_RX_OPTIONS + 32 * s->set.rings) {
		r = &s->rx[(addr - R_RX_OPTIONS) / 32];
		return addr % 32 == 0 ? r->flags : addr % 32 == 4 ? r->masks : 0;
	}
	switch (addr) {
	case R_NOTIFY:
	case R_NOTIFY + 4:
		val = s->notify[(addr - R_NOTIFY) / 4];
		s->notify[(addr - R_NOTIFY) / 4] = 0;	/* read-to-clear */
		if (addr == R_NOTIFY)
			s->raised &= ~val;
		return val;
	case R_INT_ENABLE:
		return s->int_enable;
	case R_INT_VECTOR ... R_INT_VECTOR + 12:
		return s->vector[(addr - R_INT_VECTOR) / 4];
	case R_INT_THROTTLE ... R_INT_THROTTLE + 4 * (NHI_VECTORS - 1):
		return s->throttle_rate[(addr - R_INT_THROTTLE) / 4];
	case R_CAPS:
		return s->set.rings | 0x20 << 16;	/* version below USB4 v2: no reset register */
	case R_DMA_MISC:
		return s->dma_misc;
	default:
		return 0;
	}
}

static void nhi_mmio_write(void *opaque, hwaddr addr, uint64_t val64, unsigned int size)
{
	Usb4NhiState *s = opaque;
	uint32_t val = val64;
	NhiRing *r;

	if (addr < R_TX_RING + 16 * s->set.rings ||
	    (addr >= R_RX_RING && addr < R_RX_RING + 16 * s->set.rings)) {
		bool tx = addr < R_RX_RING;

		r = tx ? &s->tx[addr / 16] : &s->rx[(addr - R_RX_RING) / 16];
		switch (addr % 16) {
		case 0:
			r->base = (r->base & ~0xffffffffull) | val;
			break;
		case 4:
			r->base = (r->base & 0xffffffffull) | (uint64_t)val << 32;
			break;
		case 8:
			/* the driver's index: TX producer in the high half, RX head in the low one */
			r->sw = tx ? val >> 16 : val & 0xffff;
			if (r->size)
				r->sw %= r->size;
			qemu_bh_schedule(s->bh);
			break;
		default:
			r->size = val & 0xffff;
			if (!tx)
				r->frame_size = val >> 16;
			break;
		}
		return;
	}
	if (addr >= R_TX_OPTIONS && addr < R_TX_OPTIONS + 32 * s->set.rings) {
		if (addr % 32 == 0)
			nhi_ring_options(s, &s->tx[(addr - R_TX_OPTIONS) / 32], val);
		return;
	}
	if (addr >= R_RX_OPTIONS && addr < R_RX_OPTIONS + 32 * s->set.rings) {
		r = &s->rx[(addr - R_RX_OPTIONS) / 32];
		if (addr % 32 == 0)
			nhi_ring_options(s, r, val);
		else if (addr % 32 == 4)
			r->masks = val;
		return;
	}
	switch (addr) {
	case R_INT_CLEAR:
	case R_INT_CLEAR + 4:
		s->notify[(addr - R_INT_CLEAR) / 4] &= ~val;
		if (addr == R_INT_CLEAR)
			s->raised &= ~val;
		break;
	case R_INT_ENABLE:
		nhi_set_int_enable(s, val);
		break;
	case R_INT_MASK_CLEAR:
		if (!s->set.auto_clear)	/* Intel's driver masks by RMW of the enable register */
			s->int_enable &= ~val;
		break;
	case R_INT_VECTOR ... R_INT_VECTOR + 12:
		s->vector[(addr - R_INT_VECTOR) / 4] = val;
		break;
	case R_INT_THROTTLE ... R_INT_THROTTLE + 4 * (NHI_VECTORS - 1):
		s->throttle_rate[(addr - R_INT_THROTTLE) / 4] = val;
		break;
	case R_DMA_MISC:
		s->dma_misc = val;
		break;
	default:
		break;	/* the firmware mailboxes: not modelled */
	}
}

static const MemoryRegionOps nhi_mmio_ops = {
	.read = nhi_mmio_read,
	.write = nhi_mmio_write,
	.endianness = DEVICE_LITTLE_ENDIAN,
	.valid = { .min_access_size = 4, .max_access_size = 4 },
	.impl = { .min_access_size = 4, .max_access_size = 4 },
};

/* ---- profiles ---- */

static bool nhi_resolve_settings(Usb4NhiState *s, Error **errp)
{
	const char *name = s->profile ? s->profile : "lenient";
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(nhi_profiles); i++)
		if (!strcmp(nhi_profiles[i].name, name))
			break;
	if (i == ARRAY_SIZE(nhi_profiles)) {
		error_setg(errp, "usb4-nhi: profile=%s: not lenient, intel, amd or strix", name);
		return false;
	}
	s->set = nhi_profiles[i].set;
	for (i = 0; i < ARRAY_SIZE(nhi_settings); i++)
		if (*nhi_setting(&s->prop, nhi_settings[i].offset) != UNSET)
			*nhi_setting(&s->set, nhi_settings[i].offset) =
				*nhi_setting(&s->prop, nhi_settings[i].offset);
	if (s->prop.sof != UNSET)
		s->set.sof = s->prop.sof;
	/* the TX and RX interrupt bits share one enable dword (RING_INTERRUPT_REG_COUNT) */
	if (s->set.rings < 2 || s->set.rings > NHI_RINGS) {
		error_setg(errp, "usb4-nhi: rings must be 2..%d", NHI_RINGS);
		return false;
	}
	if (s->set.vectors < 1 || s->set.vectors > NHI_VECTORS) {
		error_setg(errp, "usb4-nhi: msix-vectors must be 1..%d", NHI_VECTORS);
		return false;
	}
	return true;
}

/* A settable run-time value (rx-queue) or one read at realize; reading gives the resolved one. */
static void nhi_get_setting(Object *obj, Visitor *v, const char *name, void *opaque, Error **errp)
{
	Usb4NhiState *s = USB4_NHI(obj);
	size_t off = (size_t)opaque;
	uint32_t val = *nhi_setting(DEVICE(obj)->realized ? &s->set : &s->prop, off);

	visit_type_uint32(v, name, &val, errp);
}

static void nhi_set_setting(Object *obj, Visitor *v, const char *name, void *opaque, Error **errp)
{
	Usb4NhiState *s = USB4_NHI(obj);
	size_t off = (size_t)opaque;
	uint32_t val;

	if (!visit_type_uint32(v, name, &val, errp))
		return;
	if (DEVICE(obj)->realized && off != offsetof(NhiSettings, rx_queue)) {
		error_setg(errp, "usb4-nhi: %s is set before the device starts", name);
		return;
	}
	*nhi_setting(DEVICE(obj)->realized ? &s->set : &s->prop, off) = val;
}

static char *nhi_get_profile(Object *obj, Error **errp)
{
	Usb4NhiState *s = USB4_NHI(obj);

	return g_strdup(s->profile ? s->profile : "lenient");
}

static void nhi_set_profile(Object *obj, const char *value, Error **errp)
{
	Usb4NhiState *s = USB4_NHI(obj);

	g_free(s->profile);
	s->profile = g_strdup(value);
}

static char *nhi_get_sof(Object *obj, Error **errp)
{
	Usb4NhiState *s = USB4_NHI(obj);
	uint32_t sof = DEVICE(obj)->realized ? s->set.sof : s->prop.sof;

	return g_strdup(sof < ARRAY_SIZE(sof_names) ? sof_names[sof] : "");
}

static void nhi_set_sof(Object *obj, const char *value, Error **errp)
{
	Usb4NhiState *s = USB4_NHI(obj);
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sof_names); i++) {
		if (!strcmp(value, sof_names[i])) {
			s->prop.sof = i;
			return;
		}
	}
	error_setg(errp, "usb4-nhi: sof=%s: not first, one-packet-zero or zero", value);
}

/* ---- device ---- */

static void nhi_reset(DeviceState *dev)
{
	Usb4NhiState *s = USB4_NHI(dev);
	unsigned int i;

	for (i = 0; i < NHI_RINGS; i++) {
		nhi_rx_flush(&s->rx[i]);
		memset(&s->tx[i], 0, offsetof(NhiRing, queue));
		memset(&s->rx[i], 0, offsetof(NhiRing, queue));
	}
	s->int_enable = s->int_pending = s->dma_misc = s->deferred = s->raised = 0;
	memset(s->notify, 0, sizeof(s->notify));
	memset(s->vector, 0, sizeof(s->vector));
	memset(s->throttle_rate, 0, sizeof(s->throttle_rate));
	memset(s->last_fired, 0, sizeof(s->last_fired));
	timer_del(s->throttle_timer);
	u4r_reset(&s->router);
}

static void nhi_realize(PCIDevice *pdev, Error **errp)
{
	Usb4NhiState *s = USB4_NHI(pdev);
	unsigned int i;

	if (!s->uid) {
		error_setg(errp, "usb4-nhi: set uid= (a 64-bit value, different in every VM: the host's UUID derives from it)");
		return;
	}
	if ((s->max_gbps != 10 && s->max_gbps != 20) || s->max_lanes < 1 || s->max_lanes > 2) {
		error_setg(errp, "usb4-nhi: max-gbps must be 10 or 20 and max-lanes 1 or 2");
		return;
	}
	if (!nhi_resolve_settings(s, errp))
		return;
	pci_config_set_vendor_id(pdev->config, s->set.vendor_id);
	pci_config_set_device_id(pdev->config, s->set.device_id);
	/* class 0x0c0340: USB4 host interface, which thunderbolt.ko matches on */
	pci_config_set_prog_interface(pdev->config, 0x40);
	if (s->set.vectors < NHI_MSIX_MIN && msi_init(pdev, 0, 1, true, false, errp))
		return;	/* the driver's fallback: one MSI, the notify register read to clear */
	if (msix_init_exclusive_bar(pdev, s->set.vectors, 2, errp))
		return;
	for (i = 0; i < s->set.vectors; i++)
		msix_vector_use(pdev, i);	/* or msix_notify() stays silent */
	memory_region_init_io(&s->mmio, OBJECT(s), &nhi_mmio_ops, s, "usb4-nhi-mmio", NHI_BAR_SIZE);
	pci_register_bar(pdev, 0, PCI_BASE_ADDRESS_SPACE_MEMORY, &s->mmio);

	for (i = 0; i < NHI_RINGS; i++) {
		QSIMPLEQ_INIT(&s->tx[i].queue);
		QSIMPLEQ_INIT(&s->rx[i].queue);
	}
	s->txbuf = g_byte_array_new();
	s->bh = qemu_bh_new_guarded(nhi_bh, s, &DEVICE(pdev)->mem_reentrancy_guard);
	s->throttle_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, nhi_throttle_timer, s);
	s->lose_state = s->uid | 1;
	u4r_init(&s->router, s->uid, s->set.rings, s->max_gbps, s->max_lanes, &nhi_router_ops, s);
	if (qemu_chr_fe_backend_connected(&s->chr))
		qemu_chr_fe_set_handlers(&s->chr, nhi_cable_can_receive, nhi_cable_receive,
					 nhi_cable_event, NULL, s, NULL, true);
}

static void nhi_exit(PCIDevice *pdev)
{
	Usb4NhiState *s = USB4_NHI(pdev);
	unsigned int i;

	qemu_chr_fe_deinit(&s->chr, false);
	if (s->tx_watch)
		g_source_remove(s->tx_watch);
	for (i = 0; i < NHI_RINGS; i++) {
		nhi_rx_flush(&s->rx[i]);
		g_free(s->rx[i].part);
	}
	g_byte_array_free(s->txbuf, true);
	qemu_bh_delete(s->bh);
	timer_free(s->throttle_timer);
	msix_uninit_exclusive_bar(pdev);
	msi_uninit(pdev);
}

static void nhi_instance_init(Object *obj)
{
	Usb4NhiState *s = USB4_NHI(obj);
	unsigned int i;

	s->max_gbps = 20;
	s->max_lanes = 1;
	object_property_add_uint64_ptr(obj, "uid", &s->uid, OBJ_PROP_FLAG_READWRITE);
	object_property_add_uint8_ptr(obj, "max-gbps", &s->max_gbps, OBJ_PROP_FLAG_READWRITE);
	object_property_add_uint8_ptr(obj, "max-lanes", &s->max_lanes, OBJ_PROP_FLAG_READWRITE);
	object_property_add_str(obj, "profile", nhi_get_profile, nhi_set_profile);
	object_property_add_str(obj, "sof", nhi_get_sof, nhi_set_sof);
	/* the fault: transport packets lost per million (transport-packets=1); at run time too */
	object_property_add_uint32_ptr(obj, "lose-packet-ppm", &s->lose_packet_ppm,
				       OBJ_PROP_FLAG_READWRITE);
	/* each setting of the profile, overridable; UNSET until given */
	for (i = 0; i < ARRAY_SIZE(nhi_settings); i++) {
		*nhi_setting(&s->prop, nhi_settings[i].offset) = UNSET;
		object_property_add(obj, nhi_settings[i].name, "uint32", nhi_get_setting,
				    nhi_set_setting, NULL, (void *)nhi_settings[i].offset);
	}
	s->prop.sof = UNSET;
	for (i = 0; i < ARRAY_SIZE(nhi_stats); i++)
		object_property_add_uint64_ptr(obj, nhi_stats[i].name,
					       (uint64_t *)((char *)s + nhi_stats[i].offset),
					       OBJ_PROP_FLAG_READ);
	for (i = 0; i < ARRAY_SIZE(router_stats); i++)
		object_property_add_uint64_ptr(obj, router_stats[i].name,
					       (uint64_t *)((char *)&s->router.stats + router_stats[i].offset),
					       OBJ_PROP_FLAG_READ);
}

static Property nhi_properties[] = {
	DEFINE_PROP_CHR("chardev", Usb4NhiState, chr),
	DEFINE_PROP_END_OF_LIST(),
};

static const VMStateDescription nhi_vmstate = {
	.name = TYPE_USB4_NHI,
	.unmigratable = 1,	/* the cable and the peer's state cannot move */
};

static void nhi_class_init(ObjectClass *klass, void *data)
{
	DeviceClass *dc = DEVICE_CLASS(klass);
	PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

	k->realize = nhi_realize;
	k->exit = nhi_exit;
	k->vendor_id = PCI_VENDOR_ID_REDHAT;	/* 0x1b36, QEMU's; an emulated part, no real ID */
	k->device_id = 0x4e48;
	k->revision = 1;
	k->class_id = PCI_CLASS_SERIAL_USB;
	dc->desc = "USB4 host interface (NHI) with a host router and one cable (tbverbs)";
	dc->reset = nhi_reset;
	dc->vmsd = &nhi_vmstate;
	device_class_set_props(dc, nhi_properties);
	set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

static const TypeInfo nhi_info = {
	.name = TYPE_USB4_NHI,
	.parent = TYPE_PCI_DEVICE,
	.instance_size = sizeof(Usb4NhiState),
	.instance_init = nhi_instance_init,
	.class_init = nhi_class_init,
	.interfaces = (InterfaceInfo[]) {
		{ INTERFACE_CONVENTIONAL_PCI_DEVICE },
		{ },
	},
};

static void nhi_register_types(void)
{
	type_register_static(&nhi_info);
}

type_init(nhi_register_types)
