"""Two hosts on an emulated USB4 cable find each other and talk IP with Linux's own thunderbolt_net.

The first proof that the emulated host interface (QEMU's usb4-nhi) is good enough for the stock
drivers: XDomain discovery through the control channel, then thunderbolt_net's login and data
path over DMA rings. Nothing of tbverbs is loaded.
"""

from __future__ import annotations

import re

import pytest

from pair import Pair
from vm2lib import (ADDRESSES, HOST_ROUTER, NETDEV, XDOMAIN, check_xdomain_speed, net_up, on_both, ping, sysfs,
                    restore_full_link, tcp_transfer, wait_xdomain)

TRANSFER_BYTES = 4 << 20


@pytest.mark.kernels
def test_thunderbolt_net_between_two_vms(pair: Pair) -> None:
    relay = pair.relay
    # 1. each host sees the other: the XDomain's UUID is the peer's host router's
    wait_xdomain(pair, 60)
    a_peer, b_peer = sysfs(pair.a, f"{XDOMAIN}/unique_id"), sysfs(pair.b, f"{XDOMAIN}/unique_id")
    a_self, b_self = sysfs(pair.a, f"{HOST_ROUTER}/unique_id"), sysfs(pair.b, f"{HOST_ROUTER}/unique_id")
    assert a_self != b_self, "both host routers have the same UUID (usb4-nhi uid not distinct?)"
    assert (a_peer, b_peer) == (b_self, a_self)
    link = relay.link()
    assert link is not None, f"the relay's link is down: {relay.events()}"
    check_xdomain_speed(pair, link[0])

    # 2. thunderbolt_net: a netdev on each side, logged in (carrier)
    net_up(pair)

    # 3. ping both ways, small and jumbo (the 8000 B packets span two frames)
    for size in (None, 8000):
        ping(pair.a, ADDRESSES["b"], size)
        ping(pair.b, ADDRESSES["a"], size)

    # 4. 4 MiB of random bytes from A to B over TCP, intact
    tcp_transfer(pair, TRANSFER_BYTES)

    # 5. the frames went over the relay, both ways (TCP's ACKs at least from B)
    stats = relay.stats()
    assert stats.dirs[0].data > 0 and stats.dirs[1].data > 0, stats
    assert stats.dirs[0].data_bytes >= TRANSFER_BYTES, stats


def test_unplug_replug(pair: Pair) -> None:
    relay = pair.relay
    net_up(pair)  # also when this test runs alone
    try:
        relay.unplug()
        wait_xdomain(pair, 30, gone=True)
        gone = on_both(pair, lambda g: g.wait_for_path(f"/sys/class/net/{NETDEV}", 30, gone=True))
        assert all(gone.values()), f"{NETDEV} still there 30 s after the unplug: {gone}"

        relay.plug(gbps=10)
        wait_xdomain(pair, 60)
        check_xdomain_speed(pair, 10)
        lanes = on_both(pair, lambda g: sysfs(g, f"{XDOMAIN}/rx_lanes"))
        assert all(re.fullmatch(r"[12]", v) for v in lanes.values()), lanes
        net_up(pair)
        ping(pair.a, ADDRESSES["b"])
        ping(pair.b, ADDRESSES["a"])
    finally:
        restore_full_link(pair)  # the next test expects a good cable
