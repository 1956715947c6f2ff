#!/usr/bin/env bash
# Build the sanitizer-lane kernel (KASAN, UBSAN, lockdep, kmemleak, fault injection; see
# kernel-debug/debug.config) from Debian's linux-source-6.12, once per set of inputs.
#
#   bash scripts/build-debug-kernel.sh        prints the build tree's path on stdout (last line)
#
# The tree is $TBV_CACHE/debug-kernel/build-<key>, <key> a hash of the source package's version,
# the fragment, this script and the compiler's version; a second run with the same inputs only
# checks a stamp and finishes in seconds. The tree is what the VM harness boots
# (`tests/harness/vm.py --kernel <tree>`: vng --run uses its bzImage and its modules) and what
# out-of-tree modules build against (`make -C kernel KDIR=<tree>`).
# Next to it: build-<key>.log (the make output) and build-<key>.time (how long the build took).
# The source is extracted once per package version into $TBV_CACHE/debug-kernel/src-<version>.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

log() { printf 'build-debug-kernel: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

SRC_PKG=linux-source-6.12
TARBALL=/usr/src/$SRC_PKG.tar.xz
FRAGMENT=$here/kernel-debug/debug.config
BASE_FRAGMENT=kernel/configs/kvm_guest.config # inside the kernel source
top=$TBV_CACHE/debug-kernel

[ -r "$TARBALL" ] || die "$TARBALL missing: install $SRC_PKG (make setup)"
[ -r "$FRAGMENT" ] || die "$FRAGMENT missing"
pkg_version=$(dpkg-query -W -f '${Version}' "$SRC_PKG" 2>/dev/null) ||
	die "package $SRC_PKG is not installed (make setup)"
cc_version=$(${CC:-gcc} --version | head -n1)
key=$( (echo "$pkg_version"; echo "$cc_version"; cat "$FRAGMENT" "${BASH_SOURCE[0]}") |
	sha256sum | cut -c1-12)
src=$top/src-$pkg_version
out=$top/build-$key
stamp=$out/.tbv-build-complete

if [ -f "$stamp" ] && [ -f "$out/arch/x86/boot/bzImage" ]; then
	log "up to date: $SRC_PKG $pkg_version, key $key; built earlier: $(cat "$out.time" 2>/dev/null || echo "?")"
	echo "$out"
	exit 0
fi

mkdir -p "$top"
# One build at a time on this machine (another engineer, a second terminal).
exec 9>"$top/.lock"
if ! flock -n 9; then
	log "waiting for another build-debug-kernel.sh to finish"
	flock 9
fi
if [ -f "$stamp" ]; then # built while we waited
	echo "$out"
	exit 0
fi

# --- the source, extracted once per package version ---------------------------------------
if [ ! -f "$src/.tbv-extracted" ]; then
	log "extracting $TARBALL ($SRC_PKG $pkg_version) into $src"
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -xJf "$TARBALL" -C "$src.tmp" --strip-components=1
	touch "$src.tmp/.tbv-extracted"
	mv "$src.tmp" "$src"
fi
kernelversion=$(make -s -C "$src" kernelversion)

# --- configuration ------------------------------------------------------------------------
mkdir -p "$out"
log "configuring $kernelversion in $out (alldefconfig + $BASE_FRAGMENT + kernel-debug/debug.config)"
start=$(date +%s)
(
	cd "$src"
	# merge_config.sh leaves temporary files in the current directory; output in $out.
	scripts/kconfig/merge_config.sh -Q -O "$out" "$BASE_FRAGMENT" "$FRAGMENT"
	make -s O="$out" olddefconfig
) >"$out.config.log" 2>&1 || { tail -n 40 "$out.config.log" >&2; die "configuration failed (log: $out.config.log)"; }

# Every line of the fragment must have survived: "CONFIG_X=v" verbatim, "# CONFIG_X is not set"
# as not set (absent, or "is not set"). Anything else means a dependency is missing.
missing=()
while IFS= read -r line; do
	if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
		grep -qxF -- "$line" "$out/.config" ||
			missing+=("$line (got: $(grep -E "^(# )?${BASH_REMATCH[1]}[= ]" "$out/.config" || echo 'absent'))")
	elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
		! grep -qE "^${BASH_REMATCH[1]}=" "$out/.config" ||
			missing+=("$line (got: $(grep -E "^${BASH_REMATCH[1]}=" "$out/.config"))")
	fi
done <"$FRAGMENT"
if [ "${#missing[@]}" -gt 0 ]; then
	log "ERROR: ${#missing[@]} setting(s) of kernel-debug/debug.config are not in the final .config:"
	printf 'build-debug-kernel:   %s\n' "${missing[@]}" >&2
	die "fix the fragment (a dependency is probably missing); config in $out/.config"
fi
log "all $(grep -cE '^(CONFIG_|# CONFIG_.* is not set)' "$FRAGMENT") settings of the fragment are in the final .config"

# --- build --------------------------------------------------------------------------------
jobs=$(nproc)
log "building bzImage and modules with -j$jobs (log: $out.log)"
if ! make -C "$src" O="$out" -j"$jobs" bzImage modules >"$out.log" 2>&1; then
	tail -n 60 "$out.log" >&2
	die "the kernel build failed (log: $out.log)"
fi
# What `vng --run <tree>` would do on its first boot (symlinks + depmod in $out/.virtme_mods):
# done here so the tree is complete and read-only for concurrent VM runs.
if [ -x "$TBV_VENV/bin/virtme-prep-kdir-mods" ]; then
	(cd "$out" && "$TBV_VENV/bin/virtme-prep-kdir-mods") >>"$out.log" 2>&1 ||
		die "virtme-prep-kdir-mods failed (log: $out.log)"
fi
secs=$(( $(date +%s) - start ))
release=$(cat "$out/include/config/kernel.release")
printf '%dm%02ds (%d s) to configure and build %s with -j%d on %s, %s\n' \
	$((secs / 60)) $((secs % 60)) "$secs" "$release" "$jobs" "$(hostname)" "$(date -u +%FT%TZ)" >"$out.time"
cat >"$stamp" <<EOF
package=$SRC_PKG $pkg_version
compiler=$cc_version
release=$release
key=$key
EOF
ln -sfn "$(basename "$out")" "$top/current"
log "done: $(cat "$out.time")"
log "modules: $(wc -l <"$out/modules.order"); image: $(du -h "$out/arch/x86/boot/bzImage" | cut -f1)"
others=$(find "$top" -maxdepth 1 -name 'build-*' -type d ! -path "$out" | wc -l)
[ "$others" = 0 ] || log "note: $others older build tree(s) in $top (about 1-3 GB each) can be deleted"
echo "$out"
