#!/usr/bin/env python3
"""RDMA performance: unmodified perftest on our virtual cable and on rdma_rxe, side by side.

Runs inside the benchmark VM (`make bench-rdma`: one vCPU under QEMU's -icount, so that the
guest's clock counts instructions and the host's load does not enter the figures;
docs/performance.md). Devices, measured in alternating order point by point, each round:

  usb4_rdma-2rails   a virtual cable with 2 rails, its ends in two network namespaces
  usb4_rdma-4rails   the same with 4 rails
  usb4_rdma-4rails-zcopy   (TBV_BENCH_ZCOPY=1) the same, made with zero_copy=Y: page-sized
                     packets whose payload leaves from the MR's pages; zero-copy TX's cost and gain
  rdma_rxe           rdma_rxe on a dummy netdev (MTU 9000: RoCE MTU 4096), looping back

The full matrix: ib_{write,read,send}_bw at 2 B, 4 B, 16 B ... 1 MiB (powers of 4) with 1 and
8 QPs, bidirectional at 64 KiB and 1 MiB; ib_send_lat and ib_read_lat at the same sizes
(event-driven, -e; ib_write_lat has no event mode and is not run: docs/performance.md says why);
CPU per message from the guest's idle accounting on event-driven ib_send_bw (two runs of n and
4n messages: the difference leaves out start-up); then, once, the system calls per message
(perf stat) on the same points. The quick subset
(TBV_BENCH_RDMA=quick) takes 2 B, 64 KiB and 1 MiB. TBV_BENCH_RDMA=syscalls counts only the
system calls per message, on the points the stock-userspace issue names (polling and
event-driven ib_send_lat, ib_write_bw) and those counted before it (event-driven ib_send_bw).
TBV_BENCH_RDMA=profile runs the TBV_BENCH_ONLY points once per device under `perf record -a`
(guest time counts instructions, so the samples are where the instructions go) and writes
build/bench/rdma-profile-<device>.txt: the symbols and the modules taking the most.

Settings: TBV_BENCH_RDMA (full, quick, syscalls, busylat, profile), TBV_BENCH_ROUNDS (3; quick 2), TBV_BENCH_TARGET_MS
(guest ms each measurement aims at, 100), TBV_BENCH_ONLY (test:size[:qps],...: only those points of
the matrix, written to rdma-only*.csv, to check one change quickly), TBV_BENCH_ZCOPY (1: add the
usb4_rdma-4rails-zcopy device).
Output: build/bench/rdma.csv (medians: device,test,size,qps,metric,value,unit),
build/bench/rdma-rounds.csv (every run), build/bench/rdma-run.txt (counters, failures).
"""

from __future__ import annotations

import csv
import errno
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lib"))
sys.path.insert(0, str(REPO / "bench"))

from benchlib import fresh_module  # noqa: E402
from rdmalib import (COUNTERS, SYSCALL_EVENTS, Device, Point, Result, Runner, cable_device,  # noqa: E402
                     icount_shift, rxe_device)

OUT = REPO / "build" / "bench"
SIZES = [2] + [4 ** k for k in range(1, 11)]  # 2 B, then 4 B ... 1 MiB
QUICK_SIZES = [2, 65536, 1048576]
BW_TESTS = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
LAT_TESTS = ("ib_send_lat", "ib_read_lat")
CPU_SIZES = (2, 65536, 1048576)
BIDI_SIZES = (65536, 1048576)
MiB = 1 << 20
ZERO_COPY = Path("/sys/module/thunderbolt_ibverbs/parameters/zero_copy")


def iterations(test: str, size: int, qps: int, target_ms: float) -> int:
    """Messages per QP for about target_ms of guest time, from a rough guess at the cost of a
    message on one vCPU (both ends): 40 us plus 5 ns a byte; a latency test's round trip twice."""
    per_msg_us = (40 + size * 0.005) * (1 if test.endswith("_bw") else 2)
    n = int(target_ms * 1000 / per_msg_us / qps)
    return max(20, min(n, 5000 if test.endswith("_bw") else 1000))


