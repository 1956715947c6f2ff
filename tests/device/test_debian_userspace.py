"""Debian's own rdma-core across the virtual cable, with nothing of ours in the environment.

The module speaks rdma_rxe's user ABI, so a distribution's libibverbs binds its stock rxe
provider to usb4_rdmaN by driver id (docs/rxe-abi.md): no rdma-core build, no LD_LIBRARY_PATH.
The rest of the suite runs the same tools through the cache's rdma-core 59 (`rdma_env`); this
file runs what a user of the distribution's packages runs: ibv_devices, the pingpongs,
perftest's write, read and atomic tests, and rping over rdma_cm. Each test runs once per
userspace:

- bookworm: Debian 12's own packages on this system (rdma-core 44);
- trixie: Debian 13's (rdma-core 56), inside the trixie chroot that scripts/kernel-chroot.sh
  makes for the kernel headers (`make setup`), with this system's /dev and /sys;
- sid: the newest rdma-core the Debian registry serves, in the sid chroot (`make
  test-userspace-sid`, not in `make test`: sid moves). Chosen by TBV_USERSPACES (default
  "bookworm trixie").
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from pairlib import Pair, serve_and_connect
from vmlib import missing, system_env, tbv_setting

USERSPACES = os.environ.get("TBV_USERSPACES", "bookworm trixie").split()
# The oldest rdma-core each suite may bring: a chroot that fell back to another suite's
# packages, or the host's, would show an older one.
MIN_RDMA_CORE = {"bookworm": 44, "trixie": 56, "sid": 60}
# Run inside a chroot, in a private mount namespace: this system's /dev (the uverbs and rdma_cm
# devices) and /sys (libibverbs finds the devices there), a /proc of its own.
IN_CHROOT = ('mount --rbind /dev "$0/dev" && mount --rbind /sys "$0/sys" && '
             'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"')


class Userspace:
    """How to run a program of one Debian suite's userspace: a command prefix (empty: this system)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.prefix: list[str] = []
        if name != "bookworm":
            root = Path(tbv_setting("TBV_CACHE")) / "chroot" / name
            if not (root / "usr/bin/ib_write_bw").is_file():
                missing(f"no {name} userspace in {root} (scripts/kernel-chroot.sh {name})")
            self.prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_CHROOT, str(root)]

    def cmd(self, tool: str, *args: str) -> list[str]:
        return [*self.prefix, f"/usr/bin/{tool}", *args]


@pytest.fixture(scope="module", params=USERSPACES)
def userspace(request: pytest.FixtureRequest) -> Userspace:
    us = Userspace(request.param)
    out = subprocess.run([*us.prefix, "/usr/bin/dpkg-query", "-W", "-f", "${Version}", "libibverbs1"],
                         env=system_env(), capture_output=True, text=True, timeout=60)
    version = re.match(r"(\d+)\.", out.stdout)
    assert version, f"{us.name}: no libibverbs1 package: {out.stdout}{out.stderr}"
    assert int(version.group(1)) >= MIN_RDMA_CORE.get(us.name, 0), f"{us.name}: rdma-core {out.stdout}"
    print(f"{us.name}: rdma-core {out.stdout}")
    return us


@pytest.fixture
def pair(shared_pair: Pair) -> Pair:
    """One cable for the file (conftest.py: file_pair, shared_pair): each test leaves it as it was."""
    return shared_pair


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return system_env()


def run_pair(pair: Pair, env: dict[str, str], server: list[str], client: list[str]) -> tuple[str, str]:
    """Server on end 1, client on end 0, both with the userspace's own libraries."""
    return serve_and_connect(pair.hosts[1], server, pair.hosts[0], client, env)


def test_ibv_devices_lists_both_ends(pair: Pair, env: dict[str, str], userspace: Userspace) -> None:
    out = subprocess.run(userspace.cmd("ibv_devices"), env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert pair.cable.end0.ibdev in out and pair.cable.end1.ibdev in out, out


@pytest.mark.parametrize("tool,args", [
    ("ibv_rc_pingpong", ["-s", "4096", "-n", "20", "-c"]),
    ("ibv_ud_pingpong", ["-s", "1024", "-n", "20", "-c"]),
    ("ibv_srq_pingpong", ["-s", "4096", "-n", "20", "-q", "4"]),
])
def test_pingpong(pair: Pair, env: dict[str, str], userspace: Userspace, tool: str, args: list[str]) -> None:
    srv, cli = run_pair(pair, env,
                        userspace.cmd(tool, "-d", pair.cable.end1.ibdev, "-g", str(pair.gids[1]), *args),
                        userspace.cmd(tool, "-d", pair.cable.end0.ibdev, "-g", str(pair.gids[0]), *args,
                                      pair.ips[1]))
    assert "iters in" in cli and "iters in" in srv, (srv, cli)


@pytest.mark.parametrize("tool,args,row", [
    ("ib_write_bw", ["-s", "65536", "-n", "20"], "65536"),
    ("ib_read_lat", ["-s", "2", "-n", "20"], "2"),
    ("ib_atomic_bw", ["-A", "FETCH_AND_ADD", "-n", "100"], "8"),
])
def test_perftest(pair: Pair, env: dict[str, str], userspace: Userspace, tool: str, args: list[str],
                  row: str) -> None:
    _, cli = run_pair(pair, env,
                      userspace.cmd(tool, "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args, "-F"),
                      userspace.cmd(tool, "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args, "-F",
                                    pair.ips[1]))
    # the result table has a row for the message size
    assert any(line.split()[:1] == [row] for line in cli.splitlines()), cli


def test_rping_over_rdma_cm(pair: Pair, env: dict[str, str], userspace: Userspace) -> None:
    args = ["-a", pair.ips[1], "-C", "10", "-S", "1000", "-v", "-V"]
    srv, cli = run_pair(pair, env, userspace.cmd("rping", "-s", *args), userspace.cmd("rping", "-c", *args))
    assert cli.count("ping data: rdma-ping-") == 10, cli  # -V: each one verified
    assert "error" not in (srv + cli).lower(), srv + cli
