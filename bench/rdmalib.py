"""Unmodified perftest between the two sides of one RDMA device, inside the benchmark VM.

A device is one of our virtual cables split into two network namespaces (the server on end 1,
the client on end 0, as tests/device/test_verbs.py's Pair), or rdma_rxe on a dummy netdev, where
server and client share the one device and rxe loops the packets back inside it. A run starts
the server, waits until it listens, runs the client, and returns perftest's own figure with the
guest's busy time meanwhile, our transport counters' growth and, on request, the system calls
both processes made (perf stat on the syscall tracepoints).

Time: the VM runs under QEMU's -icount (TBV_ICOUNT_SHIFT, set by tests/harness/vm.py --icount):
every guest instruction advances the guest's clock, TSC included, by 2^shift ns. Figures are
scaled back to shift 0, one instruction per ns, so that a microsecond means a thousand guest
instructions whatever shift the run used (docs/performance.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from roce import gid_index
from pairlib import Pair, hw
from vmlib import NetnsFactory, VcableFactory

PERFTEST_PORT = 18515
MiB = 1 << 20
# our counters whose growth each run records (a lossless cable: retransmits should stay 0)
COUNTERS = ("retransmits", "rdma_rx_duplicates", "seq_naks", "rnr_naks", "credit_waits")
# the syscall tracepoints perf stat counts: every call, and the three the verbs use (uverbs
# commands are write()s on the context's fd, completion events are read()s)
SYSCALL_EVENTS = ("raw_syscalls:sys_enter", "syscalls:sys_enter_write", "syscalls:sys_enter_read",
                  "syscalls:sys_enter_ioctl")
# perftest options that wait for completion events instead of polling (perftest has none for
# WRITE): without them two processes polling on the one vCPU would take turns at the tick
EVENT_TESTS = ("ib_send_bw", "ib_send_lat", "ib_read_lat")
RUN_TIMEOUT_S = 600  # guest seconds; a hung run is killed and recorded as failed


def icount_shift() -> int | None:
    value = os.environ.get("TBV_ICOUNT_SHIFT")
    return int(value) if value not in (None, "") else None


def time_scale() -> float:
    """Guest ns per instruction: perftest's times are divided by it, its rates multiplied."""
    shift = icount_shift()
    return float(2 ** shift) if shift is not None else 1.0


@dataclass(frozen=True)
class Side:
    netns: str | None
    ibdev: str
    gid: int

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns] if self.netns else []


@dataclass(frozen=True)
class Device:
    name: str  # the CSV's device column
    server: Side
    client: Side
    server_ip: str
    ours: tuple[str, ...] = ()  # our ibdevs whose counters are recorded (none for rxe)

    def counters(self) -> dict[str, int]:
        return {c: sum(hw(dev, c) for dev in self.ours) for c in COUNTERS}


def cable_device(name: str, cables: VcableFactory, netns: NetnsFactory, env: dict[str, str],
                 rails: int) -> Device:
    pair = Pair(cables.add(rails=rails), netns, env)
    return Device(name, Side(pair.hosts[1], pair.cable.end1.ibdev, pair.gids[1]),
                  Side(pair.hosts[0], pair.cable.end0.ibdev, pair.gids[0]), pair.ips[1],
                  (pair.cable.end0.ibdev, pair.cable.end1.ibdev))


