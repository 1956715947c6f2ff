"""torch.distributed on CPU (gloo) between the cable's two hosts, over usb4_net0/usb4_net1.

Not in `make test-vm`: it needs PyTorch (Debian's python3-torch, 150 MB to download), so it
has its own target, `make test-torch`, which installs that first. tests/device/torch_step.py runs
the same three SGD steps of a small MLP as two DistributedDataParallel ranks, one per network
namespace, each on half the batch, with gloo bound to its end's link netdev
(GLOO_SOCKET_IFNAME), and (rank 0) once in one process on the whole batch. The losses and the
final weights must match; the gradients' all-reduce crossing the cable shows in the link's IP
packet counters. Under TCG each process takes minutes, most of it importing torch.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

from pairlib import hw, split_hosts
from vmlib import Cable, NetnsFactory, missing

STEP = Path(__file__).resolve().parent / "torch_step.py"
PORT = "29526"


def test_two_process_training_step_matches_one_process(vcable: Cable, netns: NetnsFactory) -> None:
    if importlib.util.find_spec("torch") is None:
        missing("PyTorch is not installed (make test-torch installs python3-torch)")
    h0, h1 = split_hosts(vcable, netns)
    for host in (h0, h1):  # rank 0 reaches its own store at 10.66.0.1 through loopback
        netns.exec(host, "ip", "link", "set", "lo", "up")
    netns.exec(h0, "ping", "-c", "1", "-W", "10", "10.66.0.2")

    before = [hw(end.ibdev, "net_tx_packets") for end in vcable.ends]
    ranks = []
    for rank, (host, end) in enumerate(zip((h0, h1), vcable.ends)):
        cmd = ["ip", "netns", "exec", host, "env", f"GLOO_SOCKET_IFNAME={end.netdev}",
               sys.executable, str(STEP), str(rank), "2", "10.66.0.1", PORT]
        ranks.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outs = []
    try:
        for p in ranks:
            out, err = p.communicate(timeout=1200)
            outs.append((p.returncode, out, err))
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for rc, out, err in outs:
        assert rc == 0, out + err
    result = json.loads(outs[0][1].strip().splitlines()[-1])
    single, ddp = result["single"], result["distributed"]

    assert len(ddp["losses"]) == len(single["losses"]) == 3
    for got, want in zip(ddp["losses"], single["losses"]):
        assert math.isclose(got, want, rel_tol=1e-10), (ddp["losses"], single["losses"])
    assert single["losses"][2] < single["losses"][0]  # it does train
    assert len(ddp["weights"]) == len(single["weights"])
    worst = max(abs(a - b) for a, b in zip(ddp["weights"], single["weights"]))
    assert worst < 1e-10, f"weights differ by up to {worst}"
    # gloo's traffic (store, connections, the gradients' all-reduce) went over the cable's netdevs
    for end, n in zip(vcable.ends, before):
        assert hw(end.ibdev, "net_tx_packets") - n >= 10, end.netdev