def matrix(quick: bool, target_ms: float) -> list[Point]:
    sizes = QUICK_SIZES if quick else SIZES
    points = []
    for test in BW_TESTS:
        for qps in (1, 8):
            for size in sizes:
                if quick and qps == 8 and (test, size) != ("ib_write_bw", 1048576):
                    continue
                points.append(Point(test, size, qps, iters=iterations(test, size, qps, target_ms)))
        if not quick:
            points += [Point(test, size, 1, bidi=True, iters=iterations(test, size, 2, target_ms))
                       for size in BIDI_SIZES]
    for test in LAT_TESTS:
        points += [Point(test, size, iters=iterations(test, size, 1, target_ms))
                   for size in (sizes if not quick else [2])]
    return points


# CPU cost is measured on ib_send_bw -e only: both ends wait for completion events, so the
# guest's busy time is the work itself. ib_write_bw and ib_read_bw poll (perftest has no event
# mode for them): on the one vCPU the pollers fill every idle moment, and their "CPU per MiB"
# would be the inverse of their bandwidth, whatever the transport costs.
CPU_TEST = "ib_send_bw"


def cpu_points(quick: bool, target_ms: float) -> list[Point]:
    """The points whose CPU cost is measured: event-driven ib_send_bw, 1 QP, 2 B, 64 KiB, 1 MiB."""
    return [Point(CPU_TEST, s, iters=iterations(CPU_TEST, s, 1, target_ms)) for s in CPU_SIZES]


def syscall_points() -> list[Point]:
    """What TBV_BENCH_RDMA=syscalls counts: ib_send_lat 2 B polling (the loop posts a receive,
    a send and polls: with rdma_rxe's ABI only the send's doorbell enters the kernel) and
    event-driven, ib_write_bw 64 KiB (it polls), and event-driven ib_send_bw 2 B and 1 MiB,
    the points counted with our own provider before (docs/performance.md)."""
    return [Point("ib_send_lat", 2, iters=100, events=False), Point("ib_send_lat", 2, iters=200),
            Point("ib_write_bw", 65536, iters=200),
            Point("ib_send_bw", 2, iters=500), Point("ib_send_bw", 1048576, iters=50)]


def per_message(short: Result, long: Result, what: float, other: float) -> float:
    """(what(long) - what(short)) per message more that the long run moved."""
    return (what - other) / (long.point.messages() - short.point.messages())


ROUND_FIELDS = ["round", "device", "test", "size", "qps", "iters", "ok", "value", "msg_rate_per_us",
                "busy_us", "elapsed_us", *COUNTERS, "note"]


