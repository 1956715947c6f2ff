"""What the product module ships: only what a user with hardware runs (issue 24).

thunderbolt_ibverbs.ko has no virtual cable, no configfs and no planted bug; those live in
tbverbs_vcable.ko (kernel/Kbuild), a test backend on the link API the product module exports.
Checked with modinfo and nm on the build output: kernel/*.ko (`make module`, or TBV_MODULE_KO's
directory) and each build/kmod-<kernel>/kernel/ that `make modules` made, and the sanitizer lane's
planted-bug builds (build/kmod-plant-<kind>/kernel/, `make debug-kernel`), whose bug must be in
tbverbs_vcable.ko only, and the test builds of the product module (build/kmod-*-hooks/,
kernel/Kbuild's TBV_TEST_HOOKS), the only ones with a testing parameter. The .ko not being built fails the test: it cannot pass by not looking.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAIN, VCABLE = "thunderbolt_ibverbs", "tbverbs_vcable"
# What belongs to the virtual cable alone (names, parameters, its configfs interface)
VCABLE_WORDS = re.compile(r"vcable|configfs|virtual.cable", re.I)
TEST_ONLY_SYMBOL = re.compile(r"^(tbv_vcable\w*|tbv_plant\w*)$")
# A parameter only a test uses (modinfo's "name:description"): the test build's hooks
TEST_ONLY_PARM = re.compile(r"^\w*test\w*:|^\w+:\s*testing", re.I)


def build_dirs() -> list[Path]:
    """Directories holding a build of both modules: the default one first, which must exist."""
    ko = os.environ.get("TBV_MODULE_KO")
    first = Path(ko).parent if ko else REPO / "kernel"
    return [first, *sorted(d for d in (REPO / "build").glob("kmod-*/kernel") if (d / f"{MAIN}.ko").is_file())]


@pytest.fixture(params=build_dirs(), ids=lambda d: str(d.relative_to(REPO)) if d.is_relative_to(REPO) else str(d))
def built(request: pytest.FixtureRequest) -> Path:
    d: Path = request.param
    for name in (MAIN, VCABLE):
        if not (d / f"{name}.ko").is_file():
            pytest.fail(f"{d / name}.ko is not built (make module): nothing to check")
    return d


def modinfo(ko: Path, field: str) -> list[str]:
    out = subprocess.run(["modinfo", "-F", field, str(ko)], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.strip()]


def symbols(ko: Path) -> dict[str, str]:
    """name -> nm's type letter (U: undefined, used from elsewhere)."""
    out = subprocess.run(["nm", str(ko)], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            syms[parts[-1]] = parts[-2]
    return syms


def test_the_product_module_has_no_virtual_cable_parameter_or_dependency(built: Path) -> None:
    ko = built / f"{MAIN}.ko"
    parms = modinfo(ko, "parm")
    assert parms, "modinfo shows no parameters at all: is this the module?"
    assert [p for p in parms if VCABLE_WORDS.search(p)] == []
    depends = modinfo(ko, "depends")[0].split(",")
    assert "configfs" not in depends and VCABLE not in depends, depends
    assert not [line for line in modinfo(ko, "description") if VCABLE_WORDS.search(line)]


def test_only_the_test_build_has_a_testing_parameter(built: Path) -> None:
    testing = [p for p in modinfo(built / f"{MAIN}.ko", "parm") if TEST_ONLY_PARM.search(p)]
    if built.parent.name.endswith("-hooks"):
        # the test build (make module-hooks): proof that the check sees such a parameter
        assert [p for p in testing if p.startswith("usb4_test_hold_paths_ms:")], testing
    else:
        assert testing == []


def test_the_product_module_has_no_virtual_cable_or_planted_bug_symbol(built: Path) -> None:
    syms = symbols(built / f"{MAIN}.ko")
    assert "tbv_link_create" in syms, "nm shows no link layer: is this the module?"
    assert sorted(s for s in syms if TEST_ONLY_SYMBOL.match(s)) == []
    assert sorted(s for s in syms if s.startswith("configfs_")) == [], "the product module uses configfs"


def test_the_virtual_cable_module_has_them_on_top_of_the_exported_link_api(built: Path) -> None:
    """The other side of the split, and proof that the checks above can see such symbols."""
    ko = built / f"{VCABLE}.ko"
    syms = symbols(ko)
    assert [s for s in syms if s.startswith("tbv_vcable_")], "no tbv_vcable_* symbol: the check cannot fail"
    assert syms.get("tbv_link_create") == "U" and syms.get("configfs_register_subsystem") == "U"
    planted = sorted(s for s in syms if s.startswith("tbv_plant"))
    if built.parent.name.startswith("kmod-plant-"):
        # a TBV_PLANT_BUG build (scripts/build-debug-modules.sh): its bug is here, never in the product
        assert "tbv_plant_bug" in planted, planted
    else:
        # a normal build has no planted bug, in either module
        assert planted == []
    assert MAIN in modinfo(ko, "depends")[0].split(",")
    assert modinfo(ko, "import_ns") == ["TBVERBS_LINK"]
