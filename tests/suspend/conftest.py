"""Path setup for the suspend test (tests/suspend): it runs on the host, like tests/usb4,
and boots its own pair of VMs (see test_suspend.py for why not tests/usb4's)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for sub in ("tests/harness", "tests/lib"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))


def pytest_configure(config) -> None:
    # stopped from outside (make test's deadline): the pairs' guests and QEMUs go too (each
    # Pair stops its VMs as the exception leaves it)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    config.addinivalue_line("markers", "beyond_ci: kept out of CI's time budget (make test); "
                            "make test-full runs it (README, Tests and CI)")
    config.option.strict_markers = True  # a misspelt marker is an error
