#!/usr/bin/env bash
# Build the Debian packages tbverbs-dkms and tbverbs-tools (dpkg-buildpackage -us -uc -b) from a
# copy of what they are made of, so that the .debs land in OUT (default build/deb) and not
# beside the checkout, and a development build in kernel/ cannot leak into them. Then lintian.
#   scripts/build-deb.sh [OUT]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$here/build/deb}")
version=$(cat "$here/VERSION")
src="$out/src/tbverbs-$version"

mkdir -p "$out"
rm -rf "$out/src" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo "$out/build.log" "$out/lintian.txt"
mkdir -p "$src/scripts"
cp -a "$here/debian" "$here/dkms" "$here/kernel" "$here/cli" "$here/packaging" \
	"$here/VERSION" "$src/"
cp -a "$here/scripts/dkms-source.sh" "$src/scripts/"
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 || {
	tail -n 30 "$out/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed; the log: $out/build.log" >&2
	exit 1
}
mv "$out"/src/*.deb "$out"/src/*.changes "$out"/src/*.buildinfo "$out/"
rm -rf "$out/src"
if command -v lintian >/dev/null; then
	# Errors and warnings fail the build; informational and pedantic tags are shown too (and the
	# packaging test fails on any).
	lintian --fail-on error,warning --display-info --pedantic --tag-display-limit 0 "$out"/*.changes \
		| tee "$out/lintian.txt" >&2
fi
ls "$out"/*.deb
