// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The emulated host router: config spaces, control packets, plug events, HOPS routing.
 * See router.h. Everything here runs in QEMU's main loop (or a unit test), never concurrently.
 */
#include <string.h>

#include "router.h"

/* Header dword 0: route_hi in bits 21:0; bit 31 marks packets that come from a router. */
#define HDR_FROM_ROUTER		(1u << 31)
#define ROUTE_HI_MASK		0x3fffffu

/* Config address dword of READ/WRITE: offset:13 length:6 port:6 space:2 seq:2 zero:3. */
#define ADDR_OFFSET(a)		((a) & 0x1fff)
#define ADDR_LENGTH(a)		(((a) >> 13) & 0x3f)
#define ADDR_PORT(a)		(((a) >> 19) & 0x3f)
#define ADDR_SPACE(a)		(((a) >> 25) & 0x3)
#define ADDR_PORT_MASK		(0x3fu << 19)

enum { SPACE_HOPS = 0, SPACE_PORT = 1, SPACE_ROUTER = 2, SPACE_COUNTERS = 3 };

/* Router config space (dword offsets) and bits the driver uses. */
#define RCS_3_VALID		(1u << 31)
#define RCS_5			5
#define RCS_5_SLEEP		(1u << 0)
#define RCS_6			6
#define RCS_6_SLEEP_READY	(1u << 0)
#define RCS_6_NO_TBT3		(1u << 1)
#define RCS_6_ROUTER_READY	(1u << 24)
#define RCS_6_CONFIG_READY	(1u << 25)
#define RCS_7_UID_LO		7
#define RCS_8_UID_HI		8
#define RCS_26_OP		26
#define RCS_26_OP_NOT_SUPPORTED	(1u << 30)
#define RCS_26_OP_VALID		(1u << 31)
#define ROUTER_CAP_TMU		0x40	/* the only router capability: TMU, id 3 */
#define CAP_ID_TMU		3

/* Adapter config space. */
#define ADP_TYPE_LANE		0x000001
#define ADP_TYPE_NHI		0x000002
#define ADP_4_TOTAL_BUFFERS(n)	((uint32_t)(n) << 20)
#define ADP_5_MAX_HOPIDS(n)	((uint32_t)(n) | (uint32_t)(n) << 11)
#define ADP_5_HOTPLUG_DISABLE	(1u << 31)
#define LANE_CAP		0x10	/* lane adapter capability, id 1 */
#define CAP_ID_LANE		1
#define LANE_1_SPEED_SHIFT	16
#define LANE_1_SPEED_GEN3	0x4	/* 20 Gb/s per lane */
#define LANE_1_SPEED_GEN2	0x8	/* 10 Gb/s per lane */
#define LANE_1_WIDTH_SHIFT	20
#define LANE_1_STATE_SHIFT	26
#define LANE_1_STATUS_MASK	(0xfu << 16 | 0x3fu << 20 | 0xfu << 26)
#define LANE_STATE_UP		2
#define LANE_STATE_UNPLUGGED	7
#define USB4_CAP		0x20	/* USB4 port capability, id 6 */
#define CAP_ID_USB4		6
#define PORT_1			1	/* sideband access */
#define PORT_1_TARGET(v)	(((v) >> 16) & 7)
#define PORT_1_NOT_RESPONDING	(1u << 25)
#define PORT_1_PENDING		(1u << 31)
#define PORT_18			18
#define PORT_18_BONDING_ENABLED	(1u << 8)
#define PORT_18_CABLE_USB4	(1u << 10)
#define PORT_19			19
#define PORT_19_DOWNSTREAM_RESET (1u << 0)

/* HOPS entry: dword 0 next_hop:11 out_port:6 ... enable:1; dword 1 bit 28 pending. */
#define HOP_NEXT(d0)		((d0) & 0x7ff)
#define HOP_OUT_PORT(d0)	(((d0) >> 11) & 0x3f)
#define HOP_ENABLE		(1u << 31)
#define HOP_PENDING		(1u << 28)

