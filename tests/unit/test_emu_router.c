// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The emulated host router (emu/usb4-nhi/router.c, compiled into our QEMU): control packets as
 * thunderbolt.ko sends them, the answers and events it expects, XDomain forwarding, HOPS routing.
 */
#include <stdint.h>

#include "tbv_test.h"
#include "../../emu/usb4-nhi/router.h"

struct captured {
	int to_host, to_cable;
	uint8_t pdf;
	uint8_t pkt[U4R_CTL_MAX];
	size_t len;
	uint32_t dw[U4R_CTL_MAX / 4];
};

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void capture(struct captured *c, uint8_t pdf, const uint8_t *pkt, size_t len)
{
	size_t i;

	c->pdf = pdf;
	c->len = len;
	memcpy(c->pkt, pkt, len);
	for (i = 0; i < len / 4; i++)
		c->dw[i] = be32(pkt + 4 * i);
}

static void cap_host(void *opaque, uint8_t pdf, const uint8_t *pkt, size_t len)
{
	struct captured *c = opaque;

	c->to_host++;
	capture(c, pdf, pkt, len);
	/* every packet for the host carries a valid CRC */
	CHECK_EQ(be32(pkt + len - 4), u4r_crc32c(pkt, len - 4));
}

static void cap_cable(void *opaque, uint8_t pdf, const uint8_t *pkt, size_t len)
{
	struct captured *c = opaque;

	c->to_cable++;
	capture(c, pdf, pkt, len);
}

static const struct u4r_ops ops = { .to_host = cap_host, .to_cable = cap_cable };

/* Build a packet from dwords (big-endian, CRC appended) and send it as the host would. */
static size_t build(uint8_t *pkt, const uint32_t *dw, size_t n)
{
	size_t i;
	uint32_t crc;

	for (i = 0; i < n; i++) {
		pkt[4 * i] = dw[i] >> 24;
		pkt[4 * i + 1] = dw[i] >> 16;
		pkt[4 * i + 2] = dw[i] >> 8;
		pkt[4 * i + 3] = dw[i];
	}
	crc = u4r_crc32c(pkt, 4 * n);
	pkt[4 * n] = crc >> 24;
	pkt[4 * n + 1] = crc >> 16;
	pkt[4 * n + 2] = crc >> 8;
	pkt[4 * n + 3] = crc;
	return 4 * (n + 1);
}

static uint32_t addr(unsigned int space, unsigned int port, unsigned int offset, unsigned int len,
		     unsigned int seq)
{
	return offset | len << 13 | port << 19 | space << 25 | seq << 27;
}

enum { HOPS = 0, PORT = 1, ROUTER = 2 };

static void host_read(struct u4_router *r, uint64_t route, unsigned int space, unsigned int port,
		      unsigned int offset, unsigned int len)
{
	uint32_t dw[3] = { (uint32_t)(route >> 32), (uint32_t)route, addr(space, port, offset, len, 1) };
	uint8_t pkt[U4R_CTL_MAX];

	u4r_from_host(r, U4R_PDF_READ, pkt, build(pkt, dw, 3));
}

static void host_write(struct u4_router *r, unsigned int space, unsigned int port,
		       unsigned int offset, uint32_t val)
{
	uint32_t dw[4] = { 0, 0, addr(space, port, offset, 1, 2), val };
	uint8_t pkt[U4R_CTL_MAX];

	u4r_from_host(r, U4R_PDF_WRITE, pkt, build(pkt, dw, 4));
}

TEST(emu_crc32c_matches_the_standard_check_value)
{
	CHECK_EQ(u4r_crc32c((const uint8_t *)"123456789", 9), 0xe3069283u);
}

