"""A pytest plugin: each test's time limit (TBV_TEST_TIMEOUT seconds, default 900; 0: none).

Registered by tests/device/conftest.py inside the test VM. A hung test then fails with the
kernel stacks of the tasks in uninterruptible sleep and every thread's Python stack, and the rest
of the run goes on, instead of the whole VM reaching its own limit with nothing said about which
test hung (CI keeps only the run's output). After one test has hung, the next ones get at most
AFTER_A_HANG_S each: the kernel may be wedged for all of them.

The limit covers a test's setup, call and teardown (SIGALRM: the main thread only; a task stuck
in the kernel cannot be interrupted, the VM's own limit is there for that).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

AFTER_A_HANG_S = 300


def configured_limit() -> int:
    return int(os.environ.get("TBV_TEST_TIMEOUT", "900"))


_limit_s = configured_limit()


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
    limit = _limit_s
    if not limit:
        yield
        return

    def expired(signum: int, frame: object) -> None:
        global _limit_s
        _limit_s = min(configured_limit(), AFTER_A_HANG_S)
        faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
        # pytest.fail's exception is not an Exception: an `except Exception` cannot eat it
        pytest.fail(f"TIMEOUT: {item.nodeid} still running after {limit}s (TBV_TEST_TIMEOUT); "
                    f"tasks in D state:\n{blocked_tasks()}")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
