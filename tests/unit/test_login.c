// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Login messages, negotiation and the handshake state machine. */
#include <stdlib.h>
#include "tbv_test.h"
#include "../../kernel/proto/tbv_login.h"

static const u8 uuid_a[16] = { 0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
static const u8 uuid_b[16] = { 0xb0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

static struct tbv_login_params params(u32 rails, u32 session)
{
	struct tbv_login_params p = {
		.version_min = TBV_PROTO_VERSION_MIN, .version_max = TBV_PROTO_VERSION_MAX,
		.rails = rails, .ring_size = 256, .frame_size = TBV_FRAME_SIZE,
		.tx_hopid = { 8, 9, 10, 11 }, .session = session,
	};
	return p;
}

TEST(login_roundtrip)
{
	struct tbv_login_params p = params(3, 0x1234), q;
	struct tbv_login_msg msg;
	struct tbv_ctl_parsed parsed;

	tbv_login_build(&msg, 0x8000000000000001ull, 2, uuid_a, uuid_b, 77, &p);
	CHECK_EQ(msg.hdr.length_sn & TBV_CTL_LENGTH_MASK, sizeof(msg) / 4 - 3);
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg), uuid_b, uuid_a, &parsed), 0);
	CHECK_EQ(parsed.type, TBV_MSG_LOGIN);
	CHECK_EQ(parsed.sequence, 2);
	CHECK_EQ(parsed.route, 1);	/* the CM bit is masked */
	CHECK_EQ(parsed.command_id, 77);
	q = parsed.login;
	CHECK_EQ(q.rails, 3);
	CHECK_EQ(q.ring_size, 256);
	CHECK_EQ(q.tx_hopid[2], 10);
	CHECK_EQ(q.tx_hopid[3], 0);	/* beyond the offered rails: not sent */
	CHECK_EQ(q.session, 0x1234);
	CHECK_EQ(q.version_min, TBV_PROTO_VERSION_MIN);
	CHECK_EQ(q.version_max, TBV_PROTO_VERSION_MAX);
}

TEST(parse_rejects_malformed)
{
	struct tbv_login_params p = params(1, 1);
	struct tbv_login_msg msg;
	struct tbv_ctl_parsed parsed;
	u8 big[TBV_CTL_MAX_BYTES + 4] = { 0 };

	tbv_login_build(&msg, 1, 0, uuid_a, uuid_b, 1, &p);
	/* addressed to someone else, or from someone else */
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg), uuid_a, uuid_a, &parsed), -EXDEV);
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg), uuid_b, uuid_b, &parsed), -EXDEV);
	/* wrong sizes */
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg) - 4, uuid_b, uuid_a, &parsed), -EMSGSIZE);
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg) - 1, uuid_b, uuid_a, &parsed), -EMSGSIZE);
	memcpy(big, &msg, sizeof(msg));
	CHECK_EQ(tbv_ctl_parse(big, sizeof(big), uuid_b, uuid_a, &parsed), -EMSGSIZE);
	CHECK(tbv_ctl_parse(&msg, 8, uuid_b, uuid_a, &parsed) < 0);
	/* length_sn that disagrees with the packet */
	msg.hdr.length_sn ^= 1;
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg), uuid_b, uuid_a, &parsed), -EMSGSIZE);
	msg.hdr.length_sn ^= 1;
	/* unknown message type */
	msg.hdr.type = 99;
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg), uuid_b, uuid_a, &parsed), -EPROTO);
	/* another protocol's packet is not ours to judge */
	msg.hdr.type = TBV_MSG_LOGIN;
	msg.hdr.protocol_uuid[0] ^= 0xff;
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg), uuid_b, uuid_a, &parsed), -ENOENT);
}

TEST(parse_survives_random_mutations)
{
	struct tbv_login_params p = params(4, 9);
	struct tbv_login_msg msg;
	struct tbv_ctl_parsed parsed;
	u8 buf[TBV_CTL_MAX_BYTES];
	int i, accepted = 0;

	srand(1);
	tbv_login_build(&msg, 1, 0, uuid_a, uuid_b, 1, &p);
	for (i = 0; i < 20000; i++) {
		size_t size = (size_t)(rand() % 2 ? sizeof(msg) : rand() % sizeof(buf));
		int flips = 1 + rand() % 4, f;

		memcpy(buf, &msg, sizeof(msg));
		for (f = 0; f < flips; f++)
			buf[rand() % sizeof(msg)] ^= (u8)(1 + rand() % 255);
		if (tbv_ctl_parse(buf, size, uuid_b, uuid_a, &parsed) == 0) {
			accepted++;
			/* whatever parses is of a known type with its exact size */
			CHECK(parsed.type >= TBV_MSG_LOGIN && parsed.type <= TBV_MSG_LOGOUT_RESPONSE);
		}
	}
	CHECK(accepted > 0);	/* mutations of the body alone still parse */
}

