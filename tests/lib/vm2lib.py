"""Helpers for the two-VM tests: the host router and XDomain in sysfs, thunderbolt_net, ping.

Each helper drives one guest through its agent (pair.Guest) and polls inside the guest
(Guest.wait_until: one round trip per wait, not one per poll).
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from pair import BOOT_TIMEOUT_S, Guest, Pair
from vmlib import IN_VM, missing

T = TypeVar("T")
NHI_CLASS = "0x0c0340"  # PCI class of a USB4 host interface (serial bus, USB, prog-if 0x40)
TB_DEVICES = "/sys/bus/thunderbolt/devices"
HOST_ROUTER = f"{TB_DEVICES}/0-0"
XDOMAIN = f"{TB_DEVICES}/0-1"  # the other host, seen through port 1 of our host router
NETDEV = "thunderbolt0"
ADDRESSES = {"a": "10.77.0.1", "b": "10.77.0.2"}
# how a good cable trains between two USB4 hosts; the relay's plug() takes these
FULL_LINK = {"gbps": 20, "lanes": 2}
# Cable 0's emulated host interface in a guest (QOM path), and its RX queue by default
NHI = "/machine/peripheral/nhi0"
RX_QUEUE_DEFAULT = 1024


def on_both(pair: Pair, fn: Callable[[Guest], T]) -> dict[str, T]:
    """fn(guest) for both guests at once (each mostly waits on its own VM); the results by tag."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {tag: pool.submit(fn, guest) for tag, guest in pair.guests.items()}
        return {tag: fut.result() for tag, fut in futures.items()}


def fail(msg: str) -> None:
    pytest.fail(msg, pytrace=False)


def host_router_up(guest: Guest, cables: int = 1) -> list[str]:
    """Load thunderbolt, keep the NHIs awake, wait for their host routers; the NHIs' sysfs dirs.

    One emulated NHI per cable, in PCI order (QEMU's order of the -device options): cable k's
    controller must be domain k (host router k-0, the peer seen as k-1), which the tests assume.

    The emulated NHI cannot wake from runtime suspend (no PME), and the driver allows runtime PM
    in its probe: `power/control=on` must come after the probe, or the idle domain suspends
    after 15 s and never sees the cable.
    """
    guest.run(["modprobe", "thunderbolt"])
    r = guest.run(f"grep -lx {NHI_CLASS} /sys/bus/pci/devices/*/class", check=False)
    nhis = sorted(str(Path(line).parent) for line in r.stdout.split())
    if len(nhis) != cables:
        fail(f"{guest.tag}: {len(nhis)} PCI devices of class {NHI_CLASS}, expected one per cable ({cables}): "
             f"is usb4-nhi on QEMU's command line, with prog-if 0x40?\n{r.stdout}{r.stderr}")
    for nhi in nhis:
        if not guest.wait_for_path(f"{nhi}/driver", 30):
            fail(f"{guest.tag}: thunderbolt did not bind {nhi}")
        guest.write_file(f"{nhi}/power/control", "on")
    for k, nhi in enumerate(nhis):
        router = f"{TB_DEVICES}/{k}-0"
        if not guest.wait_for_path(router, 60):
            fail(f"{guest.tag}: no host router {router} 60 s after binding {nhi}")
        parent = guest.run(f"readlink -f {TB_DEVICES}/domain{k}/..").stdout.strip()
        if parent != guest.run(f"readlink -f {nhi}").stdout.strip():
            fail(f"{guest.tag}: domain{k} belongs to {parent}, not to cable {k}'s controller {nhi}")
    return nhis


def xdomain(cable: int) -> str:
    """The other host as seen through cable `cable` (port 1 of that cable's host router)."""
    return f"{TB_DEVICES}/{cable}-1"


def wait_xdomain(pair: Pair, timeout: float, gone: bool = False, cable: int = 0) -> None:
    """Both guests see the other host through `cable` (k-1), or with gone=True no longer do, within `timeout` s."""
    path = xdomain(cable)
    seen = on_both(pair, lambda g: g.wait_for_path(path, timeout, gone=gone))
    late = [tag for tag, ok in seen.items() if not ok]
    if late:
        fail(f"{path} {'still there' if gone else 'missing'} after {timeout:g}s on {', '.join(late)}")


def sysfs(guest: Guest, path: str) -> str:
    return guest.read_file(path).strip()


def net_up(pair: Pair) -> None:
    """thunderbolt_net loaded on both, thunderbolt0 addressed (10.77.0.0/24) and up, carrier on both.

    The carrier comes with thunderbolt_net's login, which retries every few seconds: under TCG
    with two guests on two cores that takes a while.
    """
    on_both(pair, lambda g: g.run(["modprobe", "thunderbolt_net"]))
    found = on_both(pair, lambda g: g.wait_for_path(f"/sys/class/net/{NETDEV}", 60))
    if not all(found.values()):
        fail(f"no {NETDEV} within 60 s: {found}")
    for tag, guest in pair.guests.items():
        guest.run(f"ip addr flush dev {NETDEV} && ip addr add {ADDRESSES[tag]}/24 dev {NETDEV} && "
                  f"ip link set {NETDEV} up")
    carrier = f'[ "$(cat /sys/class/net/{NETDEV}/carrier 2>/dev/null)" = 1 ]'
    up = on_both(pair, lambda g: g.wait_until(carrier, 90))
    if not all(up.values()):
        fail(f"no carrier on {NETDEV} within 90 s: {up}")


