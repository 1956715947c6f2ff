"""What the packaging tests share: paths, the version, the built packages."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for sub in ("tests/harness", "tests/lib", "tests/cli"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))

VERSION = (REPO / "VERSION").read_text().strip()


@dataclass(frozen=True)
class Debs:
    out: Path  # what scripts/build-deb.sh left: .debs, .changes, build.log, lintian.txt
    dkms: Path
    tools: Path
    lintian: str  # lintian's findings on them (empty: clean)