TEST(emu_router_answers_config_reads_like_a_usb4_host_router)
{
	struct captured c = { 0 };
	struct u4_router r;

	u4r_init(&r, 0x1122334455667788ull, 16, 20, 1, &ops, &c);
	host_read(&r, 0, ROUTER, 0, 0, 5);
	CHECK_EQ(c.to_host, 1);
	CHECK_EQ(c.pdf, U4R_PDF_READ);
	CHECK_EQ(c.len, 4 * (3 + 5 + 1));
	CHECK_EQ(c.dw[0], 1u << 31);			/* from a router, route 0 */
	CHECK_EQ(c.dw[2], addr(ROUTER, 0, 0, 5, 1));	/* upstream adapter 0, same seq */
	CHECK_EQ((c.dw[3 + 1] >> 14) & 0x3f, U4R_PORT_NHI);	/* max adapter */
	CHECK_EQ(c.dw[3 + 4] >> 24, 0x20);		/* USB4 1.0 */
	host_read(&r, 0, ROUTER, 0, 7, 2);
	CHECK_EQ(c.dw[3], 0x55667788u);
	CHECK_EQ(c.dw[4], 0x11223344u);
	/* the lane adapter: a lane capability, then a USB4 port capability, then the end */
	host_read(&r, 0, PORT, U4R_PORT_LANE, 0, 8);
	CHECK_EQ(c.dw[3 + 2] & 0xffffff, 1);
	CHECK_EQ(c.dw[3 + 1] & 0xff, 0x10);
	host_read(&r, 0, PORT, U4R_PORT_LANE, 0x10, 2);
	CHECK_EQ((c.dw[3] >> 8) & 0xff, 1);
	CHECK_EQ(c.dw[3] & 0xff, 0x20);
	CHECK_EQ((c.dw[4] >> 26) & 0xf, 7);		/* unplugged */
	host_read(&r, 0, PORT, U4R_PORT_LANE, 0x20, 1);
	CHECK_EQ((c.dw[3] >> 8) & 0xff, 6);
	CHECK_EQ(c.dw[3] & 0xff, 0);
	/* a read of a port that does not exist is an error, not a crash */
	host_read(&r, 0, PORT, 40, 0, 1);
	CHECK_EQ(c.pdf, U4R_PDF_ERROR);
	CHECK_EQ(c.dw[2] & 0xff, U4R_ERR_INVALID_CONFIG_SPACE);
}

TEST(emu_router_operations_complete_as_not_supported)
{
	struct captured c = { 0 };
	struct u4_router r;

	u4r_init(&r, 1, 16, 20, 1, &ops, &c);
	host_write(&r, ROUTER, 0, 26, 0x33 | 1u << 31);
	CHECK_EQ(c.pdf, U4R_PDF_WRITE);
	CHECK_EQ(c.len, 16);
	host_read(&r, 0, ROUTER, 0, 26, 1);
	CHECK_EQ(c.dw[3], 0x33 | 1u << 30);
	/* sleep request: the router reports ready to sleep */
	host_write(&r, ROUTER, 0, 5, 1);
	host_read(&r, 0, ROUTER, 0, 6, 1);
	CHECK(c.dw[3] & 1);
}

TEST(emu_router_plug_events_follow_reset_release_and_link)
{
	struct captured c = { 0 };
	struct u4_router r;

	u4r_init(&r, 1, 16, 20, 1, &ops, &c);
	u4r_set_link(&r, true, 20, 1);
	CHECK_EQ(c.to_host, 0);				/* the host has not reset the port yet */
	host_write(&r, PORT, U4R_PORT_LANE, 0x20 + 19, 1);	/* DPR set ... */
	host_write(&r, PORT, U4R_PORT_LANE, 0x20 + 19, 0);	/* ... released */
	CHECK_EQ(c.pdf, U4R_PDF_EVENT);
	CHECK_EQ(c.dw[0], 1u << 31);
	CHECK_EQ(c.dw[2], U4R_PORT_LANE);		/* plug, adapter 1 */
	CHECK_EQ(r.stats.plug_events, 1);
	host_read(&r, 0, PORT, U4R_PORT_LANE, 0x11, 1);
	CHECK_EQ((c.dw[3] >> 26) & 0xf, 2);		/* up */
	CHECK_EQ((c.dw[3] >> 16) & 0xf, 4);		/* Gen3: 20 Gb/s */
	/* the host cannot overwrite the trained state */
	host_write(&r, PORT, U4R_PORT_LANE, 0x11, 0);
	host_read(&r, 0, PORT, U4R_PORT_LANE, 0x11, 1);
	CHECK_EQ((c.dw[3] >> 26) & 0xf, 2);
	u4r_set_link(&r, false, 0, 0);
	CHECK_EQ(c.pdf, U4R_PDF_EVENT);
	CHECK_EQ(c.dw[2], U4R_PORT_LANE | 1u << 31);	/* unplug */
	u4r_set_link(&r, true, 10, 1);			/* re-trained at Gen2 */
	CHECK_EQ(r.stats.plug_events, 2);
	host_read(&r, 0, PORT, U4R_PORT_LANE, 0x11, 1);
	CHECK_EQ((c.dw[3] >> 16) & 0xf, 8);
}

TEST(emu_router_config_access_across_the_cable_fails_as_a_domain_boundary)
{
	struct captured c = { 0 };
	struct u4_router r;

	u4r_init(&r, 1, 16, 20, 1, &ops, &c);
	host_read(&r, 1, ROUTER, 0, 0, 1);
	CHECK_EQ(c.pdf, U4R_PDF_ERROR);
	CHECK_EQ(c.dw[2] & 0xff, U4R_ERR_PORT_NOT_CONNECTED);
	u4r_set_link(&r, true, 20, 1);
	host_read(&r, 1, ROUTER, 0, 0, 1);
	CHECK_EQ(c.pdf, U4R_PDF_ERROR);
	CHECK_EQ(c.dw[2] & 0xff, U4R_ERR_INVALID_CONFIG_SPACE);
	CHECK_EQ(c.dw[1], 1);
	CHECK_EQ(c.to_cable, 0);
}

