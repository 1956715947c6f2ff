"""Open MPI over UCX across the virtual cable: an MPI_Allreduce between the cable's two hosts.

Each end of the cable is a host of its own: a network namespace with its own hostname. mpirun
runs on host A and starts host B's daemon as it would over ssh (tests/device/netns_rsh plays ssh);
the daemon reaches mpirun over IP on the cable, and the ranks (one per host) then talk through
UCX's rc_verbs on their own end's RDMA device. Debian's Open MPI 4.1.4 and UCX 1.13.1, set up
as docs/recipes.md says:

- `--mca pml ucx`: Open MPI only prefers UCX by itself for devices whose driver matches
  `pml_ucx_devices` (mlx*); forcing it also means a failure to use UCX fails the job instead of
  falling back to TCP;
- `UCX_TLS=rc_verbs,ud_verbs,self`: rc_verbs cannot wire itself up; UCX needs a transport that
  connects to an interface address for that (ud_verbs). With `rc_verbs,self` alone, UCX fails
  with "no auxiliary transport" and Open MPI reports "ucp_ep_create ... Destination is
  unreachable" (the first failure of issue 26);
- `UCX_UD_VERBS_ETH_DGID_CHECK=n` with IPv4 GIDs: UCX checks the destination GID of every UD
  packet it receives on RoCE and reads the packet's IPv4-or-IPv6 type from the completion's sl
  field, where mlx5 hardware puts it; other devices (rxe, ours) report sl 0, so UCX takes the
  IPv4 header as an IPv6 GRH, drops every UD packet and fails with "UD endpoint ... unhandled
  timeout error" (the second). IPv6 GIDs pass the check: the second case runs with the check on.

UCX's default timeouts were enough under TCG. The test shows UCX used usb4_rdma: each rank's
UCX (UCX_LOG_LEVEL=info) reports its endpoint to the other rank on rc_verbs over its own
device, and the devices' RDMA packet counters carry the allreduce's megabytes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from roce import gid_index
from pairlib import TOOLS, Pair, hw
from vmlib import missing

RSH = Path(__file__).resolve().parent / "netns_rsh"
ALLREDUCE = TOOLS / "mpi_allreduce"
ITERATIONS = 2
LARGEST = 4 << 20  # the program's largest allreduce, bytes


def mpirun_cmd(pair: Pair, ucx: dict[str, str], hosts: tuple[str, str]) -> list[str]:
    """mpirun on host A (its namespace, its hostname), one rank per host, each on its device."""
    contexts: list[str] = []
    for end, ip, gid_ip in zip(pair.cable.ends, pair.ips, hosts):
        env = dict(ucx, UCX_NET_DEVICES=f"{end.ibdev}:1")
        if gid_ip:
            env["UCX_IB_GID_INDEX"] = str(gid_index(end.ibdev, gid_ip))
        contexts += [":"] if contexts else []
        contexts += ["-np", "1", "-H", ip, "env", *(f"{k}={v}" for k, v in env.items()),
                     str(ALLREDUCE), str(ITERATIONS)]
    mpirun = ["mpirun", "--mca", "plm_rsh_agent", str(RSH), "--mca", "pml", "ucx",
              "--mca", "btl", "self", *contexts]
    return ["ip", "netns", "exec", pair.hosts[0], "unshare", "--uts", "sh", "-c",
            f'hostname {pair.hosts[0]} && exec "$@"', "sh", *mpirun]


def run_allreduce(pair: Pair, tmp_path: Path, ucx: dict[str, str],
                  gid_ips: tuple[str, str] = ("", "")) -> subprocess.CompletedProcess[str]:
    for prog in ("mpirun", "ucx_info"):
        if not shutil.which(prog):
            missing(f"{prog} is not installed (make setup: openmpi-bin, ucx-utils)")
    if not ALLREDUCE.exists():
        missing(f"{ALLREDUCE} is not built (make tools, with libopenmpi-dev installed)")
    for host in pair.hosts:  # mpirun and each host's daemon talk to their ranks over loopback
        subprocess.run(["ip", "netns", "exec", host, "ip", "link", "set", "lo", "up"], check=True)
    env = dict(pair.env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TMPDIR=str(tmp_path),  # Open MPI's session directory: sockets
               TBV_NETNS_HOSTS=" ".join(f"{ip}={ns}" for ip, ns in zip(pair.ips, pair.hosts)))
    return subprocess.run(mpirun_cmd(pair, ucx, gid_ips), env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("gids", ["ipv4", "ipv6"])
def test_mpi_allreduce_over_ucx(pair: Pair, tmp_path: Path, gids: str) -> None:
    ucx = {"UCX_TLS": "rc_verbs,ud_verbs,self", "UCX_LOG_LEVEL": "info"}
    if gids == "ipv4":
        ucx["UCX_UD_VERBS_ETH_DGID_CHECK"] = "n"
        gid_ips = ("", "")  # UCX's own choice: RoCE v2 with IPv4 first
    else:
        gid_ips = ("fd66::1", "fd66::2")  # the addresses split_hosts() gave the netdevs
    before = [hw(end.ibdev, "rdma_tx_packets") for end in pair.cable.ends]
    r = run_allreduce(pair, tmp_path, ucx, gid_ips)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "allreduce: OK (0 wrong elements)" in out, out
    assert out.count(f"allreduce: 2 ranks, {ITERATIONS} x ") == 4 and "WRONG" not in out, out

    # UCX's report of each rank's endpoints: the one to the other host is rc_verbs on the rank's
    # own device (the ep to itself is self/memory0); nothing went over TCP or shared memory
    eps = re.findall(r"\[(\S+?):\d+\s*:\w+\]\s+ucp_worker\.c:\d+\s+UCX\s+INFO\s+ep_cfg\[\d+\]: "
                     r"tag\(([^)]*)\)", out)
    for host, end in zip(pair.hosts, pair.cable.ends):
        lanes = [tls for h, tls in eps if h == host]
        assert f"rc_verbs/{end.ibdev}:1" in lanes, f"{host}: {lanes}\n{out}"
    assert eps and not any(re.search(r"\b(tcp|posix|sysv|cma)/", tls) for _, tls in eps), eps
    # the data crossed the cable as RDMA: at least the largest vector, each way, each iteration
    for end, n in zip(pair.cable.ends, before):
        sent = hw(end.ibdev, "rdma_tx_packets") - n
        assert sent >= ITERATIONS * LARGEST // 4096, f"{end.ibdev}: {sent} RDMA packets sent"


# Outside CI's budget: it proves the recipe's settings are needed, not that the recipe works.
@pytest.mark.beyond_ci
@pytest.mark.parametrize("case", ["rc_verbs_alone", "ipv4_dgid_check"])
def test_ucx_settings_the_recipe_needs(pair: Pair, tmp_path: Path, case: str) -> None:
    """Without either setting the job fails, with the errors docs/recipes.md names."""
    if case == "rc_verbs_alone":
        ucx = {"UCX_TLS": "rc_verbs,self"}
        errors = ("no auxiliary transport", "Destination is unreachable")
    else:  # UCX's check left on: every UD packet dropped, the peer declared dead (after 5 s)
        ucx = {"UCX_TLS": "rc_verbs,ud_verbs,self", "UCX_UD_VERBS_TIMEOUT": "5s"}
        errors = ("unhandled timeout error",)
    r = run_allreduce(pair, tmp_path, ucx)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "allreduce: OK" not in out, out
    for error in errors:
        assert error in out, out
