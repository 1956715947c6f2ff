#!/usr/bin/env bash
# Evaluate flake.nix and nix/*.nix against a nixpkgs tree, offline, and print what they evaluate
# to (scripts/nix-eval.nix says what, for a whole tree and for lib/ alone). Nothing is built or
# downloaded: no substituters, and nix-instantiate runs read-only (drvPaths are computed, no .drv
# is written). Then, where Nix has flakes, the flake itself through `nix eval` with its nixpkgs
# input overridden by the tree (this copies the tree and the repository's tracked files into
# the Nix store, as any flake evaluation does; --no-flake leaves it out).
# Exits 1 on any evaluation error, 3 when all evaluated but some parts could not be (the
# output's notEvaluated: the packages on a nixpkgs without lib.fileset, or their sources where
# this Nix is older than the lib asks for), 0 when everything was evaluated.
#   scripts/nix-eval.sh [--no-flake] NIXPKGS_DIR
set -euo pipefail

flake=1
if [ "${1:-}" = --no-flake ]; then flake=0; shift; fi
if [ $# -ne 1 ] || [ ! -d "$1/lib" ]; then
	echo "usage: $0 [--no-flake] NIXPKGS_DIR   (a nixpkgs tree, or one with lib/ alone)" >&2
	exit 2
fi
command -v nix-instantiate >/dev/null || { echo "nix-eval: nix-instantiate not found (Debian: nix-bin)" >&2; exit 2; }

here=$(cd "$(dirname "$0")/.." && pwd)
nixpkgs=$(realpath "$1")
system=${NIX_EVAL_SYSTEM:-x86_64-linux}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

offline=(--option build-users-group "" --option substituters "")
echo "nixpkgs: $nixpkgs"
if [ -e "$nixpkgs/.git-revision" ]; then echo "nixpkgs revision: $(cat "$nixpkgs/.git-revision")"; fi
echo "nix: $(nix-instantiate --version)"

NIX_STATE_DIR="$tmp/state" NIX_LOG_DIR="$tmp/log" nix-instantiate "${offline[@]}" --readonly-mode \
	--eval --strict --json "$here/scripts/nix-eval.nix" \
	--arg nixpkgs "$nixpkgs" --arg repo "$here" --argstr system "$system" >"$tmp/eval.json"
python3 -m json.tool "$tmp/eval.json"
status=0
python3 -c 'import json, sys; sys.exit(3 if json.load(open(sys.argv[1]))["notEvaluated"] else 0)' \
	"$tmp/eval.json" || status=$?

[ "$flake" = 1 ] || exit $status
if ! nix --extra-experimental-features 'nix-command flakes' eval --expr 1 >/dev/null 2>&1; then
	echo "flake: not evaluated (this Nix has no flakes)"
	exit 3
fi
# the packages' drvPaths where the tree has pkgs/ and lib.fileset; their attribute names always
attrs=$(python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
whole = e["nixpkgs"]["tree"] == "whole" and not e["notEvaluated"]
print(" ".join(["nixosModules", "overlays"] + ([f"packages.{sys.argv[2]}.{p}.drvPath" for p in
      ("tbverbs-module", "tbverbs-tools", "default")] if whole else [])))' "$tmp/eval.json" "$system")
for attr in $attrs; do
	apply=()
	case "$attr" in nixosModules | overlays) apply=(--apply builtins.attrNames) ;; esac
	printf 'flake %s: ' "$attr"
	nix --extra-experimental-features 'nix-command flakes' "${offline[@]}" eval --offline \
		--no-write-lock-file --override-input nixpkgs "path:$nixpkgs" --json "${apply[@]}" \
		"$here#$attr" 2>"$tmp/flake.err" || { cat "$tmp/flake.err" >&2; exit 1; }
	echo
done
exit $status
