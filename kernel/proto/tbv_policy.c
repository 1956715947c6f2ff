// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Peer policy: parsing the allowed-peers list and matching a peer against it. */
#include "tbv_policy.h"

static int tbv_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool tbv_is_sep(char c)
{
	return c == ',' || c == ' ' || c == '\t' || c == '\n';
}

/* One UUID at @s (36 characters, dashes at 8, 13, 18, 23) into @out; false if malformed. */
static bool tbv_parse_uuid(const char *s, u8 *out)
{
	unsigned int i, n = 0;

	for (i = 0; i < 36; i++) {
		int hi, lo;

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
			continue;
		}
		hi = tbv_hex(s[i]);
		lo = hi < 0 ? -1 : tbv_hex(s[i + 1]);
		if (lo < 0)
			return false;
		out[n++] = (u8)(hi << 4 | lo);
		i++;
	}
	return n == TBV_UUID_LEN;
}

/* Walk @list; with @uuid, stop at a match. 1 matched, 0 not, -EINVAL malformed. */
static int tbv_peer_list_walk(const char *list, const u8 *uuid)
{
	size_t len = 0;
	u8 entry[TBV_UUID_LEN];

	while (list[len] && len <= TBV_PEER_LIST_MAX)
		len++;
	if (len > TBV_PEER_LIST_MAX)
		return -EINVAL;
	while (*list) {
		size_t n = 0;

		if (tbv_is_sep(*list)) {
			list++;
			continue;
		}
		while (list[n] && !tbv_is_sep(list[n]))
			n++;
		if (n != 36 || !tbv_parse_uuid(list, entry))
			return -EINVAL;
		if (uuid && !memcmp(entry, uuid, TBV_UUID_LEN))
			return 1;
		list += n;
	}
	return 0;
}

int tbv_peer_list_check(const char *list)
{
	return tbv_peer_list_walk(list, NULL) < 0 ? -EINVAL : 0;
}

int tbv_peer_allowed(const char *list, const u8 *uuid)
{
	int ret = tbv_peer_list_walk(list, NULL);

	if (ret < 0)
		return ret;
	for (; *list; list++)
		if (!tbv_is_sep(*list))
			return tbv_peer_list_walk(list, uuid);
	return 1;	/* empty: everyone */
}
