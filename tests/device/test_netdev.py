"""IP over the link: ping across the virtual cable between two network namespaces."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pairlib import cable_stats, hw, split_hosts
from vmlib import Cable, NetnsFactory, VcableFactory, tbverbs

# every test here is in make test-debug's run on the sanitizer kernel
pytestmark = pytest.mark.sanitizer_subset


@pytest.mark.parametrize("rails", [1, 2])
def test_ping_ipv4_and_ipv6_across_the_cable(vcable_factory: VcableFactory, netns: NetnsFactory,
                                             rails: int) -> None:
    cable = vcable_factory.add(rails=rails)
    h0, h1 = split_hosts(cable, netns)
    before = hw(cable.end1.ibdev, "net_rx_packets")
    netns.exec(h0, "ping", "-c", "3", "-W", "5", "10.66.0.2")
    netns.exec(h0, "ping", "-6", "-c", "3", "-W", "5", "fd66::2")
    netns.exec(h1, "ping", "-c", "2", "-W", "5", "10.66.0.1")
    # the frames are visible in the link counters, the netdev counters and on the wire
    assert hw(cable.end1.ibdev, "net_rx_packets") - before >= 6
    assert hw(cable.end0.ibdev, "tx_frames") >= 8
    assert hw(cable.end0.ibdev, "rx_malformed") == 0
    stats = netns.exec(h0, "ip", "-s", "-j", "link", "show", cable.end0.netdev).stdout
    st = json.loads(stats)[0]["stats64"]
    assert st["tx"]["packets"] >= 8 and st["rx"]["packets"] >= 5
    wire = cable_stats(cable.name)
    assert sum(v for k, v in wire.items() if k.startswith("end0_") and k.endswith("_tx_frames")) >= 8
    # the CLI shows the same counters
    assert "net_rx_packets" in tbverbs("status", cable.end1.ibdev).stdout


@pytest.mark.sanitizer_ci
def test_large_packets_are_fragmented_and_reassembled(vcable: Cable, netns: NetnsFactory) -> None:
    h0, _ = split_hosts(vcable, netns)
    frames0 = hw(vcable.end0.ibdev, "tx_frames")
    netns.exec(h0, "ping", "-c", "2", "-W", "5", "-s", "30000", "10.66.0.2")
    netns.exec(h0, "ping", "-c", "1", "-W", "5", "-s", "65000", "-M", "dont", "10.66.0.2")
    # a 30000-byte ping is 8 fragments each way
    assert hw(vcable.end0.ibdev, "tx_frames") - frames0 >= 2 * 8 + 16
    assert hw(vcable.end1.ibdev, "net_rx_discards") == 0


def test_netdev_without_addresses_still_keeps_the_port_active(vcable: Cable) -> None:
    """The RDMA port tracks the link, not the netdev's administrative state."""
    subprocess.run(["ip", "link", "set", vcable.end0.netdev, "down"], check=True)
    state = Path("/sys/class/infiniband", vcable.end0.ibdev, "ports/1/state").read_text().strip()
    assert state == "4: ACTIVE"
