// SPDX-License-Identifier: GPL-2.0
/*
 * A link to one peer: login over the control channel, then bring-up of the
 * rails, the netdev and the ib_device; teardown in the reverse order. Shared by
 * every backend; the backend only moves bytes (see tbv_link.h).
 *
 * Its life is one state machine (enum tbv_link_state; docs/architecture.md
 * draws it). link->lock guards it but is never held across a call that may
 * wait for the backend's connection manager (paths_enable, paths_disable: for
 * USB4, thunderbolt.ko's domain lock, which it holds around our remove()) or
 * for the peer (ctl_request, ctl_response): such calls run in the OPENING and
 * CLOSING states, by the one work that owns the transition.
 */
#include <linux/export.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/slab.h>

#include "tbv.h"
#include "tbv_policy.h"

#define TBV_LOGIN_TIMEOUT_MS	500
#define TBV_BRINGUP_RETRY_MS	1000	/* after a failed bring-up, doubling per failure... */
#define TBV_BRINGUP_RETRY_MAX_MS	60000	/* ...up to a minute */
/* A device another module unregistered is registered again after... */
#define TBV_DEV_LOST_RETRY_MS	2000
#define TBV_DEV_LOST_RETRY_MAX_MS	60000	/* ...doubling while it recurs within a minute */
/* Unanswered logins (about half a minute) before we say so once. */
#define TBV_LOGIN_SILENT_TRIES	30

/*
 * Peer policy: an optional list of the host UUIDs we talk to (empty: anyone,
 * like the kernel's Thunderbolt networking). A refused peer gets no link.
 */
static char tbv_allowed_peers[TBV_PEER_LIST_MAX + 1];

static int tbv_allowed_peers_set(const char *val, const struct kernel_param *kp)
{
	if (strnlen(val, TBV_PEER_LIST_MAX + 1) > TBV_PEER_LIST_MAX || tbv_peer_list_check(val))
		return -EINVAL;
	return param_set_copystring(val, kp);
}

static const struct kernel_param_ops tbv_allowed_peers_ops = {
	.set = tbv_allowed_peers_set,
	.get = param_get_string,
};

static struct kparam_string tbv_allowed_peers_kps = {
	.maxlen = sizeof(tbv_allowed_peers),
	.string = tbv_allowed_peers,
};

module_param_cb(allowed_peers, &tbv_allowed_peers_ops, &tbv_allowed_peers_kps, 0644);
MODULE_PARM_DESC(allowed_peers,
		 "host UUIDs of the peers to accept, comma-separated (default: empty, any peer)");

static bool tbv_peer_is_allowed(const struct tbv_link_info *info)
{
	int ret;

	kernel_param_lock(THIS_MODULE);
	ret = tbv_peer_allowed(tbv_allowed_peers, info->peer_uuid);
	kernel_param_unlock(THIS_MODULE);
	if (ret == 1)
		return true;
	dev_notice(info->parent, "peer %pUb refused: not in allowed_peers\n", info->peer_uuid);
	return false;
}

static unsigned long tbv_login_retry_delay(unsigned int tries)
{
	if (tries < 10)
		return msecs_to_jiffies(100);
	if (tries < 60)
		return msecs_to_jiffies(1000);
	return msecs_to_jiffies(5000);
}

/* A firmware connection manager may move the peer to another route while it stays bound. */
static u64 tbv_link_route(struct tbv_link *link)
{
	return link->info.ops->route ? link->info.ops->route(link) : link->info.route;
}

