"""Zero-copy TX and split packets (TBV_CAP_SPLIT, docs/wire-protocol.md "Split packets").

With the module parameter `zero_copy` (default off) at both ends, a full packet carries a page
of payload and travels as its header (an entry of a header frame that carries the headers of
up to 16 packets in a row), and a payload frame that names the MR's pinned
page when the packet's bytes lie in one (the virtual cable reads that page, as the NHI's DMA
would), or a copy otherwise. These tests check that data arrives intact both ways, that the
page path is really taken (the counters of bytes sent from pages and copied), that losing one
frame of a pair loses nothing, and that buffers freed mid-transfer stay alive for the
controller. The hostile side (frames that break the pairing rules) is test_hostile_split.py;
that a link without it sends no split packet, test_faults.py (its lossy integrity run).
"""

from __future__ import annotations

import pytest

from faultlib import LOSSY, integrity, integrity_intact_under, killed_mid_transfer
from pairlib import Pair, hw

MODULE_PARAMS = {"zero_copy": "Y"}  # the file's cable splits (conftest.py: file_pair)


@pytest.fixture
def pair(shared_pair: Pair) -> Pair:
    """The file's cable, made with zero-copy TX on (it is off by default), each test checked
    as with conftest.py's pair (nothing_left_behind: every payload frame came back, with its
    page reference dropped)."""
    return shared_pair


def counter(pair: Pair, name: str) -> int:
    return sum(hw(end.ibdev, name) for end in pair.cable.ends)


def counters(pair: Pair) -> dict[str, int]:
    return {name: counter(pair, name) for name in
            ("tx_zcopy_bytes", "tx_copied_bytes", "rx_split_dropped", "rdma_rx_malformed",
             "retransmits", "seq_naks")}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def write_bw(pair: Pair, size: int, iters: int) -> None:
    """ib_write_bw, one QP: client on end 0, server on end 1 (perftest's buffers are
    page-aligned)."""
    args = ["-q", "1", "-n", str(iters), "-s", str(size), "-F"]
    _, cli = pair.run(["ib_write_bw", "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args],
                      ["ib_write_bw", "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args,
                       pair.ips[1]], timeout=300)
    assert any(line.split()[:1] == [str(size)] for line in cli.splitlines()), cli


def test_full_packets_leave_from_the_mr_pages(pair: Pair) -> None:
    """1 MiB WRITEs from a page-aligned buffer: every packet is a page of the MR, none is
    copied; the receiver pairs every header with its payload."""
    before = counters(pair)
    start = {name: hw(pair.cable.end0.ibdev, name)
             for name in ("tx_frames", "credit_frames_tx", "rdma_tx_packets")}
    write_bw(pair, 1 << 20, 40)
    d = delta(counters(pair), before)
    # perftest's warm-up and its iterations: at least the 40 MiB, all from pages
    assert d["tx_zcopy_bytes"] >= 40 << 20, d
    assert d["tx_copied_bytes"] == 0, d
    assert d["rx_split_dropped"] == d["rdma_rx_malformed"] == d["retransmits"] == 0, d
    # the sender's headers travel several to a header frame (kernel/tbv_split.c): a frame
    # per header would make it 2 frames per packet (its netdev sends nothing meanwhile)
    sent = {name: hw(pair.cable.end0.ibdev, name) - start[name] for name in start}
    frames = sent["tx_frames"] - sent["credit_frames_tx"]
    assert frames < 1.25 * sent["rdma_tx_packets"], sent


def test_data_arrives_intact_from_pages_and_from_copies(pair: Pair) -> None:
    """The integrity tool's messages start anywhere in its buffers: packets that lie in one
    page go from it, the others are copied; WRITE, READ and SEND data are all checked."""
    before = counters(pair)
    r = integrity(pair, "-q", "2", "-t", "10", "-s", "300000", "-S", "41")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 mismatches, 0 errors" in r.stdout, r.stdout
    d = delta(counters(pair), before)
    assert d["tx_zcopy_bytes"] > 0 and d["tx_copied_bytes"] > 0, d
    assert d["rx_split_dropped"] == d["rdma_rx_malformed"] == 0, d


def test_a_lost_half_of_a_split_packet_loses_nothing(pair: Pair) -> None:
    """Loss, duplication, reordering and damage break pairs: the other half is dropped and
    counted, RC resends the packet."""
    before = counters(pair)
    integrity_intact_under(pair, LOSSY, "-q", "2", "-t", "15", "-s", "200000", "-S", "43")
    d = delta(counters(pair), before)
    assert d["rx_split_dropped"] > 0, f"no pair was broken: nothing tested {d}"
    assert d["retransmits"] + d["seq_naks"] > 0, d


@pytest.mark.sanitizer_ci
def test_buffers_freed_while_their_pages_are_on_the_wire(pair: Pair) -> None:
    """The process that registered the buffers dies mid-transfer, under loss, so its MRs are
    deregistered and its pages unpinned while payload frames that name them are still queued:
    each frame holds a page reference of its own until the controller is done with it (on
    the sanitizer kernel KASAN would see a page freed under it; the fixture checks that every
    frame came back)."""
    sent = killed_mid_transfer(pair, "-q", "8", "-t", "120", "-s", "300000", "-S", "53",
                               counter="tx_zcopy_bytes")
    assert sent > 0, "nothing was sent from pages before the kill: nothing tested"
