#!/usr/bin/env bash
# The clean Debian 12 root that the package install test (tests/packaging/test_install.py)
# installs our .debs into: debootstrap's minbase plus the test VM's kernel image and headers,
# as a user's machine has them, and nothing of ours or of our packages' dependencies (apt
# must pull those in). Cached under $TBV_CACHE/deb-test-root, keyed by this script and the
# kernel version (cold: about 5 minutes, mostly downloads). Prints the root's path last.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

log() { printf 'install-root: %s\n' "$*" >&2; }

MIRROR=${TBV_DEBIAN_MIRROR:-http://deb.debian.org/debian}
base="$TBV_CACHE/deb-test-root"
key=$( (cat "$0"; echo "$KVER_612 $MIRROR") | sha256sum | cut -c1-16)
root="$base/$key"
mkdir -p "$base"
exec 9>"$base/.lock"
flock 9
if [ -f "$root/.tbverbs-ready" ]; then
	echo "$root"
	exit 0
fi

for old in "$base"/*/; do  # roots of older keys: several hundred MB each
	[ -d "$old" ] && [ "${old%/}" != "$root" ] && rm -rf "${old%/}"
done
rm -rf "$root"
log "debootstrap bookworm (minbase) into $root"
debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$base/debootstrap.log" 2>&1 || {
	tail -n 20 "$base/debootstrap.log" >&2
	exit 1
}

cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main
deb $MIRROR bookworm-backports main
EOF
# No daemons start inside the chroot (udev's postinst would try).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT
in_root() { chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }
log "installing the kernel $KVER_612 (image and headers)"
in_root apt-get update -qq
# The image's dependency on an initramfs generator is met by initramfs-tools: the VM boots
# with virtme-ng's own initramfs, so none is needed, but apt wants one.
in_root apt-get install -y -qq --no-install-recommends \
	"linux-image-$KVER_612" "linux-headers-$KVER_612" >"$base/apt.log" 2>&1 || {
	tail -n 20 "$base/apt.log" >&2
	exit 1
}
in_root apt-get clean
umount "$root/proc"
trap - EXIT
touch "$root/.tbverbs-ready"
log "ready: $(du -sh "$root" | cut -f1)"
echo "$root"