#define tbv_link_warn(link, fmt, ...) \
	dev_warn((link)->info.parent, "link %u: " fmt, (link)->index, ##__VA_ARGS__)
#define tbv_link_info(link, fmt, ...) \
	dev_info((link)->info.parent, "link %u: " fmt, (link)->index, ##__VA_ARGS__)

static u64 tbv_now_ms(void)
{
	return ktime_to_ms(ktime_get());
}

/*
 * May we log a line about something the peer did? A peer chooses how often it
 * logs in or out: at most TBV_PEER_LOG_LINES such lines a minute per link, and
 * the next one allowed says how many were not.
 */
static bool tbv_link_peer_may_log(struct tbv_link *link)
{
	u32 suppressed;

	lockdep_assert_held(&link->lock);
	if (!tbv_log_limit_allow(&link->peer_log, tbv_now_ms(), &suppressed))
		return false;
	if (suppressed)
		tbv_link_info(link, "%u more lines about peer %pUb were not logged\n",
			      suppressed, link->info.peer_uuid);
	return true;
}

/* ---- the state machine ---- */

static void tbv_link_set_state(struct tbv_link *link, enum tbv_link_state state)
{
	lockdep_assert_held(&link->lock);
	link->state = state;
	WRITE_ONCE(link->data_up, state == TBV_LINK_UP);
}

/* Our next login waits at least @ms from now (a backoff never shortens). */
static void tbv_link_relogin_after(struct tbv_link *link, unsigned int ms)
{
	unsigned long at = jiffies + msecs_to_jiffies(ms);

	if (time_after(at, link->relogin_at))
		link->relogin_at = at;
}

/* Arrive in @to (LOGIN, REFUSED, SUSPENDED or DEAD) with no devices left. */
static void tbv_link_enter(struct tbv_link *link, enum tbv_link_state to)
{
	unsigned long now = jiffies;

	lockdep_assert_held(&link->lock);
	link->next = TBV_LINK_UP;
	tbv_link_set_state(link, to);
	if (to != TBV_LINK_LOGIN)
		return;
	link->login_tries = 0;
	mod_delayed_work(tbv_wq, &link->login_work,
			 time_after(link->relogin_at, now) ? link->relogin_at - now : 0);
}

/* Where the link is headed: its state, or where a pending teardown takes it. */
static enum tbv_link_state tbv_link_goal(const struct tbv_link *link)
{
	switch (link->state) {
	case TBV_LINK_OPENING:
	case TBV_LINK_UP:
	case TBV_LINK_CLOSING:
		return link->next == TBV_LINK_UP ? link->state : link->next;
	default:
		return link->state;
	}
}

/*
 * A teardown's destination, given another already asked for: the host's
 * (SUSPENDED) and the backend's (DEAD) win over the login's (LOGIN, REFUSED),
 * of which the latest counts.
 */
static enum tbv_link_state tbv_link_merge(enum tbv_link_state cur, enum tbv_link_state to)
{
	if (cur == TBV_LINK_DEAD || to == TBV_LINK_DEAD)
		return TBV_LINK_DEAD;
	if (cur == TBV_LINK_SUSPENDED || to == TBV_LINK_SUSPENDED)
		return TBV_LINK_SUSPENDED;
	return to;
}

/*
 * Take the link to @to (LOGIN or REFUSED: what the login decided). With no
 * devices it goes there now; with devices, down_work tears them down (UP), or
 * the work in a paths call does once it returns (OPENING, CLOSING).
 */
static void tbv_link_go(struct tbv_link *link, enum tbv_link_state to)
{
	lockdep_assert_held(&link->lock);

	switch (link->state) {
	case TBV_LINK_UP:
		link->next = tbv_link_merge(link->next, to);
		/* to SUSPENDED or DEAD, the suspend or destroy tears down, not down_work */
		if (link->next == TBV_LINK_LOGIN || link->next == TBV_LINK_REFUSED)
			queue_work(tbv_wq, &link->down_work);
		break;
	case TBV_LINK_OPENING:
	case TBV_LINK_CLOSING:
		link->next = tbv_link_merge(link->next, to);
		break;
	case TBV_LINK_SUSPENDED:
	case TBV_LINK_DEAD:
		break;	/* only resume or nothing leaves these */
	default:	/* LOGIN, REFUSED, STARTING (up_work has built nothing yet) */
		tbv_link_enter(link, to);
	}
}

/*
 * Tear down what exists and end in link->next: the ib device, carrier and NAPI
 * under the lock; the paths (if open) without it, as CLOSING; then the rings,
 * the netdev and the buffers. Only the owner of the link's current state calls
 * it: the work that left STARTING or OPENING, down_work (UP), or
 * tbv_link_suspend()/tbv_link_destroy() once the works are idle.
 */
static void tbv_link_take_down(struct tbv_link *link, bool paths_open)
{
	lockdep_assert_held(&link->lock);
	if (WARN_ON_ONCE(link->next == TBV_LINK_UP))
		link->next = TBV_LINK_LOGIN;	/* a teardown always has a destination */

	if (link->dev)
		tbv_ibdev_unregister(link);
	tbv_link_set_state(link, TBV_LINK_CLOSING);
	if (link->ndev) {
		netif_carrier_off(link->ndev);
		netif_tx_disable(link->ndev);
	}
	tbv_rails_quiesce(link);
	if (paths_open) {
		/* may wait for the connection manager, whose remove() may wait for us */
		mutex_unlock(&link->lock);
		link->info.ops->paths_disable(link);
		mutex_lock(&link->lock);
	}
	tbv_rails_stop(link);
	tbv_netdev_unregister(link);
	tbv_rails_free(link);
	link->nr_rails = 0;
	tbv_link_enter(link, link->next);
}

/*
 * The peer wants the link down (a new session, a refusal, a LOGOUT). When that
 * costs devices that are up or coming up, it counts (tbv_churn_teardown()):
 * our next login waits, longer each time the peer does it again, so a peer
 * that keeps doing it gets at most TBV_CHURN_MAX teardowns a minute.
 */
static void tbv_link_peer_down(struct tbv_link *link, enum tbv_link_state to)
{
	bool costly;
	u32 delay_ms;

	lockdep_assert_held(&link->lock);
	costly = link->next == TBV_LINK_UP &&
		 (link->state == TBV_LINK_STARTING || link->state == TBV_LINK_OPENING ||
		  link->state == TBV_LINK_UP);
	if (costly) {
		atomic64_inc(&link->stats.peer_teardowns);
		delay_ms = tbv_churn_teardown(&link->churn, tbv_now_ms());
		tbv_link_relogin_after(link, delay_ms);
		/* at most TBV_CHURN_MAX a minute, like the teardowns: not rate-limited */
		if (delay_ms)
			tbv_link_warn(link, "peer %pUb took the link down %u times in a row; next login in %u ms\n",
				      link->info.peer_uuid, link->churn.streak, delay_ms);
	}
	tbv_link_go(link, to);
}

/* ---- bring-up ---- */

/* The netdev allocated, the rails started; on failure *@usable rails did start. */
static int tbv_link_start_rails(struct tbv_link *link, unsigned int *usable)
{
	lockdep_assert_held(&link->lock);

	link->nr_rails = link->login.agreed.rails;
	link->stripe = tbv_stripe_agreed(link);
	link->split = tbv_split_agreed(link);
	link->rdma_full = link->split ? TBV_RDMA_SPLIT_PAYLOAD : TBV_RDMA_MAX_PAYLOAD;
	link->ndev = tbv_netdev_alloc(link);
	if (!link->ndev)
		return -ENOMEM;
	return tbv_rails_start(link, usable);
}

static int tbv_link_register(struct tbv_link *link)
{
	int ret;

	lockdep_assert_held(&link->lock);

	ret = tbv_netdev_register(link);
	if (ret)
		return ret;
	return tbv_ibdev_register(link);
}

/*
 * Some rails came up, a later one did not (a firmware connection manager opens
 * one DMA tunnel per peer; another peer took the controller's free rings): log
 * in again offering only those. The peer sees a changed offer, resets and
 * agrees on the fewer rails. The offer only shrinks, so this ends.
 */
static void tbv_link_retry_with_fewer_rails(struct tbv_link *link, unsigned int rails, int err)
{
	struct tbv_login_params offer = link->login.local;

	lockdep_assert_held(&link->lock);

	tbv_link_warn(link, "rail %u did not come up (%d); logging in again with %u rail(s)\n",
		      rails, err, rails);
	offer.rails = rails;
	tbv_login_init(&link->login, &offer, link->login.command_id);
	link->next = TBV_LINK_LOGIN;
}

/*
 * The bring-up failed with no rail usable (another peer took the controller's
 * free rings since probe, memory ran out): tell the peer, whose side may be
 * up, and log in again later, waiting longer after each failure.
 */
static void tbv_link_retry_later(struct tbv_link *link, int err, const char *why)
{
	unsigned int shift = min(link->bringup_failures++, 6u);
	unsigned int delay_ms = min(TBV_BRINGUP_RETRY_MS << shift, TBV_BRINGUP_RETRY_MAX_MS);

	lockdep_assert_held(&link->lock);

	if (why)
		tbv_link_warn(link, "%s; logging out, retrying in %u s\n", why, delay_ms / 1000);
	else
		tbv_link_warn(link, "bring-up failed (%d); logging out, retrying in %u s\n", err,
			      delay_ms / 1000);
	tbv_login_init(&link->login, &link->login.local, link->login.command_id);
	tbv_link_relogin_after(link, delay_ms);
	link->next = TBV_LINK_LOGIN;
}

/*
 * The self-check ran (tbv_calib.c, which logged each rail that failed): true
 * if everything agreed passed. Else log in again with what passed, the rails
 * from rail 0 up and split packets if they passed on each (both ends judged
 * the same, and the offer only shrinks), or with no rail, later (*@logout).
 */
static bool tbv_link_calibrated(struct tbv_link *link, const struct tbv_login_agreed *agreed,
				bool *logout)
{
	struct tbv_login_params offer = link->login.local;
	unsigned int usable;
	bool split_ok;

	lockdep_assert_held(&link->lock);

	usable = tbv_calib_verdict(link, &split_ok);
	if (usable == agreed->rails && split_ok)
		return true;
	if (!usable) {
		tbv_link_retry_later(link, -EIO, "no rail passed the self-check");
		*logout = true;
		return false;
	}
	if (!split_ok)
		offer.caps &= ~TBV_CAP_SPLIT;
	if (usable < agreed->rails)
		tbv_link_warn(link, "logging in again with the %u rail(s) that passed the self-check%s\n",
			      usable, split_ok ? "" : ", without split packets");
	else
		tbv_link_warn(link, "logging in again without split packets, which failed the self-check\n");
	offer.rails = usable;
	tbv_login_init(&link->login, &offer, link->login.command_id);
	link->next = TBV_LINK_LOGIN;
	return false;
}

static void tbv_link_send_logout(struct tbv_link *link);

/*
 * STARTING -> OPENING -> UP. The paths open without the lock: the backend may
 * wait for its connection manager, which may be removing the link meanwhile
 * and then waits for whoever holds the lock.
 */
static void tbv_link_up_work(struct work_struct *work)
{
	struct tbv_link *link = container_of(work, struct tbv_link, up_work);
	struct tbv_login_agreed agreed;
	bool paths_open = false, logout = false;
	unsigned int usable = 0;
	int ret;

	mutex_lock(&link->lock);
	if (link->state != TBV_LINK_STARTING)
		goto out;
	/* ours: the peer may change link->login while the lock is dropped */
	agreed = link->login.agreed;
	ret = tbv_link_start_rails(link, &usable);
	if (ret)
		goto failed;

	tbv_link_set_state(link, TBV_LINK_OPENING);
	mutex_unlock(&link->lock);
	ret = link->info.ops->paths_enable(link, &agreed, &usable);
	if (!ret)
		tbv_calib_run(link);	/* the self-check: still OPENING, without the lock */
	mutex_lock(&link->lock);
	if (ret)
		goto failed;	/* the backend closed what it had opened */
	paths_open = true;
	if (link->next != TBV_LINK_UP)
		goto abandoned;
	if (!tbv_link_calibrated(link, &agreed, &logout))
		goto abandoned;

	tbv_link_set_state(link, TBV_LINK_UP);
	ret = tbv_link_register(link);
	if (ret) {
		usable = agreed.rails;
		goto failed;
	}
	link->bringup_failures = 0;
	atomic64_inc(&link->stats.link_ups);
	tbv_link_info(link, "up to peer %pUb: %u rail(s), protocol v%u, %s and %s\n",
		      link->info.peer_uuid, link->nr_rails, agreed.version,
		      dev_name(&link->dev->ibdev.dev), netdev_name(link->ndev));
	goto out;

failed:
	if (link->next == TBV_LINK_UP) {	/* nobody else decided where it goes */
		if (usable && usable < agreed.rails) {
			tbv_link_retry_with_fewer_rails(link, usable, ret);
		} else {
			tbv_link_retry_later(link, ret, NULL);
			logout = true;
		}
	}
abandoned:
	if (link->next == TBV_LINK_DEAD)
		tbv_link_info(link, "bring-up abandoned: the link is being removed\n");
	tbv_link_take_down(link, paths_open);
out:
	mutex_unlock(&link->lock);
	if (logout)
		tbv_link_send_logout(link);
}

/* UP -> CLOSING -> LOGIN or REFUSED: the peer restarted, sent an offer we refuse or logged out. */
static void tbv_link_down_work(struct work_struct *work)
{
	struct tbv_link *link = container_of(work, struct tbv_link, down_work);

	mutex_lock(&link->lock);
	/* a teardown to SUSPENDED or DEAD belongs to tbv_link_suspend() or tbv_link_destroy() */
	if (link->state == TBV_LINK_UP &&
	    (link->next == TBV_LINK_LOGIN || link->next == TBV_LINK_REFUSED))
		tbv_link_take_down(link, true);
	mutex_unlock(&link->lock);
}

/*
 * The core unregistered our device without us: another module's
 * ib_unregister_driver() (rdma_rxe's exit unregisters every device of its
 * driver id) ran tbv_dealloc_driver(). The link is still up, so the users see
 * what an unplug and replug shows them: the device goes and a new one comes.
 * Not at once: the walk over the core's devices that took it may still be
 * going, and would take the new one too; if that keeps happening, the wait
 * doubles.
 */
static void tbv_link_dev_lost_work(struct work_struct *work)
{
	struct tbv_link *link = container_of(to_delayed_work(work), struct tbv_link,
					     dev_lost_work);
	char name[IB_DEVICE_NAME_MAX];
	unsigned long now = jiffies;
	int ret;

	mutex_lock(&link->lock);
	/* otherwise a teardown, suspend or destroy owns the device */
	if (link->state != TBV_LINK_UP || link->next != TBV_LINK_UP)
		goto out;
	if (link->dev && READ_ONCE(link->dev->gone)) {
		strscpy(name, dev_name(&link->dev->ibdev.dev), sizeof(name));
		tbv_ibdev_unregister(link);	/* only our reference was left */
		if (link->dev_lost_delay_ms &&
		    time_before(now, link->dev_lost_at + msecs_to_jiffies(TBV_DEV_LOST_RETRY_MAX_MS)))
			link->dev_lost_delay_ms = min(link->dev_lost_delay_ms * 2,
						      TBV_DEV_LOST_RETRY_MAX_MS);
		else
			link->dev_lost_delay_ms = TBV_DEV_LOST_RETRY_MS;
		link->dev_lost_at = now;
		tbv_link_warn(link, "%s was unregistered by another module; registering it again in %u s\n",
			      name, link->dev_lost_delay_ms / 1000);
		goto again;
	}
	if (link->dev)
		goto out;
	ret = tbv_ibdev_register(link);
	if (ret) {
		tbv_link_warn(link, "registering the device again failed (%d); retrying in %u s\n",
			      ret, link->dev_lost_delay_ms / 1000);
		goto again;
	}
	tbv_link_info(link, "%s registered again\n", dev_name(&link->dev->ibdev.dev));
	goto out;

again:
	mod_delayed_work(tbv_wq, &link->dev_lost_work, msecs_to_jiffies(link->dev_lost_delay_ms));
out:
	mutex_unlock(&link->lock);
}

/* ---- login ---- */

/* Act on what the login state machine reports; called with the lock held. */
static void tbv_link_login_event(struct tbv_link *link, enum tbv_login_event ev,
				 u32 status, bool peer_refused_us)
{
	lockdep_assert_held(&link->lock);

	switch (ev) {
	case TBV_LOGIN_EV_UP:
		if (link->state != TBV_LINK_LOGIN)
			break;
		tbv_link_set_state(link, TBV_LINK_STARTING);
		link->next = TBV_LINK_UP;
		queue_work(tbv_wq, &link->up_work);
		break;
	case TBV_LOGIN_EV_RESET:
		if (tbv_link_peer_may_log(link))
			tbv_link_info(link, "peer %pUb restarted or changed its offer; logging in again\n",
				      link->info.peer_uuid);
		tbv_link_peer_down(link, TBV_LINK_LOGIN);
		break;
	case TBV_LOGIN_EV_REFUSED:
		if (!link->refusal_logged && tbv_link_peer_may_log(link)) {
			if (peer_refused_us)
				tbv_link_warn(link, "peer %pUb refused our login: %s\n",
					      link->info.peer_uuid, tbv_login_status_str(status));
			else if (status == TBV_LOGIN_OK)
				tbv_link_warn(link, "peer %pUb disagrees on the link parameters; refusing it\n",
					      link->info.peer_uuid);
			else
				tbv_link_warn(link, "refusing peer %pUb: %s (we speak protocol %u-%u)\n",
					      link->info.peer_uuid, tbv_login_status_str(status),
					      link->login.local.version_min,
					      link->login.local.version_max);
			link->refusal_logged = true;
		}
		tbv_link_peer_down(link, TBV_LINK_REFUSED);
		break;
	default:
		break;
	}
}

static void tbv_link_login_work(struct work_struct *work)
{
	struct tbv_link *link = container_of(to_delayed_work(work), struct tbv_link,
					     login_work);
	struct tbv_login_msg req;
	struct tbv_login_resp_msg resp = {};	/* a short answer leaves the rest zero */
	struct tbv_ctl_parsed parsed;
	int ret;

	mutex_lock(&link->lock);
	if (link->state != TBV_LINK_LOGIN || link->login.ours_accepted) {
		mutex_unlock(&link->lock);
		return;
	}
	link->login.command_id++;
	tbv_login_build(&req, tbv_link_route(link), link->ctl_sequence++ & 3,
			link->info.local_uuid, link->info.peer_uuid,
			link->login.command_id, &link->login.local);
	link->login_tries++;
	atomic64_inc(&link->stats.login_attempts);
	mutex_unlock(&link->lock);

	/* Sleeps; the control channel answers one request at a time per peer. */
	ret = link->info.ops->ctl_request(link, &req, sizeof(req), &resp, sizeof(resp),
					  TBV_LOGIN_TIMEOUT_MS);

	mutex_lock(&link->lock);
	if (link->state != TBV_LINK_LOGIN)
		goto out;
	if (ret == -ETIMEDOUT && link->login_tries >= TBV_LOGIN_SILENT_TRIES &&
	    !link->silence_logged) {
		/* e.g. another program under our service key, which never speaks this protocol */
		tbv_link_warn(link, "peer %pUb has not answered %u logins; still trying\n",
			      link->info.peer_uuid, link->login_tries);
		link->silence_logged = true;
	}
	if (!ret) {
		ret = tbv_ctl_parse(&resp, sizeof(resp), link->info.local_uuid,
				    link->info.peer_uuid, &parsed);
		if (!ret && parsed.type != TBV_MSG_LOGIN_RESPONSE)
			ret = -EPROTO;
		if (ret) {
			atomic64_inc(&link->stats.ctl_rx_rejected);
			dev_warn_ratelimited(link->info.parent,
					     "link %u: malformed login response (%d)\n",
					     link->index, ret);
		} else {
			tbv_link_login_event(link,
					     tbv_login_on_response(&link->login,
								   parsed.command_id,
								   &parsed.login_resp),
					     parsed.login_resp.status, true);
		}
	}
	if (link->state == TBV_LINK_LOGIN && !link->login.ours_accepted)
		queue_delayed_work(tbv_wq, &link->login_work,
				   tbv_login_retry_delay(link->login_tries));
out:
	mutex_unlock(&link->lock);
}

static void tbv_link_handle_login(struct tbv_link *link, const struct tbv_ctl_parsed *p)
{
	struct tbv_login_resp_msg resp;
	enum tbv_login_status status;
	enum tbv_link_state goal;
	enum tbv_login_event ev;

	mutex_lock(&link->lock);
	goal = tbv_link_goal(link);
	if (goal == TBV_LINK_DEAD || goal == TBV_LINK_SUSPENDED) {
		mutex_unlock(&link->lock);
		return;	/* unanswered: the peer retries until we are back */
	}
	if (!link->peer_session_seen || p->login.session != link->last_peer_session) {
		/*
		 * A new peer session (a restart, an upgrade) deserves a new log line;
		 * its first login does not, when its refusal of ours was logged already.
		 */
		if (link->peer_session_seen)
			link->refusal_logged = false;
		link->last_peer_session = p->login.session;
		link->peer_session_seen = true;
	}
	ev = tbv_login_on_request(&link->login, &p->login, &status);
	tbv_login_build_response(&resp, p->route, p->sequence, link->info.local_uuid,
				 link->info.peer_uuid, p->command_id, status,
				 &link->login.agreed);
	/* The peer came back with an offer we accept: do our half again. */
	if (goal == TBV_LINK_REFUSED && tbv_login_redo_ours(&link->login, status, ev))
		tbv_link_go(link, TBV_LINK_LOGIN);
	tbv_link_login_event(link, ev, status, false);
	mutex_unlock(&link->lock);

	/* Never waits for the peer: safe from the control channel's RX context. */
	link->info.ops->ctl_response(link, &resp, sizeof(resp));
}

static void tbv_link_handle_logout(struct tbv_link *link, const struct tbv_ctl_parsed *p)
{
	struct tbv_logout_msg resp;
	enum tbv_link_state goal;

	mutex_lock(&link->lock);
	goal = tbv_link_goal(link);
	if (goal != TBV_LINK_DEAD && goal != TBV_LINK_SUSPENDED) {
		if (tbv_link_peer_may_log(link))
			tbv_link_info(link, "peer %pUb logged out\n", link->info.peer_uuid);
		tbv_login_init(&link->login, &link->login.local, link->login.command_id);
		tbv_link_peer_down(link, goal == TBV_LINK_REFUSED ? TBV_LINK_REFUSED :
								     TBV_LINK_LOGIN);
	}
	mutex_unlock(&link->lock);

	tbv_logout_build(&resp, TBV_MSG_LOGOUT_RESPONSE, p->route, p->sequence,
			 link->info.local_uuid, link->info.peer_uuid, p->command_id);
	link->info.ops->ctl_response(link, &resp, sizeof(resp));
}

bool tbv_link_ctl_rx(struct tbv_link *link, const void *buf, size_t size)
{
	struct tbv_ctl_parsed p;
	int ret;

	ret = tbv_ctl_parse(buf, size, link->info.local_uuid, link->info.peer_uuid, &p);
	if (ret == -ENOENT)
		return false;	/* another protocol's packet */
	if (!ret && p.route != (tbv_link_route(link) & ~TBV_CTL_ROUTE_CM_BIT))
		ret = -EXDEV;
	if (ret) {
		atomic64_inc(&link->stats.ctl_rx_rejected);
		dev_warn_ratelimited(link->info.parent,
				     "link %u: dropped a malformed control packet (%zu bytes, %d)\n",
				     link->index, size, ret);
		return true;
	}

	switch (p.type) {
	case TBV_MSG_LOGIN:
		tbv_link_handle_login(link, &p);
		return true;
	case TBV_MSG_LOGOUT:
		tbv_link_handle_logout(link, &p);
		return true;
	default:
		return false;	/* a response: completes the waiting request */
	}
}
EXPORT_SYMBOL_NS_GPL(tbv_link_ctl_rx, TBV_LINK_NS);

struct tbv_link *tbv_link_create(const struct tbv_link_info *info)
{
	struct tbv_login_params params = {
		.version_min = TBV_PROTO_VERSION_MIN,
		.version_max = TBV_PROTO_VERSION_MAX,
		.caps = tbv_flow_caps() | tbv_stripe_caps() | tbv_split_caps(),
		.rails = info->max_rails,
		.ring_size = info->ring_size,
		.frame_size = TBV_FRAME_SIZE,
		.session = get_random_u32(),
	};
	struct tbv_link *link;
	unsigned int i;
	int ret;

	if (info->proto_version)
		params.version_min = params.version_max = info->proto_version;
	if (!tbv_peer_is_allowed(info))
		return ERR_PTR(-EPERM);

	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return ERR_PTR(-ENOMEM);
	link->info = *info;
	mutex_init(&link->lock);
	mutex_init(&link->calib.lock);
	INIT_DELAYED_WORK(&link->login_work, tbv_link_login_work);
	INIT_WORK(&link->up_work, tbv_link_up_work);
	INIT_WORK(&link->down_work, tbv_link_down_work);
	INIT_DELAYED_WORK(&link->dev_lost_work, tbv_link_dev_lost_work);
	for (i = 0; i < TBV_MAX_RAILS; i++) {
		link->rails[i].link = link;
		link->rails[i].idx = i;
		spin_lock_init(&link->rails[i].tx_lock);
		spin_lock_init(&link->rails[i].ring_lock);
		spin_lock_init(&link->rails[i].rx_spare_lock);
		spin_lock_init(&link->rails[i].calib_lock);
		tbv_flow_setup(&link->rails[i]);
	}

	ret = tbv_index_alloc();
	if (ret < 0)
		goto err_free;
	link->index = ret;

	ret = info->ops->hopids_alloc(link, info->max_rails, link->local_hopids);
	if (ret)
		goto err_index;
	for (i = 0; i < info->max_rails; i++)
		params.tx_hopid[i] = link->local_hopids[i];
	if (tbv_login_check_params(&params) != TBV_LOGIN_OK) {
		ret = -EINVAL;
		goto err_hopids;
	}
	tbv_login_init(&link->login, &params, get_random_u32());
	link->relogin_at = jiffies;
	mutex_lock(&link->lock);
	tbv_link_enter(link, TBV_LINK_LOGIN);
	mutex_unlock(&link->lock);
	return link;

err_hopids:
	info->ops->hopids_release(link);
err_index:
	tbv_index_free(link->index);
err_free:
	kfree(link);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_NS_GPL(tbv_link_create, TBV_LINK_NS);

/* Best effort: the peer takes its devices down now rather than at its next timeout. */
static void tbv_link_send_logout(struct tbv_link *link)
{
	struct tbv_logout_msg req, resp = {};
	int ret;

	mutex_lock(&link->lock);
	tbv_logout_build(&req, TBV_MSG_LOGOUT, tbv_link_route(link), link->ctl_sequence++ & 3,
			 link->info.local_uuid, link->info.peer_uuid, ++link->login.command_id);
	mutex_unlock(&link->lock);
	ret = link->info.ops->ctl_request(link, &req, sizeof(req), &resp, sizeof(resp),
					  TBV_LOGIN_TIMEOUT_MS);
	if (ret)
		tbv_link_info(link, "peer %pUb did not answer our logout (%d)\n",
			      link->info.peer_uuid, ret);
}

/*
 * Ask for a teardown to @to (SUSPENDED or DEAD) that the caller will carry out
 * once the works are idle; a link with no devices goes there now. True if a
 * work is in a paths call (OPENING, CLOSING): it ends there by itself.
 */
static bool tbv_link_claim(struct tbv_link *link, enum tbv_link_state to)
{
	lockdep_assert_held(&link->lock);

	switch (link->state) {
	case TBV_LINK_OPENING:
	case TBV_LINK_CLOSING:
		link->next = tbv_link_merge(link->next, to);
		return true;
	case TBV_LINK_UP:
		/* down_work leaves it alone: the caller tears down */
		link->next = tbv_link_merge(link->next, to);
		return false;
	case TBV_LINK_DEAD:
		return false;
	default:
		tbv_link_enter(link, to);
		return false;
	}
}

/* Wait for the works; then the caller owns what is left (an UP link's devices). */
static void tbv_link_cancel_works(struct tbv_link *link)
{
	cancel_delayed_work_sync(&link->login_work);
	cancel_work_sync(&link->up_work);	/* a bring-up in OPENING ends in link->next */
	cancel_work_sync(&link->down_work);	/* a teardown in CLOSING too */
}

void tbv_link_suspend(struct tbv_link *link)
{
	bool logged_in;

	mutex_lock(&link->lock);
	/* the peer may be up on its side even if our half is not done */
	logged_in = link->state == TBV_LINK_UP || link->state == TBV_LINK_OPENING ||
		    link->state == TBV_LINK_STARTING || link->login.peer_accepted;
	tbv_link_claim(link, TBV_LINK_SUSPENDED);
	mutex_unlock(&link->lock);
	tbv_link_cancel_works(link);
	if (logged_in)
		tbv_link_send_logout(link);
	mutex_lock(&link->lock);
	if (link->state == TBV_LINK_UP)
		tbv_link_take_down(link, true);
	mutex_unlock(&link->lock);
	tbv_link_info(link, "suspended\n");
}
EXPORT_SYMBOL_NS_GPL(tbv_link_suspend, TBV_LINK_NS);

void tbv_link_resume(struct tbv_link *link)
{
	struct tbv_login_params offer;

	mutex_lock(&link->lock);
	if (link->state == TBV_LINK_SUSPENDED) {
		/* a new session: whatever the peer kept of the old one is reset */
		offer = link->login.local;
		offer.session = get_random_u32();
		tbv_login_init(&link->login, &offer, link->login.command_id);
		link->silence_logged = false;
		link->relogin_at = jiffies;
		tbv_link_enter(link, TBV_LINK_LOGIN);
		tbv_link_info(link, "resumed; logging in again\n");
	}
	mutex_unlock(&link->lock);
}
EXPORT_SYMBOL_NS_GPL(tbv_link_resume, TBV_LINK_NS);

/*
 * Never waits for a paths call: the link's lock is not held across one, and a
 * work inside one is left to finish the job (link->next = DEAD).
 *
 * Nor for a bring-up or teardown work that is queued or still running, though
 * past its paths call: the caller may hold its connection manager's lock, which
 * those works take in paths calls, and lockdep rightly counts waiting for such a
 * work as taking that lock. Once DEAD is claimed neither is queued again (only
 * LOGIN queues up_work, and tbv_link_go() no down_work for a DEAD link), so
 * "idle" stays true and tbv_link_destroy() then waits for no work of theirs.
 */
bool tbv_link_stop(struct tbv_link *link)
{
	bool busy;

	mutex_lock(&link->lock);
	busy = tbv_link_claim(link, TBV_LINK_DEAD) || work_busy(&link->up_work) ||
	       work_busy(&link->down_work);
	mutex_unlock(&link->lock);
	return !busy;
}
EXPORT_SYMBOL_NS_GPL(tbv_link_stop, TBV_LINK_NS);

void tbv_link_destroy(struct tbv_link *link)
{
	mutex_lock(&link->lock);
	tbv_link_claim(link, TBV_LINK_DEAD);
	mutex_unlock(&link->lock);
	tbv_link_cancel_works(link);

	mutex_lock(&link->lock);
	if (link->state == TBV_LINK_UP)
		tbv_link_take_down(link, true);
	mutex_unlock(&link->lock);
	/* queued by a device lost meanwhile; now DEAD, it finds nothing to do */
	cancel_delayed_work_sync(&link->dev_lost_work);

	link->info.ops->hopids_release(link);
	tbv_index_free(link->index);
	mutex_destroy(&link->lock);
	kfree(link);
}
EXPORT_SYMBOL_NS_GPL(tbv_link_destroy, TBV_LINK_NS);

void *tbv_link_backend_priv(struct tbv_link *link)
{
	return link->info.backend_priv;
}
EXPORT_SYMBOL_NS_GPL(tbv_link_backend_priv, TBV_LINK_NS);

unsigned int tbv_link_index(struct tbv_link *link)
{
	return link->index;
}
EXPORT_SYMBOL_NS_GPL(tbv_link_index, TBV_LINK_NS);

void tbv_link_dev_names(struct tbv_link *link, char *ibdev, char *netdev, size_t len)
{
	mutex_lock(&link->lock);
	/* another module may have unregistered it: none until a new one comes */
	strscpy(ibdev, link->state == TBV_LINK_UP && link->dev && !READ_ONCE(link->dev->gone) ?
		dev_name(&link->dev->ibdev.dev) : "", len);
	strscpy(netdev, link->state == TBV_LINK_UP ? netdev_name(link->ndev) : "", len);
	mutex_unlock(&link->lock);
}
EXPORT_SYMBOL_NS_GPL(tbv_link_dev_names, TBV_LINK_NS);
