// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The login exchange against a hostile peer: a sequence of control packets
 * (fuzz.h: records) goes through tbv_ctl_parse() into the login state machine
 * exactly as kernel/tbv_link.c drives it (tbv_link_ctl_rx, the login work, the
 * LOGOUT handler), with the link's state reduced to LOGIN / UP / REFUSED.
 *
 * Checked after every packet: our own offer stays valid; whatever agreement
 * the machine holds is one the data path can use (rails, HopIDs, credits,
 * version within both offers); negotiation is symmetric; EV_UP means up, and
 * a link that is up has a login state that is up; the response we send parses
 * on the peer's side and says what we decided.
 */
#include "fuzz.h"

enum fuzz_link_state { FUZZ_LINK_LOGIN, FUZZ_LINK_UP, FUZZ_LINK_REFUSED };

struct fuzz_link {
	struct tbv_login_state login;
	enum fuzz_link_state state;
	u8 ctl_sequence;
};

static bool fuzz_ring_size_valid(u32 n)
{
	return n >= 16 && n <= 4096 && !(n & (n - 1));
}

/* An agreement the data path can be brought up on. */
static void fuzz_check_agreed(const struct tbv_login_state *st)
{
	const struct tbv_login_agreed *a = &st->agreed;
	unsigned int i;

	FUZZ_CHECK(a->version >= st->local.version_min && a->version <= st->local.version_max);
	FUZZ_CHECK(a->rails >= 1 && a->rails <= TBV_MIN(st->local.rails, (u32)TBV_MAX_RAILS));
	FUZZ_CHECK(fuzz_ring_size_valid(a->tx_credits));
	for (i = 0; i < TBV_MAX_RAILS; i++) {
		if (i < a->rails)
			FUZZ_CHECK(a->peer_tx_hopid[i] >= TBV_MIN_HOPID &&
				   a->peer_tx_hopid[i] <= TBV_MAX_HOPID);
		else
			FUZZ_CHECK(a->peer_tx_hopid[i] == 0);
	}
	FUZZ_CHECK(!(a->caps & ~st->local.caps));
}

static void fuzz_check_state(const struct fuzz_link *link)
{
	const struct tbv_login_state *st = &link->login;

	/* Our offer is what we send in every LOGIN: the peer must be able to accept it. */
	FUZZ_CHECK(tbv_login_check_params(&st->local) == TBV_LOGIN_OK);
	if (st->peer_accepted)
		fuzz_check_agreed(st);
	if (tbv_login_is_up(st))
		FUZZ_CHECK(st->ours_accepted && st->peer_accepted);
	/* A link that runs has a login that says so (or a peer restart would go unnoticed). */
	if (link->state == FUZZ_LINK_UP)
		FUZZ_CHECK(tbv_login_is_up(st));
}

/* kernel/tbv_link.c: tbv_link_login_event(), with the work items run at once. */
static void fuzz_event(struct fuzz_link *link, enum tbv_login_event ev)
{
	switch (ev) {
	case TBV_LOGIN_EV_UP:
		FUZZ_CHECK(tbv_login_is_up(&link->login));
		fuzz_check_agreed(&link->login);
		link->state = FUZZ_LINK_UP;
		break;
	case TBV_LOGIN_EV_RESET:
		/* reset_work: tear down, log in again unless refused */
		if (link->state != FUZZ_LINK_REFUSED)
			link->state = FUZZ_LINK_LOGIN;
		break;
	case TBV_LOGIN_EV_REFUSED:
		link->state = FUZZ_LINK_REFUSED;
		break;
	default:
		break;
	}
}

/* Negotiation is symmetric in the two offers (tbv_login.h). */
static void fuzz_check_symmetric(const struct tbv_login_params *local,
				 const struct tbv_login_params *peer)
{
	struct tbv_login_agreed a, b;
	enum tbv_login_status sa, sb;

	if (tbv_login_check_params(peer) != TBV_LOGIN_OK)
		return;
	sa = tbv_login_negotiate(local, peer, &a);
	sb = tbv_login_negotiate(peer, local, &b);
	FUZZ_CHECK(sa == sb);
	if (sa == TBV_LOGIN_OK)
		FUZZ_CHECK(a.version == b.version && a.caps == b.caps && a.rails == b.rails);
}

