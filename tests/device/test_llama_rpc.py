"""llama.cpp's RPC backend across the virtual cable, upgraded to RDMA by its own transport.

Not in `make test-vm`: it needs llama.cpp, built from the llama-cpp-python sdist on PyPI by
scripts/build-llama-rpc.sh (a download of 75 MB and a few minutes of build, cold), so it has its
own target, `make test-llama`, which builds it first and hands its directory over as
TBV_LLAMA_RPC (also kept in build/llama-rpc, for a run by hand).

Upstream's rpc-server (tools/rpc) serves its CPU backend on host B, bound to B's cable address;
tests/device/llama_rpc_check.cpp on host A connects to it through ggml's RPC backend (the client
llama-cli's --rpc uses), sends tensors, has B compute Y = W X + b and reads the results back.
Both link Debian's libibverbs and run with it (no rdma-core 59 in their environment), as on a
Debian machine. The transport in ggml/src/ggml-rpc/transport.cpp starts on TCP and, in the
HELLO exchange, moves the connection to an RC QP on the RDMA device whose GID is the TCP
connection's local address. The test shows:

- from the transport's own log lines, that each side found its own end's usb4_rdma device and
  the RoCE v2 GID of its IPv4 address (`RDMA probed: dev=... gid=N RoCEv2 qpn=Q inline=L`), and
  that both activated the connection towards each other's QP (`RDMA activated: qpn=Q->P
  mtu=2048 rx_depth=24`), with no "RDMA activate failed, staying on TCP";
- from the client, that the server's Y is exact and an 8 MiB blob came back unchanged;
- from the counters, that the data crossed the cable as RDMA: each end's rdma_tx_packets grew
  by at least the blob in 4 KiB packets, while its netdev (the TCP connection) sent well under
  a megabyte.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from pairlib import Pair, hw, kill_and_reap
from vmlib import REPO, missing, system_env

# make test-llama writes the build's directory here (scripts/build-llama-rpc.sh's last line)
LLAMA_RPC_FILE = REPO / "build" / "llama-rpc"
PORT = 50052
BLOB = 8 << 20  # the client's blob, sent and read back (llama_rpc_check.cpp)
BANNER = "transport      : TCP (RDMA auto-negotiate enabled)"  # rpc-server built with GGML_RPC_RDMA
PROBED = re.compile(r"RDMA probed: dev=(\S+) gid=(\d+)( RoCEv[12])? qpn=(\d+) inline=(\d+)")
ACTIVATED = re.compile(r"RDMA activated: qpn=(\d+)->(\d+) mtu=(\d+) rx_depth=(\d+)")


def llama_rpc_bin() -> Path:
    """The build's bin directory (TBV_LLAMA_RPC, else build/llama-rpc), or missing()."""
    where = os.environ.get("TBV_LLAMA_RPC", "")
    if not where and LLAMA_RPC_FILE.is_file():
        where = LLAMA_RPC_FILE.read_text().strip()
    if not where:
        missing("llama.cpp's RPC server is not built (make test-llama builds it with "
                "scripts/build-llama-rpc.sh)")
    for prog in ("rpc-server", "llama_rpc_check"):
        if not os.access(Path(where, "bin", prog), os.X_OK):
            missing(f"{where}/bin/{prog} is missing (make test-llama builds it)")
    return Path(where, "bin")


def netdev_tx_bytes(ns: str, netdev: str) -> int:
    r = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{netdev}/statistics/tx_bytes"],
                       capture_output=True, text=True, check=True, timeout=60)
    return int(r.stdout)


def listening(ns: str) -> bool:
    r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn", f"sport = :{PORT}"],
                       capture_output=True, text=True, timeout=60)
    return bool(r.stdout.strip())


def rdma_lines(log: str) -> tuple[list[tuple[str, int, str, int, int]], list[tuple[int, int, int]]]:
    """The transport's probe lines (device, GID index, GID type, QPN, inline size) and activation
    lines (local QPN, remote QPN, MTU) in one side's log."""
    probed = [(dev, int(gid), kind.strip(), int(qpn), int(inline))
              for dev, gid, kind, qpn, inline in PROBED.findall(log)]
    activated = [(int(a), int(b), int(mtu)) for a, b, mtu, _ in ACTIVATED.findall(log)]
    return probed, activated


