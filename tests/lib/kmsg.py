"""Kernel log lines that mean a test broke the kernel.

The single list of patterns used by the per-test dmesg checker (tests/device/conftest.py), by the VM
harness' post-run summary (tests/harness/vm.py) and by any later lane (e.g. a debug kernel with
KASAN/kmemleak/lockdep). Stdlib only, importable on the host and in the guest.

CLI: `python3 tests/lib/kmsg.py DMESG_FILE...` prints the matching lines, exits 1 if there are any.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

# Case-sensitive on purpose: the kernel prints these exact spellings, and "warning"/"bug" in
# lowercase show up in harmless driver chatter. \b keeps "DEBUG:" from matching "BUG:".
BAD_PATTERNS: tuple[str, ...] = (
    r"\bWARNING:",  # WARN_ON() and friends: "WARNING: CPU: 0 PID: 1 at ..."
    r"\bBUG:",  # "BUG: kernel NULL pointer dereference", "BUG: KASAN: ...", "BUG: soft lockup"
    r"kernel BUG at",  # BUG_ON()
    r"\bOops\b",
    r"general protection",
    r"soft lockup",
    r"hard LOCKUP",
    r"blocked for more than",  # hung_task
    r"Call Trace",
    r"\bKASAN\b",
    r"\bUBSAN\b",
    r"sleeping function called from invalid context",
    r"list_add corruption",
    r"list_del corruption",
    r"new suspected memory leaks",  # kmemleak
    r"possible recursive locking",  # lockdep
    r"possible circular locking",
    r"inconsistent lock state",
    r"detected stalls? on CPU",  # RCU stall
    r"Kernel panic",
    r"DMAR: \[DMA (?:Read|Write)",  # an Intel IOMMU refused a device's DMA (a bad mapping)
    r"IO_PAGE_FAULT",  # the same on an AMD IOMMU
)

BAD_RE = re.compile("|".join(f"(?:{p})" for p in BAD_PATTERNS))


def is_bad(line: str) -> bool:
    """True if one kernel log line signals a kernel bug or warning."""
    return BAD_RE.search(line) is not None


# The header of the kernel's report of a failed allocation (warn_alloc()), which a stack dump
# follows: expected, and no kernel bug, while a test injects allocation failures.
ALLOC_FAILURE_RE = re.compile(r"vmalloc error:|page allocation failure:")
ALLOC_REPORT_LINES = 8  # the header, CPU/Tainted/Hardware lines, then "Call Trace:"


def find_bad(lines: Iterable[str], excuse_alloc_failures: bool = False) -> list[str]:
    """The lines (stripped of the trailing newline) that match a bad pattern, in order.

    With excuse_alloc_failures, the "Call Trace" of an allocation-failure report is not bad
    (any other bad line still is).
    """
    bad: list[str] = []
    since_alloc_failure = ALLOC_REPORT_LINES
    for line in lines:
        since_alloc_failure += 1
        if excuse_alloc_failures and ALLOC_FAILURE_RE.search(line):
            since_alloc_failure = 0
        if not is_bad(line):
            continue
        if "Call Trace" in line and since_alloc_failure < ALLOC_REPORT_LINES:
            continue
        bad.append(line.rstrip("\n"))
    return bad


def parse_kmsg_record(record: str) -> str | None:
    """The message text of one /dev/kmsg record ("prio,seq,usec,flags;text\\n KEY=val...").

    Returns None for records without a ';' header (should not happen). Continuation lines
    (device properties, starting with a space) are dropped.
    """
    head, sep, rest = record.partition(";")
    if not sep:
        return None
    usec = head.split(",")[2] if head.count(",") >= 2 else "0"
    text = rest.split("\n", 1)[0]
    try:
        stamp = f"[{int(usec) / 1e6:12.6f}] "
    except ValueError:
        stamp = ""
    return stamp + text


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: kmsg.py DMESG_FILE...", file=sys.stderr)
        return 2
    found = 0
    for path in argv:
        with open(path, errors="replace") as f:
            for line in find_bad(f):
                print(f"{path}: {line}")
                found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
