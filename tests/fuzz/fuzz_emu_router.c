// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The emulated host router (emu/usb4-nhi/router.c, built into our QEMU) on a sequence of
 * control packets from the host (the guest's thunderbolt.ko) and from the cable (the other
 * VM), mixed with link changes. The guest and the peer are not ours to trust either.
 *
 * Records: u8 op, u8 len, then len bytes (cut short at the end of the input). op bits 1:0:
 * 0 a packet from the host, 1 from the cable (bit 2: append its correct CRC, so parsing
 * gets past the CRC check; bits 7:3: the PDF), 2 a link change (bit 2: up; bytes: Gb/s,
 * lanes), 3 routing lookups (bytes: ring, HopID). Checked: every packet handed on fits a
 * raw frame, is whole dwords and carries a valid CRC; lookups stay in range.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "../../emu/usb4-nhi/router.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_packet(const uint8_t *pkt, size_t len)
{
	FUZZ_CHECK(len >= 8 && len <= U4R_CTL_MAX && len % 4 == 0);
	fuzz_touch(pkt, len);
	FUZZ_CHECK(be32(pkt + len - 4) == u4r_crc32c(pkt, len - 4));
}

static void to_host(void *opaque __attribute__((unused)), uint8_t pdf, const uint8_t *pkt, size_t len)
{
	FUZZ_CHECK(pdf >= U4R_PDF_READ && pdf <= U4R_PDF_XDOMAIN_RESP);
	check_packet(pkt, len);
}

static void to_cable(void *opaque __attribute__((unused)), uint8_t pdf, const uint8_t *pkt, size_t len)
{
	FUZZ_CHECK(pdf == U4R_PDF_XDOMAIN_REQ || pdf == U4R_PDF_XDOMAIN_RESP);
	check_packet(pkt, len);
}

static const struct u4r_ops ops = { .to_host = to_host, .to_cable = to_cable };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct u4_router r;
	uint8_t pkt[U4R_CTL_MAX + 8];

	u4r_init(&r, 0x7462760000000a01ull, 16, 20, 2, &ops, NULL);
	while (size >= 2) {
		uint8_t op = data[0];
		size_t len = data[1] < size - 2 ? data[1] : size - 2;
		const uint8_t *body = data + 2;
		int res;

		data += 2 + len;
		size -= 2 + len;
		switch (op & 3) {
		case 0:
		case 1:
			memcpy(pkt, body, len);
			if (op & 4) {
				uint32_t crc = u4r_crc32c(pkt, len);

				pkt[len] = crc >> 24;
				pkt[len + 1] = crc >> 16;
				pkt[len + 2] = crc >> 8;
				pkt[len + 3] = crc;
				len += 4;
			}
			if (op & 1)
				u4r_from_cable(&r, op >> 3, pkt, len);
			else
				u4r_from_host(&r, op >> 3, pkt, len);
			break;
		case 2:
			u4r_set_link(&r, op & 4, len > 0 ? body[0] : 0, len > 1 ? body[1] : 0);
			FUZZ_CHECK(!r.link_up || (r.lanes >= 1 && r.lanes <= 2));
			break;
		default:
			res = u4r_route_tx(&r, len > 0 ? body[0] : 0);
			FUZZ_CHECK(res >= -1 && res < 2048);
			res = u4r_route_rx(&r, len > 1 ? body[1] : 0);
			FUZZ_CHECK(res >= -1 && res < 16);
			break;
		}
	}
	return 0;
}
