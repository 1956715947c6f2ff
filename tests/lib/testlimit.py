"""A pytest plugin: each test's time limit (TBV_TEST_TIMEOUT seconds, default 900; 0: none).

Registered by tests/device/conftest.py inside the test VM. A hung test then fails with the
kernel stacks of the tasks in uninterruptible sleep and every thread's Python stack, and the rest
of the run goes on, instead of the whole VM reaching its own limit with nothing said about which
test hung (CI keeps only the run's output).

The limit covers a test's setup, call and teardown together; the alarm (SIGALRM, main thread)
is armed only while one of them runs, so it never fires in pytest's own reporting between them.
When it fires, the hung tasks are written to the real stderr at once (a test stuck for good in
a child's wait would never get its report written), then the phase fails. What is left of that
test (its teardown: a cable to delete, a module to unload) and each later test get at most
AFTER_A_HANG_S: the kernel may be wedged for all of them. A task stuck in the kernel cannot be
interrupted; the VM's own limit is there for that.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# longer than a cable's deletion may take (vmlib.CABLE_DELETE_TIMEOUT_S), which a teardown or
# the next test's setup may have to do after a hang
AFTER_A_HANG_S = 600


def configured_limit() -> int:
    return int(os.environ.get("TBV_TEST_TIMEOUT", "900"))


_limit_s = configured_limit()
_deadline: float | None = None  # of the test running now (monotonic)
# the real stderr, before pytest's capture redirects fd 2
_stderr = os.fdopen(os.dup(2), "w", buffering=1)


def blocked_tasks(proc: Path = Path("/proc")) -> str:
    """Each task in uninterruptible sleep (D), with its command line and kernel stack."""
    out = []
    for status in sorted(proc.glob("[0-9]*/status")):
        with contextlib.suppress(OSError):
            if not re.search(r"^State:\s+D", status.read_text(), re.M):
                continue
            task = status.parent
            cmdline = (task / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"-- {task.name} {cmdline.strip()[:160]}\n{(task / 'stack').read_text()}")
    return "\n".join(out) or "(no task in D state)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _deadline
    _deadline = time.monotonic() + _limit_s if _limit_s else None
    try:
        yield
    finally:
        _deadline = None


def _phase(item: pytest.Item, phase: str) -> Iterator[None]:
    if _deadline is None:
        yield
        return
    limit = _limit_s

    def expired(signum: int, frame: object) -> None:
        global _limit_s, _deadline
        _limit_s = min(configured_limit(), AFTER_A_HANG_S)
        _deadline = time.monotonic() + _limit_s  # what is left of this test gets that much
        message = (f"TIMEOUT: {item.nodeid} still running ({phase}) after its {limit}s "
                   f"(TBV_TEST_TIMEOUT); tasks in D state:\n{blocked_tasks()}")
        print(f"\n{message}\nPython stacks:", file=_stderr)
        faulthandler.dump_traceback(file=_stderr, all_threads=True)
        # pytest.fail's exception is not an Exception: an `except Exception` cannot eat it
        pytest.fail(message, pytrace=True)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(_deadline - time.monotonic(), 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _phase(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _phase(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield from _phase(item, "teardown")
