"""A hostile peer against registered memory beyond plain one-packet requests (issue 23).

Multi-packet WRITEs that walk off the MR, memory windows of both types, SEND with invalidate,
FLUSH and ATOMIC_WRITE, UD (Q_Key, QP type, size) and multicast, and READs checked byte for byte
in both directions (the responder's data, and crafted READ responses at our requester). Every
refusal is shown three ways: the counter it bumps, the MR page byte for byte (and the guard pages
around it, `Target.check()`), and the QP's state (error after an RC protocol violation, unchanged
after a UD drop). Helpers and the target are in hostile.py.

Each test's target is a new QP pair, and none changes the link, so the tests share the file's
cable (conftest.py: shared_pair) instead of a bring-up and teardown each.
"""

from __future__ import annotations

import pytest

from hostile import (ACK_REQ, ATOMIC, ATOMIC_WRITE, FIRST, FLUSH, INV, LAST, MCAST_QPN, NO_SPLIT, PKT,
                     READ_REQ, READ_RESP, SEND, V4, WRITE, Target, delta, frame, pattern,
                     ud_frame)
from hostile import target  # noqa: F401  (a fixture)
from pairlib import Pair

# on the sanitizer kernel too: make test-debug (issue 23: what a peer or a user can reach)
pytestmark = pytest.mark.sanitizer_subset

BLANK = b"\x5a" * 4096  # the MR page as the target starts


MODULE_PARAMS = NO_SPLIT  # messages of several packets at a one-page MR (hostile.py)


@pytest.fixture
def pair(shared_pair: Pair) -> Pair:
    """The targets live on the file's cable (conftest.py: file_pair, shared_pair)."""
    return shared_pair


def refused(t: Target, counter: str, action, page: bytes) -> None:
    """@action's one request is refused: @counter grows by one, the RC QP goes to error,
    the MR page holds @page; then the QP is revived."""
    assert delta(t, counter, action) == 1
    assert t.check()[0] == "error", "the QP went on after a refused request"
    assert t.dump() == page
    t.refused()


# ---- multi-packet WRITEs ----

def test_a_write_ending_exactly_at_the_mr_end_is_placed(target: Target) -> None:
    t = target
    data = pattern(3)
    t.next(WRITE, FIRST, data[:PKT], va=t.info["addr"], rkey=t.info["rkey"], length=4096)
    t.next(WRITE, LAST | ACK_REQ, data[PKT:])
    assert t.check()[0] == "ok"
    assert t.dump() == data


@pytest.mark.parametrize("case", ["first_announces_past_end", "middle_past_announced",
                                  "last_past_announced", "three_packets_from_inside"])
def test_write_packets_walking_off_the_mr_are_refused(target: Target, case: str) -> None:
    """The FIRST packet starts inside the one-page MR; the WRITE's later packets would
    reach past its end. Either the FIRST announces the whole range (then it is refused
    before any byte is placed: NAK_ACCESS) or a later packet carries more than the FIRST
    announced (NAK_INVALID, the bytes already placed stay, nothing past them is written)."""
    t = target
    addr, rkey = t.info["addr"], t.info["rkey"]
    a, b = b"A" * PKT, b"B" * PKT
    if case == "first_announces_past_end":
        # 4048 bytes from offset 48 end exactly at the MR's end; the announced 16 more do not
        refused(t, "rejected_access", lambda: [
            t.request(WRITE, FIRST, a, va=addr + 48, rkey=rkey, length=PKT + 16),
            t.request(WRITE, LAST, b"C" * 16, psn=(t.epsn + 1) & 0xFFFFFF)], BLANK)
        return
    if case == "three_packets_from_inside":
        refused(t, "rejected_access", lambda: [
            t.request(WRITE, FIRST, a, va=addr, rkey=rkey, length=2 * PKT + 8),
            t.request(WRITE, 0, b, psn=(t.epsn + 1) & 0xFFFFFF),
            t.request(WRITE, LAST, b"C" * 8, psn=(t.epsn + 2) & 0xFFFFFF)], BLANK)
        return
    # within the MR as announced (4096 bytes), then a packet goes on past it
    t.next(WRITE, FIRST, a, va=addr, rkey=rkey, length=4096)
    placed = a + BLANK[PKT:]
    assert t.dump() == placed
    if case == "middle_past_announced":
        refused(t, "rejected_invalid", lambda: [
            t.request(WRITE, 0, b),
            t.request(WRITE, LAST, b"C" * 48, psn=(t.epsn + 1) & 0xFFFFFF)], placed)
    else:
        refused(t, "rejected_invalid", lambda: t.request(WRITE, LAST, b"C" * 64), placed)


