"""Our module on the two guests of tests/usb4: loaded, its devices on a cable brought up, a
client/server tool across them, the cable pulled and plugged. Shared by the two-VM tests
(test_usb4_backend.py, test_usb4_unplug.py, test_usb4_failslab.py) and tests/suspend.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from pair import Guest, Pair, nhi_profile_from_env
from pairlib import NOT_LISTENING
from vm2lib import fail, on_both, wait_xdomain
from vmlib import rdma_environment, tbv_setting

REPO = Path(__file__).resolve().parents[2]
KO = Path(os.environ.get("TBV_MODULE_KO") or REPO / "kernel" / "thunderbolt_ibverbs.ko")
# The test build of the same module (kernel/Kbuild's TBV_TEST_HOOKS: `make module-hooks`), for
# the tests that hold a race's window open; the product module has no such hook.
HOOKS_KO = Path(os.environ.get("TBV_MODULE_KO_HOOKS") or REPO / "build" / "kmod-hooks" / "kernel" / "thunderbolt_ibverbs.ko")
MODNAME = "thunderbolt_ibverbs"
# The usb4 backend is in the main module: no configfs, no virtual cable module (tbverbs_vcable).
DEPS = ("thunderbolt", "ib_core", "ib_uverbs")
VCABLE_MODNAME = "tbverbs_vcable"
IPS = {"a": "10.78.0.1", "b": "10.78.0.2"}  # on cable 0's netdev; cable k's are 10.78.k.x
RDMA_PREFIX = Path(tbv_setting("TBV_RDMA_PREFIX"))

# Run inside a guest (which shares our files): prints the RoCE v2 GID index of an address.
ROCE = REPO / "tests" / "lib" / "roce.py"


# The distribution's own rdma-core and perftest (Debian 12: rdma-core 44), with nothing of the
# cache's rdma-core 59 in the environment: what a user who installed only our module runs.
SYSTEM_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_LIBRARY_PATH": "", "PYTHONPATH": ""}


def rdma_env() -> dict[str, str]:
    """PATH, LD_LIBRARY_PATH, PYTHONPATH for the cache's rdma-core 59 (the guests share the host's files)."""
    return rdma_environment(RDMA_PREFIX, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


class Host:
    """One guest with our module loaded: the ib device, netdev, address and GID index of one cable's link."""

    def __init__(self, guest: Guest, cable: int = 0) -> None:
        self.guest = guest
        self.cable = cable
        self.ip = IPS[guest.tag].replace(".0.", f".{cable}.", 1)
        self.ibdev = ""
        self.netdev = ""
        self.gid = -1

    def run(self, cmd: list[str] | str, **kw: object):  # noqa: ANN201 (pair.RunResult)
        return self.guest.run(cmd, env=rdma_env(), **kw)


# Zero-copy TX (split packets, off by default) only on the lenient emulated NHI: its payload
# frames are told apart by PDFs 3..15, which a controller that cuts frames into transport
# packets by the RX masks (the strict profiles, docs/emulator.md) cannot deliver whole.
ZERO_COPY = nhi_profile_from_env().split(",")[0] == "lenient"


def load_module(guest: Guest) -> None:
    guest.run(["modprobe", "-a", *DEPS])
    # zero-copy TX on where it can work: the NHI then reads the MR's own pages, each mapped
    # for it at send, and the emulated IOMMU faults on any address that is not
    guest.run(["insmod", str(KO), *(["zero_copy=Y"] if ZERO_COPY else [])])


def unload_module(guest: Guest) -> bool:
    """rmmod, retried for 5 s (a tool's last close may still hold the module); True once it is out."""
    return guest.run(f"for i in $(seq 25); do rmmod {MODNAME} && exit 0; sleep 0.2; done; exit 1",
                     check=False).ok


# In a guest: "CLASS_DIR_ENTRY SERVICE" for each of our devices of a class (infiniband, net); the
# service device (k-1.N) is the link's parent, so k is the cable (thunderbolt domain) it is on.
BY_SERVICE = ('(for d in /sys/class/{cls}/{prefix}*; do [ -e "$d/device" ] && '
              'echo "${{d##*/}} $(basename "$(readlink -f "$d/device")")"; done; true)')


