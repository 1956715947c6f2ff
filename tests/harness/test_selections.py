"""The Makefile's test selections for the sanitizer kernel are pytest markers, not lists of node ids.

DEBUG_SUBSET (make test-debug), DEBUG_CI and DEBUG_COLD (make test-debug-ci-vm) and VM2_DEBUG
(make test-vm2-debug) are pytest arguments: `-m <markers> <directory>`. Host-only: each is read
from the Makefile as make expands it (TBV_FULL=0 and 1) and collected with `--collect-only`
(nothing runs, nothing boots); a plugin reports every collected test's markers and the
registered markers, so the checks below do not depend on pytest's own `-m` filtering.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SELECTIONS = ("DEBUG_SUBSET", "DEBUG_CI", "DEBUG_COLD", "VM2_DEBUG")

# Writes, at the end of collection, every collected test with its markers, the registered
# markers and whether --strict-markers is in effect (set by the suites' conftest.py).
PLUGIN = '''
import json, os

def pytest_collection_finish(session):
    cfg = session.config
    with open(os.environ["TBV_SELECTION_REPORT"], "w") as f:
        json.dump({
            "items": {i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in session.items},
            "registered": sorted(line.split(":")[0].split("(")[0].strip() for line in cfg.getini("markers")),
            "strict": bool(cfg.option.strict_markers or cfg.option.strict),
        }, f)
'''


def make_value(name: str, full: bool) -> str:
    """The variable as make expands it (no recipe runs: an extra rule prints it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-s", f"TBV_FULL={1 if full else 0}", "--eval",
                        f"__print_selection: ; @echo '$({name})'", "__print_selection"],
                       cwd=REPO, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def collect(args: list[str], tmp_path: Path) -> dict:
    """Collect with `args` (the -m filter included) and report what the plugin saw."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    (plugin_dir / "tbv_selection_report.py").write_text(PLUGIN)
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    env = dict(os.environ, TBV_SELECTION_REPORT=str(report),
               PYTHONPATH=os.pathsep.join(filter(None, [str(plugin_dir), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "-p", "tbv_selection_report", *args],
                       cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, f"pytest {shlex.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return json.loads(report.read_text())


def split_selection(value: str) -> tuple[list[str], list[str]]:
    """-m expression's marker names (an `or` of names, nothing else) and the paths."""
    args = shlex.split(value)
    assert args[:1] == ["-m"] and len(args) >= 3, f"not `-m <markers> <paths>`: {value}"
    words = args[1].split()
    names, ops = words[::2], words[1::2]
    assert names and set(ops) <= {"or"} and len(names) == len(ops) + 1, \
        f"-m {args[1]!r}: this test knows only `a or b or ...`"
    return names, args[2:]


SUITES = ("tests/device", "tests/usb4", "tests/suspend")


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every test of the VM suites, unfiltered, with its markers; the markers registered."""
    return collect(list(SUITES), tmp_path_factory.mktemp("suites"))


@pytest.fixture(scope="module")
def selections() -> dict[tuple[str, bool], str]:
    return {(name, full): make_value(name, full) for name in SELECTIONS for full in (False, True)}


@pytest.mark.parametrize("full", [False, True], ids=["ci", "full"])
@pytest.mark.parametrize("name", SELECTIONS)
def test_a_selection_collects_every_test_carrying_its_markers(name: str, full: bool, suites: dict,
                                                              selections: dict, tmp_path: Path) -> None:
    value = selections[name, full]
    assert "::" not in value, f"{name} names node ids: {value}"
    markers, paths = split_selection(value)

    selected = collect(["-m", " or ".join(markers), *paths], tmp_path)
    assert selected["strict"], f"--strict-markers is not on for {paths}"
    unregistered = set(markers) - set(selected["registered"])
    assert not unregistered, f"{name} selects markers nobody registered: {unregistered}"
    assert selected["items"], f"{name} ({value}) selects nothing"

    # every test under the selection's paths carrying one of its markers is selected: a file
    # the command line leaves out would lose its marked tests silently
    under = tuple(path.rstrip("/") + "/" for path in paths)
    marked = {node for node, names in suites["items"].items()
              if node.startswith(under) and set(names) & set(markers)}
    assert marked == set(selected["items"]), \
        f"{name}: marked but not selected {sorted(marked - set(selected['items']))}, " \
        f"selected but not marked {sorted(set(selected['items']) - marked)}"


@pytest.mark.parametrize("full", [False, True], ids=["ci", "full"])
def test_every_test_with_a_sanitizer_marker_is_in_a_selection(full: bool, suites: dict,
                                                              selections: dict) -> None:
    """A sanitizer_* marker on a test no selection of that marker covers (another suite) is an error."""
    covered = set()
    for name in SELECTIONS:
        markers, paths = split_selection(selections[name, full])
        under = tuple(path.rstrip("/") + "/" for path in paths)
        covered |= {node for node, names in suites["items"].items()
                    if node.startswith(under) and set(names) & set(markers)}
    wanted = {"sanitizer_ci", "sanitizer_cold", "sanitizer_subset"} | ({"sanitizer_full"} if full else set())
    marked = {node for node, names in suites["items"].items() if set(names) & wanted}
    assert marked, f"no test carries {wanted}"
    assert marked <= covered, f"marked but in no Makefile selection: {sorted(marked - covered)}"


@pytest.mark.parametrize("name", SELECTIONS)
def test_make_test_full_adds_to_a_selection_and_removes_nothing(name: str, selections: dict) -> None:
    ci, ci_paths = split_selection(selections[name, False])
    full, full_paths = split_selection(selections[name, True])
    assert set(ci) <= set(full) and ci_paths == full_paths


def test_every_sanitizer_marker_is_used_by_a_selection(suites: dict, selections: dict) -> None:
    used = set()
    for value in selections.values():
        used |= set(split_selection(value)[0])
    sanitizer = {m for m in suites["registered"] if m.startswith("sanitizer_")}
    assert sanitizer, "no sanitizer_* marker is registered"
    assert sanitizer <= used, f"registered but used by no Makefile selection: {sanitizer - used}"
    assert suites["strict"], "--strict-markers is not on for the VM suites"


def test_the_makefile_names_no_node_ids() -> None:
    text = (REPO / "Makefile").read_text()
    node_ids = re.findall(r"\S+\.py::\S+", text)
    assert not node_ids, f"the Makefile selects tests by node id (use a marker): {node_ids}"