# ---- memory windows ----

WIN_OFF, WIN_LEN = 1024, 1024


@pytest.mark.parametrize("mw_type", [1, 2])
def test_window_accesses_outside_the_window_are_refused(target: Target, mw_type: int) -> None:
    """A window over [1024, 2048) of the MR page: through its rkey, accesses inside the MR
    but outside the window, across its end, and an atomic it does not grant are refused;
    the window still works after them (they were refused for their range, not by chance)."""
    t = target
    addr = t.info["addr"]
    key = t.bind(mw_type, WIN_OFF, WIN_LEN)
    t.next(WRITE, FIRST | LAST | ACK_REQ, b"good", va=addr + WIN_OFF, rkey=key, length=4)
    page = BLANK[:WIN_OFF] + b"good" + BLANK[WIN_OFF + 4:]
    assert t.check()[0] == "ok" and t.dump() == page
    for va, n in ((addr, 4), (addr + WIN_OFF - 4, 8), (addr + WIN_OFF + WIN_LEN - 8, 16),
                  (addr + WIN_OFF + WIN_LEN, 4)):
        refused(t, "rejected_access", lambda: t.request(
            WRITE, FIRST | LAST, b"\xee" * n, va=va, rkey=key, length=n), page)
    refused(t, "rejected_access", lambda: t.request(
        READ_REQ, FIRST | LAST, va=addr + WIN_OFF, rkey=key, length=WIN_LEN + 1), page)
    refused(t, "rejected_access", lambda: t.request(
        ATOMIC, FIRST | LAST, bytes(16), va=addr + WIN_OFF, rkey=key, length=8, aux=2), page)
    t.next(WRITE, FIRST | LAST | ACK_REQ, b"last", va=addr + WIN_OFF + WIN_LEN - 4, rkey=key,
           length=4)
    page = page[:WIN_OFF + WIN_LEN - 4] + b"last" + page[WIN_OFF + WIN_LEN:]
    assert t.check()[0] == "ok" and t.dump() == page


def test_an_unbound_type1_window_refuses_its_old_rkey(target: Target) -> None:
    t = target
    addr = t.info["addr"]
    key = t.bind(1, WIN_OFF, WIN_LEN)
    t.next(WRITE, FIRST | LAST | ACK_REQ, b"good", va=addr + WIN_OFF, rkey=key, length=4)
    page = BLANK[:WIN_OFF] + b"good" + BLANK[WIN_OFF + 4:]
    assert t.dump() == page
    t.bind(1, 0, 0)  # a type 1 bind of length 0 unbinds
    refused(t, "rejected_access", lambda: t.request(
        WRITE, FIRST | LAST, b"evil", va=addr + WIN_OFF, rkey=key, length=4), page)
    new = t.bind(1, WIN_OFF, WIN_LEN)  # bound again: a new key; the old one stays refused
    assert new != key
    refused(t, "rejected_access", lambda: t.request(
        WRITE, FIRST | LAST, b"evil", va=addr + WIN_OFF, rkey=key, length=4), page)


def test_a_window_unbound_during_a_write_stops_it(target: Target) -> None:
    """Each packet of a WRITE is checked again: a type 1 window over the whole page, unbound
    after the WRITE's first packet was placed, refuses its last (NAK_ACCESS)."""
    t = target
    key = t.bind(1, 0, 4096)
    t.next(WRITE, FIRST, b"A" * PKT, va=t.info["addr"], rkey=key, length=4096)
    page = b"A" * PKT + BLANK[PKT:]
    assert t.dump() == page
    t.bind(1, 0, 0)
    refused(t, "rejected_access", lambda: t.request(WRITE, LAST, b"B" * 48), page)


