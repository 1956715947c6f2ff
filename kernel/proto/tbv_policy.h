/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Peer policy: which peers (host UUIDs) a host talks to. The list is text, as
 * the allowed_peers module parameter takes it: UUIDs in the usual 8-4-4-4-12
 * hex form, separated by commas, spaces or newlines; an empty list allows
 * every peer (like the kernel's own Thunderbolt networking).
 */
#ifndef TBV_POLICY_H
#define TBV_POLICY_H

#include "tbv_types.h"
#include "tbv_login.h"

#define TBV_PEER_LIST_MAX	4096	/* bytes of list text */

/* 0 if @list is a valid peer list, else -EINVAL. */
int tbv_peer_list_check(const char *list);

/* 1 if @list allows the peer @uuid (TBV_UUID_LEN bytes), 0 if not, -EINVAL if malformed. */
int tbv_peer_allowed(const char *list, const u8 *uuid);

#endif /* TBV_POLICY_H */
