"""`tbverbs link-local`: IPv4 link-local addresses derived from the two host UUIDs of a link.

The derivation is checked for what the two hosts need (same /30, different addresses, each
knowing the other's); the command runs as a subprocess against fake sysfs/configfs trees laid
out as thunderbolt.ko's (USB4) and the module's (virtual cable), with a fake `ip` that logs
what it is asked to do.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import uuid
from pathlib import Path

import pytest

from clilib import load_cli, run_cli

cli = load_cli()

A = "5d0bef8d-e897-4c4e-8b56-fd14bdd06e04"
B = "0b5a8c1e-2f4d-4d7a-9c3b-1e2f3a4b5c6d"
LL_RANGE = (ipaddress.IPv4Address("169.254.1.0"), ipaddress.IPv4Address("169.254.254.255"))


def test_two_hosts_get_the_two_addresses_of_one_subnet() -> None:
    a_addr, a_peer = cli.link_local_addresses(A, B)
    b_addr, b_peer = cli.link_local_addresses(B, A)
    assert a_addr.network == b_addr.network and a_addr.network.prefixlen == 30
    assert a_addr.ip != b_addr.ip
    assert a_peer == b_addr.ip and b_peer == a_addr.ip
    # the /30's two host addresses, never its network or broadcast address
    assert {a_addr.ip, b_addr.ip} == set(a_addr.network.hosts())
    for ip in (a_addr.ip, b_addr.ip):
        assert LL_RANGE[0] <= ip <= LL_RANGE[1]
    # the smaller UUID takes the first address
    low = min(uuid.UUID(A).bytes, uuid.UUID(B).bytes)
    first = a_addr if uuid.UUID(A).bytes == low else b_addr
    assert int(first.ip) == int(a_addr.network.network_address) + 1


def test_the_scheme_is_pinned() -> None:
    """Hosts running different versions must still agree: a change of the derivation is a change
    of protocol. These are the addresses of version 1 of the scheme."""
    assert cli.link_local_addresses(A, B) == (ipaddress.IPv4Interface("169.254.246.150/30"),
                                              ipaddress.IPv4Address("169.254.246.149"))


def test_uuid_spelling_does_not_matter() -> None:
    assert cli.link_local_addresses(A.upper(), B) == cli.link_local_addresses(A, "{" + B + "}")


@pytest.mark.parametrize("local, peer", [(A, A), (A, "not-a-uuid"), ("", B)])
def test_unusable_uuid_pairs_are_refused(local: str, peer: str) -> None:
    with pytest.raises(cli.CliError):
        cli.link_local_addresses(local, peer)


def test_pairs_spread_over_the_range() -> None:
    rng = random.Random(26)
    nets = {cli.link_local_addresses(str(uuid.UUID(int=rng.getrandbits(128))),
                                     str(uuid.UUID(int=rng.getrandbits(128))))[0].network
            for _ in range(2000)}
    # 16256 /30s: 2000 random pairs collide a little (birthday), never much
    assert len(nets) > 1800
    assert min(n.network_address for n in nets) < ipaddress.IPv4Address("169.254.20.0")
    assert max(n.network_address for n in nets) > ipaddress.IPv4Address("169.254.235.0")


# ---------------------------------------------------------------------------------------------
# the command, on fake trees


@pytest.fixture
def fake_ip(tmp_path: Path) -> dict[str, str]:
    """PATH with an `ip` that logs its arguments to IP_LOG and exits IP_FAIL (default 0)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ip = bin_dir / "ip"
    ip.write_text('#!/bin/sh\necho "$*" >>"$IP_LOG"\nexit "${IP_FAIL:-0}"\n')
    ip.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "IP_LOG": str(tmp_path / "ip.log")}


