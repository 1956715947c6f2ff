"""What a real cable does to the link, on the emulated one: lanes as trained, lost frames,
frames the controller flags as CRC-errored, RX overruns while the host posts no buffers, a
bandwidth limit. Linux's thunderbolt_net is the consumer; each test restores a clean cable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pair import Guest, Pair
from vm2lib import (ADDRESSES, NETDEV, NHI, RX_QUEUE_DEFAULT, XDOMAIN, check_xdomain_speed,
                    net_up, on_both, ping, restore_full_link, sysfs, tcp_transfer, wait_xdomain)


@pytest.fixture
def clean_cable(pair: Pair) -> Iterator[Pair]:
    """thunderbolt_net up before the test; no faults, default RX queues, link 2 x 20 Gb/s after it."""
    net_up(pair)
    yield pair
    pair.relay.set_faults()
    for guest in pair.guests.values():
        guest.qmp.qom_set(NHI, "rx-queue", RX_QUEUE_DEFAULT)
        if guest.qmp.execute("query-status")["status"] != "running":
            guest.qmp.execute("cont")


def netdev_stat(guest: Guest, name: str) -> int:
    return int(sysfs(guest, f"/sys/class/net/{NETDEV}/statistics/{name}"))


def nhi_stat(guest: Guest, name: str) -> int:
    return int(guest.qmp.qom_get(NHI, f"stat-{name}"))


def test_lanes_and_speed_as_trained(clean_cable: Pair) -> None:
    """A 2x20 Gb/s cable shows as 2 lanes at 20 Gb/s on both hosts, then the common 1x10 fallback."""
    pair = clean_cable
    relay = pair.relay
    try:
        for gbps, lanes in ((20, 2), (10, 1)):
            relay.unplug()
            wait_xdomain(pair, 30, gone=True)
            relay.plug(gbps=gbps, lanes=lanes)
            wait_xdomain(pair, 60)
            check_xdomain_speed(pair, gbps)
            seen = on_both(pair, lambda g: (sysfs(g, f"{XDOMAIN}/rx_lanes"), sysfs(g, f"{XDOMAIN}/tx_lanes")))
            assert set(seen.values()) == {(str(lanes), str(lanes))}, seen
    finally:
        restore_full_link(pair)
    net_up(pair)
    ping(pair.a, ADDRESSES["b"])


def test_tcp_is_intact_over_a_lossy_link(clean_cable: Pair) -> None:
    """3% of data frames lost and 3% flagged CRC-errored by the controller: TCP still delivers
    every byte; thunderbolt_net counts the flagged frames as CRC errors and drops them."""
    pair = clean_cable
    crc_before = netdev_stat(pair.b, "rx_crc_errors")
    before = pair.relay.stats()
    pair.relay.set_faults(drop_data=0.03, crc_error=0.03)
    tcp_transfer(pair, 1 << 20)
    after = pair.relay.stats()
    assert after.dirs[0].dropped_fault > before.dirs[0].dropped_fault, after
    flagged = after.dirs[0].crc_flagged - before.dirs[0].crc_flagged
    assert flagged > 0, after
    assert netdev_stat(pair.b, "rx_crc_errors") - crc_before == flagged
    assert nhi_stat(pair.b, "rx_crc_error") >= flagged


def test_rx_overrun_while_the_host_posts_no_buffers(clean_cable: Pair) -> None:
    """B's vCPUs stop (its driver posts nothing) while A keeps sending: B's controller fills its
    posted buffers, then its small queue, then drops and counts; B recovers once it runs again."""
    pair = clean_cable
    overruns = nhi_stat(pair.b, "rx_overrun")
    # B will not answer ARP while stopped: A must know B's address already
    b_mac = sysfs(pair.b, f"/sys/class/net/{NETDEV}/address")
    pair.a.run(["ip", "neigh", "replace", ADDRESSES["b"], "lladdr", b_mac, "dev", NETDEV, "nud", "permanent"])
    pair.b.qmp.qom_set(NHI, "rx-queue", 4)
    pair.b.qmp.execute("stop")
    try:
        # 1000 UDP datagrams of 1400 bytes: more than B's ring (256 buffers) plus its queue (4)
        pair.a.run(["python3", "-c",
                    "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                    f"for i in range(1000): s.sendto(bytes(1400), ('{ADDRESSES['b']}', 7702))"],
                   timeout=120)
        # the frames are on their way through the relay and B's QEMU (which runs while B is stopped)
        pair.relay.wait_for(lambda: nhi_stat(pair.b, "rx_overrun") > overruns, 30, "an RX overrun on B", interval=0.5)
        dropped = nhi_stat(pair.b, "rx_overrun") - overruns
    finally:
        pair.b.qmp.execute("cont")
        pair.a.run(["ip", "neigh", "del", ADDRESSES["b"], "dev", NETDEV], check=False)
    assert dropped > 0, "no RX overrun counted with B stopped and 1000 frames sent"
    pair.b.qmp.qom_set(NHI, "rx-queue", RX_QUEUE_DEFAULT)
    ping(pair.a, ADDRESSES["b"])
    ping(pair.b, ADDRESSES["a"])


def test_bandwidth_limit_paces_but_loses_nothing(clean_cable: Pair) -> None:
    """A 4 Mb/s cable: frames wait for the token bucket instead of being lost; TCP completes intact.
    (How long it took is reported, not asserted: tests check behaviour, benchmarks measure time.)"""
    pair = clean_cable
    before = pair.relay.stats()
    pair.relay.set_faults(rate_mbps=4)
    t0 = time.monotonic()
    tcp_transfer(pair, 1 << 20)
    seconds = time.monotonic() - t0
    after = pair.relay.stats()
    assert after.dirs[0].dropped_fault == before.dirs[0].dropped_fault
    assert after.dirs[0].data_bytes - before.dirs[0].data_bytes >= 1 << 20
    print(f"1 MiB over a 4 Mb/s cable took {seconds:.1f} s")
