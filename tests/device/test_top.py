"""`tbverbs top`: what a device carries, told apart as RDMA and IP, against what the traffic's own
tools sent (docs/usage.md, "Link statistics").

top runs the whole time, one JSON sample a second: its rates, times their intervals, add up to
the bytes it saw go out (a CLI that starts slowly under a loaded TCG guest cannot miss the
window this way)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable

from pairlib import Pair
from vmlib import CLI, NetnsFactory, VcableFactory

PORT = 7788
TCP_BYTES = 64 << 20
SINK = ("import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('0.0.0.0', {PORT})); s.listen(1); c, _ = s.accept(); n = 0\n"
        "while (b := c.recv(1 << 20)): n += len(b)\nprint(n)")
SOURCE = ("import socket, sys; c = socket.create_connection((sys.argv[1], %d)); b = bytes(1 << 20)\n"
          "for _ in range(%d): c.sendall(b)\nc.close()") % (PORT, TCP_BYTES >> 20)


def seen_by_top(dev: str, traffic: Callable[[], object]) -> tuple[object, dict[str, float]]:
    """traffic() while `tbverbs top DEV --json` samples every second; what traffic() returned and
    the bytes top's samples add up to (rdma_tx, ip_tx)."""
    top = subprocess.Popen([str(CLI), "top", dev, "--json", "--interval", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples = []
    try:
        samples.append(json.loads(top.stdout.readline()))  # running: its first sample came
        result = traffic()
        time.sleep(2.5)  # and the samples with the last of the traffic
    finally:
        top.kill()
        rest = top.stdout.read()  # (through the same buffer as readline: nothing skipped)
        top.wait()
    samples += [json.loads(line) for line in rest.splitlines() if line.startswith("{")]
    total = {}
    for key in ("rdma_tx_gbps", "ip_tx_gbps"):
        total[key.replace("_gbps", "")] = sum(s["devices"][dev][key] * s["interval_s"] * 1e9 / 8 for s in samples)
    return result, total


def test_top_adds_up_to_what_perftest_and_tcp_sent(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    pair = Pair(vcable_factory.add(rails=2), netns, rdma_env)
    dev = pair.cable.end0.ibdev
    iters, size = 2000, 65536
    args = ["-F", "-s", str(size), "-n", str(iters)]
    _, seen = seen_by_top(dev, lambda: pair.run(
        ["ib_write_bw", "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args],
        ["ib_write_bw", "-d", dev, "-x", str(pair.gids[0]), *args, pair.ips[1]], timeout=300))
    sent = iters * size
    print(f"ib_write_bw sent {sent} bytes; top saw {seen}")
    # top counts frames, headers included (about 1.5 % of a 4 KiB frame): within 10 %
    assert sent <= seen["rdma_tx"] <= 1.10 * sent, (seen, sent)
    assert seen["ip_tx"] < 0.01 * sent, seen

    _, seen = seen_by_top(dev, lambda: pair.run(["python3", "-c", SINK],
                                                ["python3", "-c", SOURCE, pair.ips[1]], timeout=300))
    print(f"TCP over {pair.cable.end0.netdev} sent {TCP_BYTES} bytes; top saw {seen}")
    assert TCP_BYTES <= seen["ip_tx"] <= 1.10 * TCP_BYTES, (seen, TCP_BYTES)
    assert seen["rdma_tx"] == 0, f"RDMA traffic seen: {seen}"
