#!/usr/bin/python3
"""Runs INSIDE the VM booted on the Debian root our packages were installed into
(tests/packaging/test_install.py), with that root's own python3, udev and tools.

The VM has an emulated USB4 host controller (usb4-nhi, no cable on it): udev loads
thunderbolt.ko for it, and tbverbs-dkms's udev rule loads thunderbolt_ibverbs once its
Thunderbolt domain appears, as on a real USB4 host. Then what a user does, with a virtual cable
instead of a real one: plug it, and find the devices with their addresses and IPv4 GIDs with no
other step (tbverbs-tools's udev rule gives them). Then unplug and unload. Prints
`RESULT <json>` last; exits 1 with the reason on a failure.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

MODULE = "thunderbolt_ibverbs"  # loaded by udev, never by this script
# Modules a virtual cable needs besides MODULE: the virtual cable's own (a test backend, installed
# by DKMS next to MODULE, never loaded by udev), loaded by this script and unloaded before MODULE.
VCABLE_MODULES: list[str] = ["tbverbs_vcable"]
CABLE = "pkgtest"
WAIT_S = 90  # TCG: udev, the RUN program and the GIDs can take a while under load
SYS_NET = Path("/sys/class/net")
SYS_IB = Path("/sys/class/infiniband")


class Failed(Exception):
    pass


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise Failed(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def addresses(netdev: str) -> tuple[list[ipaddress.IPv4Interface], list[ipaddress.IPv6Interface]]:
    info = json.loads(run("ip", "-j", "addr", "show", "dev", netdev).stdout)[0]
    v4 = [ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}") for a in info.get("addr_info", [])
          if a["family"] == "inet"]
    v6 = [ipaddress.IPv6Interface(f"{a['local']}/{a['prefixlen']}") for a in info.get("addr_info", [])
          if a["family"] == "inet6" and a.get("scope") == "link" and not a.get("tentative")]
    return v4, v6


def ipv4_with(netdev: str, want: ipaddress.IPv4Interface) -> list[ipaddress.IPv4Interface] | None:
    """The netdev's IPv4 addresses once `want` is among them."""
    v4 = addresses(netdev)[0]
    return v4 if want in v4 else None


def roce_v2_gids(ibdev: str) -> list[str]:
    port = SYS_IB / ibdev / "ports" / "1"
    out = []
    for entry in sorted((port / "gids").iterdir(), key=lambda p: int(p.name)):
        try:
            gid = entry.read_text().strip()
            gtype = (port / "gid_attrs" / "types" / entry.name).read_text().strip()
        except OSError:  # unused entries read EINVAL
            continue
        if gid.replace(":", "").strip("0") and gtype == "RoCE v2":
            out.append(gid)
    return out


def ipv4_of_gid(gid: str) -> ipaddress.IPv4Address | None:
    """::ffff:a.b.c.d as sysfs prints it (0000:...:ffff:xxxx:xxxx) -> a.b.c.d."""
    addr = ipaddress.IPv6Address(gid)
    return addr.ipv4_mapped


def wait_for(what: str, probe):
    deadline = time.monotonic() + WAIT_S
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failed(f"after {WAIT_S} s: {what}")
        time.sleep(0.5)


def check() -> dict[str, object]:
    kver = os.uname().release
    status = run("dkms", "status").stdout
    if not re.search(rf"^tbverbs/[^,]+, {re.escape(kver)}, [^:]+: installed", status, re.M):
        raise Failed(f"dkms status shows no tbverbs installed for the running kernel {kver}:\n{status}")
    domains = sorted(p.name for p in Path("/sys/bus/thunderbolt/devices").glob("domain*"))
    if not domains:
        raise Failed("no Thunderbolt domain: the emulated USB4 host controller did not come up")
    wait_for(f"{MODULE} was not loaded by udev for {domains}", lambda: Path(f"/sys/module/{MODULE}").is_dir())
    path = run("modinfo", "-n", MODULE).stdout.strip()
    if "/updates/dkms/" not in path:
        raise Failed(f"modprobe found {MODULE} at {path}, not DKMS's")
    for mod in VCABLE_MODULES:
        run("modprobe", mod)

    cable = json.loads(run("tbverbs", "vcable", "add", "--name", CABLE, "--json").stdout)
    ends = [cable["end0"], cable["end1"]]
    predicted = {}
    for end in ends:
        p = json.loads(run("tbverbs", "link-local", "--dry-run", "--json", end["netdev"]).stdout)
        predicted[end["netdev"]] = p

    result: dict[str, object] = {"kernel": kver, "module": path, "autoloaded_for": domains,
                                 "dkms_status": status.strip(), "ends": []}
    for end in ends:
        netdev, ibdev = end["netdev"], end["ibdev"]
        want = ipaddress.IPv4Interface(predicted[netdev]["address"])
        v4 = wait_for(f"{netdev} has no address {want} (udev rule)",
                      lambda: ipv4_with(netdev, want))
        v6 = wait_for(f"{netdev} has no IPv6 link-local address", lambda: addresses(netdev)[1])
        gids = wait_for(f"{ibdev} has no RoCE v2 GID of {want.ip}",
                        lambda: [g for g in roce_v2_gids(ibdev) if ipv4_of_gid(g) == want.ip])
        result["ends"].append({"netdev": netdev, "ibdev": ibdev, "uuid": end["uuid"], "ipv4": [str(a) for a in v4],
                               "ipv6_link_local": [str(a) for a in v6], "ipv4_gids": gids,
                               "all_roce_v2_gids": roce_v2_gids(ibdev), "predicted": predicted[netdev]})
    run("tbverbs", "vcable", "del", CABLE)
    for mod in [*reversed(VCABLE_MODULES), MODULE]:
        run("rmmod", mod)
    return result


def main() -> int:
    try:
        result = check()
    except Failed as e:
        print(f"FAILED: {e}", flush=True)
        return 1
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
