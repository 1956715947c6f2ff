#!/usr/bin/env bash
# A cached Debian chroot of another suite, holding the kernel headers (and the compiler they
# need) that the bookworm host cannot install: trixie's gcc 14 and sid's gcc 16 must never
# reach the host. It also holds the suite's RDMA userspace (rdma-core, perftest), which the VM
# tests run inside it. Prints the chroot's path on its last line.
#
#   scripts/kernel-chroot.sh trixie   the 6.12.117 and 7.3.4 headers pinned in scripts/env.sh,
#                                     and the 7.3.4 image package extracted under
#                                     $TBV_CACHE/kernels/ (for the VM; never dpkg-installed)
#   scripts/kernel-chroot.sh sid      the newest headers sid serves (moves; make test-kernels)
#
# Cached as $TBV_CACHE/chroot/<suite>, keyed by a hash of its inputs (suite, apt sources,
# packages with their pinned versions): a second run is a hash check. A new key
# rebuilds the chroot (debootstrap, ~3-5 min). The suites' apt sources exist only inside it.
# With TBV_COLD_LOG set, a debootstrap (the cold part) is noted in that file (scripts/setup.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

log() { printf 'kernel-chroot: %s\n' "$*" >&2; }

suite=${1:?usage: kernel-chroot.sh trixie|sid}
mirror=http://deb.debian.org/debian
# What a module build needs besides the headers (their packages pull in the right gcc); perl
# for W=1's kernel-doc check.
base_packages=make,libelf-dev,bc,kmod,ca-certificates,perl,python3
# The suite's own RDMA userspace, run by tests/device/test_debian_userspace.py inside the chroot:
# libibverbs with its stock rxe provider, the pingpongs, perftest and rping.
userspace_packages=(ibverbs-providers ibverbs-utils perftest rdmacm-utils)

case $suite in
trixie)
	sources="deb $mirror trixie main
deb $mirror trixie-updates main
deb http://security.debian.org/debian-security trixie-security main
deb $mirror trixie-backports main"
	# package=version (apt's syntax), installed in this order
	packages=("linux-headers-$KVER_612_TRIXIE=$KPKG_612_TRIXIE" "linux-headers-$KVER_73=$KPKG_73"
		"${userspace_packages[@]}")
	# 7.3's image package is split: the kernel, its modules and their base files
	image_release=$KVER_73
	images=("linux-binary-$KVER_73=$KPKG_73" "linux-modules-$KVER_73=$KPKG_73" "linux-base-$KVER_73=$KPKG_73")
	;;
sid)
	sources="deb $mirror sid main"
	packages=(linux-headers-amd64 "${userspace_packages[@]}")
	images=()
	;;
*)
	log "unknown suite $suite (trixie or sid)"
	exit 2
	;;
esac

top=$TBV_CACHE/chroot
dir=$top/$suite
# the debootstrap by the suite and its sources; what is installed in it by the package list
base_key=$( (echo "$suite"; echo "$sources") | sha256sum | cut -c1-16)
key=$( (echo "$base_key"; echo "$base_packages"; printf '%s\n' "${packages[@]}") | sha256sum | cut -c1-16)

mkdir -p "$top"
exec 9>"$top/.lock-$suite"
flock 9

# with /proc and /dev/pts of its own in a private mount namespace (apt and dpkg's scripts want them)
in_chroot() {
	# shellcheck disable=SC2016
	unshare --mount --propagation private sh -c '
		mount -t proc proc "$0/proc" && mount -t devpts devpts "$0/dev/pts" &&
		exec chroot "$0" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"' "$dir" "$@"
}

# The image for the VM, extracted into the cache (scripts/kernel-image.sh), never installed.
extract_images() {
	[ ${#images[@]} = 0 ] || bash "$here/scripts/kernel-image.sh" "$image_release" "$dir" "${images[@]}" >/dev/null
}

if [ "$(cat "$dir/.tbv-key" 2>/dev/null)" = "$key" ]; then
	if [ "$suite" = sid ]; then
		log "sid: moving to the newest kernel headers"
		in_chroot apt-get update -qq
		in_chroot apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
	fi
	extract_images
	echo "$dir"
	exit 0
fi

if [ "$(cat "$dir/.tbv-base-key" 2>/dev/null)" != "$base_key" ]; then
	log "creating the $suite chroot in $dir (debootstrap, a few minutes)"
	[ -z "${TBV_COLD_LOG:-}" ] || echo "the $suite chroot (debootstrap)" >>"$TBV_COLD_LOG"
	rm -rf "$dir" "$dir.new"
	debootstrap --variant=minbase --include="$base_packages" "$suite" "$dir.new" "$mirror" \
		>"$top/debootstrap-$suite.log" 2>&1 || {
		tail -n 20 "$top/debootstrap-$suite.log" >&2
		log "debootstrap failed (log: $top/debootstrap-$suite.log)"
		exit 1
	}
	mv "$dir.new" "$dir"
	echo "$sources" >"$dir/etc/apt/sources.list"
	echo "$base_key" >"$dir/.tbv-base-key"
fi
# The registry's suites can lag the clock (its sid Release was "expired" by 19 days on
# 2026-11-26): accept them, inside the chroot only.
echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99tbverbs-valid-until"
in_chroot apt-get update -qq
for spec in "${base_packages//,/ }" "${packages[@]}"; do
	log "installing $spec"
	# shellcheck disable=SC2086  # the base packages are a word list
	in_chroot apt-get install -y -qq --no-install-recommends $spec >/dev/null
done
in_chroot apt-get clean
echo "$key" >"$dir/.tbv-key"
extract_images
echo "$dir"