#define VENDOR_ID		0x1b36	/* QEMU's PCI vendor: an emulated part, not anyone's silicon */
#define DEVICE_ID		0x4e48
#define TOTAL_BUFFERS		120
#define CTL_CREDITS		2

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

uint32_t u4r_crc32c(const uint8_t *buf, size_t len)
{
	uint32_t crc = 0xffffffffu;
	size_t i;
	int bit;

	for (i = 0; i < len; i++) {
		crc ^= buf[i];
		for (bit = 0; bit < 8; bit++)
			crc = (crc >> 1) ^ (0x82f63b78u & -(crc & 1));
	}
	return ~crc;
}

/* Serialize dwords big-endian, append the CRC, hand the packet to the host. */
static void send_to_host(struct u4_router *r, uint8_t pdf, const uint32_t *dw, size_t n)
{
	uint8_t pkt[U4R_CTL_MAX];
	size_t i;

	if ((n + 1) * 4 > sizeof(pkt))
		return;
	for (i = 0; i < n; i++)
		put_be32(pkt + 4 * i, dw[i]);
	put_be32(pkt + 4 * n, u4r_crc32c(pkt, 4 * n));
	r->stats.ctl_to_host++;
	r->ops->to_host(r->opaque, pdf, pkt, 4 * (n + 1));
}

static void send_error(struct u4_router *r, uint32_t route_hi, uint32_t route_lo,
		       enum u4r_error err, unsigned int port)
{
	uint32_t dw[3] = {
		(route_hi & ROUTE_HI_MASK) | HDR_FROM_ROUTER, route_lo, err | (port & 0x3f) << 8,
	};

	send_to_host(r, U4R_PDF_ERROR, dw, 3);
}

/* The lane adapter's status bits follow the link; the host cannot overwrite them. */
static void update_lane_status(struct u4_router *r)
{
	uint32_t *lane1 = &r->port_cs[U4R_PORT_LANE][LANE_CAP + 1];
	uint32_t status;

	if (r->link_up) {
		status = (r->gbps >= 20 ? LANE_1_SPEED_GEN3 : LANE_1_SPEED_GEN2) << LANE_1_SPEED_SHIFT |
			 (uint32_t)(r->lanes >= 2 ? 2 : 1) << LANE_1_WIDTH_SHIFT |
			 (uint32_t)LANE_STATE_UP << LANE_1_STATE_SHIFT;
	} else {
		status = (uint32_t)LANE_STATE_UNPLUGGED << LANE_1_STATE_SHIFT;
	}
	*lane1 = (*lane1 & ~LANE_1_STATUS_MASK) | status;
}

/* Tell the host the link changed, once it has released the port from reset. */
static void report_link(struct u4_router *r)
{
	uint32_t dw[3];

	if (!r->reset_released || r->link_reported == r->link_up)
		return;
	r->link_reported = r->link_up;
	dw[0] = HDR_FROM_ROUTER;
	dw[1] = 0;
	dw[2] = U4R_PORT_LANE | (r->link_up ? 0 : 1u << 31);
	if (r->link_up)
		r->stats.plug_events++;
	else
		r->stats.unplug_events++;
	send_to_host(r, U4R_PDF_EVENT, dw, 3);
}

