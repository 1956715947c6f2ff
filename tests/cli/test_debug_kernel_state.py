"""scripts/debug-kernel-state.sh must compute the same cache key as scripts/build-debug-kernel.sh.

CI uses the former to decide, without building, whether the sanitizer lane's kernel is cached;
if the two keys drifted apart, CI would rebuild (or skip) the kernel behind the builder's back.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def key_recipe(path: Path) -> list[str]:
    """The lines that define pkg_version, cc_version and key, normalised."""
    text = path.read_text()
    key = re.search(r"^key=\$\(.*?cut -c1-12\)$", text, re.S | re.M)
    assert key, f"no key=... in {path}"
    body = key.group(0).replace('"${BASH_SOURCE[0]}"', "BUILDER").replace('"$builder"', "BUILDER")
    body = body.replace('"$FRAGMENT"', "FRAGMENT").replace(
        '"$here/kernel-debug/debug.config"', "FRAGMENT")
    cc = re.search(r"^cc_version=.*$", text, re.M)
    assert cc, f"no cc_version=... in {path}"
    return [" ".join(body.split()), cc.group(0)]


def test_state_script_uses_the_builders_key() -> None:
    assert key_recipe(REPO / "scripts/debug-kernel-state.sh") == \
        key_recipe(REPO / "scripts/build-debug-kernel.sh")
    builder = (REPO / "scripts/build-debug-kernel.sh").read_text()
    state = (REPO / "scripts/debug-kernel-state.sh").read_text()
    # the same tree name and completeness stamp
    assert "out=$top/build-$key" in builder and "build-$key" in state
    assert ".tbv-build-complete" in builder and ".tbv-build-complete" in state