TEST(negotiate_picks_common_parameters)
{
	struct tbv_login_params a = params(4, 1), b = params(2, 2);
	struct tbv_login_agreed ab, ba;

	b.ring_size = 64;
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ab), TBV_LOGIN_OK);
	CHECK_EQ(tbv_login_negotiate(&b, &a, &ba), TBV_LOGIN_OK);
	CHECK_EQ(ab.rails, 2);
	CHECK_EQ(ba.rails, 2);
	CHECK_EQ(ab.version, ba.version);
	CHECK_EQ(ab.tx_credits, 64);	/* a may send as many frames as b's ring holds */
	CHECK_EQ(ba.tx_credits, 256);
	CHECK_EQ(ab.peer_session, 2);
}

TEST(negotiate_refuses_bad_offers)
{
	struct tbv_login_params a = params(1, 1), b;
	struct tbv_login_agreed ag;

	b = params(1, 2);
	b.version_min = b.version_max = TBV_PROTO_VERSION_MAX + 1;
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_VERSION);
	b = params(1, 2);
	b.version_min = 3;
	b.version_max = 2;
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_VERSION);
	b = params(0, 2);
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_PARAM);
	b = params(TBV_MAX_RAILS + 1, 2);
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_PARAM);
	b = params(1, 2);
	b.ring_size = 100;
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_PARAM);
	b = params(1, 2);
	b.frame_size = 256;
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_PARAM);
	b = params(2, 2);
	b.tx_hopid[1] = 7;	/* below the first path HopID */
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_PARAM);
	b.tx_hopid[1] = TBV_MAX_HOPID + 1;
	CHECK_EQ(tbv_login_negotiate(&a, &b, &ag), TBV_LOGIN_E_PARAM);
	CHECK(strcmp(tbv_login_status_str(TBV_LOGIN_E_VERSION), "no common protocol version") == 0);
	CHECK(strcmp(tbv_login_status_str(1000), "unknown status") == 0);
}

/* Deliver the four messages of a handshake in a given order and check both ends end up. */
static void handshake(const int order[4])
{
	struct tbv_login_params pa = params(4, 11), pb = params(2, 22);
	struct tbv_login_state a, b;
	struct tbv_login_resp_body ra = { 0 }, rb = { 0 };
	enum tbv_login_status st;
	int step, ups = 0;

	tbv_login_init(&a, &pa, 100);
	tbv_login_init(&b, &pb, 200);
	for (step = 0; step < 4; step++) {
		enum tbv_login_event ev = TBV_LOGIN_EV_NONE;

		switch (order[step]) {
		case 0:		/* a's LOGIN reaches b; b answers */
			ev = tbv_login_on_request(&b, &pa, &st);
			CHECK_EQ(st, TBV_LOGIN_OK);
			rb.status = st;
			rb.version = b.agreed.version;
			rb.rails = b.agreed.rails;
			break;
		case 1:		/* b's answer reaches a */
			ev = tbv_login_on_response(&a, 100, &rb);
			break;
		case 2:		/* b's LOGIN reaches a */
			ev = tbv_login_on_request(&a, &pb, &st);
			CHECK_EQ(st, TBV_LOGIN_OK);
			ra.status = st;
			ra.version = a.agreed.version;
			ra.rails = a.agreed.rails;
			break;
		case 3:		/* a's answer reaches b */
			ev = tbv_login_on_response(&b, 200, &ra);
			break;
		}
		CHECK(ev != TBV_LOGIN_EV_REFUSED && ev != TBV_LOGIN_EV_RESET);
		if (ev == TBV_LOGIN_EV_UP)
			ups++;
	}
	CHECK_EQ(ups, 2);
	CHECK(tbv_login_is_up(&a));
	CHECK(tbv_login_is_up(&b));
	CHECK_EQ(a.agreed.rails, 2);
	CHECK_EQ(b.agreed.rails, 2);
	CHECK_EQ(a.agreed.peer_session, 22);
	CHECK_EQ(b.agreed.peer_session, 11);
}