void u4r_reset(struct u4_router *r)
{
	uint32_t *rcs = r->router_cs, *lane = r->port_cs[U4R_PORT_LANE], *nhi = r->port_cs[U4R_PORT_NHI];
	unsigned int max_speed = r->max_gbps >= 20 ? LANE_1_SPEED_GEN3 | LANE_1_SPEED_GEN2
						  : LANE_1_SPEED_GEN2;

	memset(r->router_cs, 0, sizeof(r->router_cs));
	memset(r->port_cs, 0, sizeof(r->port_cs));
	memset(r->hops, 0, sizeof(r->hops));

	rcs[0] = VENDOR_ID | (uint32_t)DEVICE_ID << 16;
	/* first capability, upstream adapter 0, highest adapter number */
	rcs[1] = ROUTER_CAP_TMU | 0u << 8 | (uint32_t)U4R_PORT_NHI << 14;
	rcs[4] = 0x20u << 24;	/* USB4 version 1.0 */
	rcs[RCS_6] = RCS_6_NO_TBT3 | RCS_6_ROUTER_READY;
	rcs[RCS_7_UID_LO] = (uint32_t)r->uid;
	rcs[RCS_8_UID_HI] = (uint32_t)(r->uid >> 32);
	rcs[ROUTER_CAP_TMU] = CAP_ID_TMU << 8;	/* next 0: the list ends here */

	lane[0] = VENDOR_ID | (uint32_t)DEVICE_ID << 16;
	lane[1] = LANE_CAP;
	lane[2] = ADP_TYPE_LANE | 0x20u << 24;
	lane[3] = (uint32_t)U4R_PORT_LANE << 20;
	lane[4] = ADP_4_TOTAL_BUFFERS(TOTAL_BUFFERS);
	lane[5] = ADP_5_MAX_HOPIDS(U4R_HOPIDS - 1) | ADP_5_HOTPLUG_DISABLE;
	lane[LANE_CAP] = USB4_CAP | CAP_ID_LANE << 8 | max_speed << 16 |
			 (r->max_lanes >= 2 ? 3u : 1u) << 20;
	lane[USB4_CAP] = CAP_ID_USB4 << 8;	/* next 0 */
	lane[USB4_CAP + PORT_18] = PORT_18_CABLE_USB4;
	/* HOPS entry 0 of a lane adapter: the control path's credits */
	r->hops[U4R_PORT_LANE][0] = (uint32_t)CTL_CREDITS << 17;

	nhi[0] = VENDOR_ID | (uint32_t)DEVICE_ID << 16;
	nhi[2] = ADP_TYPE_NHI | 0x20u << 24;
	nhi[3] = (uint32_t)U4R_PORT_NHI << 20;
	nhi[4] = ADP_4_TOTAL_BUFFERS(TOTAL_BUFFERS);
	nhi[5] = ADP_5_MAX_HOPIDS(r->hop_count - 1);

	r->reset_released = false;
	r->link_reported = false;
	update_lane_status(r);
}

void u4r_init(struct u4_router *r, uint64_t uid, uint8_t hop_count, uint8_t max_gbps,
	      uint8_t max_lanes, const struct u4r_ops *ops, void *opaque)
{
	memset(r, 0, sizeof(*r));
	r->uid = uid;
	r->hop_count = hop_count;
	r->max_gbps = max_gbps;
	r->max_lanes = max_lanes;
	r->ops = ops;
	r->opaque = opaque;
	u4r_reset(r);
}

void u4r_set_link(struct u4_router *r, bool up, uint8_t gbps, uint8_t lanes)
{
	if (up) {
		r->gbps = gbps < r->max_gbps ? gbps : r->max_gbps;
		r->lanes = lanes < r->max_lanes ? lanes : r->max_lanes;
		if (!r->lanes)
			r->lanes = 1;
	}
	r->link_up = up;
	update_lane_status(r);
	report_link(r);
}

static uint32_t *space_dwords(struct u4_router *r, unsigned int space, unsigned int port,
			      size_t *count)
{
	switch (space) {
	case SPACE_ROUTER:
		*count = U4R_SPACE_DWORDS;
		return r->router_cs;
	case SPACE_PORT:
		*count = U4R_SPACE_DWORDS;
		return port < U4R_PORTS ? r->port_cs[port] : NULL;
	case SPACE_HOPS:
		*count = 2 * U4R_HOPIDS;
		return port < U4R_PORTS ? r->hops[port] : NULL;
	default:
		*count = 0;
		return NULL;	/* counters: read as zero */
	}
}