TEST(emu_router_forwards_xdomain_packets_and_rewrites_the_route)
{
	struct captured c = { 0 };
	struct u4_router r;
	uint32_t req[8] = { 0, 1, 0x1234, 0xb638d70e, 0x42ff40bb, 0x97c290e2, 0xc0b2ff07, 12 };
	uint8_t pkt[U4R_CTL_MAX];
	size_t len = build(pkt, req, 8);

	u4r_init(&r, 1, 16, 20, 1, &ops, &c);
	u4r_from_host(&r, U4R_PDF_XDOMAIN_REQ, pkt, len);
	CHECK_EQ(c.to_cable, 0);			/* no link: lost, as on a real port */
	CHECK_EQ(r.stats.ctl_dropped_no_link, 1);
	u4r_set_link(&r, true, 20, 1);
	u4r_from_host(&r, U4R_PDF_XDOMAIN_REQ, pkt, len);
	CHECK_EQ(c.to_cable, 1);
	CHECK_EQ(c.len, len);
	CHECK(!memcmp(c.pkt, pkt, len));
	/* the peer's request arrives with the peer's route; we deliver it as from our lane adapter */
	req[0] = 0;
	req[1] = 0x0301;
	len = build(pkt, req, 8);
	u4r_from_cable(&r, U4R_PDF_XDOMAIN_REQ, pkt, len);
	CHECK_EQ(c.to_host, 1);
	CHECK_EQ(c.pdf, U4R_PDF_XDOMAIN_REQ);
	CHECK_EQ(c.dw[0], 1u << 31);
	CHECK_EQ(c.dw[1], 1);
	CHECK_EQ(c.dw[2], 0x1234);
	CHECK_EQ(c.dw[7], 12);
	/* corrupted or foreign packets are dropped and counted */
	pkt[9] ^= 1;
	u4r_from_cable(&r, U4R_PDF_XDOMAIN_REQ, pkt, len);
	u4r_from_host(&r, U4R_PDF_XDOMAIN_REQ, pkt, len);
	u4r_from_cable(&r, U4R_PDF_READ, pkt, len);
	u4r_from_host(&r, U4R_PDF_READ, pkt, 7);
	CHECK_EQ(c.to_host, 1);
	CHECK_EQ(c.to_cable, 1);
	CHECK_EQ(r.stats.ctl_bad, 4);
}

TEST(emu_router_hop_entries_route_rings_to_the_cable)
{
	struct captured c = { 0 };
	struct u4_router r;
	const uint32_t enable = 1u << 31;

	u4r_init(&r, 1, 16, 20, 1, &ops, &c);
	u4r_set_link(&r, true, 20, 1);
	CHECK_EQ(u4r_route_tx(&r, 1), -1);
	CHECK_EQ(u4r_route_rx(&r, 8), -1);
	/* TX: NHI adapter, in HopID = ring 1, out to the lane adapter as HopID 8 */
	host_write(&r, HOPS, U4R_PORT_NHI, 2 * 1, 8 | U4R_PORT_LANE << 11 | enable);
	host_write(&r, HOPS, U4R_PORT_NHI, 2 * 1 + 1, 1u << 28);	/* "pending" */
	/* RX: lane adapter, in HopID 9, out to the NHI adapter's ring 1 */
	host_write(&r, HOPS, U4R_PORT_LANE, 2 * 9, 1 | U4R_PORT_NHI << 11 | enable);
	CHECK_EQ(u4r_route_tx(&r, 1), 8);
	CHECK_EQ(u4r_route_rx(&r, 9), 1);
	CHECK_EQ(u4r_route_rx(&r, 8), -1);
	host_read(&r, 0, HOPS, U4R_PORT_NHI, 2 * 1 + 1, 1);
	CHECK_EQ(c.dw[3] & 1u << 28, 0);		/* updates complete at once */
	/* a path to a ring the NHI does not have goes nowhere */
	host_write(&r, HOPS, U4R_PORT_LANE, 2 * 10, 40 | U4R_PORT_NHI << 11 | enable);
	CHECK_EQ(u4r_route_rx(&r, 10), -1);
	CHECK_EQ(u4r_route_rx(&r, 1000), -1);
	u4r_set_link(&r, false, 0, 0);
	CHECK_EQ(u4r_route_tx(&r, 1), -1);
	CHECK(u4r_tx_path_set(&r, 1));			/* the path stays set up */
	CHECK(!u4r_tx_path_set(&r, 2));
}
