#!/usr/bin/env bash
# Builds the modules (W=1; thunderbolt_ibverbs.ko and tbverbs_vcable.ko) against one kernel's headers, in a copy of kernel/ under
# build/kmod-<name>/ so that builds for different kernels never mix. The log is kept there
# (build.log); a warning or an error in it fails the build.
#
#   scripts/build-module.sh NAME KDIR            headers on the host
#   scripts/build-module.sh NAME KDIR CHROOT     headers (and their compiler) inside a chroot
#                                                (scripts/kernel-chroot.sh); KDIR is its path there
#
# With TBV_TEST_HOOKS=1 in the environment, the test build (kernel/Kbuild): the hooks some
# tests need compiled in (use a NAME of its own, e.g. hooks, 7.3-hooks).
#
# In a chroot, the copy is bind-mounted at the same path in a private mount namespace (gone
# when the build ends), so the paths in the log and the .ko are the host's.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: build-module.sh NAME KDIR [CHROOT]}
kdir=${2:?usage: build-module.sh NAME KDIR [CHROOT]}
chroot_dir=${3:-}
out=$here/build/kmod-$name
hooks=${TBV_TEST_HOOKS:+TBV_TEST_HOOKS=1}

if [ ! -d "$chroot_dir$kdir" ]; then
	echo "build-module: no headers at $chroot_dir$kdir for $name: run 'make setup'" >&2
	exit 1
fi
# the same sources for the same kernel: the last build stands (it passed, or there is no key)
key=$( (echo "$kdir $chroot_dir $hooks"; cd "$here" && git ls-files -co --exclude-standard kernel | sort |
	xargs cat) | sha256sum | cut -c1-16)
kos=("$out/kernel/thunderbolt_ibverbs.ko" "$out/kernel/tbverbs_vcable.ko")
if [ "$(cat "$out/.key" 2>/dev/null)" = "$key" ] && [ -f "${kos[0]}" ] && [ -f "${kos[1]}" ]; then
	echo "build-module: ${kos[*]} for $name are up to date"
	exit 0
fi
rm -rf "$out" && mkdir -p "$out"
# only the sources: no objects or probe results of another kernel's build in place
bash "$here/scripts/copy-module-sources.sh" "$out"

if [ -z "$chroot_dir" ]; then
	make -C "$out/kernel" KDIR="$kdir" $hooks 2>&1 | tee "$out/build.log"
else
	mkdir -p "$chroot_dir$out"
	# shellcheck disable=SC2016
	unshare --mount --propagation private sh -c '
		mount --bind "$1" "$2$1" && mount -t proc proc "$2/proc" &&
		chroot "$2" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin make -C "$1/kernel" KDIR="$3" $4' \
		sh "$out" "$chroot_dir" "$kdir" "$hooks" 2>&1 | tee "$out/build.log"
fi
status=${PIPESTATUS[0]}
if [ "$status" != 0 ] || grep -E "warning:|error:" "$out/build.log" >/dev/null ||
	[ ! -f "${kos[0]}" ] || [ ! -f "${kos[1]}" ]; then
	echo "build-module: the build for $name failed or warned (log: $out/build.log)" >&2
	exit 1
fi
echo "$key" >"$out/.key"
echo "build-module: ${kos[*]} for $name${hooks:+ (test hooks)} ($(grep -c '^#define' "$out/kernel/compat/tbv_have.h") compat features)"
