"""A hostile peer: crafted RDMA frames from the other end of a cable.

End 1 of a virtual cable injects frames it never sent through its NHI (the cable's end1_inject
attribute, testing only), aimed at an RC QP on end 0 whose one-page MR sits between two guard
pages (tbv_integrity -H). Whatever the frames say (malformed headers, unknown kinds, strangers'
QPNs, other PDs' keys, addresses around or far outside the MR, oversized READs, misaligned
atomics, PSNs ahead and behind, floods of ACKs), the kernel stays up, nothing outside the MR
changes, nothing is executed that should not be, and every refused frame is counted.
"""

from __future__ import annotations

import random
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_netdev import hw
from test_verbs import TOOLS, Pair, pair  # noqa: F401  (pair is a fixture)

CFS = Path("/sys/kernel/config/tbverbs/vcable")
HDR = struct.Struct("<BBHBBBBIIIIQIIII")  # the 48-byte RDMA header (docs/wire-protocol.md)
SEND, WRITE, READ_REQ, READ_RESP, ACK, UD_SEND, ATOMIC = 1, 2, 3, 4, 5, 6, 7
FIRST, LAST, ACK_REQ = 0x01, 0x02, 0x10


def frame(kind: int, flags: int, dst: int, src: int, psn: int, payload: bytes = b"", *,
          va: int = 0, rkey: int = 0, length: int = 0, aux: int = 0, syndrome: int = 0,
          payload_len: int | None = None) -> bytes:
    plen = len(payload) if payload_len is None else payload_len
    return HDR.pack(0x02, 0, plen, kind, flags, syndrome, 0, dst, src, psn, 0, va, rkey, length,
                    0, aux) + payload