/* kernel/tbv_link.c: tbv_link_handle_login(). */
static void fuzz_handle_login(struct fuzz_link *link, const struct tbv_ctl_parsed *p)
{
	struct tbv_login_state *st = &link->login;
	struct tbv_login_resp_msg resp;
	enum tbv_login_status status;
	enum tbv_login_event ev;
	struct tbv_ctl_parsed q;

	fuzz_check_symmetric(&st->local, &p->login);
	ev = tbv_login_on_request(st, &p->login, &status);
	FUZZ_CHECK(status < TBV_LOGIN_E_MAX);
	if (status != TBV_LOGIN_OK) {
		FUZZ_CHECK(ev == TBV_LOGIN_EV_REFUSED);
	} else {
		FUZZ_CHECK(tbv_login_check_params(&p->login) == TBV_LOGIN_OK);
		FUZZ_CHECK(st->peer_accepted);
		FUZZ_CHECK(st->agreed.peer_session == p->login.session);
	}

	tbv_login_build_response(&resp, p->route, p->sequence, fuzz_local_uuid, fuzz_peer_uuid,
				 p->command_id, status, &st->agreed);
	/* What the peer gets: our answer to its command, with our decision. */
	FUZZ_CHECK(tbv_ctl_parse(&resp, sizeof(resp), fuzz_peer_uuid, fuzz_local_uuid, &q) == 0);
	FUZZ_CHECK(q.type == TBV_MSG_LOGIN_RESPONSE && q.command_id == p->command_id);
	FUZZ_CHECK(q.route == p->route && q.login_resp.status == status);
	if (status == TBV_LOGIN_OK)
		FUZZ_CHECK(q.login_resp.version == st->agreed.version &&
			   q.login_resp.rails == st->agreed.rails);
	else
		FUZZ_CHECK(!q.login_resp.version && !q.login_resp.rails);

	if (link->state == FUZZ_LINK_REFUSED && tbv_login_redo_ours(st, status, ev))
		link->state = FUZZ_LINK_LOGIN;
	fuzz_event(link, ev);
}

/* kernel/tbv_link.c: tbv_link_handle_logout(). */
static void fuzz_handle_logout(struct fuzz_link *link)
{
	tbv_login_init(&link->login, &link->login.local, link->login.command_id);
	if (link->state != FUZZ_LINK_REFUSED)
		link->state = FUZZ_LINK_LOGIN;
}

/* kernel/tbv_link.c: tbv_link_ctl_rx(). */
static void fuzz_ctl_rx(struct fuzz_link *link, const u8 *buf, size_t size)
{
	struct tbv_ctl_parsed p;

	if (tbv_ctl_parse(buf, size, fuzz_local_uuid, fuzz_peer_uuid, &p))
		return;
	if (p.route != FUZZ_ROUTE)
		return;
	if (p.type == TBV_MSG_LOGIN)
		fuzz_handle_login(link, &p);
	else if (p.type == TBV_MSG_LOGOUT)
		fuzz_handle_logout(link);
}

/* kernel/tbv_link.c: tbv_link_login_work(): send a LOGIN, take @buf as its answer. */
static void fuzz_login_attempt(struct fuzz_link *link, const u8 *buf, size_t size)
{
	struct tbv_login_state *st = &link->login;
	struct tbv_login_msg req;
	struct tbv_ctl_parsed p, q;
	enum tbv_login_event ev;

	if (link->state != FUZZ_LINK_LOGIN || st->ours_accepted)
		return;
	st->command_id++;
	tbv_login_build(&req, FUZZ_ROUTE, link->ctl_sequence++ & 3, fuzz_local_uuid,
			fuzz_peer_uuid, st->command_id, &st->local);
	/* Our request, as the peer parses it: a valid offer. */
	FUZZ_CHECK(tbv_ctl_parse(&req, sizeof(req), fuzz_peer_uuid, fuzz_local_uuid, &q) == 0);
	FUZZ_CHECK(q.type == TBV_MSG_LOGIN && q.command_id == st->command_id);
	FUZZ_CHECK(tbv_login_check_params(&q.login) == TBV_LOGIN_OK);

	if (tbv_ctl_parse(buf, size, fuzz_local_uuid, fuzz_peer_uuid, &p) ||
	    p.type != TBV_MSG_LOGIN_RESPONSE)
		return;
	FUZZ_CHECK(tbv_login_status_str(p.login_resp.status) != NULL);
	ev = tbv_login_on_response(st, p.command_id, &p.login_resp);
	if (p.command_id != st->command_id)
		FUZZ_CHECK(ev == TBV_LOGIN_EV_NONE);
	else if (p.login_resp.status != TBV_LOGIN_OK)
		FUZZ_CHECK(ev == TBV_LOGIN_EV_REFUSED);
	else
		FUZZ_CHECK(st->ours_accepted);
	fuzz_event(link, ev);
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct tbv_login_params local;
	struct fuzz_link link = { 0 };
	u8 cfg, rec[2];

	if (!fuzz_take(&in, &cfg, 1))
		return 0;
	fuzz_local_params(&local, cfg);
	tbv_login_init(&link.login, &local, FUZZ_FIRST_COMMAND_ID);
	link.state = FUZZ_LINK_LOGIN;
	fuzz_check_state(&link);

	while (fuzz_take(&in, rec, sizeof(rec)) == sizeof(rec)) {
		size_t len;
		u8 *buf = fuzz_take_block(&in, rec[1], &len);

		if ((rec[0] & FUZZ_OP_MASK) == FUZZ_OP_PEER)
			fuzz_ctl_rx(&link, buf, len);
		else
			fuzz_login_attempt(&link, buf, len);
		free(buf);
		fuzz_check_state(&link);
	}
	return 0;
}
