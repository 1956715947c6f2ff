"""A hostile peer and split packets (TBV_CAP_SPLIT, docs/wire-protocol.md "Split packets").

On a link that splits, a packet with a page of payload travels as its header, an entry of a
header frame (frame type SPLIT, up to 16 entries), and a frame of raw payload marked by the
payload PDFs, which carry its tag. The receiver pairs them up on the rail. A peer can break
every rule of that: a header whose payload never comes, a payload frame with no header before
it (whose bytes look like a valid packet), a payload that is not the length its header says,
headers with a GID extension, header frames that are not whole entries or hold too many. Each
is dropped and counted; the rail goes on; and nothing reaches the MR.

The targets are those of test_hostile_peer.py (tbv_integrity -H: a one-page MR between guard
pages), on the file's cable, made to split (zero_copy is off by default).
"""

from __future__ import annotations

import pytest

from hostile import (FIRST, GRH, LAST, SPLIT, SPLIT_TAGS, WRITE, Target, delta, frame,
                     split_frames, split_pdfs)
from hostile import target  # noqa: F401  (a fixture)
from pairlib import Pair

# on the sanitizer kernel too: make test-debug (issue 23: what a peer or a user can reach)
pytestmark = pytest.mark.sanitizer_subset

BLANK = b"\x5a" * 4096  # the MR page as the target starts
MODULE_PARAMS = {"zero_copy": "Y"}  # the file's cable splits (conftest.py: file_pair)


@pytest.fixture
def pair(shared_pair: Pair) -> Pair:
    """The targets live on the file's cable (conftest.py: file_pair, shared_pair)."""
    return shared_pair


def page_write(t: Target, data: bytes, psn: int | None = None) -> bytes:
    """A WRITE of the whole MR page in one packet: a page of payload, so a split one."""
    assert len(data) == 4096
    return frame(WRITE, FIRST | LAST, t.info["qpn_a"], t.info["qpn_b"],
                 t.epsn if psn is None else psn, data, va=t.info["addr"], rkey=t.info["rkey"],
                 length=4096)


def test_a_split_packet_is_put_together_and_executed(target: Target) -> None:
    data = bytes(range(256)) * 16
    assert delta(target, "rx_split_dropped", lambda: target.inject_split(
        page_write(target, data))) == 0
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.dump() == data
    # the same packet in one frame is too long for a frame: no controller sends that
    assert delta(target, "rdma_rx_malformed", lambda: target.inject(
        page_write(target, BLANK)[:4096])) == 1
    assert target.dump() == data


def test_a_header_without_its_payload_is_dropped(target: Target) -> None:
    header, _ = split_frames(page_write(target, b"H" * 4096))
    small = frame(WRITE, FIRST | LAST, target.info["qpn_a"], target.info["qpn_b"], target.epsn,
                  b"next", va=target.info["addr"], rkey=target.info["rkey"], length=4)
    # the next frame on the rail is no payload: the header goes, that frame is handled
    assert delta(target, "rx_split_dropped", lambda: (target.inject(header),
                                                      target.inject(small))) == 1
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.dump() == b"next" + BLANK[4:]


def test_a_payload_without_its_header_is_never_read_as_a_packet(target: Target) -> None:
    """Payload bytes are the user's: a valid WRITE inside them must not be executed, whatever
    PDFs but a typed frame's its frame has."""
    inner = frame(WRITE, FIRST | LAST, target.info["qpn_a"], target.info["qpn_b"], target.epsn,
                  b"evil", va=target.info["addr"], rkey=target.info["rkey"], length=4)
    for sof, eof in (split_pdfs(0), split_pdfs(SPLIT_TAGS - 1), (1, 5), (7, 2), (0, 0)):
        assert delta(target, "rx_split_dropped", lambda: target.inject(inner, 0, sof, eof)) == 1
    assert target.dump() == BLANK
    # nor after a header and its payload: a header goes with one payload frame
    header, payload = split_frames(page_write(target, b"P" * 4096), 5)
    assert delta(target, "rx_split_dropped", lambda: (
        target.inject(header), target.inject(payload, 0, *split_pdfs(5)),
        target.inject(inner, 0, *split_pdfs(6)))) == 1
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.dump() == b"P" * 4096


