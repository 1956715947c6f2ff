"""`make test`'s stage runner (scripts/test-stages.sh): every stage runs whatever failed before,
a summary of all closes the run, and the exit status says whether any failed.

Host-only: `make` is replaced by a stub that records its targets and fails the ones asked to."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "test-stages.sh"
STAGES = ("builds", "unit", "fuzz", "host", "vm", "kernels", "vm2", "suspend", "sanitizers")


def run_stages(tmp_path: Path, fail_target: str | None,
               full: bool = False) -> tuple[int, str, list[str]]:
    calls = tmp_path / "calls"
    stub = tmp_path / "bin" / "make"
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                    f'case " $* " in *" {fail_target} "*) exit 2;; esac\nexit 0\n')
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{stub.parent}:{os.environ['PATH']}", TBV_FULL="1" if full else "")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    return r.returncode, r.stdout, calls.read_text().splitlines()


def summary(out: str) -> dict[str, str]:
    lines = out.split("==== make test: summary ====")[1].strip().splitlines()
    return {line.split()[0]: line.split()[1] for line in lines if line.split()[0] in STAGES}


def test_a_failed_stage_does_not_stop_the_others(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target="fuzz")
    assert rc == 1, out
    assert len(calls) == len(STAGES), calls  # every stage ran, the ones after fuzz too
    assert calls[-1].endswith("test-debug-ci"), calls
    got = summary(out)
    assert got == {name: "FAILED" if name == "fuzz" else "passed" for name in STAGES}, out
    assert "make test: FAILED" in out


def test_all_stages_passing_exits_zero(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target=None)
    assert rc == 0, out
    assert set(summary(out).values()) == {"passed"}, out
    assert "every stage passed" in out
    assert [c.split()[-1] for c in calls] == ["checkpatch", "unit", "fuzz", "test-host", "test-vm", "test-kernels-ci", "test-vm2",
                                               "test-vm2-suspend", "test-debug-ci"]


def test_the_full_run_has_the_whole_kernels_subset_and_ci_the_budgeted_one(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target=None, full=True)
    assert rc == 0, out
    kernels = [c for c in calls if "test-vm-6.1" in c or "test-kernels-ci" in c]
    assert kernels == ["--no-print-directory test-vm-6.1 test-vm-7.3 test-vm2-7.3"], calls
    assert set(summary(out)) == set(STAGES), out