TEST(handshake_any_order)
{
	/* every order in which a request precedes its own response */
	static const int orders[][4] = {
		{ 0, 1, 2, 3 }, { 0, 2, 1, 3 }, { 0, 2, 3, 1 },
		{ 2, 3, 0, 1 }, { 2, 0, 3, 1 }, { 2, 0, 1, 3 },
	};
	unsigned int i;

	for (i = 0; i < TBV_ARRAY_SIZE(orders); i++)
		handshake(orders[i]);
}

TEST(handshake_retries_restarts_and_refusals)
{
	struct tbv_login_params pa = params(1, 1), pb = params(1, 2);
	struct tbv_login_state a;
	struct tbv_login_resp_body ok = { TBV_LOGIN_OK, 1, 1, 0 };
	struct tbv_login_resp_body no = { TBV_LOGIN_E_VERSION, 0, 0, 0 };
	struct tbv_login_resp_body wrong = { TBV_LOGIN_OK, 1, 3, 0 };
	enum tbv_login_status st;

	tbv_login_init(&a, &pa, 5);
	CHECK_EQ(tbv_login_on_request(&a, &pb, &st), TBV_LOGIN_EV_PROGRESS);
	/* the peer retried its LOGIN (our answer was lost): answer again, no change */
	CHECK_EQ(tbv_login_on_request(&a, &pb, &st), TBV_LOGIN_EV_NONE);
	CHECK_EQ(st, TBV_LOGIN_OK);
	/* an answer to an older attempt is ignored */
	CHECK_EQ(tbv_login_on_response(&a, 4, &ok), TBV_LOGIN_EV_NONE);
	CHECK(!tbv_login_is_up(&a));
	CHECK_EQ(tbv_login_on_response(&a, 5, &ok), TBV_LOGIN_EV_UP);
	CHECK_EQ(tbv_login_on_response(&a, 5, &ok), TBV_LOGIN_EV_NONE);
	/* the peer restarted: new session while up */
	pb.session = 3;
	CHECK_EQ(tbv_login_on_request(&a, &pb, &st), TBV_LOGIN_EV_RESET);
	CHECK(!tbv_login_is_up(&a));

	/* a refusal is reported */
	tbv_login_init(&a, &pa, 5);
	CHECK_EQ(tbv_login_on_response(&a, 5, &no), TBV_LOGIN_EV_REFUSED);
	/* a peer whose view of the agreement differs from ours is refused */
	tbv_login_init(&a, &pa, 5);
	CHECK_EQ(tbv_login_on_request(&a, &pb, &st), TBV_LOGIN_EV_PROGRESS);
	CHECK_EQ(tbv_login_on_response(&a, 5, &wrong), TBV_LOGIN_EV_REFUSED);
	CHECK(!tbv_login_is_up(&a));
}

TEST(changed_offer_drops_answers_to_earlier_logins)
{
	struct tbv_login_params pa = params(4, 1), pb = params(4, 2), pb_one = params(1, 2);
	struct tbv_login_resp_body old = { TBV_LOGIN_OK, 0, 4, 0 }, fresh = { TBV_LOGIN_OK, 0, 1, 0 };
	struct tbv_login_state a;
	enum tbv_login_status st;
	u32 in_flight;

	tbv_login_init(&a, &pa, 5);
	CHECK_EQ(tbv_login_on_request(&a, &pb, &st), TBV_LOGIN_EV_PROGRESS);
	in_flight = a.command_id;
	/* the peer could open one rail only and offers that now, before our LOGIN is answered */
	CHECK_EQ(tbv_login_on_request(&a, &pb_one, &st), TBV_LOGIN_EV_PROGRESS);
	CHECK_EQ(st, TBV_LOGIN_OK);
	CHECK_EQ(a.agreed.rails, 1);
	/* its answer to our earlier LOGIN speaks of 4 rails: dropped, not a refusal */
	old.version = a.agreed.version;
	CHECK_EQ(tbv_login_on_response(&a, in_flight, &old), TBV_LOGIN_EV_NONE);
	CHECK(!a.ours_accepted);
	/* our next LOGIN (a new command id) is answered with the new agreement */
	CHECK(a.command_id != in_flight);
	fresh.version = a.agreed.version;
	CHECK_EQ(tbv_login_on_response(&a, a.command_id, &fresh), TBV_LOGIN_EV_UP);
	CHECK(tbv_login_is_up(&a));
}

