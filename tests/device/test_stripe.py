"""Striping: one QP's packets spread over every rail of its link, put back in order on arrival.

With the module parameter `stripe` (default on) at both ends and more than one rail, a QP moves
to the rail with most room every 16 packets (equal rails take turns) and numbers each packet (TSN); the receiver holds a packet
that overtook an earlier one on another rail until the gap fills, so the QP sees its packets in
order. Gaps that never fill (a lost frame) are given up and RC resends, as on one rail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from faultlib import CFS, integrity, set_faults
from pairlib import Pair, hw
from vmlib import NetnsFactory, VcableFactory

STRIPE = Path("/sys/module/thunderbolt_ibverbs/parameters/stripe")
COUNTERS = ("stripe_held", "stripe_gaps", "stripe_dropped", "stripe_late", "seq_naks", "retransmits", "rdma_rx_stray")


@pytest.fixture
def stripe_param() -> Iterator[Path]:
    yield STRIPE
    STRIPE.write_text("Y\n")


def counter(pair: Pair, name: str) -> int:
    return sum(hw(end.ibdev, name) for end in pair.cable.ends)


def rail_tx_frames(pair: Pair, end: int) -> list[int]:
    """TX frames per rail of one end, from the cable's own counters."""
    stats = dict(line.split() for line in (CFS / pair.cable.name / "stats").read_text().splitlines())
    rails = int((CFS / pair.cable.name / "rails").read_text())
    return [int(stats[f"end{end}_rail{r}_tx_frames"]) for r in range(rails)]


def one_qp_bw(pair: Pair, tool: str, iters: int = 300) -> None:
    """One QP (-q 1), 64 KiB messages: client on end 0, server on end 1."""
    args = ["-q", "1", "-n", str(iters), "-s", "65536", "-F"]
    _, cli = pair.run([tool, "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args],
                      [tool, "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args,
                       pair.ips[1]], timeout=300)
    assert any(line.split()[:1] == ["65536"] for line in cli.splitlines()), cli


@pytest.mark.parametrize("tool,data_end", [("ib_write_bw", 0), ("ib_read_bw", 1)])
def test_one_qp_uses_every_rail_and_stays_in_order(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        stripe_param: Path, tool: str, data_end: int) -> None:
    """WRITE data leaves end 0, READ responses leave end 1: either way one QP's data crosses
    all three rails, and the receiver puts it back in order (no sequence NAK, no resend)."""
    assert stripe_param.read_text().strip() == "Y"
    pair = Pair(vcable_factory.add(rails=3), netns, rdma_env)
    before = rail_tx_frames(pair, data_end)
    one_qp_bw(pair, tool)
    sent = [after - b for after, b in zip(rail_tx_frames(pair, data_end), before)]
    total = sum(sent)
    assert total > 300 * 16, sent
    assert all(n > total // 6 for n in sent), f"one QP's frames per rail: {sent}"
    counts = {name: counter(pair, name) for name in COUNTERS}
    assert counts["stripe_held"] > 0, f"no packet ever overtook another: nothing tested {counts}"
    assert counts["seq_naks"] == counts["retransmits"] == counts["stripe_gaps"] == 0, counts
    assert counts["stripe_dropped"] == counts["stripe_late"] == 0, counts


def test_without_striping_one_qp_stays_on_one_rail(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        stripe_param: Path) -> None:
    """(That both ends must offer it is the login's capability intersection: unit-tested.)"""
    stripe_param.write_text("N\n")
    pair = Pair(vcable_factory.add(rails=3), netns, rdma_env)
    before = rail_tx_frames(pair, 0)
    one_qp_bw(pair, "ib_write_bw", iters=100)
    sent = [after - b for after, b in zip(rail_tx_frames(pair, 0), before)]
    assert sorted(sent)[-1] > 100 * 16, sent
    assert sorted(sent)[-2] < sum(sent) // 10, f"one QP's frames per rail: {sent}"
    assert counter(pair, "stripe_held") == 0


def test_striped_data_survives_loss_duplication_and_reordering(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """Every opcode, random sizes and SGE layouts, every byte verified, on a cable that loses,
    duplicates and reorders frames: gaps are given up, duplicates dropped, RC resends."""
    pair = Pair(vcable_factory.add(rails=2), netns, rdma_env)
    set_faults(pair, "drop_ppm=5000 dup_ppm=5000 reorder_ppm=5000")
    try:
        r = integrity(pair, "-t", "10", "-S", "11", "-q", "2")
    finally:
        set_faults(pair, "clear")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 mismatches, 0 errors" in r.stdout, r.stdout
    assert counter(pair, "stripe_held") > 0
    assert counter(pair, "stripe_gaps") > 0, "no lost frame was given up on"
    assert counter(pair, "stripe_dropped") > 0, "no duplicate was dropped"


def test_a_slow_rail_gets_fewer_of_one_qps_packets(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        stripe_param: Path) -> None:
    """End 0's rail 1 limited to 10 Mb/s, rail 0 unlimited: frames queue up on rail 1, so the
    sender, choosing the rail with most room every 16 packets, puts most of one QP's packets
    on rail 0, and ib_write_bw completes. Moving to the next rail in turn split them evenly:
    the packets queued behind the slow rail outlasted RC's timeouts until the QP gave up
    ("transport retry counter exceeded"). Late packets may still be given up on and resent
    (a chunk of 16 on the slow rail takes 53 ms), so only the outcome is asserted, and that
    such packets, when the cable loses none, are counted late (given up on, then came)."""
    assert stripe_param.read_text().strip() == "Y"
    pair = Pair(vcable_factory.add(rails=2), netns, rdma_env)
    set_faults(pair, "rate_mbps=10 rails=2", ends=(0,))
    try:
        before = rail_tx_frames(pair, 0)
        one_qp_bw(pair, "ib_write_bw", iters=200)
        sent = [after - b for after, b in zip(rail_tx_frames(pair, 0), before)]
    finally:
        set_faults(pair, "clear", ends=(0,))
    counts = {name: counter(pair, name) for name in COUNTERS}
    print(f"frames on the fast and the slow rail: {sent}; {counts}")
    assert sum(sent) > 200 * 16, sent
    assert sent[0] > 3 * sent[1], f"one QP's frames on the fast and the slow rail: {sent}; {counts}"
    assert sent[1] > 0, f"the slow rail was never used: {sent}"
    assert counts["stripe_gaps"] == 0 or counts["stripe_late"] > 0, \
        f"gaps given up on a cable that loses nothing, yet no packet came late: {counts}"