def ip_calls(env: dict[str, str]) -> list[str]:
    log = Path(env["IP_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def usb4_host(root: Path, local: str, peer: str, netdev: str = "usb4_net0", domain: int = 0) -> Path:
    """A sysfs tree as thunderbolt.ko lays it out: the netdev's parent is the peer's service
    (D-1.1) under the XDomain (D-1, the peer's UUID) under our host router (D-0)."""
    d = root / "devices" / "pci0000:00" / "0000:00:0d.2" / f"domain{domain}"
    router = d / f"{domain}-0"
    xdomain = router / f"{domain}-1"
    service = xdomain / f"{domain}-1.1"
    service.mkdir(parents=True)
    (router / "unique_id").write_text(local + "\n")
    (xdomain / "unique_id").write_text(peer + "\n")
    net = root / "class" / "net" / netdev
    net.mkdir(parents=True)
    (net / "device").symlink_to(service)
    return root


def vcable_tree(tmp_path: Path) -> tuple[Path, Path]:
    """sysfs and configfs of one virtual cable whose ends are usb4_net0 and usb4_net1."""
    sysfs, cfs = tmp_path / "sys", tmp_path / "config"
    cable = cfs / "tbverbs" / "vcable" / "vc0"
    cable.mkdir(parents=True)
    for i, (u, n) in enumerate(((A, "usb4_net0"), (B, "usb4_net1"))):
        (cable / f"end{i}_uuid").write_text(u + "\n")
        (cable / f"end{i}_netdev").write_text(n + "\n")
        pdev = sysfs / "devices" / "platform" / f"tbverbs_vcable.{i}"
        pdev.mkdir(parents=True)
        net = sysfs / "class" / "net" / n
        net.mkdir(parents=True)
        (net / "device").symlink_to(pdev)
    return sysfs, cfs


def test_usb4_hosts_address_their_ends_of_one_cable(tmp_path: Path, fake_ip: dict[str, str]) -> None:
    outputs = []
    for name, (local, peer) in (("a", (A, B)), ("b", (B, A))):
        sysfs = usb4_host(tmp_path / name, local, peer)
        r = run_cli("link-local", "--json", env={**fake_ip, "TBVERBS_SYSFS": str(sysfs),
                                                 "TBVERBS_CONFIGFS": str(tmp_path / "none")})
        assert r.returncode == 0, r.stderr
        outputs.append(json.loads(r.stdout))
    a, b = outputs
    assert (a["local_uuid"], a["peer_uuid"]) == (A, B)
    assert a["address"] != b["address"]
    assert a["peer"] == b["address"].split("/")[0] and b["peer"] == a["address"].split("/")[0]
    assert ip_calls(fake_ip) == ["link set dev usb4_net0 up",
                                 f"addr replace {a['address']} dev usb4_net0 scope link",
                                 "link set dev usb4_net0 up",
                                 f"addr replace {b['address']} dev usb4_net0 scope link"]


def test_usb4_second_controller_uses_its_own_host_router(tmp_path: Path, fake_ip: dict[str, str]) -> None:
    c = str(uuid.uuid4())
    sysfs = usb4_host(tmp_path / "sys", c, B, netdev="usb4_net1", domain=1)
    r = run_cli("link-local", "--dry-run", "--json", "usb4_net1",
                env={**fake_ip, "TBVERBS_SYSFS": str(sysfs), "TBVERBS_CONFIGFS": str(tmp_path / "none")})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["local_uuid"] == c
    assert ip_calls(fake_ip) == []  # --dry-run


def test_virtual_cable_ends_take_the_two_addresses(tmp_path: Path, fake_ip: dict[str, str]) -> None:
    sysfs, cfs = vcable_tree(tmp_path)
    r = run_cli("link-local", env={**fake_ip, "TBVERBS_SYSFS": str(sysfs), "TBVERBS_CONFIGFS": str(cfs)})
    assert r.returncode == 0, r.stderr
    mine, theirs = cli.link_local_addresses(A, B)
    assert r.stdout.splitlines() == [f"usb4_net0: {mine} (peer {theirs})",
                                     f"usb4_net1: {theirs}/30 (peer {mine.ip})"]
    assert f"addr replace {mine} dev usb4_net0 scope link" in ip_calls(fake_ip)
    assert f"addr replace {theirs}/30 dev usb4_net1 scope link" in ip_calls(fake_ip)


def test_a_netdev_with_no_known_link_fails_and_the_others_go_on(tmp_path: Path, fake_ip: dict[str, str]) -> None:
    sysfs, cfs = vcable_tree(tmp_path)
    (sysfs / "class" / "net" / "usb4_net2").mkdir()  # no parent device, no cable end
    r = run_cli("link-local", env={**fake_ip, "TBVERBS_SYSFS": str(sysfs), "TBVERBS_CONFIGFS": str(cfs)})
    assert r.returncode == 1
    assert "usb4_net2: cannot find the two host UUIDs" in r.stderr
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["usb4_net0", "usb4_net1"]


def test_missing_netdev_and_failing_ip_are_reported(tmp_path: Path, fake_ip: dict[str, str]) -> None:
    sysfs, cfs = vcable_tree(tmp_path)
    env = {**fake_ip, "TBVERBS_SYSFS": str(sysfs), "TBVERBS_CONFIGFS": str(cfs)}
    r = run_cli("link-local", "usb4_net7", env=env)
    assert r.returncode == 1 and "no such network device: usb4_net7" in r.stderr
    r = run_cli("link-local", "usb4_net0", env={**env, "IP_FAIL": "2"})
    assert r.returncode == 1 and "ip link set dev usb4_net0 up failed: exit 2" in r.stderr


def test_no_devices_is_not_an_error(tmp_path: Path, fake_ip: dict[str, str]) -> None:
    (tmp_path / "sys" / "class" / "net").mkdir(parents=True)
    r = run_cli("link-local", env={**fake_ip, "TBVERBS_SYSFS": str(tmp_path / "sys"),
                                   "TBVERBS_CONFIGFS": str(tmp_path / "config")})
    assert r.returncode == 0 and r.stdout.startswith("no usb4_net* devices")
    assert ip_calls(fake_ip) == []