@dataclass
class Target:
    proc: subprocess.Popen
    info: dict[str, int]
    cable: str
    ibdev: str
    epsn: int

    def inject(self, data: bytes, rail: int = 0) -> None:
        (CFS / self.cable / "end1_inject").write_bytes(bytes([rail, 1, 2, 0]) + data)

    def request(self, kind: int, flags: int, payload: bytes = b"", *, psn: int | None = None,
                **kw) -> None:
        self.inject(frame(kind, flags, self.info["qpn_a"], self.info["qpn_b"],
                          self.epsn if psn is None else psn, payload, **kw))

    def sync(self) -> None:
        """Wait until every frame injected so far was processed: the receiver handles a
        rail's frames in order (in NAPI, after the write returned), so once a marker frame
        for a QP that does not exist is counted, all before it are done."""
        before = self.count("rdma_rx_no_qp")
        self.inject(frame(SEND, FIRST | LAST, 0xFFFFFE, 1, 0))
        deadline = time.monotonic() + 10
        while self.count("rdma_rx_no_qp") == before:
            assert time.monotonic() < deadline, "injected frames were not processed"
            time.sleep(0.02)

    def guard(self) -> str:
        self.sync()
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("check\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        assert line.startswith("guard ok"), f"memory outside the MR changed: {line}"
        return line.split()[-1]  # the MR page's first 4 bytes, hex

    def count(self, name: str) -> int:
        return hw(self.ibdev, name)


@pytest.fixture
def target(pair: Pair):
    proc = subprocess.Popen([str(TOOLS / "tbv_integrity"), "-H",
                             pair.cable.end0.ibdev, str(pair.gids[0]),
                             pair.cable.end1.ibdev, str(pair.gids[1])],
                            env=pair.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    info: dict[str, int] = {}
    assert proc.stdout
    for line in proc.stdout:
        if line.strip() == "ready":
            break
        key, value = line.split()
        info[key] = int(value)
    assert "rkey" in info, f"tbv_integrity -H did not start: {info}"
    t = Target(proc, info, pair.cable.name, pair.cable.end0.ibdev, info["rq_psn"])
    yield t
    assert proc.stdin
    proc.stdin.close()
    proc.wait(timeout=60)


def delta(t: Target, name: str, action) -> int:
    """How much counter @name grew through @action (once its frames were processed)."""
    before = t.count(name)
    action()
    t.sync()
    return t.count(name) - before - (name == "rdma_rx_no_qp")  # the marker itself


def test_malformed_frames_are_counted_and_dropped(target: Target) -> None:
    rng = random.Random(1)
    frames = []
    for _ in range(200):  # unknown kinds
        frames.append(frame(rng.choice([0, 11, 12, 99, 255]), FIRST | LAST, target.info["qpn_a"],
                            target.info["qpn_b"], target.epsn))
    for _ in range(200):  # payload_len not the frame's
        body = rng.randbytes(rng.randrange(0, 200))
        frames.append(frame(SEND, FIRST | LAST, target.info["qpn_a"], target.info["qpn_b"],
                            target.epsn, body, payload_len=len(body) + rng.randrange(1, 100)))
    for _ in range(100):  # reserved flag, reserved bytes, 25-bit QPNs
        frames.append(frame(SEND, 0x80, target.info["qpn_a"], target.info["qpn_b"], 1))
        frames.append(frame(SEND, FIRST | LAST, 1 << 24, target.info["qpn_b"], 1))

    def send_all() -> None:
        for f in frames:
            target.inject(f)
    assert delta(target, "rdma_rx_malformed", send_all) == len(frames)
    assert target.guard() == "5a5a5a5a"


def test_strangers_are_ignored_and_counted(target: Target) -> None:
    a, b = target.info["qpn_a"], target.info["qpn_b"]
    write = dict(va=target.info["addr"], rkey=target.info["rkey"], length=4)
    assert delta(target, "rdma_rx_no_qp", lambda: target.inject(
        frame(WRITE, FIRST | LAST, 0xabcde, b, target.epsn, b"evil", **write))) == 1
    assert delta(target, "rdma_rx_stray", lambda: target.inject(
        frame(WRITE, FIRST | LAST, a, b + 1, target.epsn, b"evil", **write))) == 1
    assert delta(target, "rdma_rx_stray", lambda: target.inject(
        frame(UD_SEND, FIRST | LAST | 0x20, a, b, 0, bytes(32) + b"x", payload_len=1))) == 1
    assert target.guard() == "5a5a5a5a"  # nothing was written


@pytest.mark.parametrize("case", ["other_pd_key", "below", "past_end", "wrap", "random_key"])
def test_writes_outside_a_permitting_registration_are_refused(target: Target, case: str) -> None:
    addr, size, rkey = target.info["addr"], target.info["len"], target.info["rkey"]
    va, key, n = {
        "other_pd_key": (target.info["other_pd_addr"], target.info["other_pd_rkey"], 16),
        "below": (addr - 16, rkey, 32),
        "past_end": (addr + size - 8, rkey, 16),
        "wrap": (0xFFFF_FFFF_FFFF_FF00, rkey, 0x200),
        "random_key": (addr, 0x1234_5678, 16),
    }[case]
    payload = b"\xee" * n
    d = delta(target, "rejected_access", lambda: target.request(
        WRITE, FIRST | LAST, payload, va=va, rkey=key, length=n))
    assert d == 1
    target.epsn = (target.epsn + 1) & 0xFFFFFF  # a refused request still uses its PSN
    assert target.guard() == "5a5a5a5a"


def test_oversized_reads_and_bad_atomics_are_refused(target: Target) -> None:
    addr, size, rkey = target.info["addr"], target.info["len"], target.info["rkey"]
    for va, n in ((addr, size + 1), (addr, 1 << 31), (addr - 4096, 4096)):
        assert delta(target, "rejected_access", lambda: target.request(
            READ_REQ, FIRST | LAST, va=va, rkey=rkey, length=n)) == 1
        target.epsn = (target.epsn + 1) & 0xFFFFFF
    operands = struct.pack("<QQ", 0x1111, 0)
    assert delta(target, "rejected_invalid", lambda: target.request(
        ATOMIC, FIRST | LAST, operands, va=addr + 4, rkey=rkey, length=8, aux=2)) == 1
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert delta(target, "rejected_access", lambda: target.request(
        ATOMIC, FIRST | LAST, operands, va=addr - 8, rkey=rkey, length=8, aux=2)) == 1
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.guard() == "5a5a5a5a"


def test_sequence_games_execute_nothing_twice_or_early(target: Target) -> None:
    addr, rkey = target.info["addr"], target.info["rkey"]
    wr = dict(va=addr, rkey=rkey, length=4)
    # far ahead: a gap; one sequence NAK, nothing executed
    assert delta(target, "seq_naks", lambda: target.request(
        WRITE, FIRST | LAST, b"AHEA", psn=(target.epsn + 1000) & 0xFFFFFF, **wr)) == 1
    target.request(WRITE, FIRST | LAST, b"AHE2", psn=(target.epsn + 2000) & 0xFFFFFF, **wr)
    assert target.guard() == "5a5a5a5a"
    # the expected PSN executes
    target.request(WRITE, FIRST | LAST | ACK_REQ, b"abcd", **wr)
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.guard() == "61626364"
    # the same PSN again, and one far behind: duplicates, not executed again
    target.request(WRITE, FIRST | LAST, b"DUPL", psn=(target.epsn - 1) & 0xFFFFFF, **wr)
    target.request(WRITE, FIRST | LAST, b"OLDX", psn=(target.epsn - 5000) & 0xFFFFFF, **wr)
    assert target.guard() == "61626364"
    # a middle packet without a message in progress: refused, its PSN used
    assert delta(target, "rejected_invalid", lambda: target.request(
        WRITE, 0, b"x" * 4048)) == 1
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.guard() == "61626364"


def test_a_flood_of_acks_and_responses_changes_nothing(target: Target) -> None:
    rng = random.Random(7)
    a, b = target.info["qpn_a"], target.info["qpn_b"]
    for _ in range(3000):
        syndrome = rng.randrange(0, 6)
        aux = rng.randrange(0, 32) if syndrome in (0, 2) else 0
        target.inject(frame(ACK, 0, a, b, rng.randrange(0, 1 << 24), syndrome=syndrome, aux=aux))
        target.inject(frame(READ_RESP, FIRST | LAST, a, b, rng.randrange(0, 1 << 24),
                            rng.randbytes(rng.randrange(0, 64))))
    # the QP still works: the expected PSN executes
    target.request(WRITE, FIRST | LAST | ACK_REQ, b"live", va=target.info["addr"],
                   rkey=target.info["rkey"], length=4)
    target.epsn = (target.epsn + 1) & 0xFFFFFF
    assert target.guard() == "6c697665"
