"""Two ends of a virtual cable as two hosts: the helpers the verbs, fault and hostile-peer tests share.

The ends' counters (`hw`, `cable_stats`), the split into two network namespaces (`split_hosts`)
and `Pair`, a server/client runner across them. The `pair` fixture is in conftest.py.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from roce import gid_index
from vmlib import Cable, NetnsFactory, task_stack


def hw(ibdev: str, counter: str) -> int:
    return int(Path("/sys/class/infiniband", ibdev, "ports/1/hw_counters", counter).read_text())


def cable_stats(name: str) -> dict[str, int]:
    text = Path("/sys/kernel/config/tbverbs/vcable", name, "stats").read_text()
    return {k: int(v) for k, v in (line.split() for line in text.splitlines())}


def kill_and_reap(proc: subprocess.Popen) -> str:
    """SIGKILL a tool still running and return its output. One that does not die is stuck in the
    kernel (uninterruptible): fail with its kernel stack rather than wait for ever."""
    if proc.poll() is None:
        proc.kill()
    try:
        return proc.communicate(timeout=30)[0] or ""
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{proc.args} survives SIGKILL: stuck in the kernel at\n"
                             f"{task_stack(proc.pid)}") from None


def split_hosts(cable: Cable, netns: NetnsFactory, subnet: str = "10.66.0") -> tuple[str, str]:
    hosts = []
    for i, end in enumerate(cable.ends, start=1):
        ns = netns.add()
        subprocess.run(["ip", "link", "set", end.netdev, "netns", ns], check=True)
        netns.exec(ns, "ip", "addr", "add", f"{subnet}.{i}/24", "dev", end.netdev)
        netns.exec(ns, "ip", "addr", "add", f"fd66::{i}/64", "dev", end.netdev, "nodad")
        netns.exec(ns, "ip", "link", "set", end.netdev, "up")
        hosts.append(ns)
    return hosts[0], hosts[1]


TOOLS = Path(__file__).resolve().parents[2] / "build" / "tools"
OBJECT_COUNTERS = ("objects_qp", "objects_cq", "objects_mr", "objects_pd", "objects_ah",
                   "objects_srq")


def objects(ibdev: str) -> dict[str, int]:
    return {c: hw(ibdev, c) for c in OBJECT_COUNTERS}


# What a client prints when its server does not listen yet: TCP refused, or (rdma_cm: perftest -R,
# rping) its connect REJECTED by the CM for want of a listener (event 8). Only such a failure is
# retried. One pattern for Python's re (MULTILINE) and grep -E.
NOT_LISTENING = (r"Couldn't connect|Unable to connect|Connection refused|Unexpected CM event.* 8$"
                 r"|RDMA_CM_EVENT_REJECTED, error 8")


def serve_and_connect(server_ns: str, server: list[str], client_ns: str, client: list[str],
                      env: dict[str, str], timeout: float = 120) -> tuple[str, str]:
    """A server tool in one namespace, its client in another (or the same), the client retried
    until the server listens; both must succeed. Returns their outputs."""
    srv = subprocess.Popen(["ip", "netns", "exec", server_ns, *server], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            cli = subprocess.run(["ip", "netns", "exec", client_ns, *client], env=env,
                                 capture_output=True, text=True, timeout=timeout)
            out = cli.stdout + cli.stderr
            refused = re.search(NOT_LISTENING, out, re.M)
            if not refused or srv.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        try:
            # a failed client leaves the server waiting: give it a moment, then report the client
            srv_out, _ = srv.communicate(timeout=timeout if cli.returncode == 0 else 10)
        except subprocess.TimeoutExpired:
            srv_out = f"(still running after the client ended; killed)\n{kill_and_reap(srv)}"
    finally:
        kill_and_reap(srv)
    assert cli.returncode == 0, f"client {' '.join(client)} failed:\n{out}\nserver:\n{srv_out}"
    assert srv.returncode == 0, f"server {' '.join(server)} failed:\n{srv_out}\nclient:\n{out}"
    return srv_out, out


class Pair:
    """A cable split into two hosts with IPv4 addresses, ready for server/client tools."""

    def __init__(self, cable: Cable, netns: NetnsFactory, env: dict[str, str]) -> None:
        self.cable = cable
        self.env = env
        self.hosts = split_hosts(cable, netns)
        self.ips = ("10.66.0.1", "10.66.0.2")
        self.gids = (gid_index(cable.end0.ibdev, self.ips[0]),
                     gid_index(cable.end1.ibdev, self.ips[1]))
        self.resolve_neighbours()

    def resolve_neighbours(self) -> None:
        """Both ends learn each other's MAC before a test connects anything.

        Connecting a RoCE QP (and rdma_cm's address resolution) resolves the peer's MAC over the
        link's IP netdev and gives up after a second or two; on a loaded machine, or a lossy
        link, that first ARP exchange can miss it and fail the connection, not what the test is
        about. Real applications retry; the test tools do not."""
        for host, peer_ip in ((self.hosts[0], self.ips[1]), (self.hosts[1], self.ips[0])):
            subprocess.run(["ip", "netns", "exec", host, "ping", "-c", "1", "-W", "10", peer_ip],
                           check=True, capture_output=True, timeout=60)

    def run(self, server: list[str], client: list[str], timeout: float = 120) -> tuple[str, str]:
        """Server on end 1, client on end 0 (serve_and_connect)."""
        return serve_and_connect(self.hosts[1], server, self.hosts[0], client, self.env, timeout)
