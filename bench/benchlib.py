"""Shared by the in-VM benchmarks: a freshly loaded module, settings measured in alternating
rounds, a ratio report. Import it after putting tests/lib on sys.path (it uses vmlib)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from vmlib import (NetnsFactory, VcableFactory, load_module, module_loaded, rdma_environment,
                   require_vm, rmmod, tbv_setting)


@contextmanager
def fresh_module() -> Iterator[tuple[dict[str, str], VcableFactory, NetnsFactory]]:
    """Inside the test VM: our module loaded anew; (rdma-core environment, cables, namespaces),
    all removed again afterwards, the module too."""
    require_vm()
    env = rdma_environment(Path(tbv_setting("TBV_RDMA_PREFIX")), dict(os.environ))
    if module_loaded():
        rmmod()
    load_module()
    cables, netns = VcableFactory(), NetnsFactory()
    try:
        yield env, cables, netns
    finally:
        cables.cleanup()
        netns.cleanup()
        rmmod()


def write_bw_mbps(pair, iters: int, *extra: str) -> float:
    """ib_write_bw with 64 KiB messages between the pair's ends: the client's average MB/s."""
    args = [*extra, "-n", str(iters), "-s", "65536", "-F"]
    _, cli = pair.run(["ib_write_bw", "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args],
                      ["ib_write_bw", "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args,
                       pair.ips[1]], timeout=900)
    row = next((line.split() for line in cli.splitlines() if line.split()[:1] == ["65536"]), None)
    if not row:
        raise SystemExit(f"no result row in ib_write_bw's output:\n{cli}")
    return float(row[3])  # #bytes #iterations BW-peak BW-average MsgRate


def with_deltas(run: Callable[[], float],
                counters: Callable[[], Sequence[int]]) -> tuple[float, list[int]]:
    """run()'s figure and how much each of counters() grew while it ran."""
    before = counters()
    value = run()
    return value, [a - b for a, b in zip(counters(), before)]


def alternate(names: Sequence[str], rounds: int,
              measure: Callable[[str], tuple[float, Sequence[int]]]) -> tuple[dict[str, list[float]],
                                                                              dict[str, list[int]]]:
    """Measure each setting once per round, each one first in turn (so drift spreads over all);
    `measure(name)` returns its figure and counter deltas, which are summed per setting."""
    results: dict[str, list[float]] = {name: [] for name in names}
    counts: dict[str, list[int]] = {}
    for r in range(rounds):
        for name in list(names[r % len(names):]) + list(names[:r % len(names)]):
            value, deltas = measure(name)
            results[name].append(value)
            counts[name] = [a + b for a, b in zip(counts.get(name, [0] * len(deltas)), deltas)]
    return results, counts


def report(title: str, results: dict[str, list[float]], counts: dict[str, list[int]],
           count_labels: Sequence[str], out: Path) -> str:
    """Median per setting and its ratio to the one named "baseline"; printed and written to out."""
    base = statistics.median(results["baseline"])
    width = max(len(name) for name in results) + 1
    lines = [title, f"{'setting':<{width}} {'median':>9} {'vs baseline':>12} "
             + " ".join(f"{label:>16}" for label in count_labels) + "   rounds"]
    for name, values in results.items():
        med = statistics.median(values)
        lines.append(f"{name:<{width}} {med:9.1f} {med / base:11.2f}x "
                     + " ".join(f"{c:16d}" for c in counts.get(name, []))
                     + "   " + " ".join(f"{v:.0f}" for v in values))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text