/* A host write to one dword, with the side effects the driver waits for. */
static void write_dword(struct u4_router *r, unsigned int space, unsigned int port,
			unsigned int offset, uint32_t val)
{
	size_t count;
	uint32_t *regs = space_dwords(r, space, port, &count);
	uint32_t old;

	if (!regs || offset >= count)
		return;
	old = regs[offset];
	if (space == SPACE_HOPS) {
		/* the path update completes at once: never pending */
		regs[offset] = offset & 1 ? val & ~HOP_PENDING : val;
		return;
	}
	regs[offset] = val;
	if (space == SPACE_ROUTER) {
		if (offset == RCS_26_OP && (val & RCS_26_OP_VALID))
			/* no router operation is implemented (no NVM, no DROM, default buffers) */
			regs[offset] = (val & 0xffff) | RCS_26_OP_NOT_SUPPORTED;
		else if (offset == RCS_5)
			regs[RCS_6] = (regs[RCS_6] & ~(RCS_6_SLEEP_READY | RCS_6_CONFIG_READY)) |
				      (val & RCS_5_SLEEP ? RCS_6_SLEEP_READY : 0) |
				      (val & RCS_3_VALID ? RCS_6_CONFIG_READY : 0);
		else if (offset == RCS_6)
			regs[offset] = old;	/* status, read-only */
		return;
	}
	if (port != U4R_PORT_LANE)
		return;
	if (offset == LANE_CAP + 1) {
		update_lane_status(r);
	} else if (offset == USB4_CAP + PORT_1 && (val & PORT_1_PENDING)) {
		/* sideband: only the router answers; retimers and the partner do not exist */
		regs[offset] = val & ~PORT_1_PENDING;
		if (PORT_1_TARGET(val) != 0)
			regs[offset] |= PORT_1_NOT_RESPONDING;
	} else if (offset == USB4_CAP + PORT_19 && (old & PORT_19_DOWNSTREAM_RESET) &&
		   !(val & PORT_19_DOWNSTREAM_RESET)) {
		r->reset_released = true;	/* the plug event follows the write's reply */
	}
}

static void handle_read_write(struct u4_router *r, uint8_t pdf, const uint32_t *dw, size_t n)
{
	uint32_t reply[3 + 64];
	uint32_t addr = dw[2];
	unsigned int offset = ADDR_OFFSET(addr), length = ADDR_LENGTH(addr);
	unsigned int port = ADDR_PORT(addr), space = ADDR_SPACE(addr);
	size_t count, i;
	uint32_t *regs;

	if ((pdf == U4R_PDF_READ && n != 3) || (pdf == U4R_PDF_WRITE && n != 3 + length) ||
	    !length || ((space == SPACE_PORT || space == SPACE_HOPS) && port >= U4R_PORTS)) {
		send_error(r, dw[0], dw[1], U4R_ERR_INVALID_CONFIG_SPACE, port);
		return;
	}
	reply[0] = (dw[0] & ROUTE_HI_MASK) | HDR_FROM_ROUTER;
	reply[1] = dw[1];
	reply[2] = addr & ~ADDR_PORT_MASK;	/* answered by upstream adapter 0 */
	if (pdf == U4R_PDF_WRITE) {
		for (i = 0; i < length; i++)
			write_dword(r, space, port, offset + i, dw[3 + i]);
		send_to_host(r, pdf, reply, 3);
		report_link(r);
		return;
	}
	regs = space_dwords(r, space, port, &count);
	for (i = 0; i < length; i++)
		reply[3 + i] = regs && offset + i < count ? regs[offset + i] : 0;
	send_to_host(r, pdf, reply, 3 + length);
}

