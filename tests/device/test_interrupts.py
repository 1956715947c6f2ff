"""RX interrupts throttled as thunderbolt.ko throttles the NHI's, and the busy-poll mode.

The virtual cable's irq_throttle_us spaces each RX ring's interrupts as the real controller
does (128 us on Linux 6.1-6.12). The module parameter busy_poll_us keeps a rail's NAPI polling
an idle ring that long before its interrupt is re-enabled, so a frame arriving within the window
is found without waiting for a throttled interrupt. These tests check the behaviour (which
path found the frames, that traffic is intact either way); what it is worth in latency is
measured by bench/busy_poll.py, never asserted here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultlib import integrity, integrity_running
from pairlib import Pair, cable_stats, hw
from vmlib import NetnsFactory, VcableFactory

# every test here is in make test-debug's run on the sanitizer kernel
pytestmark = pytest.mark.sanitizer_subset

BUSY_POLL = Path("/sys/module/thunderbolt_ibverbs/parameters/busy_poll_us")
THROTTLE_US = 2000  # far above the TCG guest's own latency, so throttling surely happens


@pytest.fixture
def throttled(vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> Iterator[Pair]:
    cable = vcable_factory.add(rails=1, irq_throttle_us=THROTTLE_US)
    yield Pair(cable, netns, rdma_env)
    BUSY_POLL.write_text("0\n")


def busy_polled(pair: Pair) -> int:
    return sum(hw(end.ibdev, "rx_busy_polled") for end in pair.cable.ends)


def throttled_irqs(pair: Pair) -> int:
    return sum(v for k, v in cable_stats(pair.cable.name).items() if k.endswith("_irqs_throttled"))


def pingpong(pair: Pair, iters: int = 200) -> float:
    """ibv_rc_pingpong across the cable, data checked (-c); its usec/iter."""
    common = ["-s", "64", "-n", str(iters), "-c"]
    srv, cli = pair.run(["ibv_rc_pingpong", "-d", pair.cable.end1.ibdev, "-g", str(pair.gids[1]), *common],
                        ["ibv_rc_pingpong", "-d", pair.cable.end0.ibdev, "-g", str(pair.gids[0]), *common,
                         pair.ips[1]])
    m = re.search(r"iters in [\d.]+ seconds = ([\d.]+) usec/iter", cli)
    assert m and "iters in" in srv, cli
    return float(m.group(1))


def test_busy_poll_finds_frames_the_throttled_interrupt_would_delay(throttled: Pair) -> None:
    assert BUSY_POLL.read_text().strip() == "0"
    throttled0, polled0 = throttled_irqs(throttled), busy_polled(throttled)
    interrupts_only = pingpong(throttled)
    assert throttled_irqs(throttled) > throttled0, "no RX interrupt was held back by a 2 ms throttle"
    assert busy_polled(throttled) == polled0, "frames counted as busy-polled with busy_poll_us=0"

    BUSY_POLL.write_text(f"{2 * THROTTLE_US}\n")
    polled1 = busy_polled(throttled)
    busy = pingpong(throttled)
    found = busy_polled(throttled) - polled1
    # each end answers within the window: frames are found by the poll still running
    assert found > 0, "busy_poll_us set, yet no frame was found by busy polling"
    print(f"usec/iter under a {THROTTLE_US} us throttle: interrupts only {interrupts_only:.0f}, "
          f"busy poll {busy:.0f} ({busy / interrupts_only:.2f}x); {found} frames busy-polled")

    BUSY_POLL.write_text("0\n")
    time.sleep(0.5)  # a poll already inside its window finishes it (and the counters' 10 ms cache)
    polled2 = busy_polled(throttled)
    pingpong(throttled, iters=50)
    assert busy_polled(throttled) == polled2, "busy polling went on after busy_poll_us=0"


# out of CI's lane (9-11 min each under lockdep here): make test-full
@pytest.mark.sanitizer_full
def test_unplug_while_busy_polling_with_an_interrupt_held_back(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """The cable goes under load while NAPI busy-polls and a throttled interrupt waits on its
    timer: teardown stops both (no poll or timer left on freed rings: KASAN and lockdep on the
    sanitizer lane), and a new cable works."""
    cable = vcable_factory.add(rails=2, irq_throttle_us=10000)
    pair = Pair(cable, netns, rdma_env)
    BUSY_POLL.write_text("10000\n")
    try:
        polled = busy_polled(pair)
        with integrity_running(pair, "-q", "4", "-t", "60", "-S", "53") as tool:
            deadline = time.monotonic() + 60
            while busy_polled(pair) == polled and time.monotonic() < deadline:
                time.sleep(0.2)
            assert busy_polled(pair) > polled, "no frame busy-polled under load"
            assert tool.poll() is None, "the integrity tool ended early"
            (Path("/sys/kernel/config/tbverbs/vcable") / cable.name / "plugged").write_text("0\n")
            out, _ = tool.communicate(timeout=180)
        assert tool.returncode != 0, "the tool did not notice the unplug:\n" + out
        vcable_factory.delete(cable.name)
        pingpong(Pair(vcable_factory.add(rails=1, irq_throttle_us=10000), netns, rdma_env), iters=50)
    finally:
        BUSY_POLL.write_text("0\n")


def test_busy_poll_us_refuses_out_of_range_values(module: str) -> None:
    BUSY_POLL.write_text("100\n")
    try:
        for bad in ("10001", "-1", "fast"):
            with pytest.raises(OSError):
                BUSY_POLL.write_text(bad + "\n")
            assert BUSY_POLL.read_text().strip() == "100", f"{bad!r} changed busy_poll_us"
    finally:
        BUSY_POLL.write_text("0\n")


def test_irq_throttle_us_is_a_cable_parameter(vcable_factory: VcableFactory) -> None:
    """Set while unplugged, within 0-10000; a plugged cable refuses a change."""
    cfs = Path("/sys/kernel/config/tbverbs/vcable")
    cable = vcable_factory.add(rails=1, irq_throttle_us=128)
    attr = cfs / cable.name / "irq_throttle_us"
    assert attr.read_text().strip() == "128"
    with pytest.raises(OSError):  # EBUSY: plugged
        attr.write_text("0\n")
    (cfs / cable.name / "plugged").write_text("0\n")
    with pytest.raises(OSError):  # EINVAL
        attr.write_text("10001\n")
    attr.write_text("0\n")
    assert attr.read_text().strip() == "0"


def test_the_module_needs_neither_an_interrupt_replay_nor_the_rx_sof(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """Silicon may report a one-packet frame's SOF as 0, and nothing says a controller raises an
    RX interrupt at unmask for a frame that came while it was masked (docs/hardware.md). On a
    cable that does both, checked traffic of several QPs over two rails and an RC pingpong pass,
    nothing is resent and no frame is taken for a split packet's payload: ACKs and credit frames
    (one packet each) are read by their header, and a frame that came while NAPI was finishing is
    found by the look after re-arming (rx_rearm_found), not by a retransmission."""
    cable = vcable_factory.add(rails=2, rx_sof=1, irq_replay=0)
    pair = Pair(cable, netns, rdma_env)
    r = integrity(pair, "-q", "4", "-t", "4", "-s", "16384", "-S", "31")
    assert r.returncode == 0 and " 0 mismatches, 0 errors" in r.stdout, r.stdout + r.stderr
    pingpong(pair, iters=300)
    for end in cable.ends:
        for counter in ("retransmits", "rx_split_dropped", "rx_malformed", "seq_naks"):
            assert hw(end.ibdev, counter) == 0, f"{end.ibdev}: {counter} {hw(end.ibdev, counter)}"
    assert sum(hw(end.ibdev, "rdma_rx_packets") for end in cable.ends) > 600
    print("frames found after re-arming:", sum(hw(end.ibdev, "rx_rearm_found") for end in cable.ends))
