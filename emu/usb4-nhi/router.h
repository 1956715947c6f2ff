/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The host router behind the emulated USB4 host interface: its configuration spaces, the control
 * packets that read and write them, plug events, and the routing table (HOPS) that joins NHI rings
 * to the cable. Portable C (no QEMU headers) so host unit tests can drive it.
 *
 * Register layouts and behaviour follow what Linux's thunderbolt.ko reads and writes (see
 * docs/emulator.md); names and values here are our own, not copied from the kernel's headers.
 */
#ifndef TBV_EMU_ROUTER_H
#define TBV_EMU_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Adapters: 0 control, 1 the lane adapter (the cable), 2 the NHI adapter (the rings). */
#define U4R_PORT_CTL	0
#define U4R_PORT_LANE	1
#define U4R_PORT_NHI	2
#define U4R_PORTS	3
#define U4R_SPACE_DWORDS 128	/* stored dwords per config space; beyond reads 0 */
#define U4R_HOPIDS	64	/* HOPS entries per adapter (2 dwords each) */

/* Control packet types (the PDF, carried in the ring descriptor's eof field). */
enum u4r_pdf {
	U4R_PDF_READ = 1,
	U4R_PDF_WRITE = 2,
	U4R_PDF_ERROR = 3,
	U4R_PDF_NOTIFY_ACK = 4,
	U4R_PDF_EVENT = 5,
	U4R_PDF_XDOMAIN_REQ = 6,
	U4R_PDF_XDOMAIN_RESP = 7,
	U4R_PDF_RESET = 9,
};

/* Error codes in an ERROR packet (only the ones we send). */
enum u4r_error {
	U4R_ERR_PORT_NOT_CONNECTED = 0,
	U4R_ERR_INVALID_CONFIG_SPACE = 2,
};

#define U4R_CTL_MAX	256	/* a control packet with its CRC fits one 256-byte raw frame */

struct u4r_stats {
	uint64_t ctl_from_host;		/* control packets the host sent */
	uint64_t ctl_to_host;		/* control packets delivered to the host */
	uint64_t ctl_bad;		/* dropped: bad CRC, length or header */
	uint64_t ctl_to_cable;		/* XDomain packets sent to the peer */
	uint64_t ctl_from_cable;	/* XDomain packets from the peer */
	uint64_t ctl_dropped_no_link;	/* XDomain packets for the peer while the link was down */
	uint64_t plug_events;
	uint64_t unplug_events;
};

struct u4r_ops {
	/* A control packet for the host (RX ring 0): big-endian dwords, CRC included. */
	void (*to_host)(void *opaque, uint8_t pdf, const uint8_t *pkt, size_t len);
	/* An XDomain packet for the peer, as the host sent it (CRC included). */
	void (*to_cable)(void *opaque, uint8_t pdf, const uint8_t *pkt, size_t len);
};

struct u4_router {
	uint32_t router_cs[U4R_SPACE_DWORDS];
	uint32_t port_cs[U4R_PORTS][U4R_SPACE_DWORDS];
	uint32_t hops[U4R_PORTS][2 * U4R_HOPIDS];
	uint64_t uid;
	uint8_t hop_count;		/* NHI rings, for the NHI adapter's max HopID */
	uint8_t max_gbps;		/* per lane: 10 (Gen2) or 20 (Gen3) */
	uint8_t max_lanes;		/* 1 or 2 */
	bool link_up;
	uint8_t gbps, lanes;		/* as trained, while link_up */
	bool reset_released;		/* the host released the port's reset (DPR) once */
	bool link_reported;		/* the last plug/unplug event the host was sent said "up" */
	const struct u4r_ops *ops;
	void *opaque;
	struct u4r_stats stats;
};

void u4r_init(struct u4_router *r, uint64_t uid, uint8_t hop_count, uint8_t max_gbps,
	      uint8_t max_lanes, const struct u4r_ops *ops, void *opaque);
/* Power-on register contents (link state and statistics are kept). */
void u4r_reset(struct u4_router *r);

/* A control packet the host posted on TX ring 0 (pdf from the descriptor, CRC included). */
void u4r_from_host(struct u4_router *r, uint8_t pdf, const uint8_t *pkt, size_t len);
/* A control packet from the peer over the cable. */
void u4r_from_cable(struct u4_router *r, uint8_t pdf, const uint8_t *pkt, size_t len);
/* The cable's link state changed (gbps/lanes: as trained, ignored when down). */
void u4r_set_link(struct u4_router *r, bool up, uint8_t gbps, uint8_t lanes);

/* Routing: the cable HopID a frame from TX ring `ring` leaves on, or -1 if no enabled path. */
int u4r_route_tx(const struct u4_router *r, unsigned int ring);
/* Whether TX ring `ring` has an enabled path to the cable, the link up or not. */
bool u4r_tx_path_set(const struct u4_router *r, unsigned int ring);
/* The RX ring a frame arriving from the cable on HopID `hopid` goes to, or -1. */
int u4r_route_rx(const struct u4_router *r, unsigned int hopid);

/* CRC32C as the control channel uses it (stored big-endian after the packet). */
uint32_t u4r_crc32c(const uint8_t *buf, size_t len);

#endif