def test_send_with_invalidate_kills_a_type2_window(target: Target) -> None:
    """The peer invalidates a type 2 window bound through the target QP: the receive
    completes, nothing is refused, and the window's rkey is refused from then on."""
    t = target
    addr = t.info["addr"]
    key = t.bind(2, WIN_OFF, WIN_LEN)
    t.next(WRITE, FIRST | LAST | ACK_REQ, b"good", va=addr + WIN_OFF, rkey=key, length=4)
    t.post_recv()
    invalid = t.count("rejected_invalid")
    t.next(SEND, FIRST | LAST | INV, b"inv!", rkey=key)
    assert t.check()[0] == "ok" and t.count("rejected_invalid") == invalid
    page = b"inv!" + BLANK[4:WIN_OFF] + b"good" + BLANK[WIN_OFF + 4:]
    assert t.dump() == page
    refused(t, "rejected_access", lambda: t.request(
        WRITE, FIRST | LAST, b"evil", va=addr + WIN_OFF, rkey=key, length=4), page)


@pytest.mark.parametrize("case", ["mr", "other_pd_mr", "other_pd_type2", "type1_window",
                                  "unbound_type2"])
def test_send_with_invalidate_of_what_it_may_not_invalidate_is_refused(target: Target,
                                                                         case: str) -> None:
    """SEND with invalidate naming an MR (ours, or another PD's: MRs cannot be invalidated),
    a type 2 window of another PD (bound through a QP of that PD), a type 1 window (IBA: only type 2 windows are invalidated remotely) or a type 2 window
    that is not bound: the receive completes in error, NAK_INVALID, the QP goes to error;
    the SEND's bytes are in its receive buffer only, and what it named still works."""
    t = target
    addr, rkey = t.info["addr"], t.info["rkey"]
    key = {"mr": lambda: rkey, "other_pd_mr": lambda: t.info["other_pd_rkey"],
           "other_pd_type2": lambda: t.bind("o", 0, 4096),
           "type1_window": lambda: t.bind(1, WIN_OFF, WIN_LEN),
           "unbound_type2": lambda: t.bind(2, WIN_OFF, WIN_LEN) ^ 1}[case]()
    t.post_recv()
    page = b"zzzz" + BLANK[4:]
    refused(t, "rejected_invalid", lambda: t.request(SEND, FIRST | LAST | INV, b"zzzz", rkey=key),
            page)
    if case in ("mr", "type1_window"):  # still valid: a WRITE through it is placed
        t.next(WRITE, FIRST | LAST | ACK_REQ, b"live", va=addr + WIN_OFF, rkey=key, length=4)
        assert t.check()[0] == "ok"
        assert t.dump() == page[:WIN_OFF] + b"live" + page[WIN_OFF + 4:]


# ---- FLUSH and ATOMIC_WRITE ----

def test_flush_outside_the_mr_or_without_the_right_is_refused(target: Target) -> None:
    """flush_rkey names an MR of the page granting flush (global visibility) and remote
    read only; the page's main MR does not grant flush."""
    t = target
    addr, size, fkey = t.info["addr"], t.info["len"], t.info["flush_rkey"]
    assert fkey, "the target could not register an MR with the flush right (a kernel before 6.2?)"
    t.next(FLUSH, FIRST | LAST | ACK_REQ, va=addr, rkey=fkey, length=size, aux=0x001)
    t.next(FLUSH, FIRST | LAST | ACK_REQ, rkey=fkey, aux=0x101)  # level MR: va, len unchecked
    assert t.check()[0] == "ok"
    for va, key, n, aux in ((addr + size - 8, fkey, 16, 0x001),   # past the end
                            (addr - 8, fkey, 16, 0x001),          # below
                            (addr, t.info["rkey"], 8, 0x001),     # no flush right
                            (0, t.info["rkey"], 0, 0x101),        # no flush right, level MR
                            (addr, fkey, 8, 0x002),               # persistence: never granted
                            (addr, t.bind(1, 0, 4096), 8, 0x001)):  # a window: no flush rights
        refused(t, "rejected_access", lambda: t.request(
            FLUSH, FIRST | LAST | ACK_REQ, va=va, rkey=key, length=n, aux=aux), BLANK)


