#!/usr/bin/env bash
# DKMS from this tree, without the Debian package (as root; `make dkms-install`, `make dkms-remove`):
#   scripts/dkms.sh install   the module's sources and dkms.conf to /usr/src/tbverbs-VERSION, then
#                             dkms add, and dkms build + install for every kernel whose headers
#                             are installed; DKMS rebuilds it for kernels installed later. And the
#                             udev rule that loads it on hosts with a USB4 controller, in /etc.
#   scripts/dkms.sh remove    dkms remove for every kernel, the sources and the rule
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
name=tbverbs
version=$(cat "$here/VERSION")
src=/usr/src/$name-$version
rule=/etc/udev/rules.d/70-tbverbs-load.rules

log() { printf 'dkms.sh: %s\n' "$*" >&2; }

command -v dkms >/dev/null || { log "dkms is not installed (Debian/Ubuntu: apt-get install dkms)"; exit 1; }

remove() {
	if [ -n "$(dkms status -m "$name" -v "$version")" ]; then
		dkms remove -m "$name" -v "$version" --all
	fi
	rm -rf "$src" "$rule"
}

install_all() {
	remove
	bash "$here/scripts/dkms-source.sh" "$src" "$version"
	dkms add -m "$name" -v "$version"
	local dir kver rc built=0
	for dir in /lib/modules/*/; do
		kver=$(basename "$dir")
		if [ ! -e "$dir/build" ]; then
			log "$kver: no headers (linux-headers-$kver), skipped"
			continue
		fi
		rc=0
		dkms install -m "$name" -v "$version" -k "$kver" || rc=$?
		case $rc in
		0) built=$((built + 1)) ;;
		77) log "$kver: not a kernel this module supports (dkms.conf BUILD_EXCLUSIVE_*), skipped" ;;
		*) log "$kver: dkms install failed ($rc); the build log is under /var/lib/dkms/$name/$version/$kver/"
		   exit "$rc" ;;
		esac
	done
	dkms status -m "$name" -v "$version"
	[ "$built" -gt 0 ] || { log "no kernel with headers to build for (install linux-headers-\$(uname -r))"; exit 1; }
	install -D -m 644 "$here/packaging/70-tbverbs-load.rules" "$rule"
}

case ${1:-} in
install) install_all ;;
remove) remove ;;
*) echo "usage: $0 install|remove" >&2; exit 2 ;;
esac
