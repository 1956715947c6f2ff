"""The per-test limit the VM tests run under (tests/lib/testlimit.py): a hung test fails with the
blocked tasks listed, and the tests after it still run, with less time each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"
sys.path.insert(0, str(LIB))

import testlimit  # noqa: E402

SAMPLE = """
import time
import pytest
import testlimit

testlimit.AFTER_A_HANG_S = 1  # below TBV_TEST_TIMEOUT (2), to see it taken

def test_hangs():
    try:
        time.sleep(60)
    except Exception:  # code under test that swallows errors cannot keep it running
        time.sleep(60)

def test_after_it_gets_less_time():
    assert testlimit._limit_s == 1

@pytest.fixture
def slow_to_tear_down():
    yield
    time.sleep(60)

def test_whose_teardown_hangs(slow_to_tear_down):
    pass

def test_quick():
    assert True
"""


def test_a_hung_test_fails_with_the_blocked_tasks_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = dict(os.environ, TBV_TEST_TIMEOUT="2", PYTHONPATH=str(LIB))
    r = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "testlimit", "-p", "no:cacheprovider",
                        "test_sample.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "test_sample.py::test_hangs FAILED" in out, out
    assert "TIMEOUT: test_sample.py::test_hangs still running (call) after its 2s" in out, out
    assert "tasks in D state" in out, out
    assert "test_sample.py::test_after_it_gets_less_time PASSED" in out, out
    # a fixture's teardown is limited too, and the test is reported with it
    assert "test_sample.py::test_whose_teardown_hangs ERROR" in out, out
    assert "still running (teardown) after its 1s" in out, out
    assert "test_sample.py::test_quick PASSED" in out, out
    assert "Current thread" in r.stderr, r.stderr  # the Python stacks, on the real stderr at once


def test_blocked_tasks_lists_only_tasks_in_d_state(tmp_path: Path) -> None:
    for pid, state, cmd in (("10", "S (sleeping)", b"sleep\x0060"), ("11", "D (disk sleep)", b"rmmod\x00x")):
        task = tmp_path / pid
        task.mkdir()
        (task / "status").write_text(f"Name:\tx\nState:\t{state}\n")
        (task / "cmdline").write_bytes(cmd)
        (task / "stack").write_text("[<0>] tbv_stuck+0x10/0x20\n")
    assert testlimit.blocked_tasks(tmp_path) == "-- 11 rmmod x\n[<0>] tbv_stuck+0x10/0x20\n"
    assert testlimit.blocked_tasks(tmp_path / "10") == "(no task in D state)"
