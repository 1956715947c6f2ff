"""Shared by the hostile-peer tests: crafted RDMA frames and the target they are aimed at.

End 1 of a virtual cable injects frames it never sent through its NHI (the cable's end1_inject
attribute, testing only) at QPs of end 0 run by `tbv_integrity -H` (tests/tools/tbv_integrity.c):
an RC (or, -u, UC) QP whose one-page MR sits between two guard pages, windows to bind over it, an
MR of another PD, one granting flush, and a UD QP joined to one multicast group.
"""

from __future__ import annotations

import subprocess
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pairlib import TOOLS, Pair, hw

CFS = Path("/sys/kernel/config/tbverbs/vcable")
HDR = struct.Struct("<BBHBBBBIIIIQIIII")  # the 48-byte RDMA header (docs/wire-protocol.md)
SEND, WRITE, READ_REQ, READ_RESP, ACK, UD_SEND, ATOMIC = 1, 2, 3, 4, 5, 6, 7
FLUSH, ATOMIC_WRITE = 9, 10
FIRST, LAST, ACK_REQ, SEQ = 0x01, 0x02, 0x10, 0x80
GRH, INV = 0x20, 0x40
PKT = 4048  # RDMA payload per packet, on a link that does not split them
# Files whose tests send messages of several packets at the one-page MR run on links that
# do not split packets (MODULE_PARAMS, conftest.py's file_pair): there a packet is PKT bytes,
# so a message of two fits the page and its first packet does not fill it.
NO_SPLIT = {"zero_copy": "N"}
PDF_SOF, PDF_EOF = 1, 2  # a typed frame's PDFs
SPLIT = 0x04  # the frame type of a split packet's header (TBV_FT_RDMA_SPLIT)
SPLIT_TAGS = 13 * 13


def frame(kind: int, flags: int, dst: int, src: int, psn: int, payload: bytes = b"", *,
          va: int = 0, rkey: int = 0, length: int = 0, aux: int = 0, syndrome: int = 0,
          payload_len: int | None = None, tsn: int | None = None) -> bytes:
    """An RDMA frame; with @tsn, a striped QP's numbered packet (SEQ flag, TSN at offset 40)."""
    plen = len(payload) if payload_len is None else payload_len
    if tsn is not None:
        flags |= SEQ
    return HDR.pack(0x02, 0, plen, kind, flags, syndrome, 0, dst, src, psn, 0, va, rkey, length,
                    tsn or 0, aux) + payload


def split_pdfs(tag: int) -> tuple[int, int]:
    """The (sof, eof) of a split packet's payload frame with this tag."""
    return 3 + tag % 13, 3 + tag // 13 % 13


def split_frames(data: bytes, tag: int = 0) -> tuple[bytes, bytes]:
    """A packet (frame()) as a link that splits sends it: its header frame of one entry (the
    header typed SPLIT, then the pair check: the tag, 7 zero bytes, the payload's first and
    last 8 bytes) and its payload, to go in a frame of its own with split_pdfs(tag). A header
    frame of several packets is their entries one after the other."""
    payload = data[48:]
    return (bytes([SPLIT]) + data[1:48] + bytes([tag]) + bytes(7) + payload[:8] + payload[-8:],
            payload)


MCAST_QPN = 0xFFFFFF  # the multicast QPN: a UD_SEND to a multicast GID
V4 = bytes(10) + b"\xff\xff"  # IPv4-mapped GID prefix


def ud_frame(dst: int, src: int, qkey: int, data: bytes, *, dgid: bytes = V4 + bytes([10, 0, 0, 1]),
             sgid: bytes = V4 + bytes([10, 0, 0, 2]), payload_len: int | None = None) -> bytes:
    """A UD_SEND: the header (Q_Key at offset 40), the GID extension, the data."""
    plen = len(data) if payload_len is None else payload_len
    return HDR.pack(0x02, 0, plen, UD_SEND, FIRST | LAST | GRH, 0, 0, dst, src, 0, 0, 0, 0, 0,
                    qkey, 0) + sgid + dgid + data


