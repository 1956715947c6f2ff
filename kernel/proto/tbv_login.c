// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Link login: building, validating and negotiating control messages.
 * Everything that arrives here is untrusted peer input.
 */
#include "tbv_login.h"

/*
 * The tbverbs control protocol: edcef847-ec8e-4157-9825-a76fd62afd97 for requests
 * from the lower host UUID, 5c3a0e91-27d4-4b6f-8e1a-d94f60b2c738 from the higher.
 */
const u8 tbv_login_protocol_uuid[2][TBV_UUID_LEN] = {
	{ 0xed, 0xce, 0xf8, 0x47, 0xec, 0x8e, 0x41, 0x57,
	  0x98, 0x25, 0xa7, 0x6f, 0xd6, 0x2a, 0xfd, 0x97 },
	{ 0x5c, 0x3a, 0x0e, 0x91, 0x27, 0xd4, 0x4b, 0x6f,
	  0x8e, 0x1a, 0xd9, 0x4f, 0x60, 0xb2, 0xc7, 0x38 },
};

_Static_assert(sizeof(struct tbv_ctl_hdr) == 68, "ctl header layout");
_Static_assert(sizeof(struct tbv_login_msg) == 108, "login layout");
_Static_assert(sizeof(struct tbv_login_resp_msg) == 84, "login response layout");
_Static_assert(sizeof(struct tbv_login_msg) <= TBV_CTL_MAX_BYTES, "fits the control channel");

const u8 *tbv_ctl_protocol_uuid(const u8 *requester_uuid, const u8 *responder_uuid)
{
	return tbv_login_protocol_uuid[memcmp(requester_uuid, responder_uuid, TBV_UUID_LEN) > 0];
}

static bool tbv_msg_is_response(u32 type)
{
	return type == TBV_MSG_LOGIN_RESPONSE || type == TBV_MSG_LOGOUT_RESPONSE;
}

/* The UUID a packet of @type from @sender_uuid to @target_uuid must carry. */
static const u8 *tbv_ctl_hdr_protocol_uuid(u32 type, const u8 *sender_uuid,
					   const u8 *target_uuid)
{
	if (tbv_msg_is_response(type))
		return tbv_ctl_protocol_uuid(target_uuid, sender_uuid);
	return tbv_ctl_protocol_uuid(sender_uuid, target_uuid);
}

static bool tbv_ctl_is_our_protocol(const u8 *uuid)
{
	return !memcmp(uuid, tbv_login_protocol_uuid[0], TBV_UUID_LEN) ||
	       !memcmp(uuid, tbv_login_protocol_uuid[1], TBV_UUID_LEN);
}

void tbv_ctl_fill_hdr(struct tbv_ctl_hdr *hdr, u64 route, u8 sequence, size_t size,
		      const u8 *sender_uuid, const u8 *target_uuid,
		      enum tbv_msg_type type, u32 command_id)
{
	u32 words = (u32)(size / 4) - TBV_CTL_HDR_WORDS;

	hdr->route_hi = (u32)(route >> 32);
	hdr->route_lo = (u32)route;
	hdr->length_sn = (words & TBV_CTL_LENGTH_MASK) |
			 (((u32)sequence << TBV_CTL_SN_SHIFT) & TBV_CTL_SN_MASK);
	memcpy(hdr->protocol_uuid, tbv_ctl_hdr_protocol_uuid(type, sender_uuid, target_uuid),
	       TBV_UUID_LEN);
	memcpy(hdr->sender_uuid, sender_uuid, TBV_UUID_LEN);
	memcpy(hdr->target_uuid, target_uuid, TBV_UUID_LEN);
	hdr->type = type;
	hdr->command_id = command_id;
}

static size_t tbv_msg_size(u32 type)
{
	switch (type) {
	case TBV_MSG_LOGIN:
		return sizeof(struct tbv_login_msg);
	case TBV_MSG_LOGIN_RESPONSE:
		return sizeof(struct tbv_login_resp_msg);
	case TBV_MSG_LOGOUT:
	case TBV_MSG_LOGOUT_RESPONSE:
		return sizeof(struct tbv_logout_msg);
	default:
		return 0;
	}
}

static void tbv_login_body_to_params(const struct tbv_login_body *b,
				     struct tbv_login_params *p)
{
	unsigned int i;

	p->version_min = (u16)(b->version & 0xffff);
	p->version_max = (u16)(b->version >> 16);
	p->caps = b->caps;
	p->rails = b->rails;
	p->ring_size = b->ring_size;
	p->frame_size = b->frame_size;
	for (i = 0; i < TBV_MAX_RAILS; i++)
		p->tx_hopid[i] = b->tx_hopid[i];
	p->session = b->session;
}

