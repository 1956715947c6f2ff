"""rdma-core's test suite (run_tests.py -v) read: each test's result, and the skips docs/rdma-core-suite.md explains.

Shared by the suite's run on the virtual cable (tests/device/test_rdma_core_suite.py) and on a USB4
device across two VMs (tests/usb4/test_usb4_backend.py).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP_DOC = REPO / "docs" / "rdma-core-suite.md"
# A documented skip: a table row "| `message start` | reason |" in SKIP_DOC.
SKIP_ROW = re.compile(r"^\| `([^`]+)` \|")
HEADER = re.compile(r"^(test_\w+) \(([\w.]+)\)")
RESULT = re.compile(r" \.\.\. (ok|ERROR|FAIL|skipped.*|expected failure|unexpected success)$")


def parse_results(log: str) -> dict[str, str]:
    """run_tests.py -v's stderr: each test (module.Class.test) and its result text."""
    results: dict[str, str] = {}
    current = None
    for line in log.splitlines():
        head = HEADER.match(line)
        if head:
            current = head.group(2)  # module.Class.test (a docstring line may follow)
        res = RESULT.search(line)
        if res and current:
            results[current] = res.group(1)
            current = None
    return results


def skip_message(text: str) -> str:
    """The message of a "skipped 'message'" result."""
    return text.removeprefix("skipped").strip().strip("'\"")


def documented_skips() -> list[str]:
    return [m.group(1) for line in SKIP_DOC.read_text().splitlines() if (m := SKIP_ROW.match(line))]


def status(text: str) -> str:
    if text == "ok":
        return "ok"
    if text.startswith("skipped"):
        return "skipped"
    return "ERROR" if "ERROR" in text else "FAIL"
