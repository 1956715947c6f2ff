#!/usr/bin/env bash
# Build the modules (thunderbolt_ibverbs.ko, tbverbs_vcable.ko) against the debug kernel tree
# (scripts/build-debug-kernel.sh): the normal ones into build/kmod-debug, and one pair per
# planted bug (kernel/tbv_plant.h) into build/kmod-plant-<kind>, the test build with its hooks
# (TBV_TEST_HOOKS) into build/kmod-debug-hooks, each in its own copy of the
# sources so the builds never mix. Only tbverbs_vcable.ko has the bug, so a planted build makes
# that module alone, linked against build/kmod-debug's symbols, beside a copy of that
# thunderbolt_ibverbs.ko (a product module build is a minute under the lane's VM).
#   bash scripts/build-debug-modules.sh TREE
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tree=${1:?usage: build-debug-modules.sh DEBUG_KERNEL_TREE}
[ -f "$tree/Module.symvers" ] || { echo "build-debug-modules: $tree is not a built kernel tree" >&2; exit 1; }

base=$here/build/kmod-debug/kernel

build_one() { # dir [plant] [hooks]
	local dir=$1 plant=${2:-} hooks=${3:+TBV_TEST_HOOKS=1}
	rm -rf "$dir" && mkdir -p "$dir"
	bash "$here/scripts/copy-module-sources.sh" "$dir"
	make -C "$dir/kernel" clean KDIR="$tree" >/dev/null
	[ -z "$plant" ] || cp "$base/thunderbolt_ibverbs.ko" "$dir/kernel/"
	if ! make -C "$dir/kernel" KDIR="$tree" ${plant:+TBV_PLANT_BUG=$plant} $hooks \
		${plant:+KBUILD_EXTRA_SYMBOLS=$base/Module.symvers} >"$dir/build.log" 2>&1 ||
		grep -E "warning:|error:" "$dir/build.log" ||
		[ ! -f "$dir/kernel/thunderbolt_ibverbs.ko" ] || [ ! -f "$dir/kernel/tbverbs_vcable.ko" ]; then
		cat "$dir/build.log" >&2
		echo "build-debug-modules: building $dir failed or warned" >&2
		exit 1
	fi
	echo "build-debug-modules: $dir/kernel/thunderbolt_ibverbs.ko $dir/kernel/tbverbs_vcable.ko"
}

build_one "$here/build/kmod-debug"
# the test build of the product module (kernel/Kbuild's TBV_TEST_HOOKS), for the two-VM tests
build_one "$here/build/kmod-debug-hooks" "" hooks
for kind in oob sleep leak; do
	build_one "$here/build/kmod-plant-$kind" "$kind"
done
