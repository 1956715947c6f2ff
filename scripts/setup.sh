#!/usr/bin/env bash
# One idempotent setup step for a fresh Debian 12 machine: apt sources, kernels, QEMU, build
# dependencies, virtme-ng, and rdma-core (from the PyPI pyverbs sdist) built together with our provider.
# A second run only checks stamps and finishes in seconds.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

log() { printf 'setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_packages=(
	"linux-image-$KVER_612" "linux-headers-$KVER_612" "linux-headers-$KVER_61=$KPKG_61" linux-source-6.12
	qemu-system-x86 build-essential bc flex bison libelf-dev libssl-dev dwarves kmod cpio
	cmake ninja-build pkg-config libnl-3-dev libnl-route-3-dev libudev-dev
	cython3 python3-dev python3-venv python3-pytest clang libclang-rt-14-dev debootstrap
	iproute2 iputils-ping procps busybox-static strace perftest rdmacm-utils ibverbs-utils
	libibverbs-dev ibverbs-providers
	meson libglib2.0-dev libpixman-1-dev libfdt-dev libcap-ng-dev dpkg-dev
	debhelper dh-dkms lintian man-db nix-bin
	openmpi-bin libopenmpi-dev ucx-utils
)

setup_apt() {
	local src=/etc/apt/sources.list.d/tbverbs-backports.sources
	if [ ! -f "$src" ]; then
		log "adding bookworm-backports to apt sources"
		as_root tee "$src" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
		rm -f "$TBV_CACHE/apt.stamp"
	fi
	local want
	want=$(printf '%s\n' "${apt_packages[@]}" | sha256sum | cut -c1-16)
	# (dpkg -s takes names: a pinned "name=version" is checked by name, its version by the stamp)
	if [ "$(cat "$TBV_CACHE/apt.stamp" 2>/dev/null)" = "$want" ] && dpkg -s "${apt_packages[@]%%=*}" >/dev/null 2>&1; then
		return
	fi
	log "installing Debian packages (first run takes a few minutes)"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${apt_packages[@]}" >/dev/null
	echo "$want" >"$TBV_CACHE/apt.stamp"
}

setup_venv() {
	if [ -x "$TBV_VENV/bin/vng" ] && "$TBV_VENV/bin/python" -c 'import pytest' 2>/dev/null; then
		return
	fi
	log "creating the Python venv with virtme-ng and pytest"
	/usr/bin/python3 -m venv --system-site-packages "$TBV_VENV"
	"$TBV_VENV/bin/pip" install -q "virtme-ng==$VNG_VERSION" pytest
}

setup_rdma_core() {
	# The build is keyed by the rdma-core version and how it is built.
	local key
	key=$( (echo "$RDMA_CORE_VERSION"; cat "$here/scripts/build-rdma-core.sh") |
		sha256sum | cut -c1-16)
	if [ "$(cat "$TBV_RDMA_PREFIX/.key" 2>/dev/null)" = "$key" ]; then
		return
	fi
	log "building rdma-core $RDMA_CORE_VERSION (its stock providers, pyverbs and tests)"
	bash "$here/scripts/build-rdma-core.sh"
	echo "$key" >"$TBV_RDMA_PREFIX/.key"
}

# checkpatch.pl and its data files, from Debian's kernel source package.
setup_checkpatch() {
	local dir="$TBV_CACHE/linux-source-6.12"
	[ -x "$dir/scripts/checkpatch.pl" ] && return
	log "extracting checkpatch.pl from linux-source-6.12"
	mkdir -p "$dir"
	tar -xJf /usr/src/linux-source-6.12.tar.xz -C "$dir" --strip-components=1 \
		linux-source-6.12/scripts/checkpatch.pl linux-source-6.12/scripts/spelling.txt \
		linux-source-6.12/scripts/const_structs.checkpatch
}

# The other kernels (docs/kernels.md): trixie's headers in a chroot (with 7.3's image), and the
# images the VM boots besides the host's 6.12, extracted into the cache, never installed.
# What had to be built in this run goes to build/kernels-cold: make test then skips the VM runs
# on those kernels (and says so), as CI's time is counted for the cold run.
setup_kernels() {
	mkdir -p "$here/build"
	: >"$here/build/kernels-cold"
	export TBV_COLD_LOG=$here/build/kernels-cold
	bash "$here/scripts/kernel-chroot.sh" trixie >/dev/null
	bash "$here/scripts/kernel-image.sh" "$KVER_61" / "linux-image-$KVER_61=$KPKG_61" >/dev/null
	unset TBV_COLD_LOG
}

mkdir -p "$TBV_CACHE"
setup_apt
setup_kernels
setup_venv
setup_rdma_core
setup_checkpatch
log "ready (cache: $TBV_CACHE)"