def test_atomic_write_outside_the_mr_or_without_the_right_is_refused(target: Target) -> None:
    t = target
    addr, size, rkey = t.info["addr"], t.info["len"], t.info["rkey"]
    t.next(ATOMIC_WRITE, FIRST | LAST | ACK_REQ, b"ABCDEFGH", va=addr + 8, rkey=rkey, length=8)
    page = BLANK[:8] + b"ABCDEFGH" + BLANK[16:]
    assert t.check()[0] == "ok" and t.dump() == page
    for va, key in ((addr + size, rkey), (addr - 8, rkey), (addr + size + 4096, rkey),
                    (addr + 16, t.info["flush_rkey"]),        # no remote write
                    (t.info["other_pd_addr"], t.info["other_pd_rkey"]),
                    (addr + 16, 0x1234_5678)):
        refused(t, "rejected_access", lambda: t.request(
            ATOMIC_WRITE, FIRST | LAST | ACK_REQ, b"\xee" * 8, va=va, rkey=key, length=8), page)
    refused(t, "rejected_invalid", lambda: t.request(  # misaligned: IBA 9.4.5
        ATOMIC_WRITE, FIRST | LAST | ACK_REQ, b"\xee" * 8, va=addr + 4, rkey=rkey, length=8), page)


# ---- UD and multicast ----

def ud_poll(t: Target, ms: int, length: int) -> tuple[str, bytes]:
    """The UD receive's completion ("success 44", "none", ...) and its buffer's first 64
    bytes; the UD guard and the UD QP's state are asserted (drops leave it working)."""
    wc, guard, head = t.cmd(f"udpoll {ms} {length}", lines=3)
    assert guard == "ud guard ok qp ok", guard
    return wc.removeprefix("wc "), bytes.fromhex(head)


def test_ud_drops_wrong_qkeys_other_kinds_and_oversize(target: Target) -> None:
    """A UD QP with one receive of 1024 bytes: SENDs with a wrong Q_Key, RC packets aimed
    at it, and a payload larger than the frame allows leave the receive unused (the next
    good SEND fills it); a payload larger than the receive completes it with a length
    error and writes nothing. UD to the RC QP is stray. Nothing moves the UD QP's state."""
    t = target
    ud, qkey, src = t.info["ud_qpn"], t.info["ud_qkey"], t.info["qpn_b"]
    assert t.cmd("udrecv 1024") == ["posted"]
    ud_no_recv, malformed = t.count("ud_no_recv"), t.count("rdma_rx_malformed")
    assert delta(t, "ud_qkey_mismatches", lambda: [
        t.inject(ud_frame(ud, src, bad, b"evil")) for bad in (qkey ^ 1, qkey | 0x8000_0000, 0)]) == 3
    # a connected QP's packets aimed at the UD QP are stray
    assert delta(t, "rdma_rx_stray", lambda: (
        t.inject(frame(SEND, FIRST | LAST, ud, src, 0, b"evil")),
        t.inject(frame(WRITE, FIRST | LAST, ud, src, 0, b"evil", va=t.info["addr"],
                       rkey=t.info["rkey"], length=4)))) == 2
    assert delta(t, "rdma_rx_malformed", lambda: t.inject(
        ud_frame(ud, src, qkey, b"x" * 4016, payload_len=4017))) == 1  # > 4016: no such frame
    assert ud_poll(t, 200, 1024) == ("none", b"\x5a" * 64)
    assert t.count("ud_no_recv") == ud_no_recv and t.count("rdma_rx_malformed") == malformed + 1
    t.inject(ud_frame(ud, src, qkey, b"good"))
    wc, head = ud_poll(t, 5000, 1024)
    assert wc == "success 44" and head[40:44] == b"good", (wc, head)
    # too long for the receive: a local length error, nothing written
    assert t.cmd("udrecv 1024") == ["posted"]
    t.inject(ud_frame(ud, src, qkey, b"L" * 1000))
    assert ud_poll(t, 5000, 1024) == ("local length error 0", b"\x5a" * 64)
    # a UD packet for the RC QP is stray; the RC QP goes on
    assert delta(t, "rdma_rx_stray", lambda: t.inject(
        ud_frame(t.info["qpn_a"], src, qkey, b"evil"))) == 1
    assert t.check() == ("ok", "5a5a5a5a")