def pattern(seed: int) -> bytes:
    """What `fill SEED` writes into the MR page."""
    return bytes((i * 31 + (i >> 8) + seed) & 0xFF for i in range(4096))


@dataclass
class Target:
    proc: subprocess.Popen
    info: dict[str, int]
    cable: str
    ibdev: str
    epsn: int

    def inject(self, data: bytes, rail: int = 0, sof: int = PDF_SOF, eof: int = PDF_EOF) -> None:
        """One frame, exactly as given, with these PDFs."""
        (CFS / self.cable / "end1_inject").write_bytes(bytes([rail, sof, eof, 0]) + data)

    def inject_split(self, data: bytes, rail: int = 0, tag: int = 0) -> None:
        """A packet (frame()) as a split one: header frame, then payload frame."""
        header, payload = split_frames(data, tag)
        self.inject(header, rail)
        self.inject(payload, rail, *split_pdfs(tag))

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

    def check(self) -> tuple[str, str]:
        """(the QP's state, "error" or "ok"; the MR page's first 4 bytes, hex)."""
        self.sync()
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("check\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        assert line.startswith("guard ok"), f"memory outside the MR changed: {line}"
        words = line.split()
        return words[3], words[-1]

    def guard(self) -> str:
        """The MR page's first 4 bytes; the QP must be working."""
        state, first = self.check()
        assert state == "ok", "the target QP is in error"
        return first

    def refused(self) -> None:
        """A refused request put the QP in error (IBA: the responder stops there); every
        later frame is dropped until the application resets it, which the tool does now."""
        state, _ = self.check()
        assert state == "error", "the QP went on after refusing a request"
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("revive\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "revived"
        self.epsn = self.info["rq_psn"]

    def count(self, name: str) -> int:
        return hw(self.ibdev, name)

    def next(self, kind: int, flags: int, payload: bytes = b"", **kw) -> None:
        """A request at the expected PSN, which it uses."""
        self.request(kind, flags, payload, **kw)
        self.epsn = (self.epsn + 1) & 0xFFFFFF

    def cmd(self, line: str, lines: int = 1) -> list[str]:
        """A command to the tool (after the frames injected so far were processed); its
        output lines."""
        self.sync()
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return [self.proc.stdout.readline().strip() for _ in range(lines)]

    def dump(self) -> bytes:
        """The whole MR page (the guard pages checked too)."""
        self.check()
        return bytes.fromhex(self.cmd("dump")[0])

    def bind(self, mw_type: int | str, offset: int, length: int) -> int:
        """Bind the type 1 or 2 window over [offset, offset + length) of the MR page
        (remote read and write) through the target QP, or ("o") a type 2 window of
        another PD over a page of its own, through a QP of that PD; its rkey."""
        out = self.cmd(f"mw{mw_type} {offset} {length}")[0]
        assert out.startswith("rkey "), out
        return int(out.split()[1])

    def post_recv(self) -> None:
        """Post on the target QP one receive of the whole MR page."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("recv\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "posted"


def start_target(pair: Pair, *flags: str):
    proc = subprocess.Popen([str(TOOLS / "tbv_integrity"), "-H", *flags,
                             pair.cable.end0.ibdev, str(pair.gids[0]),
                             pair.cable.end1.ibdev, str(pair.gids[1])],
                            env=pair.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    info: dict[str, int] = {}
    assert proc.stdout
    for line in proc.stdout:
        if line.strip() == "ready":
            break
        words = line.split()
        assert len(words) == 2, f"tbv_integrity -H did not start: {line.strip()!r} (after {info})"
        info[words[0]] = int(words[1])
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


@pytest.fixture
def target(pair: Pair):
    """An RC target QP."""
    yield from start_target(pair)


@pytest.fixture
def uc_target(pair: Pair):
    """A UC target QP: refused requests are dropped, the QP stays in RTS."""
    yield from start_target(pair, "-u")