TEST(response_and_logout_roundtrip)
{
	struct tbv_login_params pa = params(2, 1), pb = params(2, 2);
	struct tbv_login_agreed ag;
	struct tbv_login_resp_msg resp;
	struct tbv_logout_msg lo;
	struct tbv_ctl_parsed parsed;

	CHECK_EQ(tbv_login_negotiate(&pa, &pb, &ag), TBV_LOGIN_OK);
	tbv_login_build_response(&resp, 3, 1, uuid_a, uuid_b, 42, TBV_LOGIN_OK, &ag);
	CHECK_EQ(tbv_ctl_parse(&resp, sizeof(resp), uuid_b, uuid_a, &parsed), 0);
	CHECK_EQ(parsed.type, TBV_MSG_LOGIN_RESPONSE);
	CHECK_EQ(parsed.command_id, 42);
	CHECK_EQ(parsed.login_resp.status, TBV_LOGIN_OK);
	CHECK_EQ(parsed.login_resp.rails, 2);
	tbv_login_build_response(&resp, 3, 1, uuid_a, uuid_b, 42, TBV_LOGIN_E_PARAM, &ag);
	CHECK_EQ(tbv_ctl_parse(&resp, sizeof(resp), uuid_b, uuid_a, &parsed), 0);
	CHECK_EQ(parsed.login_resp.rails, 0);	/* nothing agreed on a refusal */
	tbv_logout_build(&lo, TBV_MSG_LOGOUT, 3, 0, uuid_a, uuid_b, 7);
	CHECK_EQ(tbv_ctl_parse(&lo, sizeof(lo), uuid_b, uuid_a, &parsed), 0);
	CHECK_EQ(parsed.type, TBV_MSG_LOGOUT);
}

TEST(protocol_uuid_per_direction)
{
	const u8 *lower = tbv_login_protocol_uuid[0], *higher = tbv_login_protocol_uuid[1];
	struct tbv_login_params p = params(1, 1);
	struct tbv_login_resp_msg resp;
	struct tbv_logout_msg lo;
	struct tbv_login_msg msg;
	struct tbv_ctl_parsed parsed;

	CHECK(memcmp(lower, higher, TBV_UUID_LEN));
	CHECK(tbv_ctl_protocol_uuid(uuid_a, uuid_b) == lower);	/* uuid_a sorts first */
	CHECK(tbv_ctl_protocol_uuid(uuid_b, uuid_a) == higher);

	/* a's requests and b's answers to them carry one UUID ... */
	tbv_login_build(&msg, 1, 0, uuid_a, uuid_b, 1, &p);
	CHECK(!memcmp(msg.hdr.protocol_uuid, lower, TBV_UUID_LEN));
	tbv_login_build_response(&resp, 1, 0, uuid_b, uuid_a, 1, TBV_LOGIN_OK, NULL);
	CHECK(!memcmp(resp.hdr.protocol_uuid, lower, TBV_UUID_LEN));
	CHECK_EQ(tbv_ctl_parse(&resp, sizeof(resp), uuid_a, uuid_b, &parsed), 0);
	/* ... b's requests and a's answers the other */
	tbv_logout_build(&lo, TBV_MSG_LOGOUT, 1, 0, uuid_b, uuid_a, 2);
	CHECK(!memcmp(lo.hdr.protocol_uuid, higher, TBV_UUID_LEN));
	CHECK_EQ(tbv_ctl_parse(&lo, sizeof(lo), uuid_a, uuid_b, &parsed), 0);
	tbv_logout_build(&lo, TBV_MSG_LOGOUT_RESPONSE, 1, 0, uuid_a, uuid_b, 2);
	CHECK(!memcmp(lo.hdr.protocol_uuid, higher, TBV_UUID_LEN));
	CHECK_EQ(tbv_ctl_parse(&lo, sizeof(lo), uuid_b, uuid_a, &parsed), 0);

	/* ours, in the wrong direction: refused, not left to another protocol */
	memcpy(msg.hdr.protocol_uuid, higher, TBV_UUID_LEN);
	CHECK_EQ(tbv_ctl_parse(&msg, sizeof(msg), uuid_b, uuid_a, &parsed), -EPROTO);
	memcpy(resp.hdr.protocol_uuid, higher, TBV_UUID_LEN);
	CHECK_EQ(tbv_ctl_parse(&resp, sizeof(resp), uuid_a, uuid_b, &parsed), -EPROTO);
}
