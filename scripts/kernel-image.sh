#!/usr/bin/env bash
# A Debian kernel image for the test VM without installing it: the packages' contents under
# $TBV_CACHE/kernels/<release>/ (boot/vmlinuz-<release>, lib/modules/<release> with
# modules.dep). virtme-ng finds the modules next to the image it boots (tests/harness/vm.py
# --kernel $TBV_CACHE/kernels/<release>/boot/vmlinuz-<release>) and links them into the
# guest's /lib/modules; the host's own /lib/modules is not touched.
#
#   scripts/kernel-image.sh RELEASE CHROOT PKG=VERSION...   apt-get download inside CHROOT
#   scripts/kernel-image.sh RELEASE / PKG=VERSION...        with the host's apt (bookworm only)
#
# Cached by a hash of the package list; prints the image's path on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

release=${1:?usage: kernel-image.sh RELEASE CHROOT PKG=VERSION...}
root=${2:?usage: kernel-image.sh RELEASE CHROOT PKG=VERSION...}
shift 2
out=$TBV_CACHE/kernels/$release
key=$( (printf '%s\n' "$@"; cat "$0") | sha256sum | cut -c1-16)
image=$out/boot/vmlinuz-$release

if [ "$(cat "$out/.key" 2>/dev/null)" = "$key" ] && [ -f "$image" ]; then
	echo "$image"
	exit 0
fi
echo "kernel-image: extracting $* into $out" >&2
debs=$root/tmp/tbv-debs-$$
rm -rf "$out" "$debs" && mkdir -p "$debs" "$out"
trap 'rm -rf "$debs"' EXIT
if [ "$root" = / ]; then
	(cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "$@")
else
	chroot "$root" sh -c 'cd "$1" && shift && apt-get download -qq -o APT::Sandbox::User=root "$@"' \
		sh "${debs#"$root"}" "$@"
fi
for deb in "$debs"/*.deb; do
	dpkg-deb -x "$deb" "$out"
done
# merged /usr (trixie on): the modules are under usr/lib/modules
if [ ! -d "$out/lib/modules" ] && [ -d "$out/usr/lib/modules" ]; then
	rm -rf "$out/lib" && ln -s usr/lib "$out/lib"
fi
# 7.3's split packages put the image next to its modules
if [ ! -f "$image" ] && [ -f "$out/lib/modules/$release/vmlinuz" ]; then
	mkdir -p "$out/boot" && ln -s "../lib/modules/$release/vmlinuz" "$image"
fi
[ -f "$image" ] || { echo "kernel-image: no vmlinuz-$release in $*" >&2; find "$out" -maxdepth 4 >&2; exit 1; }
depmod -b "$out" "$release"
echo "$key" >"$out/.key"
echo "$image"
