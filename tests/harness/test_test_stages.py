"""`make test`'s stage runner (scripts/test-stages.sh): every stage runs whatever failed before,
a summary of all closes the run, and the exit status says whether any failed.

Host-only: `make` is replaced by a stub that records its targets and fails the ones asked to."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "test-stages.sh"
STAGES = ("builds", "unit", "fuzz", "host", "sanitizers", "kernels", "vm-rdma-core", "vm",
          "vm2", "suspend", "sanitizers-vm2")
# make test-full adds the two-VM suite on 7.3 after the lanes' join
FULL_STAGES = STAGES[:STAGES.index("vm2")] + ("kernels-vm2",) + STAGES[STAGES.index("vm2"):]
SERIAL_TARGETS = ["checkpatch", "unit", "fuzz", "test-host", "test-debug-ci-vm", "test-kernels-ci-vm",
                  "test-vm-rdma-core", "test-vm-main", "test-vm2", "test-vm2-suspend",
                  "test-debug-ci-vm2"]


# what a VM stage prints about its time: the guest's boot, pytest's --durations block
VM_TIMING = ("vm: booted in 25.3s, total 99.0s, exit status 0\\n"
             "=========== slowest 15 durations ===========\\n"
             "300.01s call     tests/device/test_a.py::test_slow\\n"
             "200.00s setup    tests/device/test_b.py::test_b\\n"
             "100.00s call     tests/device/test_c.py::test_c\\n"
             "50.00s call     tests/device/test_d.py::test_d\\n")


def run_stages(tmp_path: Path, fail_target: str | None, full: bool = False,
               beside: bool = False, slow_target: str | None = None,
               deadline_in: int | None = None) -> tuple[int, str, list[str]]:
    """Run the runner with `make` stubbed: `fail_target` fails as pytest would say it does,
    `slow_target` takes a minute, `deadline_in` seconds from now is TBV_DEADLINE."""
    calls = tmp_path / "calls"
    stub = tmp_path / "bin" / "make"
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                    f'case " $* " in *" {slow_target} "*) sleep 60;; esac\n'
                    f'case " $* " in *" test-vm-main "*) printf "{VM_TIMING}";; esac\n'
                    f'case " $* " in *" {fail_target} "*) echo "FAILED tests/x.py::test_y - boom"; '
                    f'echo "===== 1 failed, 2 passed in 3.25s ====="; exit 2;; esac\n'
                    f'echo "===== 3 passed, 1 xfailed in 1.00s ====="\nexit 0\n')
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{stub.parent}:{os.environ['PATH']}", TBV_FULL="1" if full else "",
               TBV_STAGES_BESIDE="1" if beside else "0",
               TBV_STAGE_LOGS=str(tmp_path / "stage-logs"), TBV_STAGE_MIN_S="3",
               TBV_DEADLINE=str(int(time.time()) + deadline_in) if deadline_in else "")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)
    return r.returncode, r.stdout, calls.read_text().splitlines()


def summary(out: str) -> dict[str, str]:
    table = out.split("==== make test: summary ====")[1].split("==== make test: where the time went")[0]
    lines = table.strip().splitlines()
    return {line.split()[0]: line.split()[1] for line in lines if line.split()[0] in FULL_STAGES}


def test_a_failed_stage_does_not_stop_the_others(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target="fuzz")
    assert rc == 1, out
    assert len(calls) == len(STAGES), calls  # every stage ran, the ones after fuzz too
    assert calls[-1].endswith("test-debug-ci-vm2"), calls
    got = summary(out)
    assert got == {name: "FAILED" if name == "fuzz" else "passed" for name in STAGES}, out
    assert "make test: FAILED" in out


def test_all_stages_passing_exits_zero(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target=None)
    assert rc == 0, out
    assert set(summary(out).values()) == {"passed"}, out
    assert "every stage passed" in out
    assert [c.split()[-1] for c in calls] == SERIAL_TARGETS


def test_the_full_run_has_the_whole_kernels_subset_and_ci_the_budgeted_one(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target=None, full=True)
    assert rc == 0, out
    kernels = [c for c in calls if "test-vm-6.1" in c or "test-kernels-ci" in c or "test-vm2-7.3" in c]
    assert kernels == ["--no-print-directory test-vm-6.1 test-vm-7.3",
                       "--no-print-directory test-vm2-7.3"], calls
    assert set(summary(out)) == set(FULL_STAGES), out


def test_the_second_lane_runs_beside_the_stock_suite_and_reports_at_the_join(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target="test-debug-ci-vm", beside=True)
    assert rc == 1, out
    assert sorted(c.split()[-1] for c in calls) == sorted(SERIAL_TARGETS), calls
    # the two-VM stages start only after the lane has ended (one VM per lane, two cores)
    after_join = [c.split()[-1] for c in calls][-3:]
    assert after_join == ["test-vm2", "test-vm2-suspend", "test-debug-ci-vm2"], calls
    # the lane's own stages ran in order, and their output comes after the main lane's vm stage
    assert calls.index("--no-print-directory test-debug-ci-vm") < calls.index("--no-print-directory test-kernels-ci-vm") \
        < calls.index("--no-print-directory test-vm-rdma-core")
    # the stock suite once, in two parts: rdma-core's suite in lane two, the rest in lane one
    assert calls.count("--no-print-directory test-vm-main") == 1 and "--no-print-directory test-vm" not in calls
    assert out.index("stage sanitizers, run beside the others") > out.index("stage vm (make test-vm-main)"), out
    assert out.index("stage vm-rdma-core, run beside the others") > out.index("stage kernels, run beside the others")
    got = summary(out)
    assert got == {name: "FAILED" if name == "sanitizers" else "passed" for name in STAGES}, out
    assert "make test: FAILED" in out


def test_the_summary_closes_the_run_with_each_stage_s_tally_and_why_one_failed(tmp_path: Path) -> None:
    rc, out, _ = run_stages(tmp_path, fail_target="fuzz")
    assert rc == 1, out
    # CI keeps only the end of the output: the reasons, then the table, come last (only the
    # one-line timings and the verdict after them)
    tail = out.split("==== make test: why stages failed ====")[1]
    reasons, table = tail.split("==== make test: summary ====")
    table = table.split("==== make test: where the time went")[0]
    assert reasons.split() == ["--", "fuzz", "(FAILED):", "FAILED", "tests/x.py::test_y", "-", "boom"], out
    rows = {line.split()[0]: line for line in table.strip().splitlines() if line.split()[0] in STAGES}
    assert rows["fuzz"].endswith("1 failed, 2 passed"), rows
    assert rows["unit"].endswith("3 passed, 1 xfailed"), rows


def test_the_deadline_stops_a_stage_and_the_ones_after_it_do_not_start(tmp_path: Path) -> None:
    rc, out, calls = run_stages(tmp_path, fail_target=None, slow_target="test-vm-main", deadline_in=10)
    assert rc == 1, out
    # the stock suite was stopped at the deadline, nothing after it started
    assert calls[-1].endswith(" test-vm-main"), calls
    got = summary(out)
    assert got["vm"] == "DEADLINE", out
    assert {got[name] for name in STAGES[STAGES.index("vm") + 1:]} == {"NOT-RUN"}, out
    assert {got[name] for name in STAGES[:STAGES.index("vm")]} == {"passed"}, out
    assert "-- suspend (NOT-RUN):" in out and "not started" in out, out


def test_stopping_the_run_stops_the_stage_in_its_own_process_group(tmp_path: Path) -> None:
    """A stage runs in a process group of its own (timeout's), which a ^C or a CI cancel aimed at
    the run's group does not reach: the runner passes it on and ends."""
    stub = tmp_path / "bin" / "make"
    stub.parent.mkdir()
    pidfile = tmp_path / "sleep.pid"
    stub.write_text(f'#!/bin/sh\ncase " $* " in *" fuzz "*) sleep 60 & echo $! > {pidfile}; wait;; esac\n')
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{stub.parent}:{os.environ['PATH']}", TBV_FULL="", TBV_STAGES_BESIDE="0",
               TBV_STAGE_LOGS=str(tmp_path / "stage-logs"), TBV_STAGE_MIN_S="3",
               TBV_DEADLINE=str(int(time.time()) + 600))
    proc = subprocess.Popen(["bash", str(SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.1)
    sleeper = int(pidfile.read_text())
    assert os.getpgid(sleeper) != proc.pid  # the stage is in a group of its own
    os.killpg(proc.pid, signal.SIGTERM)  # what a CI cancel does to the run's group
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert "make test: stopped" in out
    time.sleep(0.5)
    try:
        os.kill(sleeper, 0)
        alive = Path(f"/proc/{sleeper}/stat").read_text().split()[2] != "Z"
    except ProcessLookupError:
        alive = False
    assert not alive, "the stage's process outlived the run"


def test_the_run_says_where_the_time_went_in_one_line_per_stage_after_its_summary(tmp_path: Path) -> None:
    rc, out, _ = run_stages(tmp_path, fail_target=None)
    assert rc == 0, out
    after_summary = out.split("==== make test: summary ====")[1]
    timing = after_summary.split("==== make test: where the time went ====")[1].strip().splitlines()
    # only the stage that printed timing: its boot and its three slowest phases, on one line;
    # then the run's verdict, last
    assert timing == ["vm              boots 25.3s; slowest 300.01s call test_slow, "
                      "200.00s setup test_b, 100.00s call test_c",
                      timing[-1]], out
    assert timing[-1].startswith("make test: every stage passed"), out
