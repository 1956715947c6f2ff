"""Fixtures for the packaging tests, which run ON THE HOST: the Debian packages built from this
tree (scripts/build-deb.sh), once per pytest session.

    python3 -m pytest tests/packaging --ignore=tests/packaging/test_install.py   (make test-packaging)
    python3 -m pytest tests/packaging/test_install.py                           (make test-deb-install)
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from pkglib import REPO, VERSION, Debs

from vmlib import missing


@pytest.fixture(scope="session")
def debs(tmp_path_factory: pytest.TempPathFactory) -> Debs:
    for tool in ("dpkg-buildpackage", "dh", "dh_dkms", "lintian"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (make setup)")
    out = tmp_path_factory.mktemp("deb")
    r = subprocess.run(["bash", str(REPO / "scripts" / "build-deb.sh"), str(out)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"scripts/build-deb.sh failed:\n{r.stdout}\n{r.stderr}"
    return Debs(out, out / f"tbverbs-dkms_{VERSION}_all.deb", out / f"tbverbs-tools_{VERSION}_all.deb",
                (out / "lintian.txt").read_text())