def devices_on(guest: Guest, cls: str, prefix: str) -> dict[int, str]:
    """Our devices of a class by the cable each one's link runs over."""
    out = guest.run(BY_SERVICE.format(cls=cls, prefix=prefix)).stdout
    # a device going away while listed may leave a line without its service: not on a cable
    found = (re.fullmatch(r"(\S+) (\d+)-1\.\d+", line.strip()) for line in out.splitlines())
    return {int(m.group(2)): m.group(1) for m in found if m}


def on_cable(cable: int) -> str:
    """Shell: true while a guest has a usb4_rdma device on `cable`."""
    return f"{BY_SERVICE.format(cls='infiniband', prefix='usb4_rdma')} | grep -q ' {cable}-1\\.'"


def bring_up(guest: Guest, cable: int = 0) -> Host:
    """Wait for our device on `cable` of a guest, address its netdev, find the GID."""
    host = Host(guest, cable)
    if not guest.wait_until(on_cable(cable), 120):
        fail(f"{guest.tag}: no usb4_rdma device on cable {cable} 120 s after loading the module (no parameters)"
             "\n" + "\n".join(guest.kmsg_since(0)[-40:]))
    host.ibdev = devices_on(guest, "infiniband", "usb4_rdma")[cable]
    host.netdev = devices_on(guest, "net", "usb4_net").get(cable, "")
    assert host.netdev.removeprefix("usb4_net") == host.ibdev.removeprefix("usb4_rdma"), \
        f"{guest.tag}: cable {cable}'s ib device {host.ibdev} and netdev {host.netdev or '(none)'} do not pair"
    guest.run(f"ip addr add {host.ip}/24 dev {host.netdev} && ip link set {host.netdev} up")
    host.gid = int(guest.run(["python3", str(ROCE), host.ibdev, host.ip]).stdout.strip())
    return host


def rail_packets(host: Host) -> list[int]:
    """RDMA packets each of the host's rails received (hw counters railN_rdma_rx_packets, N = 0..3)."""
    base = f"/sys/class/infiniband/{host.ibdev}/ports/1/hw_counters"
    out = host.run(f"cat {' '.join(f'{base}/rail{n}_rdma_rx_packets' for n in range(4))}").stdout
    return [int(v) for v in out.split()]


def link_rails(host: Host, timeout: float = 30) -> int:
    """The rails of the host's link, as its last `up to peer ...: N rail(s)` line says (logged just
    after the device registers: waited for)."""
    deadline = time.monotonic() + timeout
    pattern = re.compile(rf": up to peer \S+: (\d+) rail\(s\), .* {host.ibdev} and {host.netdev}$")
    while True:
        found = [int(m.group(1)) for line in host.guest.kmsg_since(0) if (m := pattern.search(line))]
        if found:
            return found[-1]
        if time.monotonic() > deadline:
            fail(f"{host.guest.tag}: no 'up to peer' line for {host.ibdev} in the kernel log")
        time.sleep(1)


# In a guest, with the repo's tests/lib on the path: kmemleak's records naming our module.
KMEMLEAK = """
import sys
sys.path.insert(0, "tests/lib")
from vmlib import kmemleak_available, kmemleak_clear, kmemleak_scan, leaks_of
if not kmemleak_available():
    sys.exit(0)
if sys.argv[1] == "clear":
    kmemleak_clear()
else:
    print("\\n".join(leaks_of(kmemleak_scan(), "[thunderbolt_ibverbs]", "tbv_")))
"""


def kmemleak(guest: Guest, op: str) -> str:
    """On a kmemleak kernel (the sanitizer lane's): "clear" what is known, or "scan" for our leaks."""
    return guest.run(["python3", "-c", KMEMLEAK, op], cwd=str(REPO), timeout=300).stdout.strip()


