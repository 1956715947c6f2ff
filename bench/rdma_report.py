#!/usr/bin/env python3
"""Plots and ratios from build/bench/rdma.csv (make bench-rdma, on the host after the VM run).

Writes build/bench/rdma-bw.png (bandwidth against message size), build/bench/rdma-lat.png
(latency against message size), each with rdma_rxe beside our devices, and
build/bench/rdma-ratios.md: our figures as ratios of rdma_rxe's from the same run, and the
targets of issue 25 against them. Needs matplotlib (Debian: python3-matplotlib).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "build" / "bench"
BASELINE = "rdma_rxe"
KiB, MiB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Row:
    device: str
    test: str
    size: int
    qps: int
    metric: str
    value: float
    unit: str


def read_rows(path: Path) -> list[Row]:
    with path.open(newline="") as f:
        return [Row(r["device"], r["test"], int(r["size"]), int(r["qps"]), r["metric"], float(r["value"]), r["unit"])
                for r in csv.DictReader(f)]


def lookup(rows: Iterable[Row], device: str, test: str, size: int, qps: int, metric: str) -> float | None:
    for r in rows:
        if (r.device, r.test, r.size, r.qps, r.metric) == (device, test, size, qps, metric):
            return r.value
    return None


def size_label(size: int) -> str:
    if size >= MiB and size % MiB == 0:
        return f"{size // MiB} MiB"
    if size >= KiB and size % KiB == 0:
        return f"{size // KiB} KiB"
    return f"{size} B"


def ours(rows: Iterable[Row]) -> list[str]:
    return sorted({r.device for r in rows if r.device != BASELINE})


# (test, size, qps, metric, what "better" is, target ratio or None, label)
TARGETS = [
    ("ib_write_bw", 65536, 1, "bw_MBps", "higher", 10.0, "64 KiB ib_write_bw"),
    ("ib_write_bw", 1048576, 8, "bw_MBps", "higher", 10.0, "1 MiB ib_write_bw, 8 QPs"),
    ("ib_send_lat", 2, 1, "lat_typical_us", "lower", 0.5, "2 B ib_send_lat (typical)"),
    ("ib_write_lat", 2, 1, "lat_typical_us", "lower", 0.5, "2 B ib_write_lat (typical)"),
    ("ib_send_bw", 1048576, 1, "cpu_us_per_MiB", "lower", 0.25, "CPU per MiB, 1 MiB ib_send_bw -e"),
]


def ratio(rows: list[Row], device: str, test: str, size: int, qps: int, metric: str) -> float | None:
    mine, base = lookup(rows, device, test, size, qps, metric), lookup(rows, BASELINE, test, size, qps, metric)
    return mine / base if mine is not None and base else None


def fmt(x: float | None, suffix: str = "x") -> str:
    return "n/a" if x is None else f"{x:.2f}{suffix}"


def targets_table(rows: list[Row]) -> list[str]:
    devs = ours(rows)
    lines = ["| target (vs rdma_rxe) | wanted | " + " | ".join(devs) + " |",
             "|---|---|" + "---|" * len(devs)]
    for test, size, qps, metric, better, want, label in TARGETS:
        cells = []
        for dev in devs:
            r = ratio(rows, dev, test, size, qps, metric)
            met = r is not None and (r >= want if better == "higher" else r <= want)
            cells.append(fmt(r) + ("" if r is None else " (met)" if met else " (missed)"))
        sign = ">=" if better == "higher" else "<="
        lines.append(f"| {label} | {sign} {want:g}x | " + " | ".join(cells) + " |")
    return lines


def ratios_table(rows: list[Row]) -> list[str]:
    """Every test at 2 B, 64 KiB and 1 MiB: rxe's figure and ours as a ratio of it."""
    devs = ours(rows)
    lines = ["| test | size | QPs | metric | rdma_rxe | " + " | ".join(devs) + " |",
             "|---|---|---|---|---|" + "---|" * len(devs)]
    keys = sorted({(r.test, r.size, r.qps, r.metric, r.unit) for r in rows if r.device == BASELINE
                   and r.size in (2, 65536, 1048576)}, key=lambda k: (k[3], k[0], k[2], k[1]))
    for test, size, qps, metric, unit in keys:
        base = lookup(rows, BASELINE, test, size, qps, metric)
        cells = [fmt(ratio(rows, dev, test, size, qps, metric)) for dev in devs]
        lines.append(f"| {test} | {size_label(size)} | {qps} | {metric} | {base:g} {unit} | " + " | ".join(cells) + " |")
    return lines


def plot(rows: list[Row], metric: str, tests: list[str], ylabel: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tests), figsize=(5.5 * len(tests), 4.5), squeeze=False)
    devices = ours(rows) + [BASELINE]
    for ax, test in zip(axes[0], tests):
        for dev in devices:
            for qps in sorted({r.qps for r in rows if r.test == test and r.metric == metric}):
                pts = sorted((r.size, r.value) for r in rows
                             if (r.device, r.test, r.qps, r.metric) == (dev, test, qps, metric))
                if pts:
                    label = dev + (f", {qps} QPs" if qps > 1 else "")
                    ax.plot(*zip(*pts), marker="o", markersize=3, label=label,
                            linestyle="--" if qps > 1 else "-", color="black" if dev == BASELINE else None)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(test)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("one vCPU under QEMU -icount, 1 ns per guest instruction (docs/performance.md)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    csv_path = Path(argv[0]) if argv else OUT / "rdma.csv"
    rows = read_rows(csv_path)
    out = csv_path.parent
    text = "\n".join(["Targets of issue 25, as ratios of rdma_rxe in the same run:", "",
                      *targets_table(rows), "", "Every test at 2 B, 64 KiB and 1 MiB (ours / rdma_rxe):", "",
                      *ratios_table(rows)]) + "\n"
    (out / "rdma-ratios.md").write_text(text)
    print(text, end="")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("rdma_report: no matplotlib (apt-get install python3-matplotlib): no plots", file=sys.stderr)
        return 1
    plot(rows, "bw_MBps", [t for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw") if any(r.test == t for r in rows)],
         "MiB/s", out / "rdma-bw.png")
    plot(rows, "lat_typical_us", sorted({r.test for r in rows if r.metric == "lat_typical_us"}),
         "typical latency (us)", out / "rdma-lat.png")
    print(f"plots: {out / 'rdma-bw.png'}, {out / 'rdma-lat.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
