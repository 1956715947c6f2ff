/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the tools that speak the raw uverbs ABI share (tbv_ring_abuse, tbv_ring_hoard): the
 * legacy write() commands of <rdma/ib_user_verbs.h> on /dev/infiniband/uverbsN, no libibverbs.
 */
#ifndef TBV_UVERBS_H
#define TBV_UVERBS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

/*
 * One legacy write() command: header, then @req (the command, its response field already
 * set, then any driver data in); 0 or a negative errno.
 */
static inline int tbv_uverbs_command(int fd, uint32_t cmd, const void *req, size_t reqlen,
				     size_t resplen)
{
	uint8_t msg[512];
	struct ib_uverbs_cmd_hdr hdr = {
		.command = cmd,
		.in_words = (sizeof(hdr) + reqlen) / 4,
		.out_words = resplen / 4,
	};
	ssize_t n;

	if (reqlen > sizeof(msg) - sizeof(hdr))
		return -EINVAL;
	memcpy(msg, &hdr, sizeof(hdr));
	memcpy(msg + sizeof(hdr), req, reqlen);
	n = write(fd, msg, sizeof(hdr) + reqlen);
	if (n == (ssize_t)(sizeof(hdr) + reqlen))
		return 0;
	return n < 0 ? -errno : -EIO;
}

/* The uverbs device of @ibdev, opened: its fd, or a negative errno (-ENODEV: none). */
static inline int tbv_uverbs_open(const char *ibdev)
{
	DIR *d = opendir("/sys/class/infiniband_verbs");
	struct dirent *de;
	char path[512], name[64];
	int fd = -ENODEV;

	if (!d)
		return -errno;
	while (fd == -ENODEV && (de = readdir(d))) {
		FILE *f;

		if (strncmp(de->d_name, "uverbs", 6))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%63s", name) == 1 && !strcmp(name, ibdev)) {
			snprintf(path, sizeof(path), "/dev/infiniband/%s", de->d_name);
			fd = open(path, O_RDWR | O_CLOEXEC);
			if (fd < 0)
				fd = -errno;
		}
		fclose(f);
	}
	closedir(d);
	return fd;
}

#endif /* TBV_UVERBS_H */
