#!/usr/bin/env bash
# Is the sanitizer-lane kernel already built for the current inputs? Prints "warm" (exit 0) or
# "cold" (exit 1) without building anything, so CI can pick the lane's subset before it commits
# to a kernel build. The key must be computed exactly as scripts/build-debug-kernel.sh does
# (tests/cli/test_debug_kernel_state.py checks that the two agree).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"
builder=$here/scripts/build-debug-kernel.sh
pkg_version=$(dpkg-query -W -f '${Version}' linux-source-6.12 2>/dev/null) || { echo cold; exit 1; }
cc_version=$(${CC:-gcc} --version | head -n1)
key=$( (echo "$pkg_version"; echo "$cc_version"; cat "$here/kernel-debug/debug.config" "$builder") |
	sha256sum | cut -c1-12)
out=$TBV_CACHE/debug-kernel/build-$key
if [ -f "$out/.tbv-build-complete" ] && [ -f "$out/arch/x86/boot/bzImage" ]; then
	echo "warm $out"
	exit 0
fi
echo "cold $out"
exit 1