int tbv_ctl_parse(const void *buf, size_t size, const u8 *local_uuid,
		  const u8 *peer_uuid, struct tbv_ctl_parsed *out)
{
	const struct tbv_ctl_hdr *hdr = buf;
	size_t want;

	/* Whose packet it is comes first: another protocol's is never counted as ours. */
	if (size < TBV_CTL_MIN_BYTES || !tbv_ctl_is_our_protocol(hdr->protocol_uuid))
		return -ENOENT;
	if (size < sizeof(*hdr) || size > TBV_CTL_MAX_BYTES || size % 4)
		return -EMSGSIZE;
	/* The control channel already checked length_sn against the packet. */
	if ((hdr->length_sn & TBV_CTL_LENGTH_MASK) != size / 4 - TBV_CTL_HDR_WORDS)
		return -EMSGSIZE;
	want = tbv_msg_size(hdr->type);
	if (!want)
		return -EPROTO;
	if (size != want)
		return -EMSGSIZE;
	if (memcmp(hdr->target_uuid, local_uuid, TBV_UUID_LEN) ||
	    memcmp(hdr->sender_uuid, peer_uuid, TBV_UUID_LEN))
		return -EXDEV;
	/* ours, but the other direction's UUID: no peer of ours sends that */
	if (memcmp(hdr->protocol_uuid,
		   tbv_ctl_hdr_protocol_uuid(hdr->type, peer_uuid, local_uuid), TBV_UUID_LEN))
		return -EPROTO;

	memset(out, 0, sizeof(*out));
	out->type = (enum tbv_msg_type)hdr->type;
	out->sequence = (u8)((hdr->length_sn & TBV_CTL_SN_MASK) >> TBV_CTL_SN_SHIFT);
	out->route = (((u64)hdr->route_hi << 32) | hdr->route_lo) & ~TBV_CTL_ROUTE_CM_BIT;
	out->command_id = hdr->command_id;
	out->hdr = hdr;
	if (hdr->type == TBV_MSG_LOGIN)
		tbv_login_body_to_params(&((const struct tbv_login_msg *)buf)->body,
					 &out->login);
	else if (hdr->type == TBV_MSG_LOGIN_RESPONSE)
		out->login_resp = ((const struct tbv_login_resp_msg *)buf)->body;
	return 0;
}

void tbv_login_build(struct tbv_login_msg *msg, u64 route, u8 sequence,
		     const u8 *local_uuid, const u8 *peer_uuid, u32 command_id,
		     const struct tbv_login_params *p)
{
	unsigned int i;

	memset(msg, 0, sizeof(*msg));
	tbv_ctl_fill_hdr(&msg->hdr, route, sequence, sizeof(*msg), local_uuid,
			 peer_uuid, TBV_MSG_LOGIN, command_id);
	msg->body.version = p->version_min | ((u32)p->version_max << 16);
	msg->body.caps = p->caps;
	msg->body.rails = p->rails;
	msg->body.ring_size = p->ring_size;
	msg->body.frame_size = p->frame_size;
	for (i = 0; i < TBV_MAX_RAILS; i++)
		msg->body.tx_hopid[i] = i < p->rails ? p->tx_hopid[i] : 0;
	msg->body.session = p->session;
}

void tbv_login_build_response(struct tbv_login_resp_msg *msg, u64 route, u8 sequence,
			      const u8 *local_uuid, const u8 *peer_uuid, u32 command_id,
			      enum tbv_login_status status,
			      const struct tbv_login_agreed *agreed)
{
	memset(msg, 0, sizeof(*msg));
	tbv_ctl_fill_hdr(&msg->hdr, route, sequence, sizeof(*msg), local_uuid,
			 peer_uuid, TBV_MSG_LOGIN_RESPONSE, command_id);
	msg->body.status = status;
	if (status == TBV_LOGIN_OK && agreed) {
		msg->body.version = agreed->version;
		msg->body.rails = agreed->rails;
	}
}

void tbv_logout_build(struct tbv_logout_msg *msg, enum tbv_msg_type type, u64 route,
		      u8 sequence, const u8 *local_uuid, const u8 *peer_uuid,
		      u32 command_id)
{
	memset(msg, 0, sizeof(*msg));
	tbv_ctl_fill_hdr(&msg->hdr, route, sequence, sizeof(*msg), local_uuid,
			 peer_uuid, type, command_id);
}

static bool tbv_ring_size_valid(u32 n)
{
	return n >= 16 && n <= 4096 && !(n & (n - 1));
}

enum tbv_login_status tbv_login_check_params(const struct tbv_login_params *p)
{
	unsigned int i;

	if (!p->version_min || p->version_min > p->version_max)
		return TBV_LOGIN_E_VERSION;
	if (!p->rails || p->rails > TBV_MAX_RAILS)
		return TBV_LOGIN_E_PARAM;
	if (!tbv_ring_size_valid(p->ring_size) || p->frame_size != TBV_FRAME_SIZE)
		return TBV_LOGIN_E_PARAM;
	for (i = 0; i < p->rails; i++) {
		if (p->tx_hopid[i] < TBV_MIN_HOPID || p->tx_hopid[i] > TBV_MAX_HOPID)
			return TBV_LOGIN_E_PARAM;
	}
	return TBV_LOGIN_OK;
}