def test_multicast_reaches_only_the_joined_group(target: Target) -> None:
    """Multicast is a UD_SEND to the multicast QPN with a multicast destination GID
    (docs/wire-protocol.md); the UD QP joined ff0e::1:1 only. A group it did not join, a
    unicast GID at the multicast QPN (rdma_rx_no_qp) and its own group with a wrong Q_Key
    leave its receive unused; then its group reaches it."""
    t = target
    ud, qkey, src = t.info["ud_qpn"], t.info["ud_qkey"], t.info["qpn_b"]
    joined = bytes([0xFF, 0x0E]) + bytes(11) + b"\x01\x00\x01"
    assert t.cmd("udrecv 1024") == ["posted"]
    assert delta(t, "mcast_unjoined", lambda: (
        t.inject(ud_frame(MCAST_QPN, src, qkey, b"evil", dgid=joined[:15] + b"\x02")),
        t.inject(ud_frame(MCAST_QPN, src, qkey, b"evil", dgid=V4 + bytes([239, 1, 1, 1]))))) == 2
    assert delta(t, "ud_qkey_mismatches", lambda: t.inject(
        ud_frame(MCAST_QPN, src, qkey ^ 1, b"evil", dgid=joined))) == 1
    assert delta(t, "rdma_rx_no_qp", lambda: t.inject(
        ud_frame(MCAST_QPN, src, qkey, b"evil", dgid=V4 + bytes([10, 0, 0, 1])))) == 1
    assert ud_poll(t, 200, 1024) == ("none", b"\x5a" * 64)
    t.inject(ud_frame(MCAST_QPN, src, qkey, b"mcst", dgid=joined))
    wc, head = ud_poll(t, 5000, 1024)
    assert wc == "success 44" and head[40:44] == b"mcst", (wc, head)


# ---- READs byte for byte ----

def test_a_read_returns_exactly_the_mr_bytes(target: Target) -> None:
    """The real peer QP reads the MR page (a pattern written first): the whole page in two
    packets, and 96 bytes at an odd offset; each is the page's bytes exactly, and the 64
    bytes after the requester's buffer are untouched."""
    t = target
    data = pattern(5)
    assert t.cmd("fill 5") == ["filled"]
    assert t.dump() == data
    for off, n in ((0, 4096), (4001, 95)):
        out = t.cmd(f"readb {off} {n}")[0]
        assert out.startswith("read "), out
        got = bytes.fromhex(out.removeprefix("read "))
        assert got[:n] == data[off:off + n], f"READ of {n} at {off}: differs"
        assert got[n:] == b"\xa5" * 64, "the requester wrote past its buffer"
    assert t.check()[0] == "ok" and t.dump() == data


def test_crafted_read_responses_change_nothing_but_the_read(target: Target) -> None:
    """Our QP's own READ of 100 bytes into [1000, 1100) of the MR page waits (the real peer
    is silenced): responses for a READ never posted, at the wrong PSN, too long, too short,
    without LAST, of the wrong kind, change no byte of the page and complete nothing; the
    right one is placed exactly there; a repeat of it after completion changes nothing."""
    t = target
    a, b, psn = t.info["qpn_a"], t.info["qpn_b"], t.info["sq_psn"]
    assert t.cmd("fill 9") == ["filled"] and t.cmd("silence") == ["silenced"]
    page = pattern(9)

    def resp(p: int, data: bytes, flags: int = FIRST | LAST, kind: int = READ_RESP) -> None:
        t.inject(frame(kind, flags, a, b, p & 0xFFFFFF, data))
    assert delta(t, "responses_unmatched", lambda: resp(psn, b"N" * 100)) == 1  # no READ yet
    assert t.dump() == page
    assert t.cmd("reada 1000 100") == ["posted"]
    rx, unmatched = t.count("rdma_rx_packets"), t.count("responses_unmatched")
    bad = [lambda: resp(psn - 1, b"P" * 100), lambda: resp(psn + 5, b"Q" * 100),
           lambda: resp(psn, b"L" * 200), lambda: resp(psn, b"S" * 50),
           lambda: resp(psn, b"F" * PKT, flags=FIRST), lambda: resp(psn, b"T" * 8, kind=8)]
    for send in bad:
        send()
    t.sync()  # the frames are received in NAPI, after the injecting write returned
    assert t.count("rdma_rx_packets") - rx >= len(bad)
    # the wrong PSNs ask again (a lost response); the wrong shapes match nothing
    assert t.count("responses_unmatched") - unmatched == 4
    assert t.check()[0] == "ok" and t.dump() == page
    assert t.cmd("poll 0") == ["wc none"]
    resp(psn, b"R" * 100)
    assert t.cmd("poll 5000") == ["wc success 100"]
    page = page[:1000] + b"R" * 100 + page[1100:]
    assert t.dump() == page
    resp(psn, b"D" * 100)
    resp(psn + 1, b"E" * 100)
    assert t.check()[0] == "ok" and t.dump() == page
