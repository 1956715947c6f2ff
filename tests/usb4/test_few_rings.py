"""A controller with few DMA rings (Strix Halo's reportedly has 3: the control ring and two
pairs): with thunderbolt_net up first, our link comes up on the ring pairs left, says how many,
and both carry traffic.

The pair's profile sets the rings (docs/emulator.md: strix 3, intel 12, amd and lenient 16).
"""

from __future__ import annotations

import pytest

from pair import Pair
from usb4lib import (MODNAME, bring_up, client_server, link_rails, load_module, rail_packets,
                     unload_module)
from vm2lib import ADDRESSES, NHI, net_up, on_both, ping, wait_xdomain

MAX_RAILS = 4  # usb4_rails' default


@pytest.mark.kernels
def test_beside_thunderbolt_net_the_link_takes_the_rings_left(pair: Pair) -> None:
    wait_xdomain(pair, 60)
    net_up(pair)  # thunderbolt0 up: its ring pair is taken
    rings = int(pair.a.qmp.qom_get(NHI, "rings"))
    # ring 0 is the control channel's, one pair thunderbolt_net's
    expect = min(MAX_RAILS, rings - 2)
    assert expect >= 1, f"the profile's {rings} rings leave no pair for our link"
    on_both(pair, load_module)
    try:
        hosts = on_both(pair, bring_up)
        assert {tag: link_rails(h) for tag, h in hosts.items()} == {"a": expect, "b": expect}
        before = {tag: rail_packets(h) for tag, h in hosts.items()}
        ping(pair.a, ADDRESSES["b"], 8000)
        cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", "65536", "-n", "20"])
        assert "iters in" in cli and "iters in" in srv
        ping(pair.b, ADDRESSES["a"], 8000)
        for tag, h in hosts.items():
            got = [n - n0 for n, n0 in zip(rail_packets(h), before[tag])]
            assert sum(got[:expect]) > 0 and not any(got[expect:]), \
                f"{tag}: RDMA packets per rail {got}, the link has {expect} rail(s)"
    finally:
        unloaded = on_both(pair, unload_module)
        # as the earlier tests found the guests: neither module loaded (modprobe -r would take
        # thunderbolt.ko along)
        on_both(pair, lambda g: g.run("rmmod thunderbolt_net", check=False))
    assert all(unloaded.values()), f"rmmod {MODNAME} failed: {unloaded}"