void u4r_from_host(struct u4_router *r, uint8_t pdf, const uint8_t *pkt, size_t len)
{
	uint32_t dw[U4R_CTL_MAX / 4];
	uint32_t route_lo;
	size_t n = len / 4 - 1, i;

	r->stats.ctl_from_host++;
	if (len < 12 || len > U4R_CTL_MAX || len % 4 ||
	    get_be32(pkt + len - 4) != u4r_crc32c(pkt, len - 4)) {
		r->stats.ctl_bad++;
		return;
	}
	for (i = 0; i < n; i++)
		dw[i] = get_be32(pkt + 4 * i);
	route_lo = dw[1];

	if ((dw[0] & ROUTE_HI_MASK) == 0 && route_lo == 0) {
		/* our own router */
		if (pdf == U4R_PDF_READ || pdf == U4R_PDF_WRITE)
			handle_read_write(r, pdf, dw, n);
		/* ERROR from the host acknowledges a plug event: nothing to do */
		return;
	}
	if ((route_lo & 0xff) != U4R_PORT_LANE) {
		if (pdf == U4R_PDF_READ || pdf == U4R_PDF_WRITE)
			send_error(r, dw[0], route_lo, U4R_ERR_PORT_NOT_CONNECTED, route_lo & 0x3f);
		return;
	}
	/* Through the lane adapter: the other side of the cable is another host's domain. */
	if (pdf == U4R_PDF_XDOMAIN_REQ || pdf == U4R_PDF_XDOMAIN_RESP) {
		if (!r->link_up) {
			r->stats.ctl_dropped_no_link++;
			return;
		}
		r->stats.ctl_to_cable++;
		r->ops->to_cable(r->opaque, pdf, pkt, len);
		return;
	}
	if (pdf == U4R_PDF_READ || pdf == U4R_PDF_WRITE)
		/*
		 * Config access into another domain fails. The driver takes any error as "a host,
		 * not a device router, is there" and starts XDomain discovery; code 2 is the one it
		 * logs quietly. With no link, the port is simply not connected.
		 */
		send_error(r, dw[0], route_lo, r->link_up ? U4R_ERR_INVALID_CONFIG_SPACE
							  : U4R_ERR_PORT_NOT_CONNECTED,
			   U4R_PORT_LANE);
}

void u4r_from_cable(struct u4_router *r, uint8_t pdf, const uint8_t *pkt, size_t len)
{
	uint32_t dw[U4R_CTL_MAX / 4];
	size_t n = len / 4 - 1, i;

	if ((pdf != U4R_PDF_XDOMAIN_REQ && pdf != U4R_PDF_XDOMAIN_RESP) || len < 12 ||
	    len > U4R_CTL_MAX || len % 4 || get_be32(pkt + len - 4) != u4r_crc32c(pkt, len - 4)) {
		r->stats.ctl_bad++;
		return;
	}
	if (!r->link_up)
		return;
	for (i = 0; i < n; i++)
		dw[i] = get_be32(pkt + 4 * i);
	/*
	 * The receiving host finds the XDomain, and matches responses to its requests, by route:
	 * ours to the peer is "through the lane adapter", whatever route the sender used.
	 */
	dw[0] = HDR_FROM_ROUTER;
	dw[1] = U4R_PORT_LANE;
	r->stats.ctl_from_cable++;
	send_to_host(r, pdf, dw, n);
}

/* Where an enabled HOPS entry of adapter `in` for `hopid` leads, if it leads out through `out`. */
/* The next HopID of an enabled path from @in to @out, whatever the link's state, or -1. */
static int hop_set(const struct u4_router *r, unsigned int in, unsigned int hopid, unsigned int out)
{
	uint32_t d0;

	if (hopid >= U4R_HOPIDS)
		return -1;
	d0 = r->hops[in][2 * hopid];
	if (!(d0 & HOP_ENABLE) || HOP_OUT_PORT(d0) != out)
		return -1;
	return HOP_NEXT(d0);
}

static int hop_next(const struct u4_router *r, unsigned int in, unsigned int hopid, unsigned int out)
{
	return r->link_up ? hop_set(r, in, hopid, out) : -1;
}

int u4r_route_tx(const struct u4_router *r, unsigned int ring)
{
	return hop_next(r, U4R_PORT_NHI, ring, U4R_PORT_LANE);
}

bool u4r_tx_path_set(const struct u4_router *r, unsigned int ring)
{
	return hop_set(r, U4R_PORT_NHI, ring, U4R_PORT_LANE) >= 0;
}

int u4r_route_rx(const struct u4_router *r, unsigned int hopid)
{
	int ring = hop_next(r, U4R_PORT_LANE, hopid, U4R_PORT_NHI);

	return ring < r->hop_count ? ring : -1;
}
