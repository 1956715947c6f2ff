#!/usr/bin/env bash
# Stage the module's DKMS source tree in DEST: kernel/ (sources, Kbuild, Makefile), nothing
# built. With VERSION, also DEST/dkms.conf with that version (the
# Debian package lets dh_dkms install dkms.conf instead).
#   scripts/dkms-source.sh DEST [VERSION]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: dkms-source.sh DEST [VERSION]}
version=${2:-}

mkdir -p "$dest/kernel/proto" "$dest/kernel/compat"
# The sources by name: a tree that was built in has .o, .ko, .mod.c and .cmd files beside them,
# and compat/tbv_have.h, which Kbuild generates from the compile tests in compat/ (they must
# come along: without them the build for any kernel fails).
for f in "$here"/kernel/*.[ch] "$here"/kernel/proto/*.[ch] "$here"/kernel/compat/*.[ch]; do
	case $f in *.mod.c | */compat/tbv_have.h) continue ;; esac
	install -m 644 "$f" "$dest/kernel/${f#"$here/kernel/"}"
done
install -m 644 "$here/kernel/Kbuild" "$here/kernel/Makefile" "$dest/kernel/"
if [ -n "$version" ]; then
	sed "s/#MODULE_VERSION#/$version/" "$here/dkms/dkms.conf" >"$dest/dkms.conf"
	chmod 644 "$dest/dkms.conf"
fi
