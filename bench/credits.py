#!/usr/bin/env python3
"""What software credits cost a bulk transfer, and what they save when the receiver is slow.

Runs inside the test VM (`make bench-vm`). ib_write_bw (64 KiB messages) on four virtual
cables, rounds alternating between them side by side:

  baseline            credits off, 256-descriptor rings, receiver at full speed
  credits             credits on, same cable (the cost of credit frames and the accounting)
  slow, no credits    credits off, 32-descriptor rings, the receiver's interrupts throttled
                      to one per TBV_BENCH_SLOW_US (2000 us): it overruns, RC resends
  slow, credits       credits on, same slow cable: the sender waits instead

The figures are ratios of median bandwidth against the baseline, with the frames lost for
want of an RX buffer and the RC retransmissions per setting (so it shows what happened, not
only how fast). Under TCG everything is far slower than on silicon. Written to
build/bench/credits.txt as well.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lib"))
sys.path.insert(0, str(REPO / "bench"))

from benchlib import alternate, fresh_module, report, with_deltas, write_bw_mbps  # noqa: E402
from pairlib import Pair, cable_stats, hw  # noqa: E402

CREDITS = Path("/sys/module/thunderbolt_ibverbs/parameters/credits")
SLOW_US = int(os.environ.get("TBV_BENCH_SLOW_US", "2000"))
ROUNDS = int(os.environ.get("TBV_BENCH_ROUNDS", "5"))
ITERS = int(os.environ.get("TBV_BENCH_ITERS", "300"))
OUT = REPO / "build" / "bench" / "credits.txt"


def losses(pair: Pair) -> tuple[int, int]:
    """(frames dropped for want of an RX buffer, RC retransmissions) so far, both ends."""
    dropped = sum(v for k, v in cable_stats(pair.cable.name).items() if k.endswith("_dropped_no_rx_buffer"))
    return dropped, sum(hw(end.ibdev, "retransmits") for end in pair.cable.ends)


def main() -> int:
    names = ["baseline", "credits", "slow, no credits", "slow, credits"]
    with fresh_module() as (env, cables, netns):
        try:
            pairs = {}
            for name in names:
                CREDITS.write_text("N\n" if "no credits" in name or name == "baseline" else "Y\n")
                slow = dict(ring_size=32, irq_throttle_us=SLOW_US) if name.startswith("slow") else {}
                pairs[name] = Pair(cables.add(rails=1, **slow), netns, env)

            def measure(name: str) -> tuple[float, list[int]]:
                return with_deltas(lambda: write_bw_mbps(pairs[name], ITERS),
                                   lambda: losses(pairs[name]))
            results, lost = alternate(names, ROUNDS, measure)
        finally:
            CREDITS.write_text("Y\n")
    report(f"ib_write_bw -s 65536 -n {ITERS}, {ROUNDS} alternating rounds, median MB/s "
           f"(slow: ring 32, irq_throttle_us={SLOW_US})",
           results, lost, ["no-buffer drops", "retransmits"], OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
