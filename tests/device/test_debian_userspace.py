"""Debian 12's own rdma-core across the virtual cable, with nothing of ours in the environment.

The module speaks rdma_rxe's user ABI, so the distribution's libibverbs (rdma-core 44 on Debian
12) binds its stock rxe provider to usb4_rdmaN by driver id (docs/rxe-abi.md): no rdma-core
build, no LD_LIBRARY_PATH. The rest of the suite runs the same tools through the cache's rdma-core
59 (`rdma_env`); this file runs what a user of the distribution's packages runs: ibv_devices,
the pingpongs, perftest's write, read and atomic tests, and rping over rdma_cm.
"""

from __future__ import annotations

import subprocess

import pytest

from pairlib import Pair, serve_and_connect
from vmlib import system_env


@pytest.fixture
def pair(shared_pair: Pair) -> Pair:
    """One cable for the file (conftest.py: file_pair, shared_pair): each test leaves it as it was."""
    return shared_pair


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return system_env()


def run_pair(pair: Pair, env: dict[str, str], server: list[str], client: list[str]) -> tuple[str, str]:
    """Server on end 1, client on end 0, both from /usr/bin with the system's libraries."""
    return serve_and_connect(pair.hosts[1], server, pair.hosts[0], client, env)


def test_ibv_devices_lists_both_ends(pair: Pair, env: dict[str, str]) -> None:
    out = subprocess.run(["/usr/bin/ibv_devices"], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert pair.cable.end0.ibdev in out and pair.cable.end1.ibdev in out, out


@pytest.mark.parametrize("tool,args", [
    ("ibv_rc_pingpong", ["-s", "4096", "-n", "20", "-c"]),
    ("ibv_ud_pingpong", ["-s", "1024", "-n", "20", "-c"]),
    ("ibv_srq_pingpong", ["-s", "4096", "-n", "20", "-q", "4"]),
])
def test_pingpong(pair: Pair, env: dict[str, str], tool: str, args: list[str]) -> None:
    srv, cli = run_pair(pair, env,
                        [f"/usr/bin/{tool}", "-d", pair.cable.end1.ibdev, "-g", str(pair.gids[1]), *args],
                        [f"/usr/bin/{tool}", "-d", pair.cable.end0.ibdev, "-g", str(pair.gids[0]), *args,
                         pair.ips[1]])
    assert "iters in" in cli and "iters in" in srv, (srv, cli)


@pytest.mark.parametrize("tool,args,row", [
    ("ib_write_bw", ["-s", "65536", "-n", "20"], "65536"),
    ("ib_read_lat", ["-s", "2", "-n", "20"], "2"),
    ("ib_atomic_bw", ["-A", "FETCH_AND_ADD", "-n", "100"], "8"),
])
def test_perftest(pair: Pair, env: dict[str, str], tool: str, args: list[str], row: str) -> None:
    _, cli = run_pair(pair, env,
                      [f"/usr/bin/{tool}", "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args, "-F"],
                      [f"/usr/bin/{tool}", "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args, "-F",
                       pair.ips[1]])
    # the result table has a row for the message size
    assert any(line.split()[:1] == [row] for line in cli.splitlines()), cli


def test_rping_over_rdma_cm(pair: Pair, env: dict[str, str]) -> None:
    args = ["-a", pair.ips[1], "-C", "10", "-S", "1000", "-v", "-V"]
    srv, cli = run_pair(pair, env, ["/usr/bin/rping", "-s", *args], ["/usr/bin/rping", "-c", *args])
    assert cli.count("ping data: rdma-ping-") == 10, cli  # -V: each one verified
    assert "error" not in (srv + cli).lower(), srv + cli
