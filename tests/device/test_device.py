"""The RDMA devices as unmodified rdma-core tools see them, through rdma-core's rxe provider."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from pairlib import hw, serve_and_connect, split_hosts
from roce import gid_index
from vmlib import REPO, Cable, NetnsFactory, VcableFactory, unload_rdma_rxe

VERBS_CHECK = REPO / "build" / "tools" / "verbs_check"


def tool(env: dict[str, str], *cmd: str, check: bool = True, timeout: float = 60) -> str:
    r = subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{cmd} exited {r.returncode}: {r.stdout}{r.stderr}"
    return r.stdout


def devinfo(env: dict[str, str], dev: str) -> str:
    return tool(env, "ibv_devinfo", "-v", "-d", dev)


def field(text: str, name: str) -> str:
    m = re.search(rf"^\s*{name}:\s*(.+)$", text, re.M)
    assert m, f"no {name} in:\n{text}"
    return m.group(1).strip()


def test_ibv_devices_lists_both_ends(vcable: Cable, rdma_env: dict[str, str]) -> None:
    out = tool(rdma_env, "ibv_devices")
    rows = dict(re.findall(r"^\s*(usb4_rdma\d+)\s+([0-9a-f]{16})\s*$", out, re.M))
    assert set(rows) == {vcable.end0.ibdev, vcable.end1.ibdev}, out
    assert len(set(rows.values())) == 2, "node GUIDs are unique"


@pytest.mark.kernels
def test_ibv_devinfo_port_is_active_roce(vcable: Cable, rdma_env: dict[str, str]) -> None:
    infos = [devinfo(rdma_env, e.ibdev) for e in vcable.ends]
    for info in infos:
        assert field(info, "state") == "PORT_ACTIVE (4)"
        assert field(info, "link_layer") == "Ethernet"
        # 2048: a UD message and its GIDs must fit one 4 KiB frame (wire-protocol.md)
        assert field(info, "active_mtu") == "2048 (4)"
        assert field(info, "phys_state") == "LINK_UP (5)"
        # perftest matches vendor_part_id against Mellanox tables; ours is outside them
        assert field(info, "vendor_part_id") == "21812"
        assert field(info, "node_guid") == field(info, "sys_image_guid")
    assert field(infos[0], "node_guid") != field(infos[1], "node_guid")
    assert field(infos[0], "sys_image_guid") != field(infos[1], "sys_image_guid")
    # a RoCE v2 GID is there from the start: the link-local address of the netdev
    assert re.search(r"GID\[\s*\d+\]:\s+fe80::\S+, RoCE v2", infos[0]), infos[0]


def test_rate_follows_the_trained_link(vcable_factory: VcableFactory) -> None:
    fast = vcable_factory.add("fast")  # 2 lanes x 20 Gb/s
    slow = vcable_factory.add("slow", lanes=1, lane_speed=10)
    rate = lambda c: Path("/sys/class/infiniband", c.end0.ibdev, "ports/1/rate").read_text().strip()
    assert rate(fast) == "40 Gb/sec (4X QDR)"
    assert rate(slow) == "10 Gb/sec (1X QDR)"


def test_gids_follow_the_netdev_addresses(vcable: Cable, netns: NetnsFactory,
                                          rdma_env: dict[str, str]) -> None:
    ns = netns.add()
    nd = vcable.end0.netdev
    subprocess.run(["ip", "link", "set", nd, "netns", ns], check=True)
    netns.exec(ns, "ip", "addr", "add", "10.55.0.1/24", "dev", nd)
    netns.exec(ns, "ip", "addr", "add", "fd55::1/64", "dev", nd, "nodad")
    netns.exec(ns, "ip", "link", "set", nd, "up")
    gids = Path("/sys/class/infiniband", vcable.end0.ibdev, "ports/1/gids")
    types = Path("/sys/class/infiniband", vcable.end0.ibdev, "ports/1/gid_attrs/types")

    def table() -> dict[str, str]:
        out = {}
        for g in gids.iterdir():
            value = g.read_text().strip()
            if value != "0000:0000:0000:0000:0000:0000:0000:0000":
                out[value] = (types / g.name).read_text().strip()
        return out

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(table()) < 3:
        time.sleep(0.2)
    t = table()
    assert t.get("0000:0000:0000:0000:0000:ffff:0a37:0001") == "RoCE v2", t
    assert t.get("fd55:0000:0000:0000:0000:0000:0000:0001") == "RoCE v2", t
    ndev_of = Path("/sys/class/infiniband", vcable.end0.ibdev, "ports/1/gid_attrs/ndevs")
    assert {(ndev_of / g.name).read_text().strip() for g in gids.iterdir()
            if g.read_text().strip() in t} == {nd}
    # and ibv_devinfo shows the IPv4 one
    assert "::ffff:10.55.0.1, RoCE v2" in devinfo(rdma_env, vcable.end0.ibdev)
    netns.exec(ns, "ip", "addr", "del", "10.55.0.1/24", "dev", nd)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "0000:0000:0000:0000:0000:ffff:0a37:0001" in table():
        time.sleep(0.2)
    assert "0000:0000:0000:0000:0000:ffff:0a37:0001" not in table(), "removed address, removed GID"


def test_unimplemented_verbs_fail_with_eopnotsupp(vcable: Cable, rdma_env: dict[str, str]) -> None:
    assert VERBS_CHECK.exists(), f"{VERBS_CHECK} is not built (make tools)"
    out = tool(rdma_env, str(VERBS_CHECK), "unsupported", vcable.end0.ibdev)
    results = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert results == {
        "reg_dmabuf_mr": "EOPNOTSUPP", "reg_mr_on_demand": "EOPNOTSUPP",
        "open_xrcd": "EOPNOTSUPP", "alloc_mw_bad_type": "Invalid argument",
        "create_cq_over_max_cqe": "Invalid argument",
        "create_qp_over_max_wr": "Invalid argument",
        "create_qp_over_max_sge": "Invalid argument",
        "create_qp_over_max_inline": "Invalid argument",
    }, out


def test_inline_read_is_treated_as_rdma_rxe_treats_it(vcable: Cable, rdma_env: dict[str, str],
                                                     rxe_device: str) -> None:
    """Issue 23 item 5: an RDMA READ with IBV_SEND_INLINE, the QP in error (where posting needs
    no peer). Our own provider refused it at post time; rdma-core's rxe provider, which drives
    both devices now, posts it to the SQ ring, and the flush completes it with the READ before
    it. Whatever the provider does, usb4_rdma must answer as rdma_rxe does."""
    assert VERBS_CHECK.exists(), f"{VERBS_CHECK} is not built (make tools)"
    ours = tool(rdma_env, str(VERBS_CHECK), "inline_read", vcable.end0.ibdev).strip()
    theirs = tool(rdma_env, str(VERBS_CHECK), "inline_read", rxe_device).strip()
    assert ours == theirs, (ours, theirs)
    assert ours.endswith("first flushed"), ours


@pytest.mark.parametrize("device", ["usb4_rdma", "rdma_rxe"])
def test_a_qp_on_an_srq_reports_last_wqe_reached_when_it_enters_error(
        device: str, vcable: Cable, rdma_env: dict[str, str], request: pytest.FixtureRequest) -> None:
    """IBA 10.3.1: an RC QP on an SRQ that enters the error state raises Last WQE Reached
    (the kernel's ib_drain_qp() waits for it before a QP on an SRQ is destroyed), once; again
    after RESET and a new ERR. rdma_rxe, beside ours, shows the probe asks what a stock
    driver does. Before: never (the kernel's drain waited out its timeout)."""
    assert VERBS_CHECK.exists(), f"{VERBS_CHECK} is not built (make tools)"
    dev = vcable.end0.ibdev if device == "usb4_rdma" else request.getfixturevalue("rxe_device")
    out = tool(rdma_env, str(VERBS_CHECK), "last_wqe", dev)
    assert out.strip().splitlines()[-1] == "last_wqe 1 1", out


@pytest.mark.kernels
@pytest.mark.sanitizer_subset
@pytest.mark.sanitizer_ci
def test_unplug_with_an_open_context(vcable: Cable, rdma_env: dict[str, str]) -> None:
    """The port goes down with an event, then the device goes away without waiting for the process."""
    holder = subprocess.Popen([str(VERBS_CHECK), "hold", vcable.end1.ibdev, "60"],
                              stdout=subprocess.PIPE, text=True, env=rdma_env)
    try:
        assert holder.stdout.readline().strip() == "ready"
        # Returns only once the device is gone; the holder would keep it for 60 s
        # unless its context is disassociated (DEVICE_FATAL), which ends it at once.
        Path("/sys/kernel/config/tbverbs/vcable", vcable.name, "plugged").write_text("0")
        out, _ = holder.communicate(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert not Path("/sys/class/infiniband", vcable.end1.ibdev).exists()
    lines = out.strip().splitlines()
    assert "event port error" in lines, out
    assert "event local catastrophic error" in lines, out   # IBV_EVENT_DEVICE_FATAL
    assert lines[-1] == "closed" and holder.returncode == 0, out


PIN_SCRIPT = r"""
import sys, time
from pathlib import Path
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.libibverbs_enums as e

def pinned(dev):
    time.sleep(0.1)  # the counters are cached for 10 ms
    return int(Path("/sys/class/infiniband", dev, "ports/1/hw_counters/pinned_bytes").read_text())
first, second = sys.argv[1:3]
pd = PD(Context(name=first))
pd2 = PD(Context(name=second))
print("before", pinned(first), pinned(second))
mr = MR(pd, 3 << 20, e.IBV_ACCESS_LOCAL_WRITE)
print("first", pinned(first))
try:
    MR(pd2, 2 << 20, e.IBV_ACCESS_LOCAL_WRITE)  # the other device: the same limit
    print("second accepted")
except PyverbsRDMAError as err:
    print("second refused", err.error_code)
small = MR(pd2, 4096, e.IBV_ACCESS_LOCAL_WRITE)
print("small", pinned(first), pinned(second))
small.close()
mr.close()
print("after", pinned(first), pinned(second))
print("limit", int(Path("/sys/class/infiniband", second, "ports/1/hw_counters/pinned_bytes_limit").read_text()))
"""


def test_pinned_memory_is_limited_over_all_devices(vcable_factory: VcableFactory,
                                                    rdma_env: dict[str, str]) -> None:
    """max_pinned_mb bounds what the registrations of all devices pin together, even for root."""
    one, two = vcable_factory.add("pin1"), vcable_factory.add("pin2")
    param = Path("/sys/module/thunderbolt_ibverbs/parameters/max_pinned_mb")
    old = param.read_text().strip()
    param.write_text("4")
    try:
        out = tool(rdma_env, "/usr/bin/python3", "-c", PIN_SCRIPT, one.end0.ibdev, two.end0.ibdev)
    finally:
        param.write_text(old)
    seen = {words[0]: words[1:] for words in (line.split() for line in out.splitlines())}
    assert seen["before"] == ["0", "0"], out
    # 3 MiB of a page-aligned buffer, or one page more if it is not aligned
    assert 3 << 20 <= int(seen["first"][0]) <= (3 << 20) + 4096, out
    assert seen["second"] == ["refused", "12"], out  # ENOMEM: 3 + 2 MiB > 4 MiB, on two devices
    # each device counts its own registrations
    assert seen["small"][0] == seen["first"][0] and int(seen["small"][1]) in (4096, 8192), out
    assert seen["after"] == ["0", "0"], out
    assert seen["limit"] == [str(4 << 20)], out


@pytest.mark.sanitizer_subset
@pytest.mark.sanitizer_full
def test_loopback_on_one_device(vcable: Cable, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """Both QPs of ibv_rc_pingpong on the same device: packets never touch the cable."""
    h0, _ = split_hosts(vcable, netns)
    netns.exec(h0, "ip", "link", "set", "lo", "up")
    gid = gid_index(vcable.end0.ibdev, "10.66.0.1")
    before = hw(vcable.end0.ibdev, "rdma_tx_packets")
    # the server slow to start on the debug kernel: the client retries meanwhile
    args = ["ibv_rc_pingpong", "-d", vcable.end0.ibdev, "-g", str(gid), "-n", "20", "-c"]
    serve_and_connect(h0, args, h0, [*args, "127.0.0.1"], rdma_env, timeout=60)
    assert hw(vcable.end0.ibdev, "rdma_tx_packets") == before


@pytest.mark.kernels
def test_the_core_finds_the_netdev_through_the_device_and_rdma_rxe_can_share_it(
        vcable: Cable, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """The port's netdev reaches the core through the device (ops.get_netdev), not the core's
    netdev hash that rdma_rxe searches (docs/rxe-abi.md, 1.3, R1): netlink and the GID table
    still name usb4_netN, and an rdma_rxe device can be made over that same netdev, take its
    netdev events and RoCE packets from the cable, and be removed while ours goes on working;
    rdma_rxe's unload then unregisters ours too (the same driver id), which come back."""
    end = vcable.end0
    links = json.loads(subprocess.run(["rdma", "-j", "link", "show", f"{end.ibdev}/1"],
                                      capture_output=True, text=True, check=True).stdout)
    assert links[0].get("netdev") == end.netdev, links
    ndevs = Path("/sys/class/infiniband", end.ibdev, "ports/1/gid_attrs/ndevs")
    assert (ndevs / "0").read_text().strip() == end.netdev  # the link-local GID, from the netdev
    # end0 stays here (rdma_rxe's UDP socket is in this namespace), end1 sends from another
    peer = netns.add()
    subprocess.run(["ip", "link", "set", vcable.end1.netdev, "netns", peer], check=True)
    netns.exec(peer, "ip", "addr", "add", "10.88.0.2/24", "dev", vcable.end1.netdev)
    netns.exec(peer, "ip", "link", "set", vcable.end1.netdev, "up")
    subprocess.run(["ip", "addr", "add", "10.88.0.1/24", "dev", end.netdev], check=True)
    subprocess.run(["ip", "link", "set", end.netdev, "up"], check=True)
    gid = gid_index(end.ibdev, "10.88.0.1")  # waits for the IPv4 GID to appear
    assert (ndevs / str(gid)).read_text().strip() == end.netdev
    netns.exec(peer, "ping", "-c", "1", "-W", "5", "10.88.0.1")

    subprocess.run(["modprobe", "rdma_rxe"], check=True)
    try:
        subprocess.run(["rdma", "link", "add", "tbvrxe1", "type", "rxe", "netdev", end.netdev], check=True)
        # rdma_rxe's netdev events on our netdev, and RoCE v2 packets over the cable to it
        subprocess.run(["ip", "link", "set", end.netdev, "down"], check=True)
        subprocess.run(["ip", "link", "set", end.netdev, "up"], check=True)
        netns.exec(peer, "ping", "-c", "1", "-W", "5", "10.88.0.1")
        for _ in range(3):
            netns.exec(peer, "bash", "-c", "printf '%064d' 0 >/dev/udp/10.88.0.1/4791")
        subprocess.run(["rdma", "link", "delete", "tbvrxe1"], check=True)
    finally:
        subprocess.run(["rdma", "link", "delete", "tbvrxe1"], capture_output=True)
        # rdma_rxe's exit takes ours too (same driver id): they come back (R2), waited for here
        unload = unload_rdma_rxe()
    assert unload.returncode == 0, unload.stderr
    # ours is there again, with its netdev and its GIDs
    gid = gid_index(end.ibdev, "10.88.0.1")
    assert (ndevs / str(gid)).read_text().strip() == end.netdev
    assert "PORT_ACTIVE" in tool(rdma_env, "ibv_devinfo", "-d", end.ibdev)
