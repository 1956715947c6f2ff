#!/usr/bin/env python3
"""What striping one QP over the rails gives a single bulk transfer, and what it costs.

Runs inside the test VM (`make bench-vm`). ib_write_bw with one QP (64 KiB messages) on two
virtual cables of TBV_BENCH_RAILS (2) rails each, rounds alternating between them:

  baseline   striping off: the QP's packets all use one rail
  striped    striping on: every 16 packets the QP moves to the rail with most room (equal
             rails take turns), the receiver puts its packets back in order

The figures are ratios of median bandwidth against the baseline, with the packets the
receiver held for an earlier one and the RC retransmissions per setting. Under TCG the CPU,
not a ring, is the bottleneck and the virtual cable moves every rail's frames in one worker,
so this shows the cost of resequencing more than the gain; on silicon each ring pair has
its own DMA engine and interrupt. Written to build/bench/stripe.txt as well.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lib"))
sys.path.insert(0, str(REPO / "bench"))

from benchlib import alternate, fresh_module, report, with_deltas, write_bw_mbps  # noqa: E402
from pairlib import Pair, hw  # noqa: E402

STRIPE = Path("/sys/module/thunderbolt_ibverbs/parameters/stripe")
RAILS = int(os.environ.get("TBV_BENCH_RAILS", "2"))
ROUNDS = int(os.environ.get("TBV_BENCH_ROUNDS", "5"))
ITERS = int(os.environ.get("TBV_BENCH_ITERS", "300"))
OUT = REPO / "build" / "bench" / "stripe.txt"
COUNTERS = ["stripe_held", "stripe_gaps", "retransmits"]


def counts(pair: Pair) -> list[int]:
    return [sum(hw(end.ibdev, name) for end in pair.cable.ends) for name in COUNTERS]


def main() -> int:
    names = ["baseline", "striped"]
    with fresh_module() as (env, cables, netns):
        try:
            pairs = {}
            for name in names:
                STRIPE.write_text("Y\n" if name == "striped" else "N\n")
                pairs[name] = Pair(cables.add(rails=RAILS), netns, env)

            def measure(name: str) -> tuple[float, list[int]]:
                return with_deltas(lambda: write_bw_mbps(pairs[name], ITERS, "-q", "1"),
                                   lambda: counts(pairs[name]))
            results, totals = alternate(names, ROUNDS, measure)
        finally:
            STRIPE.write_text("Y\n")
    report(f"ib_write_bw -q 1 -s 65536 -n {ITERS}, {RAILS} rails, {ROUNDS} alternating rounds, "
           "median MB/s", results, totals, COUNTERS, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
