// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tbv_ctl_parse() on one control packet from the peer (the input, exactly as
 * long as the packet). Checked: a packet of another protocol is left to others
 * (-ENOENT) and ours never is; an accepted packet is addressed to us from the
 * peer, has its type's exact size, and what was parsed out of it builds
 * (tbv_login_build & co.) a packet that parses to the same values.
 */
#include "fuzz.h"

#define FUZZ_UUID_OFF	(TBV_CTL_HDR_WORDS * 4)

static void fuzz_same_login(const struct tbv_login_params *a, const struct tbv_login_params *b)
{
	unsigned int i;

	FUZZ_CHECK(a->version_min == b->version_min && a->version_max == b->version_max);
	FUZZ_CHECK(a->caps == b->caps && a->rails == b->rails);
	FUZZ_CHECK(a->ring_size == b->ring_size && a->frame_size == b->frame_size);
	FUZZ_CHECK(a->session == b->session);
	/* HopIDs beyond the offered rails are not sent (0 on the wire). */
	for (i = 0; i < TBV_MAX_RAILS; i++)
		FUZZ_CHECK(b->tx_hopid[i] == (i < a->rails ? a->tx_hopid[i] : 0));
}

/* Build the message @p describes the way the peer would, parse it, compare. */
static void fuzz_rebuild(const struct tbv_ctl_parsed *p)
{
	union {
		struct tbv_login_msg login;
		struct tbv_login_resp_msg resp;
		struct tbv_logout_msg logout;
	} m;
	struct tbv_login_agreed agreed = { 0 };
	struct tbv_ctl_parsed q;
	size_t size;

	switch (p->type) {
	case TBV_MSG_LOGIN:
		tbv_login_build(&m.login, p->route, p->sequence, fuzz_peer_uuid, fuzz_local_uuid,
				p->command_id, &p->login);
		size = sizeof(m.login);
		break;
	case TBV_MSG_LOGIN_RESPONSE:
		agreed.version = p->login_resp.version;
		agreed.rails = p->login_resp.rails;
		tbv_login_build_response(&m.resp, p->route, p->sequence, fuzz_peer_uuid,
					 fuzz_local_uuid, p->command_id,
					 (enum tbv_login_status)p->login_resp.status, &agreed);
		size = sizeof(m.resp);
		break;
	default:
		tbv_logout_build(&m.logout, p->type, p->route, p->sequence, fuzz_peer_uuid,
				 fuzz_local_uuid, p->command_id);
		size = sizeof(m.logout);
		break;
	}
	FUZZ_CHECK(tbv_ctl_parse(&m, size, fuzz_local_uuid, fuzz_peer_uuid, &q) == 0);
	FUZZ_CHECK(q.type == p->type && q.sequence == p->sequence);
	FUZZ_CHECK(q.route == p->route && q.command_id == p->command_id);
	if (p->type == TBV_MSG_LOGIN)
		fuzz_same_login(&p->login, &q.login);
	if (p->type == TBV_MSG_LOGIN_RESPONSE) {
		FUZZ_CHECK(q.login_resp.status == p->login_resp.status);
		if (p->login_resp.status == TBV_LOGIN_OK)
			FUZZ_CHECK(q.login_resp.version == p->login_resp.version &&
				   q.login_resp.rails == p->login_resp.rails);
	}
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	const struct tbv_ctl_hdr *hdr;
	struct tbv_ctl_parsed p;
	bool ours;
	u8 *buf;
	int ret;

	if (size > 2 * TBV_CTL_MAX_BYTES)
		return -1;	/* larger than any control packet: keep it out of the corpus */
	/* The control channel hands over whole 32-bit words: an aligned block of exactly @size. */
	buf = malloc(size);
	if (!buf)
		abort();
	memcpy(buf, data, size);
	hdr = (const struct tbv_ctl_hdr *)buf;

	ret = tbv_ctl_parse(buf, size, fuzz_local_uuid, fuzz_peer_uuid, &p);
	if (size >= TBV_CTL_MIN_BYTES) {
		/* tbv_login.h: -ENOENT if (and only if) the packet belongs to another protocol. */
		ours = !memcmp(buf + FUZZ_UUID_OFF, tbv_login_protocol_uuid[0], TBV_UUID_LEN) ||
		       !memcmp(buf + FUZZ_UUID_OFF, tbv_login_protocol_uuid[1], TBV_UUID_LEN);
		FUZZ_CHECK((ret == -ENOENT) == !ours);
	}
	if (ret)
		goto out;

	FUZZ_CHECK(p.hdr == hdr);
	/* the direction's UUID: the peer's for its requests, ours for its answers */
	if (p.type == TBV_MSG_LOGIN_RESPONSE || p.type == TBV_MSG_LOGOUT_RESPONSE)
		FUZZ_CHECK(!memcmp(hdr->protocol_uuid,
				   tbv_ctl_protocol_uuid(fuzz_local_uuid, fuzz_peer_uuid),
				   TBV_UUID_LEN));
	else
		FUZZ_CHECK(!memcmp(hdr->protocol_uuid,
				   tbv_ctl_protocol_uuid(fuzz_peer_uuid, fuzz_local_uuid),
				   TBV_UUID_LEN));
	FUZZ_CHECK(!memcmp(hdr->target_uuid, fuzz_local_uuid, TBV_UUID_LEN));
	FUZZ_CHECK(!memcmp(hdr->sender_uuid, fuzz_peer_uuid, TBV_UUID_LEN));
	FUZZ_CHECK(p.type >= TBV_MSG_LOGIN && p.type <= TBV_MSG_LOGOUT_RESPONSE);
	FUZZ_CHECK(p.type == hdr->type && p.command_id == hdr->command_id);
	FUZZ_CHECK(p.sequence <= 3 && !(p.route & TBV_CTL_ROUTE_CM_BIT));
	FUZZ_CHECK(size % 4 == 0 && size <= TBV_CTL_MAX_BYTES);
	FUZZ_CHECK((hdr->length_sn & TBV_CTL_LENGTH_MASK) == size / 4 - TBV_CTL_HDR_WORDS);
	switch (p.type) {
	case TBV_MSG_LOGIN:
		FUZZ_CHECK(size == sizeof(struct tbv_login_msg));
		tbv_login_check_params(&p.login);
		break;
	case TBV_MSG_LOGIN_RESPONSE:
		FUZZ_CHECK(size == sizeof(struct tbv_login_resp_msg));
		FUZZ_CHECK(tbv_login_status_str(p.login_resp.status) != NULL);
		break;
	default:
		FUZZ_CHECK(size == sizeof(struct tbv_logout_msg));
		break;
	}
	fuzz_rebuild(&p);
out:
	free(buf);
	return 0;
}
