"""NCCL's IB transport, as far as verbs go, across the virtual cable: tests/tools/tbv_nccl_pattern.

No GPU here and no NCCL: the program issues the verbs NCCL's net_ib issues (its header says which
and from where) with end 0 as NCCL's sender and end 1 as its receiver, and checks every result.
This test checks what the program reports: the GID NCCL would pick, the dma-buf probe's answer,
the transfers, the 512-deep send queue, the loopback flush and GIN's atomic.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from pairlib import TOOLS, Pair

ROUNDS = 20
SIZES = (0, 1, 127, 128, 4096, 8192, 8193, 65536, 100000, 1 << 20)  # the program's, in order


# One QP per connection is the two-QP case's first half: outside CI's budget.
@pytest.mark.parametrize("qps", [pytest.param(1, marks=pytest.mark.beyond_ci), 2])
def test_nccl_verbs_pattern(pair: Pair, qps: int) -> None:
    tool = TOOLS / "tbv_nccl_pattern"
    if not tool.exists():
        pytest.fail(f"{tool} is not built (make tools)")
    r = subprocess.run([str(tool), "-q", str(qps), "-n", str(ROUNDS),
                        pair.cable.end0.ibdev, pair.cable.end1.ibdev],
                       env=pair.env, capture_output=True, text=True, timeout=600)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    # NCCL's GID choice (IPv4, RoCE v2, type read from sysfs) is the address the test gave each end
    for end, ip, gid in zip(pair.cable.ends, pair.ips, pair.gids):
        m = re.search(rf"^{end.ibdev}: link_layer (\S+) active_mtu \d+ gid_index (\d+) "
                      rf"type (\S+) gid (\S+)$", out, re.M)
        assert m, out
        assert m.groups() == ("Ethernet", str(gid), "RoCE-v2", f"::ffff:{ip}"), m.group(0)
        # no dma-buf: the answer that keeps NCCL from assuming GPU-direct over dma-buf
        assert f"dmabuf probe: {end.ibdev} EOPNOTSUPP" in out, out
    assert f"qps: {qps} per connection, sender max_send_wr 512, receiver max_recv_wr 256" in out
    data = sum(SIZES[k % len(SIZES)] for k in range(ROUNDS))
    assert f"rounds: {ROUNDS} requests, {data} bytes," in out and out.count(" 0 mismatches") == 2, out
    assert "burst: 256 requests in flight, 512 send WRs per sender QP, 0 mismatches" in out, out
    nonzero = sum(1 for k in range(ROUNDS) if SIZES[k % len(SIZES)])
    assert f"flush: {nonzero + 1} loopback RDMA READs" in out, out  # each round with data, and the burst
    assert "atomic: fetch-and-add returned 0x1234500000000000, word now 0x1234500000000005" in out
    assert f"cts: {ROUNDS + 256} FIFO entries written, 2 signaled" in out, out
    assert "nccl pattern: OK (0 failures)" in out, out