def ping(guest: Guest, dst: str, size: int | None = None) -> None:
    """Five pings, none lost."""
    argv = ["ping", "-c", "5", "-W", "5", *(["-s", str(size)] if size else []), dst]
    r = guest.run(argv, timeout=90, check=False)
    if r.rc != 0 or " 0% packet loss" not in r.stdout:
        fail(f"{guest.tag}: {' '.join(argv)} lost packets (exit {r.rc}):\n{r.stdout}{r.stderr}")


PORT = 7701
READY = "/tmp/tbv-listener.ready"
BLOB = "/tmp/tbv-blob"

# B: accept one connection, read to EOF; print the byte count and sha256
LISTENER = r"""
import hashlib, socket, sys
addr, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(1)
open(ready, "w").close()
c, _ = s.accept()
h, n = hashlib.sha256(), 0
while chunk := c.recv(65536):
    h.update(chunk)
    n += len(chunk)
print(n, h.hexdigest())
"""

# A: connect (retrying while B's listener comes up), send the file, close
SENDER = r"""
import socket, sys, time
addr, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(path, "rb").read()
deadline = time.monotonic() + 30
while True:
    try:
        c = socket.create_connection((addr, port), timeout=30)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
c.settimeout(None)
c.sendall(data)
c.shutdown(socket.SHUT_WR)
c.close()
"""


def tcp_transfer(pair: Pair, nbytes: int, timeout: float = 480) -> None:
    """`nbytes` of random data from A to a listener on B over TCP (thunderbolt0): length and sha256 match."""
    pair.b.run(["rm", "-f", READY])
    listener = pair.b.spawn(["python3", "-c", LISTENER, ADDRESSES["b"], str(PORT), READY], timeout=timeout + 120)
    try:
        assert pair.b.wait_for_path(READY, 60), "B's listener did not start"
        digest = pair.a.run(f"head -c {nbytes} /dev/urandom > {BLOB} && sha256sum {BLOB}").stdout.split()[0]
        pair.a.run(["python3", "-c", SENDER, ADDRESSES["b"], str(PORT), BLOB], timeout=timeout)
        result = pair.b.wait(listener, timeout=120)
        assert result is not None, "B's listener still running after A sent everything"
        assert result.ok, f"B's listener failed:\n{result.stdout}{result.stderr}"
        got = result.stdout.split()
        assert got == [str(nbytes), digest], f"sent {nbytes} bytes {digest}, B got {got}"
    finally:
        if pair.b.wait(listener, timeout=0) is None:
            pair.b.kill(listener)
        pair.a.run(["rm", "-f", BLOB], check=False)


def check_xdomain_speed(pair: Pair, gbps: int) -> None:
    speeds = on_both(pair, lambda g: sysfs(g, f"{XDOMAIN}/rx_speed"))
    if set(speeds.values()) != {f"{gbps}.0 Gb/s"}:
        fail(f"{XDOMAIN}/rx_speed is {speeds}, the cable is at {gbps} Gb/s")


def restore_full_link(pair: Pair) -> None:
    """Leave the cable plugged and trained at FULL_LINK (re-plugged if it is at anything else)."""
    if pair.relay.link() == (FULL_LINK["gbps"], FULL_LINK["lanes"]):
        return
    if pair.relay.link() is not None:
        pair.relay.unplug()
        wait_xdomain(pair, 30, gone=True)
    pair.relay.plug(**FULL_LINK)
    wait_xdomain(pair, 60)


def plugged_pair(cables: int = 1) -> Iterator[Pair]:
    """The body of a pair fixture: two VMs joined by `cables` cables, their host routers up and
    the first cable plugged (FULL_LINK); after the tests, a failure if either guest's whole
    kernel log has a warning.

    TBV_VM2_KERNEL / TBV_VM2_APPEND: another kernel for both guests (the sanitizer lane's).
    TBV_VM2_IOMMU=1/0: an emulated Intel IOMMU or none; by default only with Debian's kernel
    (the sanitizer kernel is built without the Intel IOMMU driver).
    TBV_VM2_BOOT_TIMEOUT: seconds until both agents said hello (the sanitizer kernel's pair needs
    more: under KASAN, udev's coldplug alone took 100 s of a loaded machine's boot).
    TBV_VM2_UDEV=0: both guests boot without udev (the sanitizer kernel's: its coldplug took
    minutes, and the pair loads every module it needs itself).
    """
    if IN_VM:
        pytest.skip("the two-VM tests run on the host: they boot their own VMs")
    kernel = os.environ.get("TBV_VM2_KERNEL") or None
    p = Pair(kernel=kernel, append=os.environ.get("TBV_VM2_APPEND", "").split() or None,
             iommu=os.environ.get("TBV_VM2_IOMMU", "0" if kernel else "1") == "1", cables=cables,
             boot_timeout=float(os.environ.get("TBV_VM2_BOOT_TIMEOUT") or BOOT_TIMEOUT_S),
             udev=os.environ.get("TBV_VM2_UDEV", "1") != "0")
    problems = p.preflight()
    if problems:
        missing("cannot boot the two-VM pair: " + "; ".join(problems))
    with p:
        on_both(p, lambda g: host_router_up(g, cables))
        p.relay.plug(**FULL_LINK)
        yield p
    bad = [f"{tag}: {line}" for tag, lines in p.final_bad.items() for line in lines]
    if bad:
        pytest.fail("the guests' kernel logs have warnings/errors (whole run):\n" + "\n".join(bad)
                    + "\n" + p.logs(), pytrace=False)
