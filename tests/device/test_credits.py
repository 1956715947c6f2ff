"""Software credits: a sender waits for the receiver's RX buffers instead of losing frames.

The virtual cable drops a frame that finds no RX buffer posted, as the NHI does. With its
receive interrupts throttled to one per 2 ms and a 32-descriptor ring, a fast sender overruns
the receiver unless it waits for credits. The module parameter `credits` (default on) decides
what a new link offers at login; both ends must offer them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from faultlib import cable_stats, set_faults
from pairlib import Pair, hw
from vmlib import NetnsFactory, VcableFactory

CREDITS = Path("/sys/module/thunderbolt_ibverbs/parameters/credits")
THROTTLE_US = 2000


@pytest.fixture
def credits_param() -> Iterator[Path]:
    yield CREDITS
    CREDITS.write_text("Y\n")


def counter(pair: Pair, name: str) -> int:
    return sum(hw(end.ibdev, name) for end in pair.cable.ends)


def write_bw(pair: Pair, iters: int = 200) -> str:
    args = ["-n", str(iters), "-s", "65536", "-F"]
    _, cli = pair.run(["ib_write_bw", "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args],
                      ["ib_write_bw", "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args,
                       pair.ips[1]], timeout=300)
    assert any(line.split()[:1] == ["65536"] for line in cli.splitlines()), cli
    return cli


def throttled_pair(vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> Pair:
    cable = vcable_factory.add(rails=1, ring_size=32, irq_throttle_us=THROTTLE_US)
    return Pair(cable, netns, rdma_env)


def test_a_slow_receiver_slows_its_sender_instead_of_losing_frames(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        credits_param: Path) -> None:
    assert credits_param.read_text().strip() == "Y"
    pair = throttled_pair(vcable_factory, netns, rdma_env)
    write_bw(pair)
    assert cable_stats(pair)["dropped_no_rx_buffer"] == 0, cable_stats(pair)
    assert counter(pair, "credit_frames_rx") > 0, "no credit frame was received"
    assert counter(pair, "credit_waits") > 0, "the sender never waited for credits"
    assert counter(pair, "credit_limits_refused") == 0
    # nothing was lost, so the receiver never saw a gap (an ACK-timer retransmission is not
    # asserted: it needs no loss, only 100 ms without an ACK, which a loaded host can take)
    assert counter(pair, "seq_naks") == 0, "the receiver saw a gap: a frame was lost"
    print(f"ACK-timer retransmissions: {counter(pair, 'retransmits')}")
    vcable_factory.delete(pair.cable.name)

    # the same traffic without credits loses frames (so the check above can fail)
    credits_param.write_text("N\n")
    pair = throttled_pair(vcable_factory, netns, rdma_env)
    write_bw(pair)
    assert cable_stats(pair)["dropped_no_rx_buffer"] > 0, "no frame was lost without credits"
    assert counter(pair, "seq_naks") > 0, "frames were lost without credits, yet no gap was seen"
    assert counter(pair, "credit_frames_tx") == 0, "credit frames sent though not agreed"


def test_no_credit_frames_when_credits_are_not_offered(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        credits_param: Path) -> None:
    """(That both ends must offer them is the login's capability intersection: unit-tested.)"""
    credits_param.write_text("N\n")
    pair = Pair(vcable_factory.add(rails=2), netns, rdma_env)
    write_bw(pair, iters=50)
    assert counter(pair, "credit_frames_tx") + counter(pair, "credit_frames_rx") == 0


def test_frames_lost_on_a_rail_are_counted_at_the_next_credit_request(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """A lost frame never gives its buffer's credit back: the sender, its credits used up on
    frames that never came, asks for more, and the request numbers the frames sent before it.
    The receiver counts the ones it never saw (rx_frames_lost): never more than the cable
    dropped, as it would a controller's drops for want of a buffer."""
    pair = Pair(vcable_factory.add(rails=1, ring_size=32), netns, rdma_env)
    assert counter(pair, "rx_frames_lost") == 0
    write_bw(pair, iters=100)
    assert counter(pair, "rx_frames_lost") == 0, "frames counted lost on a cable that loses none"
    set_faults(pair, "drop_ppm=30000")
    try:
        write_bw(pair, iters=300)
    finally:
        set_faults(pair, "clear")
    dropped, lost = cable_stats(pair)["dropped_fault"], counter(pair, "rx_frames_lost")
    assert counter(pair, "credit_requests") > 0, "no starved sender asked for credits: nothing tested"
    assert 0 < lost <= dropped, (lost, dropped)


# out of CI's lane (9-11 min each under lockdep here): make test-full
@pytest.mark.sanitizer_full
def test_lost_and_duplicated_frames_do_not_leave_the_sender_starved(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """Losses leak credits and duplicates inflate the receiver's count; credit requests put both
    right, so traffic keeps going (RC resends what was lost)."""
    pair = Pair(vcable_factory.add(rails=1, ring_size=32), netns, rdma_env)
    set_faults(pair, "drop_ppm=30000 dup_ppm=30000")
    try:
        write_bw(pair, iters=300)
    finally:
        set_faults(pair, "clear")
    assert cable_stats(pair)["dropped_fault"] > 0 and cable_stats(pair)["duplicated"] > 0
    assert counter(pair, "credit_requests") > 0, "no starved sender asked for credits"
    write_bw(pair, iters=100)  # and the rail is healthy afterwards
