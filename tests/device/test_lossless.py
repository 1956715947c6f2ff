"""A lossless cable never makes RC resend: no retransmission, no sequence NAK, no duplicate PSN.

The virtual cable loses nothing unless a fault is set, and with software credits a sender sends
a frame only while the receiver has a buffer for it. So a packet that a responder receives twice
(`rdma_rx_duplicates`), a sequence NAK (`seq_naks`) or an ACK-timer retransmission
(`retransmits`) can only come from a requester that resent too early: an ACK timer that ran while
its packets waited to be sent, not while they were on the way. Each costs a whole timeout on the
critical path. Loads: the bandwidth tools with 8 QPs (their packets queue behind each other's),
and small messages as request/response over 8 QPs (READ and atomics).

Whether an ACK timer runs out depends on how fast the VM runs (TCG, the host's load), so these
are kept out of CI (beyond_ci; make test-full, make test-lossless). The cases still open are
marked xfail (not strict): docs/performance.md says what is known of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.beyond_ci

from pairlib import Pair, hw
from vmlib import NetnsFactory, VcableFactory

SPURIOUS = ("retransmits", "rdma_rx_duplicates", "seq_naks")


def counts(pair: Pair) -> dict[str, int]:
    return {name: sum(hw(end.ibdev, name) for end in pair.cable.ends) for name in SPURIOUS}


def all_counters(pair: Pair) -> dict[str, list[int]]:
    """Every counter of both ends, for the failure message: what else the transport did."""
    names = sorted(p.name for p in Path("/sys/class/infiniband", pair.cable.end0.ibdev,
                                        "ports/1/hw_counters").iterdir() if p.name != "lifespan")
    return {name: [hw(end.ibdev, name) for end in pair.cable.ends] for name in names}


LOADS = {
    "write_64k_8qp": ["ib_write_bw", "-q", "8", "-s", "65536", "-n", "200"],
    "send_64k_8qp": ["ib_send_bw", "-q", "8", "-s", "65536", "-n", "200"],
    "read_64k_8qp": ["ib_read_bw", "-q", "8", "-s", "65536", "-n", "200"],
    "read_64b_8qp": ["ib_read_bw", "-q", "8", "-s", "64", "-n", "2000"],
    "atomic_8qp": ["ib_atomic_bw", "-q", "8", "-n", "2000"],
    "write_1m_8qp": ["ib_write_bw", "-q", "8", "-s", "1048576", "-n", "20"],
    # 1 MiB READs take 260 PSNs each, more than the window: asked for in parts (proto/tbv_rdma.h)
    "read_1m_8qp": ["ib_read_bw", "-q", "8", "-s", "1048576", "-n", "20"],
}


# Open (2026-11-28): the loads that move 64 KiB and more. With the TX pool's turns (f2db10b)
# 8-QP 64 KiB READs went from 35 ACK timeouts a run to 0 (1 in one run of three) with the VM
# alone on the host; but beside another VM (the host's two cores busy) the same run had 4 on
# 2 rails and 210 on 4, and SENDs and WRITEs resend 1-3 times a run either way, their senders
# waiting for credits meanwhile. A vCPU the host deschedules sees its clock jump, and an ACK
# timer then fires for time the guest did not run: docs/performance.md has the next step.
# 1 MiB READs (stop 43) passed once READs longer than the window were asked for in parts
# (before: 1373 duplicate requests on 2 rails, 2499 on 4): docs/performance.md.
OPEN = {"read_64k_8qp", "send_64k_8qp", "write_64k_8qp", "write_1m_8qp"}


def cases() -> list:
    return [pytest.param(load, rails, marks=[pytest.mark.xfail(reason="open: ACK timeouts under "
                                                                 "the host's load and credit waits")]
                         if load in OPEN else [], id=f"{load}-{rails}")
            for load in sorted(LOADS) for rails in (2, 4)]


@pytest.mark.parametrize("load,rails", cases())
def test_a_lossless_cable_never_resends(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        rails: int, load: str) -> None:
    pair = Pair(vcable_factory.add(rails=rails), netns, rdma_env)
    before = counts(pair)
    before_all = all_counters(pair)
    tool, *args = LOADS[load]
    args += ["-F"]
    _, cli = pair.run([tool, "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args],
                      [tool, "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args,
                       pair.ips[1]], timeout=600)
    results = [line.split() for line in cli.splitlines() if line.split()[:1] and line.split()[0].isdigit()]
    assert results and len(results[-1]) >= 4, f"no result row:\n{cli}"
    spurious = {name: n - before[name] for name, n in counts(pair).items()}
    changed = {name: [a - b for a, b in zip(v, before_all[name])]
               for name, v in all_counters(pair).items() if v != before_all[name]}
    assert spurious == dict.fromkeys(SPURIOUS, 0), (
        f"{load} on {rails} rails: {spurious}\nclient:\n{cli}\ncounters (end 0, end 1): {changed}")
