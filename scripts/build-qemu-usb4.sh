#!/usr/bin/env bash
# Builds Debian's QEMU 7.2 with our emulated USB4 host interface (emu/usb4-nhi) built in, and
# prints the path of the qemu-system-x86_64 binary on its last line.
#
# Cached under $TBV_CACHE/qemu-usb4 by a hash of the inputs:
#   src-<version>/   Debian's source package, extracted once (patches applied)
#   build-<basekey>/ the configured build tree (version, glue, configure flags, compiler); kept,
#                    so a change to the device alone recompiles its files and relinks (seconds)
#   bin-<key>/       the binary for one exact device source (key = basekey + emu/usb4-nhi/*)
# A warm cache makes this a hash check. Cold: ~1 min of downloads and ~3-4 min of build on 2 cores.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

log() { printf 'build-qemu-usb4: %s\n' "$*" >&2; }

version=$QEMU_SRC_VERSION              # e.g. 1:7.2+dfsg-7+deb12u18
upstream=${version#*:}                 # 7.2+dfsg-7+deb12u18
top=$TBV_CACHE/qemu-usb4
srcdir=$top/src-$upstream
devsrc=$here/emu/usb4-nhi
# The files QEMU compiles; the list is part of the glue (changing it re-runs meson, ~4 min).
devfiles=(nhi.c router.c router.h)

configure_flags=(
	--target-list=x86_64-softmmu --disable-docs --disable-user --disable-tools
	--disable-guest-agent --disable-gtk --disable-sdl --disable-vnc --disable-spice --disable-opengl
	--disable-curses --disable-libusb --disable-usb-redir --disable-xen --disable-slirp --disable-werror
	--enable-virtfs --enable-cap-ng
	--firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
)

glue() {
	cat <<'GLUE'
softmmu_ss.add(when: 'CONFIG_USB4_NHI', if_true: files('usb4/nhi.c', 'usb4/router.c'))
---
config USB4_NHI
    bool
    default y if PCI_DEVICES
    depends on PCI && MSI_NONBROKEN
GLUE
}

mkdir -p "$top"
exec 9>"$top/.lock"
flock 9

installed=$(dpkg-query -W -f '${source:Version}' qemu-system-x86 2>/dev/null || true)
if [ -n "$installed" ] && [ "$installed" != "$version" ]; then
	log "note: Debian's installed QEMU is $installed; building $version (QEMU_SRC_VERSION)"
fi

basekey=$( (echo "$version"; glue; printf '%s\n' "${configure_flags[@]}"; gcc --version | head -n 1;
	dpkg-query -W -f '${Package} ${Version}\n' meson libglib2.0-dev libpixman-1-dev libfdt-dev libcap-ng-dev) |
	sha256sum | cut -c1-16)
key=$( (echo "$basekey"; for f in "${devfiles[@]}"; do cat "$devsrc/$f"; done; cat "$0") | sha256sum | cut -c1-16)
bin=$top/bin-$key/qemu-system-x86_64
if [ -x "$bin" ]; then
	ln -sfn "bin-$key" "$top/current"
	echo "$bin"
	exit 0
fi

# 1. Debian's source package through a private deb-src list (the system's apt sources untouched).
if [ ! -f "$srcdir/.tbv-extracted" ]; then
	aptdir=$top/apt
	mkdir -p "$aptdir/lists/partial" "$aptdir/cache" "$TBV_CACHE/src/qemu"
	{
		for suite in bookworm bookworm-updates; do
			echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
		done
		echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main"
	} >"$aptdir/sources.list"
	apt_opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache")
	dsc=$TBV_CACHE/src/qemu/qemu_$upstream.dsc
	if [ ! -f "$dsc" ]; then
		log "downloading Debian's qemu $version source package"
		apt-get "${apt_opts[@]}" update -qq
		(cd "$TBV_CACHE/src/qemu" && apt-get "${apt_opts[@]}" source --download-only -qq "qemu=$version") ||
			{ log "qemu $version is no longer on deb.debian.org: set QEMU_SRC_VERSION, or put its .dsc and tarballs (snapshot.debian.org) in $TBV_CACHE/src/qemu"; exit 1; }
	fi
	log "extracting $dsc"
	rm -rf "$srcdir"
	# apt checked the files against the signed archive index; dpkg-source has no keyring for
	# the uploader's signature and says so: keep that noise in a log.
	dpkg-source -x "$dsc" "$srcdir" >"$top/extract.log" 2>&1 || { cat "$top/extract.log" >&2; exit 1; }
	touch "$srcdir/.tbv-extracted"
fi

# 2. The glue: our directory in hw/misc, one meson line, one Kconfig entry (idempotent).
mkdir -p "$srcdir/hw/misc/usb4"
if ! grep -q CONFIG_USB4_NHI "$srcdir/hw/misc/meson.build"; then
	glue | sed -n '1p' >>"$srcdir/hw/misc/meson.build"
	glue | sed '1,2d' | { echo; cat; } >>"$srcdir/hw/misc/Kconfig"
fi
# Copy only changed files, so ninja recompiles only those.
for f in "${devfiles[@]}"; do
	cmp -s "$devsrc/$f" "$srcdir/hw/misc/usb4/$f" || cp "$devsrc/$f" "$srcdir/hw/misc/usb4/$f"
done

# 3. Configure once per basekey; build.
build=$top/build-$basekey
if [ ! -f "$build/.tbv-configured" ]; then
	log "configuring QEMU in $build"
	rm -rf "$build"
	mkdir -p "$build"
	(cd "$build" && "$srcdir/configure" "${configure_flags[@]}" >configure.log 2>&1) ||
		{ tail -n 30 "$build/configure.log" >&2; exit 1; }
	touch "$build/.tbv-configured"
fi
log "building qemu-system-x86_64 (cold: ~3-4 min on 2 cores; after a device change: seconds)"
start=$(date +%s)
ninja -C "$build" qemu-system-x86_64 >"$build/ninja.log" 2>&1 || { grep -B2 -A12 -m3 'error' "$build/ninja.log" >&2 || tail -n 40 "$build/ninja.log" >&2; exit 1; }

# 4. Self-check, then publish.
"$build/qemu-system-x86_64" -device help 2>/dev/null | grep -q '"usb4-nhi"' ||
	{ log "the built QEMU has no usb4-nhi device"; exit 1; }
"$build/qemu-system-x86_64" -device help 2>/dev/null | grep -q '"virtio-9p-pci"' ||
	{ log "the built QEMU has no virtio-9p-pci (virtme-ng needs it)"; exit 1; }
mkdir -p "$top/bin-$key.tmp"
cp "$build/qemu-system-x86_64" "$top/bin-$key.tmp/"
echo "$(($(date +%s) - start)) s" >"$top/bin-$key.tmp/.build-time"
rm -rf "$top/bin-$key"
mv "$top/bin-$key.tmp" "$top/bin-$key"
ln -sfn "bin-$key" "$top/current"
# Old binaries are small but add up: keep the newest three.
find "$top" -maxdepth 1 -name 'bin-*' -type d -printf '%T@ %p\n' | sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -rf
log "built in $(cat "$top/bin-$key/.build-time")"
echo "$bin"