enum tbv_login_status tbv_login_negotiate(const struct tbv_login_params *local,
					  const struct tbv_login_params *peer,
					  struct tbv_login_agreed *agreed)
{
	enum tbv_login_status st;
	u32 lo, hi, i;

	st = tbv_login_check_params(peer);
	if (st != TBV_LOGIN_OK)
		return st;
	lo = TBV_MAX(local->version_min, peer->version_min);
	hi = TBV_MIN(local->version_max, peer->version_max);
	if (lo > hi)
		return TBV_LOGIN_E_VERSION;

	memset(agreed, 0, sizeof(*agreed));
	agreed->version = hi;
	agreed->caps = local->caps & peer->caps;
	agreed->rails = TBV_MIN(local->rails, peer->rails);
	agreed->tx_credits = peer->ring_size;
	for (i = 0; i < agreed->rails; i++)
		agreed->peer_tx_hopid[i] = peer->tx_hopid[i];
	agreed->peer_session = peer->session;
	return TBV_LOGIN_OK;
}

const char *tbv_login_status_str(u32 status)
{
	static const char *const names[TBV_LOGIN_E_MAX] = {
		[TBV_LOGIN_OK] = "accepted",
		[TBV_LOGIN_E_VERSION] = "no common protocol version",
		[TBV_LOGIN_E_PARAM] = "invalid link parameters",
		[TBV_LOGIN_E_TARGET] = "addressed to another host",
		[TBV_LOGIN_E_POLICY] = "refused by local policy",
	};

	return status < TBV_LOGIN_E_MAX ? names[status] : "unknown status";
}

void tbv_login_init(struct tbv_login_state *st, const struct tbv_login_params *local,
		    u32 first_command_id)
{
	/* @local may point into @st (a reset keeps our offer): copy it out first */
	struct tbv_login_params offer = *local;

	memset(st, 0, sizeof(*st));
	st->local = offer;
	st->command_id = first_command_id;
}

/*
 * After the peer's login @ev/@status while our link is refused: must our half
 * be done again? Yes when the peer's offer is acceptable now, unless this
 * login completed the agreement (our half still stands). Clears our half if so.
 */
bool tbv_login_redo_ours(struct tbv_login_state *st, enum tbv_login_status status,
			 enum tbv_login_event ev)
{
	if (status != TBV_LOGIN_OK || ev == TBV_LOGIN_EV_UP)
		return false;
	st->ours_accepted = false;
	return true;
}

bool tbv_login_is_up(const struct tbv_login_state *st)
{
	return st->ours_accepted && st->peer_accepted &&
	       st->peer_view.version == st->agreed.version &&
	       st->peer_view.rails == st->agreed.rails;
}

/* Both halves done: the peer's view of the agreement must equal ours. */
static enum tbv_login_event tbv_login_settle(const struct tbv_login_state *st)
{
	if (!st->ours_accepted || !st->peer_accepted)
		return TBV_LOGIN_EV_PROGRESS;
	return tbv_login_is_up(st) ? TBV_LOGIN_EV_UP : TBV_LOGIN_EV_REFUSED;
}

enum tbv_login_event tbv_login_on_request(struct tbv_login_state *st,
					  const struct tbv_login_params *peer,
					  enum tbv_login_status *status)
{
	struct tbv_login_agreed agreed;
	bool was_up = tbv_login_is_up(st);

	*status = tbv_login_negotiate(&st->local, peer, &agreed);
	if (*status != TBV_LOGIN_OK)
		return TBV_LOGIN_EV_REFUSED;

	if (st->peer_accepted) {
		if (agreed.peer_session == st->agreed.peer_session &&
		    !memcmp(&agreed, &st->agreed, sizeof(agreed)))
			return TBV_LOGIN_EV_NONE;	/* a retry: answer again */
		/*
		 * A new session (the peer restarted) or a changed offer: our half
		 * must be redone too, and an answer to a LOGIN we sent before this
		 * point speaks of the old agreement: the new command id drops it.
		 */
		st->agreed = agreed;
		st->ours_accepted = false;
		st->command_id++;
		return was_up ? TBV_LOGIN_EV_RESET : TBV_LOGIN_EV_PROGRESS;
	}
	st->agreed = agreed;
	st->peer_accepted = true;
	return tbv_login_settle(st);
}

enum tbv_login_event tbv_login_on_response(struct tbv_login_state *st,
					   u32 command_id,
					   const struct tbv_login_resp_body *resp)
{
	if (command_id != st->command_id)
		return TBV_LOGIN_EV_NONE;	/* an answer to an older attempt */
	if (resp->status != TBV_LOGIN_OK)
		return TBV_LOGIN_EV_REFUSED;
	if (st->ours_accepted)
		return TBV_LOGIN_EV_NONE;
	st->ours_accepted = true;
	st->peer_view = *resp;
	return tbv_login_settle(st);
}