@contextmanager
def rxe_device(name: str = "rdma_rxe", mtu: int = 9000) -> Iterator[Device]:
    """rdma_rxe on a dummy netdev. MTU 9000 gives it RoCE's largest MTU, 4096, as it would
    have over thunderbolt_net (MTU 65522); with the dummy's default 1500 it would cut every
    message into 1024-byte packets."""
    ibdev, netdev = "tbvbrxe0", "tbvbench0"
    subprocess.run(["modprobe", "rdma_rxe"], check=True)
    subprocess.run(["ip", "link", "add", netdev, "type", "dummy"], check=True)
    try:
        for cmd in (["ip", "link", "set", netdev, "mtu", str(mtu)],
                    ["ip", "addr", "add", "10.78.0.1/24", "dev", netdev],
                    ["ip", "link", "set", netdev, "up"],
                    ["rdma", "link", "add", ibdev, "type", "rxe", "netdev", netdev]):
            subprocess.run(cmd, check=True)
        side = Side(None, ibdev, gid_index(ibdev, "10.78.0.1"))
        yield Device(name, side, side, "127.0.0.1")
    finally:
        subprocess.run(["rdma", "link", "delete", ibdev], capture_output=True)
        subprocess.run(["ip", "link", "delete", netdev], capture_output=True)
        # rdma_rxe stays loaded: its exit would unregister ours too (the same driver id)


@dataclass(frozen=True)
class Point:
    """One perftest measurement: tool, message size, QPs, bidirectional, iterations."""

    test: str
    size: int
    qps: int = 1
    bidi: bool = False
    iters: int = 100
    events: bool = True  # -e where perftest has it (EVENT_TESTS); False: every test polls

    @property
    def name(self) -> str:
        """The CSV's test column: the tool, with -b for bidirectional bandwidth."""
        return f"{self.test} -b" if self.bidi else self.test

    @property
    def label(self) -> str:
        """The name, with " -e" when the tool waits for completion events rather than polls."""
        return self.name + (" -e" if self.events and self.test in EVENT_TESTS else "")

    @property
    def is_bw(self) -> bool:
        return self.test.endswith("_bw")

    def messages(self) -> int:
        """Messages the run moves: iterations per QP, both ways when bidirectional."""
        return self.iters * self.qps * (2 if self.bidi else 1) if self.is_bw else self.iters

    def args(self) -> list[str]:
        args = ["-F", "-s", str(self.size), "-n", str(self.iters)]
        if self.qps > 1:
            args += ["-q", str(self.qps)]
        if self.bidi:
            args.append("-b")
        if self.events and self.test in EVENT_TESTS:
            args.append("-e")
        return args


@dataclass
class Result:
    point: Point
    device: str
    ok: bool
    value: float = float("nan")  # MiB/s (bandwidth) or typical us (latency), at shift 0
    msg_rate: float = float("nan")  # messages per us (bandwidth tests), at shift 0
    busy_us: float = float("nan")  # guest CPU time not idle, client start to both ends, at shift 0
    elapsed_us: float = float("nan")
    counters: dict[str, int] = field(default_factory=dict)
    syscalls: dict[str, dict[str, int]] = field(default_factory=dict)  # side -> event -> count
    note: str = ""


def idle_ns() -> int:
    """Nanoseconds every CPU has spent idle since boot, waiting for I/O included (the nohz idle
    accounting, exact to the ns, where /proc/stat counts in ticks). Under -icount an idle guest's
    clock follows the host's, so only the time not idle counts instructions."""
    text = Path("/proc/timer_list").read_text()
    return sum(int(m) for m in re.findall(r"\.(?:idle|iowait)_sleeptime\s*:\s*(\d+) nsecs", text))