def test_llama_rpc_over_rdma(pair: Pair, tmp_path: Path) -> None:
    bin_dir = llama_rpc_bin()
    # Debian's libibverbs, as on a Debian machine; nothing that turns RDMA off or picks for it
    env = {k: v for k, v in system_env().items() if not k.startswith(("GGML_", "LLAMA_"))}
    client_ns, server_ns = pair.hosts
    server_ip = pair.ips[1]
    ends = pair.cable.ends
    rdma_before = [hw(end.ibdev, "rdma_tx_packets") for end in ends]
    tcp_before = [netdev_tx_bytes(ns, end.netdev) for ns, end in zip(pair.hosts, ends)]

    server_log = tmp_path / "rpc-server.log"
    with server_log.open("w") as log:
        # stdbuf: its stdout line by line, so the log is whole even when it has to be killed
        server = subprocess.Popen(["ip", "netns", "exec", server_ns, "stdbuf", "-oL",
                                   str(bin_dir / "rpc-server"), "-H", server_ip, "-p", str(PORT), "-t", "1"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not listening(server_ns):
            assert server.poll() is None, f"rpc-server exited {server.returncode}:\n{server_log.read_text()}"
            assert time.monotonic() < deadline, f"rpc-server not listening:\n{server_log.read_text()}"
            time.sleep(0.5)
        client = subprocess.run(["ip", "netns", "exec", client_ns, str(bin_dir / "llama_rpc_check"),
                                 f"{server_ip}:{PORT}"], env=env, capture_output=True, text=True,
                                timeout=600)
        # the server logs "Client connection closed" (and flushes) when it is done with it
        deadline = time.monotonic() + 60
        while True:
            text = server_log.read_text()
            accepted = text.count("Accepted client connection")
            if accepted and text.count("Client connection closed") >= accepted:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        kill_and_reap(server)
    srv = server_log.read_text()
    cli = client.stdout + client.stderr
    both = f"client:\n{cli}\nserver:\n{srv}"
    assert client.returncode == 0, both
    assert server.returncode == -9, f"rpc-server did not keep serving: {server.returncode}\n{both}"

    # the result: the server's product exact, the blob back unchanged
    assert "llama_rpc_check: OK" in client.stdout, both
    assert re.search(r"Y = W X \+ b, .*: OK \(0 wrong of \d+\)", client.stdout), both
    assert f"blob of {BLOB} bytes there and back: OK (0 wrong words)" in client.stdout, both

    # the transport: one connection, each side on its own end's device and IPv4 GID, activated
    assert BANNER in srv, both
    assert "RDMA activate failed" not in both, both
    assert srv.count("Accepted client connection") == 1, both
    sides = []
    for name, out, end, gid in (("client", cli, ends[0], pair.gids[0]),
                                ("server", srv, ends[1], pair.gids[1])):
        probed, activated = rdma_lines(out)
        assert len(probed) == 1 and len(activated) == 1, f"{name}: {probed} {activated}\n{both}"
        dev, gid_idx, kind, qpn, inline = probed[0]
        assert (dev, gid_idx, kind) == (end.ibdev, gid, "RoCEv2"), f"{name}: {probed[0]}\n{both}"
        assert inline >= 256, f"{name}: {probed[0]}"
        local, remote, mtu = activated[0]
        assert local == qpn and mtu == 2048, f"{name}: {activated[0]}\n{both}"
        sides.append((local, remote))
    assert sides[0] == sides[1][::-1], f"the QPs are not each other's peers: {sides}\n{both}"

    # the data went over RDMA, each way: at least the blob, in packets of up to 4 KiB; the TCP
    # connection carried the HELLO only
    for i, (ns, end) in enumerate(zip(pair.hosts, ends)):
        sent = hw(end.ibdev, "rdma_tx_packets") - rdma_before[i]
        assert sent >= BLOB // 4096, f"{end.ibdev}: {sent} RDMA packets sent"
        tcp = netdev_tx_bytes(ns, end.netdev) - tcp_before[i]
        assert tcp < BLOB // 8, f"{end.netdev}: {tcp} bytes sent over IP"