def test_a_header_pairs_only_with_its_own_payload(target: Target) -> None:
    """Frames lost between a header and its payload (the payload, and the next header) leave
    the header before the next packet's payload: the tag in the payload frame's PDFs and the
    samples of its bytes in the header frame tell them apart."""
    mine = bytes(range(256)) * 16
    header, _ = split_frames(page_write(target, mine), 7)
    theirs = b"T" + mine[1:]                    # another packet's payload, not the same bytes
    # its tag, other bytes: the header is used up, the payload dropped
    for payload in (theirs, mine[::-1]):
        assert delta(target, "rx_split_dropped", lambda: (
            target.inject(header), target.inject(payload, 0, *split_pdfs(7)))) == 1
    assert target.dump() == BLANK
    # another tag: that payload is dropped, the header still waits for its own (until a
    # typed frame comes: delta()'s marker)
    assert delta(target, "rx_split_dropped", lambda: (
        target.inject(header), target.inject(mine, 0, *split_pdfs(8)),
        target.inject(mine, 0, *split_pdfs(7)))) == 1
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.dump() == mine


def test_a_header_frame_of_several_packets_pairs_each_with_its_own_payload(target: Target) -> None:
    """Entries pair with the payload frames that follow, in order; a lost payload costs only
    its own packet (the next payload frame's tag skips its entry), and a typed frame ends the
    header frame's run: entries still without a payload are dropped."""
    pages = [bytes([i]) * 4096 for i in (1, 2, 3)]
    packets = [split_frames(page_write(target, page, (target.epsn + i) & 0xFFFFFF), 20 + i)
               for i, page in enumerate(pages)]
    entries = b"".join(entry for entry, _ in packets)
    # all three: each executed in turn, the last one's bytes stay
    assert delta(target, "rx_split_dropped", lambda: (
        target.inject(entries),
        *(target.inject(payload, 0, *split_pdfs(20 + i))
          for i, (_, payload) in enumerate(packets)))) == 0
    target.epsn = (target.epsn + 3) & 0xFFFFFF
    assert target.dump() == pages[2]
    # the next three, the first's payload lost: the second pairs with its own entry (then
    # is out of sequence for RC: the first is missing), the third's entry waits, then a
    # typed frame drops it
    again = [bytes([i]) * 4096 for i in (4, 5, 6)]
    packets = [split_frames(page_write(target, page, (target.epsn + i) & 0xFFFFFF), 30 + i)
               for i, page in enumerate(again)]
    probe = frame(WRITE, FIRST | LAST, target.info["qpn_a"], target.info["qpn_b"],
                  (target.epsn + 5) & 0xFFFFFF, b"late", va=target.info["addr"],
                  rkey=target.info["rkey"], length=4)  # out of sequence too: not executed
    assert delta(target, "rx_split_dropped", lambda: (
        target.inject(b"".join(entry for entry, _ in packets)),
        target.inject(packets[1][1], 0, *split_pdfs(31)), target.inject(probe))) == 2
    assert target.dump() == pages[2]


def test_a_payload_of_the_wrong_length_is_malformed(target: Target) -> None:
    header, payload = split_frames(page_write(target, b"L" * 4096))
    # the samples match (the same bytes throughout); the header's length does not
    for wrong in (payload[:-1], payload[:4049], payload[:100]):
        assert delta(target, "rdma_rx_malformed", lambda: (
            target.inject(header), target.inject(wrong, 0, *split_pdfs(0)))) == 1
    assert target.dump() == BLANK


def test_headers_that_are_not_a_split_header_frame_are_malformed(target: Target) -> None:
    header, payload = split_frames(page_write(target, b"G" * 4096))
    cases = [header + bytes(32),            # not whole entries
             header[:48],                   # the bare header, no pair check
             bytes([SPLIT]),                # just the type
             header * 17]                   # more entries than a header frame holds
    # each is malformed (the rail's count: it never becomes a packet), and its payload frame
    # then has no header
    for bad in cases:
        assert delta(target, "rx_malformed", lambda: target.inject(bad)) == 1
        assert delta(target, "rx_split_dropped", lambda: target.inject(
            payload, 0, *split_pdfs(0))) == 1
    # a GRH flag (no GID extension in a split header), or a payload that would have fit one
    # frame: checked with the payload, dropped whole
    with_grh = header[:5] + bytes([header[5] | GRH]) + header[6:]
    small = frame(WRITE, FIRST | LAST, target.info["qpn_a"], target.info["qpn_b"], target.epsn,
                  b"s" * 4048, va=target.info["addr"], rkey=target.info["rkey"], length=4048)
    for bad, body in ((with_grh, payload), split_frames(small)):
        assert delta(target, "rdma_rx_malformed", lambda: (
            target.inject(bad), target.inject(body, 0, *split_pdfs(0)))) == 1
    assert target.dump() == BLANK