def descendants(pid: int) -> list[int]:
    """pid and the processes below it (perf stat runs the server as its child)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for children in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in children.read_text().split()]
            except OSError:
                continue
    return found


def listening(pid: int, port: int) -> bool:
    """Whether the network namespace of pid, or of a process below it, has a TCP socket
    listening on port."""
    for p in descendants(pid):
        for table in ("tcp", "tcp6"):
            try:
                lines = Path(f"/proc/{p}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def parse_row(output: str, point: Point) -> list[float] | None:
    """perftest's result row for the point's size: bandwidth rows are bytes, iterations, peak,
    average MiB/s, Mpps; latency rows bytes, iterations, min, max, typical, average ... us."""
    for line in output.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0] == str(point.size) and fields[1].isdigit():
            try:
                return [float(f) for f in fields]
            except ValueError:
                continue
    return None


def parse_perf_stat(text: str) -> dict[str, int]:
    """perf stat -x, output: count,unit,event,... per line; events perf could not count are left out."""
    counts = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[0].strip().isdigit() and fields[2] in SYSCALL_EVENTS:
            counts[fields[2]] = int(fields[0])
    return counts


class Runner:
    """Runs perftest points on devices; rdma-core's environment from the caller."""

    def __init__(self, env: dict[str, str], workdir: Path, pin: tuple[int, int] | None = None) -> None:
        self.env = env
        self.workdir = workdir  # perf stat's output files (a guest-private directory)
        self.scale = time_scale()
        # (server's vCPU, client's vCPU) for a VM with a host thread per vCPU; None: one vCPU,
        # both at SCHED_IDLE
        self.pin = pin

    def command(self, point: Point, side: Side, server_ip: str | None, stat_file: Path | None) -> list[str]:
        cmd = []
        if stat_file is not None:  # outside the namespace: `ip netns exec` hides the tracefs mount
            cmd += ["perf", "stat", "-x", ",", "-o", str(stat_file), "-e", ",".join(SYSCALL_EVENTS), "--"]
        cmd += side.prefix()
        if self.pin is None:
            # SCHED_IDLE: a polling perftest takes the one vCPU only when nothing else (the
            # kernel's work for the transfer) wants it: polling fills idle time, never delays work
            cmd += ["chrt", "--idle", "0"]
        else:
            cmd += ["taskset", "-c", str(self.pin[0] if server_ip is None else self.pin[1])]
        cmd += [point.test, "-d", side.ibdev, "-x", str(side.gid), *point.args()]
        return cmd + ([server_ip] if server_ip else [])

    def run(self, device: Device, point: Point, count_syscalls: bool = False) -> Result:
        stats = {side: self.workdir / f"perf-{side}.txt" for side in ("server", "client")} \
            if count_syscalls else {}
        for f in stats.values():
            f.unlink(missing_ok=True)
        before = device.counters()
        srv = subprocess.Popen(self.command(point, device.server, None, stats.get("server")), env=self.env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            while not listening(srv.pid, PERFTEST_PORT) and srv.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            idle0, t0 = idle_ns(), time.monotonic_ns()
            try:
                cli = subprocess.run(self.command(point, device.client, device.server_ip, stats.get("client")),
                                     env=self.env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
                cli_out, cli_rc = cli.stdout + cli.stderr, cli.returncode
            except subprocess.TimeoutExpired as e:
                cli_out, cli_rc = f"(timed out after {RUN_TIMEOUT_S} s) {e.stdout or ''}", -1
            try:
                srv_out = srv.communicate(timeout=30)[0]
            except subprocess.TimeoutExpired:
                srv.kill()
                srv_out = "(server still running after the client ended; killed) " + srv.communicate()[0]
            elapsed, idle = time.monotonic_ns() - t0, idle_ns() - idle0
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.communicate()
        result = Result(point, device.name, ok=False, counters={
            k: v - before[k] for k, v in device.counters().items()})
        result.elapsed_us = elapsed / 1e3 / self.scale
        result.busy_us = (elapsed - idle) / 1e3 / self.scale
        row = parse_row(cli_out, point)
        if cli_rc != 0 or srv.returncode != 0 or row is None:
            result.note = f"client exit {cli_rc}, server exit {srv.returncode}: " + \
                " | ".join((cli_out.strip().splitlines() or [""])[-3:] + (srv_out.strip().splitlines() or [""])[-2:])
            return result
        result.ok = True
        if point.is_bw:
            result.msg_rate = row[4] * self.scale
            # perftest prints MiB/s to two decimals: small messages' bandwidth from the message rate
            small = row[3] < 100 and not point.bidi
            result.value = (result.msg_rate * 1e6 * point.size / MiB) if small else row[3] * self.scale
        else:
            result.value = row[4] / self.scale
        for side, f in stats.items():
            result.syscalls[side] = parse_perf_stat(f.read_text()) if f.exists() else {}
        return result
