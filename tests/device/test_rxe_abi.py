"""rxe_abi_check (tests/tools/rxe_abi_check.c) with Debian's own rdma-core userspace.

The design of speaking rdma_rxe's user ABI (docs/rxe-abi.md) relies on what the program checks:
libibverbs binds the rxe provider by driver id, the queues are rings laid out as rxe_queue_buf,
post_recv and poll_cq make no system call, post_send and req_notify_cq make one each on the
uverbs device (the doorbell is a write(), the arming an ioctl() in rdma-core 44), UD WQEs carry
an ah_num, SRQ and CQ resizing keep what is posted, a full CQ raises IBV_EVENT_CQ_ERR. It runs with the system's libibverbs (LD_LIBRARY_PATH and the like removed, so
not the rdma-core 59 build of the cache) under `strace -f -y`; the program brackets each section
with marker system calls and announces what may happen between them.

- On rdma_rxe itself (tbvrxe0 on a dummy netdev) it must pass: that proves the checks.
- On usb4_rdma0 it must pass the same way: Debian 12's own rdma-core drives our device.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from vmlib import Cable, missing, run, system_env

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "build" / "tools" / "rxe_abi_check"
# A syscall line of `strace -f -y -o FILE`: "PID name(args) = ..." or "PID name(args <unfinished ...>".
SYSCALL = re.compile(r"^(\d+)\s+(\w+)\((.*)$")
SECTION = re.compile(r"^section (\d+) (\w+) (\S+)$")
def sections_of(trace: str) -> dict[int, list[tuple[str, str]]]:
    """Per section id: the (name, args) of the main process' syscalls between its two markers."""
    lines = [m.groups() for m in map(SYSCALL.match, trace.splitlines()) if m]
    assert lines, "strace recorded no system calls"
    main = lines[0][0]
    out: dict[int, list[tuple[str, str]]] = {}
    current = None
    for pid, name, args in lines:
        if pid != main:
            continue
        marker = re.match(r"-(\d+)\)", args) if name == "close" else None
        if marker and int(marker.group(1)) >= 1000:
            n = int(marker.group(1)) - 1000
            current = n // 2 if n % 2 == 0 else None
            if current is not None:
                out[current] = []
            continue
        if current is not None:
            out[current].append((name, args))
    return out


def run_check(dev: str, tmp: Path) -> tuple[str, dict[int, list[tuple[str, str]]]]:
    if not TOOL.exists():
        missing(f"{TOOL} is not built (make tools)")
    trace = tmp / "strace.txt"
    r = subprocess.run(["strace", "-f", "-y", "-o", str(trace), str(TOOL), dev],
                       env=system_env(), capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    print(out)  # shown with -rA: what each check saw
    assert r.returncode == 0 and "FAIL" not in r.stdout, \
        f"rxe_abi_check {dev} exited {r.returncode}:\n{out}"
    return r.stdout, sections_of(trace.read_text())


def assert_sections(stdout: str, traced: dict[int, list[tuple[str, str]]]) -> None:
    """Each announced section made exactly the system calls it announced, writes to uverbs only."""
    announced = [m.groups() for m in map(SECTION.match, stdout.splitlines()) if m]
    assert len(announced) >= 7, f"sections missing from the output:\n{stdout}"
    errors = []
    for sid, name, expect in announced:
        want = [] if expect == "-" else expect.split(",")
        got = traced.get(int(sid))
        if got is None:
            errors.append(f"{name}: markers not found in the trace")
            continue
        if [n for n, _ in got] != want:
            errors.append(f"{name}: expected {want or 'no system call'}, got {got}")
        errors += [f"{name}: {n} not to the uverbs device: {a}" for n, a in got
                   if n == "write" and "/infiniband/uverbs" not in a]
    assert not errors, "\n".join(errors)


def test_rxe_abi_on_rdma_rxe(rxe_device: str, tmp_path: Path) -> None:
    """The checks hold on rdma_rxe with Debian's rdma-core: they are sound."""
    stdout, traced = run_check(rxe_device, tmp_path)
    assert_sections(stdout, traced)


def test_rxe_abi_on_usb4_rdma(vcable: Cable, tmp_path: Path) -> None:
    """The same checks on usb4_rdma0 through loopback on one end of a virtual cable."""
    end = vcable.end0
    run(["ip", "addr", "add", "10.66.0.1/24", "dev", end.netdev])
    run(["ip", "link", "set", end.netdev, "up"])
    stdout, traced = run_check(end.ibdev, tmp_path)
    assert_sections(stdout, traced)
