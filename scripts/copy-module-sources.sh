#!/usr/bin/env bash
# Copy the module's sources (kernel/: C files, Kbuild, Makefile) into DEST, keeping
# their paths, for a build in a copy (scripts/build-module.sh, build-debug-modules.sh).
# Listed by git, not copied by directory: a build in place may be running meanwhile (make
# test's two lanes), and its temporary files come and go (a `cp -r kernel` failed on one).
#   bash scripts/copy-module-sources.sh DEST
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: copy-module-sources.sh DEST}
mkdir -p "$dest"
cd "$here"
git ls-files -co --exclude-standard kernel |
	grep -E '(\.[ch]|/Kbuild|/Makefile)$' | grep -vE '\.mod\.c$|/tbv_have\.h$' |
	xargs cp --parents -t "$dest"
