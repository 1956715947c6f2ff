#!/usr/bin/env python3
"""What the NHI's interrupt throttle costs a ping-pong, and what busy_poll_us buys back.

Runs inside the test VM (`make bench-vm`). One virtual cable whose RX interrupts are spaced
as thunderbolt.ko spaces the real controller's (irq_throttle_us=128), ibv_rc_pingpong with
small messages, rounds alternating between three settings side by side:

  baseline     no throttle, interrupts only (what an unthrottled controller would give)
  throttled    128 us throttle, interrupts only (the stock kernel today)
  busy poll    128 us throttle, busy_poll_us=200

The figures are ratios of median usec/iter against the baseline, with how often the throttle
held an interrupt back and how many frames busy polling found (so it shows whether the mechanism
engaged at all). Under TCG a round trip takes far longer than on silicon, so the throttle's
share, and busy polling's gain, are smaller here than they would be on hardware; both settings
can be raised (TBV_BENCH_THROTTLE_US, TBV_BENCH_BUSY_POLL_US). Written to
build/bench/busy_poll.txt as well.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lib"))
sys.path.insert(0, str(REPO / "bench"))

from benchlib import alternate, fresh_module, report, with_deltas  # noqa: E402
from pairlib import Pair, cable_stats, hw  # noqa: E402

BUSY_POLL = Path("/sys/module/thunderbolt_ibverbs/parameters/busy_poll_us")
THROTTLE_US = int(os.environ.get("TBV_BENCH_THROTTLE_US", "128"))
BUSY_POLL_US = int(os.environ.get("TBV_BENCH_BUSY_POLL_US", "200"))
ROUNDS = int(os.environ.get("TBV_BENCH_ROUNDS", "7"))
ITERS = int(os.environ.get("TBV_BENCH_ITERS", "500"))
OUT = REPO / "build" / "bench" / "busy_poll.txt"


def usec_per_iter(pair: Pair) -> float:
    common = ["-s", "64", "-n", str(ITERS)]
    _, cli = pair.run(["ibv_rc_pingpong", "-d", pair.cable.end1.ibdev, "-g", str(pair.gids[1]), *common],
                      ["ibv_rc_pingpong", "-d", pair.cable.end0.ibdev, "-g", str(pair.gids[0]), *common,
                       pair.ips[1]], timeout=600)
    m = re.search(r"= ([\d.]+) usec/iter", cli)
    if not m:
        raise SystemExit(f"no usec/iter in ibv_rc_pingpong's output:\n{cli}")
    return float(m.group(1))


def counters(pair: Pair) -> tuple[int, int]:
    """(interrupts the cable held back, frames busy-polled) so far, both ends."""
    held = sum(v for k, v in cable_stats(pair.cable.name).items() if k.endswith("_irqs_throttled"))
    return held, sum(hw(end.ibdev, "rx_busy_polled") for end in pair.cable.ends)


def main() -> int:
    names = ["baseline", "throttled", "busy poll"]
    with fresh_module() as (env, cables, netns):
        try:
            plain = Pair(cables.add(rails=1), netns, env)
            throttled = Pair(cables.add(rails=1, irq_throttle_us=THROTTLE_US), netns, env)
            settings = {"baseline": (plain, 0), "throttled": (throttled, 0), "busy poll": (throttled, BUSY_POLL_US)}

            def measure(name: str) -> tuple[float, list[int]]:
                pair, busy = settings[name]
                BUSY_POLL.write_text(f"{busy}\n")
                return with_deltas(lambda: usec_per_iter(pair), lambda: counters(pair))
            results, engaged = alternate(names, ROUNDS, measure)
        finally:
            BUSY_POLL.write_text("0\n")
    report(f"ibv_rc_pingpong -s 64 -n {ITERS}, {ROUNDS} alternating rounds, median usec/iter "
           f"(irq_throttle_us={THROTTLE_US}, busy_poll_us={BUSY_POLL_US})",
           results, engaged, ["irqs held", "busy-polled"], OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