def retried(client_cmd: str, unless: str | None = None) -> str:
    """Shell: run a client until it connects, at most 30 times a second apart: again only while
    its output says the server on the other guest does not listen yet (NOT_LISTENING), never
    again once file `unless` exists. Prints the last attempt's output alone (stdout and stderr
    together): a refused attempt's words are not the tool's errors (rping's "connect error")."""
    stop = f"[ -e {unless} ] && break; " if unless else ""
    return (f"t=$(mktemp); trap 'rm -f $t' EXIT; for i in $(seq 30); do "
            f"( {client_cmd} ) >$t 2>&1 && {{ cat $t; exit 0; }}; "
            f"grep -qE {shlex.quote(NOT_LISTENING)} $t || break; {stop}sleep 1; done; cat $t; exit 1")


def client_server(hosts: dict[str, Host], tool: list[str], timeout: float = 300,
                  while_running: Callable[[int], None] | None = None,
                  env: dict[str, str] | None = None) -> tuple[str, str]:
    """`tool` as server on B and as client on A (retried until B listens); both outputs.
    `while_running(client)` is called once both are started, before waiting for them.
    `env`: the cache's rdma-core 59 unless given (SYSTEM_ENV: the distribution's)."""
    a, b = hosts["a"], hosts["b"]
    gid = "-x" if Path(tool[0]).name.startswith("ib_") else "-g"  # perftest's -g is multicast
    return server_and_client(hosts, [*tool, "-d", b.ibdev, gid, str(b.gid)],
                             [*tool, "-d", a.ibdev, gid, str(a.gid), b.ip], timeout, while_running, env)


def server_and_client(hosts: dict[str, Host], server_cmd: list[str], client_cmd: list[str],
                      timeout: float = 300, while_running: Callable[[int], None] | None = None,
                      env: dict[str, str] | None = None) -> tuple[str, str]:
    """`server_cmd` on B, then `client_cmd` on A (retried until B listens); both must succeed.
    Returns the client's output and the server's."""
    a, b = hosts["a"], hosts["b"]
    env = rdma_env() if env is None else env
    server = b.guest.spawn(server_cmd, timeout=timeout, env=env)
    client = a.guest.spawn(retried(shlex.join(client_cmd)), timeout=timeout, env=env)
    try:
        if while_running:
            while_running(client)
        cli = a.guest.wait(client, timeout=timeout)
        result = b.guest.wait(server, timeout=60)
        assert cli is not None, f"client still running after {timeout:g}s"
        assert cli.ok, f"client failed:\n{cli.stdout}{cli.stderr}"
        assert result is not None and result.ok, f"server failed: {result}"
        return cli.stdout + cli.stderr, result.stdout + result.stderr
    finally:
        for guest, handle in ((a.guest, client), (b.guest, server)):
            if guest.wait(handle, timeout=0) is None:
                guest.kill(handle)


def check(host: Host) -> tuple[int, str]:
    """`tbverbs check` in the guest: exit status and output."""
    r = host.run(["python3", str(REPO / "cli" / "tbverbs"), "check"], check=False)
    return r.rc, r.stdout + r.stderr


def pull_and_plug(pair: Pair, **link: int) -> None:
    """Pull cable 0, see both hosts drop their devices, plug it in as `link`."""
    pair.relay.unplug()
    wait_cable_devices(pair, 0, gone=True, timeout=60)
    pair.relay.plug(**link)


def replug(pair: Pair, hosts: dict[str, Host], **link: int) -> None:
    """Pull the cable, see both hosts drop their devices, plug it in as `link`, bring them up again."""
    pull_and_plug(pair, **link)
    wait_xdomain(pair, 60)
    hosts.update(on_both(pair, bring_up))


def wait_cable_devices(pair: Pair, cable: int, gone: bool, timeout: float) -> None:
    """Both guests have (or, gone=True, no longer have) a usb4_rdma device on `cable`."""
    present = on_cable(cable)
    seen = on_both(pair, lambda g: g.wait_until(f"! {present}" if gone else present, timeout))
    late = [tag for tag, ok in seen.items() if not ok]
    if late:
        fail(f"cable {cable}'s usb4_rdma devices {'still there' if gone else 'missing'} after {timeout:g}s "
             f"on {', '.join(late)}")
