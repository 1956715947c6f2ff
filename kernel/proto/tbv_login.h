/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Link login over the XDomain control channel: message layout, validation and
 * parameter negotiation. Shared by every link backend (virtual cable, USB4).
 *
 * A control packet is at most 252 bytes and a whole number of 32-bit words. The
 * Thunderbolt control channel converts each word to big-endian on the wire and
 * back on receipt, so every field here is a host-order u32 (or a 16-byte UUID,
 * which round-trips the same way on both ends).
 */
#ifndef TBV_LOGIN_H
#define TBV_LOGIN_H

#include "tbv_types.h"

#define TBV_CTL_MAX_BYTES	252
#define TBV_CTL_MIN_BYTES	28	/* header words + protocol UUID */
#define TBV_CTL_HDR_WORDS	3	/* route_hi, route_lo, length_sn */
#define TBV_CTL_LENGTH_MASK	0x3fu	/* length_sn bits 5:0 */
#define TBV_CTL_SN_SHIFT	27	/* length_sn bits 28:27 */
#define TBV_CTL_SN_MASK		(0x3u << TBV_CTL_SN_SHIFT)
#define TBV_CTL_ROUTE_CM_BIT	(1ull << 63) /* set on some replies; ignored */

#define TBV_UUID_LEN		16
#define TBV_MAX_RAILS		4
#define TBV_FRAME_SIZE		4096
#define TBV_MIN_HOPID		8
#define TBV_MAX_HOPID		2047

/* Protocol versions this code speaks; a peer must share at least one. */
#define TBV_PROTO_VERSION_MIN	1
#define TBV_PROTO_VERSION_MAX	1

/* Capability bits: the agreement is the intersection; unknown bits are ignored. */
#define TBV_CAP_NONE		0u
#define TBV_CAP_CREDITS		0x1u	/* software credits on every rail (tbv_credit.h) */
#define TBV_CAP_STRIPE		0x2u	/* QPs striped over the rails, TSNs (tbv_reseq.h) */
#define TBV_CAP_SPLIT		0x4u	/* page-sized packets as header + payload frames (tbv_rdma.h) */

/*
 * The control protocol's UUIDs, one per direction of requests: [0] for requests
 * from the host whose UUID sorts lower, [1] for the other's; a response carries
 * its request's. thunderbolt.ko matches a response to any waiting request with
 * the same route and protocol UUID, and queues our responses as such requests:
 * with one UUID, the peer's answer to our login could complete our response to
 * its own (docs/usb4-backend.md, "Races inside thunderbolt.ko").
 */
extern const u8 tbv_login_protocol_uuid[2][TBV_UUID_LEN];

/* The protocol UUID of requests from @requester_uuid to @responder_uuid, and their responses. */
const u8 *tbv_ctl_protocol_uuid(const u8 *requester_uuid, const u8 *responder_uuid);

enum tbv_msg_type {
	TBV_MSG_LOGIN = 1,
	TBV_MSG_LOGIN_RESPONSE = 2,
	TBV_MSG_LOGOUT = 3,
	TBV_MSG_LOGOUT_RESPONSE = 4,
};

/* Why a login was refused; carried in responses and logged by both ends. */
enum tbv_login_status {
	TBV_LOGIN_OK = 0,
	TBV_LOGIN_E_VERSION = 1,	/* no protocol version in common */
	TBV_LOGIN_E_PARAM = 2,		/* rails, ring size, frame size or HopID invalid */
	TBV_LOGIN_E_TARGET = 3,		/* addressed to another host */
	TBV_LOGIN_E_POLICY = 4,		/* refused by local policy */
		TBV_LOGIN_E_MAX
};

struct tbv_ctl_hdr {
	u32 route_hi;
	u32 route_lo;
	u32 length_sn;
	u8 protocol_uuid[TBV_UUID_LEN];
	u8 sender_uuid[TBV_UUID_LEN];
	u8 target_uuid[TBV_UUID_LEN];
	u32 type;		/* enum tbv_msg_type */
	u32 command_id;		/* chosen by the requester, echoed in the response */
};

/* What one end offers; both ends derive the same agreement from the two offers. */
struct tbv_login_params {
	u16 version_min;
	u16 version_max;
	u32 caps;
	u32 rails;			/* ring pairs offered, 1..TBV_MAX_RAILS */
	u32 ring_size;			/* RX descriptors per rail: the peer's credit limit */
	u32 frame_size;			/* largest ring frame, TBV_FRAME_SIZE */
	u32 tx_hopid[TBV_MAX_RAILS];	/* sender's out-HopIDs = receiver's in-HopIDs */
	u32 session;			/* random per link instance: a new one = peer restarted */
};

struct tbv_login_body {
	u32 version;			/* min | max << 16 */
	u32 caps;
	u32 rails;
	u32 ring_size;
	u32 frame_size;
	u32 tx_hopid[TBV_MAX_RAILS];
	u32 session;
};

struct tbv_login_msg {
	struct tbv_ctl_hdr hdr;
	struct tbv_login_body body;
};