class Bench:
    def __init__(self, runner: Runner, devices: list[Device], rounds_csv: Path) -> None:
        self.runner = runner
        self.devices = devices
        self.results: dict[tuple[str, str, int, int], list[float]] = defaultdict(list)
        self.cpu: dict[tuple[str, str, int], list[float]] = defaultdict(list)
        self.syscalls: dict[tuple[str, str, int], dict[str, float]] = {}
        self.counters: dict[str, dict[str, int]] = {d.name: dict.fromkeys(COUNTERS, 0) for d in devices}
        self.failures: list[str] = []
        self.rounds_csv = rounds_csv
        with rounds_csv.open("w", newline="") as f:
            csv.writer(f).writerow(ROUND_FIELDS)

    def measure(self, rnd: int | str, device: Device, point: Point, count_syscalls: bool = False) -> Result:
        result = self.runner.run(device, point, count_syscalls)
        if not result.ok:  # once more: a start-up hiccup is not a measurement
            result = self.runner.run(device, point, count_syscalls)
        for k, v in result.counters.items():
            self.counters[device.name][k] += v
        with self.rounds_csv.open("a", newline="") as f:
            csv.writer(f).writerow([rnd, device.name, point.name, point.size, point.qps, point.iters,
                                    int(result.ok), f"{result.value:.4f}", f"{result.msg_rate:.6f}",
                                    f"{result.busy_us:.1f}", f"{result.elapsed_us:.1f}",
                                    *(result.counters.get(c, "") for c in COUNTERS), result.note])
        figure = f"{result.value:10.3f} {'MiB/s' if point.is_bw else 'us'}" if result.ok else "FAILED " + result.note
        print(f"[{rnd}] {device.name:17} {point.name:15} {point.size:8d} B {point.qps} QP "
              f"n={point.iters:<5d} {figure}  busy {result.busy_us / 1e3:8.1f} ms"
              + "".join(f" {k}+{v}" for k, v in result.counters.items() if v), flush=True)
        if not result.ok:
            self.failures.append(f"round {rnd}: {device.name} {point.name} {point.size} B "
                                 f"{point.qps} QP: {result.note}")
        return result

    def rotated(self, i: int) -> list[Device]:
        """The devices, each one first in turn, so that drift spreads over all of them."""
        k = i % len(self.devices)
        return self.devices[k:] + self.devices[:k]

    def round(self, rnd: int, points: list[Point], cpu: list[Point]) -> None:
        for i, point in enumerate(points):
            for device in self.rotated(rnd + i):
                result = self.measure(rnd, device, point)
                if result.ok:
                    self.results[(device.name, point.name, point.size, point.qps)].append(result.value)
                if point in cpu and result.ok:
                    long = self.measure(rnd, device, replace(point, iters=point.iters * 4))
                    if long.ok:
                        self.cpu[(device.name, point.name, point.size)].append(
                            per_message(result, long, long.busy_us, result.busy_us))

    def count_syscalls(self, points: list[Point]) -> None:
        for i, point in enumerate(points):
            for device in self.rotated(i):
                short = self.measure("syscalls", device, point, count_syscalls=True)
                long = self.measure("syscalls", device, replace(point, iters=point.iters * 4), count_syscalls=True)
                if not (short.ok and long.ok):
                    continue
                per_msg = {}
                for side in ("server", "client"):
                    for ev in SYSCALL_EVENTS:
                        if ev in long.syscalls.get(side, {}) and ev in short.syscalls.get(side, {}):
                            per_msg[f"{side} {ev}"] = per_message(short, long, long.syscalls[side][ev],
                                                                  short.syscalls[side][ev])
                self.syscalls[(device.name, point.label, point.size)] = per_msg

    def rows(self) -> list[list[object]]:
        rows: list[list[object]] = []
        for (dev, test, size, qps), values in self.results.items():
            metric, unit = ("bw_MBps", "MiB/s") if "_bw" in test else ("lat_typical_us", "us")
            rows.append([dev, test, size, qps, metric, round(statistics.median(values), 4), unit])
        for (dev, test, size), values in self.cpu.items():
            us = statistics.median(values)
            rows.append([dev, test, size, 1, "cpu_us_per_msg", round(us, 3), "us"])
            if size >= 65536:
                rows.append([dev, test, size, 1, "cpu_us_per_MiB", round(us * MiB / size, 1), "us"])
        for (dev, test, size), per_msg in self.syscalls.items():
            total = sum(v for k, v in per_msg.items() if k.endswith("raw_syscalls:sys_enter"))
            rows.append([dev, test, size, 1, "syscalls_per_msg", round(total, 2), "calls"])
        return rows

    def summary(self) -> str:
        lines = ["transport counters over the whole run (our devices; growth, both ends):"]
        for dev, counts in self.counters.items():
            lines.append(f"  {dev}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        lines.append("system calls per message (both ends; perf stat, runs of n and 4n messages):")
        for (dev, test, size), per_msg in sorted(self.syscalls.items()):
            lines.append(f"  {dev} {test} {size} B: " + ", ".join(
                f"{k.replace('syscalls:sys_enter_', '').replace('raw_syscalls:sys_enter', 'all')} {v:.2f}"
                for k, v in per_msg.items()))
        lines.append(f"failed runs: {len(self.failures)}")
        lines += [f"  {f}" for f in self.failures]
        return "\n".join(lines) + "\n"


def only(points: list[Point], spec: str) -> list[Point]:
    """The points TBV_BENCH_ONLY names ("ib_read_bw:1048576,ib_send_bw:2:1"; no qps: any)."""
    wanted = [tuple(item.split(":")) for item in spec.split(",") if item]
    return [p for p in points if any(w[0] == p.name and int(w[1]) == p.size and
                                     (len(w) < 3 or int(w[2]) == p.qps) for w in wanted)]


def busy_latency_points() -> list[Point]:
    """Busy-polling latency, ib_write_lat's only way: 2 B, 4 KiB, 64 KiB."""
    return [Point(t, s, iters=1000 if s < 65536 else 200, events=False)
            for t in ("ib_write_lat", "ib_send_lat", "ib_read_lat") for s in (2, 4096, 65536)]


def start_recording(data: Path) -> tuple[subprocess.Popen | None, str]:
    """perf record of every CPU, started with its events off and turned on through its control
    FIFO once it is ready: a perf started plainly spends seconds of guest time reading every
    process before it samples, longer than a short point runs (the first profiles had no
    samples). Returns the recorder, or None and why not."""
    ctl, ack = Path("/tmp/perf-ctl.fifo"), Path("/tmp/perf-ack.fifo")
    for fifo in (ctl, ack):
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
    rec = subprocess.Popen(["perf", "record", "-a", "-q", "-F", "4000", "-e", "cpu-clock", "-D", "-1",
                            "--control", f"fifo:{ctl},{ack}", "-o", str(data)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    try:
        ctl_fd = open_fifo(ctl, os.O_WRONLY, rec, deadline)
        ack_fd = open_fifo(ack, os.O_RDONLY, rec, deadline)
        os.write(ctl_fd, b"enable\n")
        reply = b""
        while b"\n" not in reply:  # perf writes "ack\n" and its terminating NUL
            if rec.poll() is not None or time.monotonic() > deadline:
                raise OSError("no acknowledgement of 'enable'")
            try:
                chunk = os.read(ack_fd, 16)
            except BlockingIOError:
                chunk = b""
            reply += chunk
            if not chunk:
                time.sleep(0.05)
        os.close(ctl_fd)
        os.close(ack_fd)
        if reply.split(b"\n")[0] != b"ack":
            raise OSError(f"perf answered {reply!r} to 'enable'")
        return rec, ""
    except OSError as exc:
        rec.kill()
        err = rec.communicate(timeout=60)[1].decode(errors="replace").strip()
        return None, f"{exc}; {err[-400:]}"


def open_fifo(path: Path, mode: int, rec: subprocess.Popen, deadline: float) -> int:
    """Opens our end of perf's FIFO without blocking forever on a perf that died."""
    while True:
        try:
            return os.open(path, mode | os.O_NONBLOCK)
        except OSError as exc:  # ENXIO: a write end with no reader yet
            if exc.errno != errno.ENXIO or rec.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


PROFILE_SCALE = 10


def profile(runner: Runner, devices: list[Device], points: list[Point]) -> list[str]:
    """Each point once per device under perf record (every CPU, kernel and user), its report
    written beside the CSVs; returns the failures."""
    failures = []
    for device in devices:
        text = []
        for point in points:
            # ten times the measurement's messages: perftest's own start (it fills its buffers
            # with rand(), about a fifth of a 20-message run's samples) weighs a tenth as much
            point = replace(point, iters=point.iters * PROFILE_SCALE)
            data = Path("/tmp") / f"perf-{device.name}.data"
            rec, err = start_recording(data)
            try:
                result = runner.run(device, point) if rec else None
            finally:
                if rec:
                    rec.send_signal(signal.SIGINT)
                    err = rec.communicate(timeout=120)[1].decode(errors="replace")
            if rec is None:
                failures.append(f"{device.name} {point.label} {point.size}: perf record: {err}")
                continue
            if not result.ok or rec.returncode not in (0, -signal.SIGINT):
                failures.append(f"{device.name} {point.label} {point.size}: {result.note or err.strip()}")
                continue
            text.append(f"== {device.name} {point.label} {point.size} B x {point.iters}, "
                        f"{result.value:.1f} {'MiB/s' if point.is_bw else 'us'}, "
                        f"busy {result.busy_us / max(1, point.messages()):.2f} us per message")
            for sort, limit in (("dso", "1"), ("dso,sym", "0.4")):
                rep = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                                      "--sort", sort, "--percent-limit", limit],
                                     capture_output=True, text=True)
                lines = [ln for ln in rep.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
                # nothing reported: say why (perf's own words), not an empty profile
                text += lines or [f"(perf report --sort {sort}: no lines; exit {rep.returncode}: "
                                  f"{rep.stderr.strip()[-400:]})"]
        (OUT / f"rdma-profile-{device.name}.txt").write_text("\n".join(text) + "\n")
        print("\n".join(text[:60]), flush=True)
    return failures


def main() -> int:
    mode = os.environ.get("TBV_BENCH_RDMA", "full")
    shift = icount_shift()
    busy = mode == "busylat"
    if busy != (shift is None) or (busy and (os.cpu_count() or 1) < 2):
        print(f"bench/rdma.py: mode {mode} needs " + ("two vCPUs, a host thread each, no -icount"
              if busy else "QEMU -icount (tests/harness/vm.py --icount)") + " (make bench-rdma; docs/performance.md)",
              file=sys.stderr)
        return 2
    quick = mode == "quick"
    rounds = int(os.environ.get("TBV_BENCH_ROUNDS", "5" if busy else "2" if quick else "3"))
    target_ms = float(os.environ.get("TBV_BENCH_TARGET_MS", "100"))
    OUT.mkdir(parents=True, exist_ok=True)
    if busy:
        points, cpu = busy_latency_points(), []
    elif mode == "syscalls":
        points, cpu = [], []
    elif mode == "profile":
        points, cpu = matrix(False, target_ms), []
        if not os.environ.get("TBV_BENCH_ONLY"):
            print("bench/rdma.py: profile needs TBV_BENCH_ONLY (the points to profile)", file=sys.stderr)
            return 2
    else:
        points, cpu = matrix(quick, target_ms), cpu_points(quick, target_ms)
    spec = os.environ.get("TBV_BENCH_ONLY", "")
    if spec:
        points, cpu = only(points, spec), only(cpu, spec)
        if not points + cpu:
            print(f"bench/rdma.py: TBV_BENCH_ONLY={spec} names no point of the {mode} matrix",
                  file=sys.stderr)
            return 2
    name = {"busylat": "rdma-busy-lat", "syscalls": "rdma-syscalls"}.get(mode, "rdma")
    if spec:
        name += "-only"
    print(f"bench-rdma: {mode}, {len(points)} points, {rounds} rounds, "
          f"icount shift {shift}, {os.cpu_count()} vCPU(s)", flush=True)
    with fresh_module() as (env, cables, netns):
        devices = [cable_device("usb4_rdma-2rails", cables, netns, env, rails=2),
                   cable_device("usb4_rdma-4rails", cables, netns, env, rails=4)]
        if os.environ.get("TBV_BENCH_ZCOPY") == "1":
            ZERO_COPY.write_text("Y\n")  # offered at login: this cable's links split packets
            try:
                devices.append(cable_device("usb4_rdma-4rails-zcopy", cables, netns, env, rails=4))
            finally:
                ZERO_COPY.write_text("N\n")
        with rxe_device() as rxe:
            runner = Runner(env, Path("/tmp"), pin=(1, 0) if busy else None)
            bench = Bench(runner, devices + [rxe], OUT / f"{name}-rounds.csv")
            # one unmeasured run per device: the binaries and libraries into the page cache
            for device in bench.devices:
                runner.run(device, Point("ib_write_bw", 2, iters=20))
            if mode == "profile":
                failures = profile(runner, bench.devices, points)
                print("\n".join(failures), file=sys.stderr)
                return 1 if failures else 0
            for rnd in range(rounds):
                bench.round(rnd, points, [p for p in cpu if p in points])
            if mode == "syscalls":
                bench.count_syscalls(syscall_points())
            elif not busy:
                bench.count_syscalls([p for p in cpu if p in points] + ([] if quick else [
                    Point("ib_send_lat", 2, iters=iterations("ib_send_lat", 2, 1, target_ms))]))
    with (OUT / f"{name}.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["device", "test", "size", "qps", "metric", "value", "unit"])
        w.writerows(r for r in bench.rows() if not (isinstance(r[5], float) and math.isnan(r[5])))
    method = ("two vCPUs, a host thread each, perftest polling, pinned to vCPU 1 (server) and 0 (client), "
              "host wall-clock time" if busy else
              f"icount shift {shift} (figures scaled to 1 ns per instruction), {os.cpu_count()} vCPU(s)")
    text = f"{mode}, {rounds} rounds, {method}\n" + bench.summary()
    (OUT / f"{name}-run.txt").write_text(text)
    print(text, end="")
    return 0 if not bench.failures else 1


if __name__ == "__main__":
    sys.exit(main())