struct tbv_login_resp_body {
	u32 status;			/* enum tbv_login_status */
	u32 version;			/* agreed version (0 if refused) */
	u32 rails;			/* agreed rails (0 if refused) */
	u32 reserved;
};

struct tbv_login_resp_msg {
	struct tbv_ctl_hdr hdr;
	struct tbv_login_resp_body body;
};

/* LOGOUT and its response carry only the header. */
struct tbv_logout_msg {
	struct tbv_ctl_hdr hdr;
};

/* The agreement both ends reach; identical on the two ends. */
struct tbv_login_agreed {
	u32 version;
	u32 caps;
	u32 rails;
	u32 tx_credits;			/* = the peer's RX ring size */
	u32 peer_tx_hopid[TBV_MAX_RAILS];
	u32 peer_session;
};

/* A control packet after validation: which message, from whom. */
struct tbv_ctl_parsed {
	enum tbv_msg_type type;
	u8 sequence;
	u64 route;
	u32 command_id;
	const struct tbv_ctl_hdr *hdr;
	union {
		struct tbv_login_params login;
		struct tbv_login_resp_body login_resp;
	};
};

void tbv_ctl_fill_hdr(struct tbv_ctl_hdr *hdr, u64 route, u8 sequence, size_t size,
		      const u8 *sender_uuid, const u8 *target_uuid,
		      enum tbv_msg_type type, u32 command_id);

/*
 * Validate an incoming control packet for this protocol. Returns 0 and fills
 * @out, -ENOENT if the packet belongs to another protocol (leave it to others),
 * or another negative errno if it is ours but malformed, not addressed to
 * @local_uuid from @peer_uuid (-EXDEV), or with the other direction's protocol
 * UUID (-EPROTO).
 */
int tbv_ctl_parse(const void *buf, size_t size, const u8 *local_uuid,
		  const u8 *peer_uuid, struct tbv_ctl_parsed *out);

void tbv_login_build(struct tbv_login_msg *msg, u64 route, u8 sequence,
		     const u8 *local_uuid, const u8 *peer_uuid, u32 command_id,
		     const struct tbv_login_params *params);
void tbv_login_build_response(struct tbv_login_resp_msg *msg, u64 route, u8 sequence,
			      const u8 *local_uuid, const u8 *peer_uuid, u32 command_id,
			      enum tbv_login_status status,
			      const struct tbv_login_agreed *agreed);
void tbv_logout_build(struct tbv_logout_msg *msg, enum tbv_msg_type type, u64 route,
		      u8 sequence, const u8 *local_uuid, const u8 *peer_uuid,
		      u32 command_id);

/* Check one end's offer on its own (used for ours before sending, and the peer's). */
enum tbv_login_status tbv_login_check_params(const struct tbv_login_params *p);

/* Derive the agreement from our offer and the peer's; symmetric in the two. */
enum tbv_login_status tbv_login_negotiate(const struct tbv_login_params *local,
					  const struct tbv_login_params *peer,
					  struct tbv_login_agreed *agreed);

const char *tbv_login_status_str(u32 status);

/*
 * The login exchange as seen by one end. Each end sends LOGIN and answers the
 * peer's LOGIN; the link is up once our LOGIN was accepted and we accepted the
 * peer's, with both agreements equal.
 */
struct tbv_login_state {
	struct tbv_login_params local;
	u32 command_id;			/* of our outstanding LOGIN */
	bool ours_accepted;		/* peer answered our LOGIN with OK */
	bool peer_accepted;		/* we accepted the peer's LOGIN */
	struct tbv_login_agreed agreed;	/* valid once peer_accepted */
	struct tbv_login_resp_body peer_view; /* the peer's agreement, from its response */
};

enum tbv_login_event {
	TBV_LOGIN_EV_NONE,		/* nothing changed (duplicate, stale) */
	TBV_LOGIN_EV_PROGRESS,		/* one more half of the handshake done */
	TBV_LOGIN_EV_UP,		/* both halves done: bring the link up */
	TBV_LOGIN_EV_REFUSED,		/* the peer refused us, or we refused it */
	TBV_LOGIN_EV_RESET,		/* peer logged in again as a new session: it restarted */
};

void tbv_login_init(struct tbv_login_state *st, const struct tbv_login_params *local,
		    u32 first_command_id);
/* The peer's LOGIN arrived: decide our answer (*status) and what changed. */
enum tbv_login_event tbv_login_on_request(struct tbv_login_state *st,
					  const struct tbv_login_params *peer,
					  enum tbv_login_status *status);
/* The answer to our LOGIN arrived. */
enum tbv_login_event tbv_login_on_response(struct tbv_login_state *st,
					   u32 command_id,
					   const struct tbv_login_resp_body *resp);
bool tbv_login_is_up(const struct tbv_login_state *st);
/* The peer's login came while our link was refused: redo our half? (clears it if so) */
bool tbv_login_redo_ours(struct tbv_login_state *st, enum tbv_login_status status,
			 enum tbv_login_event ev);

#endif /* TBV_LOGIN_H */
