"""The cable between two emulated USB4 host interfaces (QEMU's usb4-nhi): a relay in the test process.

Each VM's usb4-nhi device is a client of one end of the relay (`-chardev socket,id=cable,path=
DIR/cable0.sock,reconnect=1`; QEMU reconnects every second if the connection drops). The relay,
not the devices, decides whether the link is up and at what speed, so a test can plug, unplug,
replug at another speed, lose, corrupt, delay and throttle traffic from Python, and no start order
between the two QEMUs matters.

Wire format (little-endian; the device's C side implements the same):

    header   u16 magic 0x5534 | u8 version 1 | u8 type | u32 len (payload bytes, <= 4096 + 64)
    HELLO 1  device -> relay on connect: u64 uid | u8 max_gbps_per_lane (10/20) | u8 max_lanes | u16 0
    LINK  2  relay -> device: u8 up | u8 gbps_per_lane | u8 lanes | u8 0
    CTL   3  u8 pdf | u8[3] 0 | the raw control packet (big-endian, with its CRC; opaque here)
    DATA  4  u16 hopid | u8 sof | u8 eof | u8 flags | u8[3] 0 | payload (1..4096 bytes)
             flags bit 0: the receiver marks the frame as CRC-errored

A malformed frame (bad magic or version, oversize, a HELLO/CTL/DATA too short) closes that
connection: there is no way to find the next header in a byte stream after one. Frame types the
relay does not know are counted and skipped.

The relay runs in a background thread (selectors, non-blocking sockets); its API is synchronous
and thread-safe, for plain pytest code. No socket write ever blocks it. Like a USB4 link, which
holds a sender back with link credits rather than lose a packet, the relay pushes back: once
out_limit bytes wait for one end (in its output buffer, or delayed or rate-limited on their way
to it), it stops reading from the other end until they drain, so that end's QEMU stops taking
TX descriptors. The other direction flows on. A frame is dropped (and counted) only past
4 x out_limit, which a device that reads nothing could otherwise make the relay hold.
"""

from __future__ import annotations

import collections
import os
import queue
import random
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

MAGIC = 0x5534
VERSION = 1
HEADER = struct.Struct("<HBBI")
MAX_PAYLOAD = 4096
MAX_LEN = MAX_PAYLOAD + 64  # the largest frame payload (type-specific header included)

T_HELLO, T_LINK, T_CTL, T_DATA = 1, 2, 3, 4
HELLO = struct.Struct("<QBBH")
LINK = struct.Struct("<BBBB")
CTL_HEAD = struct.Struct("<B3x")
DATA_HEAD = struct.Struct("<HBBB3x")
DATA_FLAG_CRC_ERROR = 0x01

CTL_KEPT = 64  # control packets the relay remembers per end (ctl_sent, for replays)
OUT_LIMIT = 1 << 20  # bytes waiting for one end before the relay stops reading from the other
RECV_SIZE = 65536

T = TypeVar("T")


class ProtocolError(Exception):
    """A frame the relay cannot make sense of: the connection is closed."""


def frame(ftype: int, payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, VERSION, ftype, len(payload)) + payload


def hello_frame(uid: int, max_gbps: int = 20, max_lanes: int = 1) -> bytes:
    return frame(T_HELLO, HELLO.pack(uid, max_gbps, max_lanes, 0))


def link_frame(up: bool, gbps: int = 0, lanes: int = 0) -> bytes:
    return frame(T_LINK, LINK.pack(int(up), gbps, lanes, 0))


def ctl_frame(pdf: int, packet: bytes) -> bytes:
    return frame(T_CTL, CTL_HEAD.pack(pdf) + packet)


def data_frame(hopid: int, payload: bytes, sof: int = 0, eof: int = 0, flags: int = 0) -> bytes:
    return frame(T_DATA, DATA_HEAD.pack(hopid, sof, eof, flags) + payload)


def split_frames(buf: bytearray) -> list[tuple[int, bytes]]:
    """Remove the complete frames from the front of `buf`: (type, whole frame) each.

    Raises ProtocolError on a header that cannot be right; the bytes before it are consumed.
    """
    frames = []
    while len(buf) >= HEADER.size:
        magic, version, ftype, length = HEADER.unpack_from(buf)
        if magic != MAGIC or version != VERSION:
            raise ProtocolError(f"bad header magic {magic:#06x} version {version}")
        if length > MAX_LEN:
            raise ProtocolError(f"frame of type {ftype} too long ({length} > {MAX_LEN})")
        end = HEADER.size + length
        if len(buf) < end:
            break
        frames.append((ftype, bytes(buf[:end])))
        del buf[:end]
    return frames


@dataclass(frozen=True)
class Hello:
    uid: int
    max_gbps: int
    max_lanes: int


def parse_hello(raw: bytes) -> Hello:
    if len(raw) - HEADER.size < HELLO.size:
        raise ProtocolError(f"HELLO of {len(raw) - HEADER.size} bytes, want {HELLO.size}")
    uid, gbps, lanes, _ = HELLO.unpack_from(raw, HEADER.size)
    if gbps == 0 or lanes == 0:
        raise ProtocolError(f"HELLO with speed {gbps} Gb/s x{lanes}")
    return Hello(uid, gbps, lanes)


@dataclass
class DirStats:
    """What happened to the frames one end sent towards the other."""

    ctl: int = 0  # CTL frames delivered (queued to the other end's socket)
    data: int = 0  # DATA frames delivered
    data_bytes: int = 0  # DATA payload bytes delivered
    dropped_unplugged: int = 0  # no link: unplugged, or the other end not connected/said no HELLO
    dropped_fault: int = 0  # dropped by set_faults(drop_data=..., drop_ctl=...)
    dropped_overflow: int = 0  # the other end's output buffer was full (its QEMU does not read)
    crc_flagged: int = 0  # DATA delivered with the CRC-error flag set by set_faults(crc_error=...)


@dataclass
class EndStats:
    connects: int = 0
    protocol_errors: int = 0
    ignored: int = 0  # frames of a type the relay does not take from a device (LINK, unknown)
    last_error: str = ""


@dataclass(frozen=True)
class Stats:
    dirs: tuple[DirStats, DirStats]  # dirs[0]: from end 0 to end 1
    ends: tuple[EndStats, EndStats]


@dataclass(frozen=True)
class Faults:
    drop_data: float = 0.0  # probability a DATA frame is dropped
    drop_ctl: float = 0.0  # probability a CTL frame is dropped
    crc_error: float = 0.0  # probability a DATA frame is delivered flagged as CRC-errored
    delay_ms: float = 0.0  # every frame is held this long (order kept)
    rate_mbps: float | None = None  # DATA bandwidth per direction (token bucket; frames wait)
    burst_bytes: int = 16384  # the token bucket's depth


@dataclass
class _Conn:
    sock: socket.socket
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytearray = field(default_factory=bytearray)
    hello: Hello | None = None
    link_sent: tuple[int, int] | None = None  # the (gbps, lanes) last sent up, None: down/nothing
    broken: str = ""  # why a write failed: the connection is dropped at the end of this round
    writing: bool = False  # output is waiting for room in the socket (wants EVENT_WRITE)
    events: int = selectors.EVENT_READ  # what the selector watches now (0: not registered)


@dataclass
class _Pipe:
    """Frames from one end waiting for their release time (delay, rate limit), in order."""

    pending: collections.deque[tuple[float, int, bytes]] = field(default_factory=collections.deque)
    pending_bytes: int = 0
    last_release: float = 0.0
    tat: float = 0.0  # the token bucket as a theoretical arrival time (GCRA)


class Relay:
    """Two cable ends as UNIX stream sockets, DIR/cable0.sock and DIR/cable1.sock."""

    def __init__(self, directory: str | Path, out_limit: int = OUT_LIMIT, seed: int | None = None) -> None:
        self.dir = Path(directory)
        self.paths = (self.dir / "cable0.sock", self.dir / "cable1.sock")
        for path in self.paths:
            if len(os.fsencode(path)) >= 108:
                raise ValueError(f"UNIX socket path too long (use a short temp dir): {path}")
        self.out_limit = out_limit
        self._rng = random.Random(seed)
        self._sel = selectors.DefaultSelector()
        self._listeners: list[socket.socket] = []
        self._conns: list[_Conn | None] = [None, None]
        self._plugged: tuple[int, int] | None = None  # the cable's (gbps, lanes) while plugged
        self._faults = Faults()
        self._dirs = (DirStats(), DirStats())
        self._ends = (EndStats(), EndStats())
        self._pipes = (_Pipe(), _Pipe())
        # the latest control packets each end sent: (pdf, raw packet with its CRC)
        self._ctl_sent: tuple[collections.deque[tuple[int, bytes]], ...] = (
            collections.deque(maxlen=CTL_KEPT), collections.deque(maxlen=CTL_KEPT))
        self._events: collections.deque[str] = collections.deque(maxlen=200)
        self._t0 = time.monotonic()
        self._link_noted: tuple[int, int] | None = None
        self._calls: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    # ---- API (any thread) ----

    def start(self) -> Relay:
        for end, path in enumerate(self.paths):
            path.unlink(missing_ok=True)
            lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            lsock.bind(str(path))
            lsock.listen(4)
            lsock.setblocking(False)
            self._listeners.append(lsock)
            self._sel.register(lsock, selectors.EVENT_READ, ("listen", end))
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", -1))
        self._thread = threading.Thread(target=self._loop, name="cable-relay", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread, close every socket and remove the socket files. Stats stay readable."""
        if self._thread is not None and self._thread.is_alive():
            self._stopping = True
            self._wake()
            self._thread.join(timeout=10)
        for conn in self._conns:
            if conn is not None:
                conn.sock.close()
        self._conns = [None, None]
        for lsock in self._listeners:
            lsock.close()
        self._listeners.clear()
        for path in self.paths:
            path.unlink(missing_ok=True)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def plug(self, gbps: int = 20, lanes: int = 1) -> None:
        """Plug the cable (rated gbps per lane x lanes): the link comes up once both ends said HELLO."""
        def do() -> None:
            self._plugged = (gbps, lanes)
            self._update_link()
        self._call(do)

    def unplug(self) -> None:
        """Pull the cable: LINK down to both ends; frames in flight are dropped."""
        def do() -> None:
            self._plugged = None
            self._update_link()
        self._call(do)

    def connected(self, end: int) -> bool:
        return self._call(lambda: self._conns[end] is not None)

    def hello(self, end: int) -> int | None:
        """The uid end `end` said in its HELLO on the current connection, or None."""
        def get() -> int | None:
            conn = self._conns[end]
            return conn.hello.uid if conn is not None and conn.hello is not None else None
        return self._call(get)

    def link(self) -> tuple[int, int] | None:
        """(gbps per lane, lanes) while the link is up, else None."""
        return self._call(self._link_params)

    def set_faults(self, drop_data: float = 0.0, drop_ctl: float = 0.0, crc_error: float = 0.0,
                   delay_ms: float = 0, rate_mbps: float | None = None, burst_bytes: int = 16384) -> None:
        """Apply these faults to both directions from now on (the defaults: none)."""
        faults = Faults(drop_data, drop_ctl, crc_error, delay_ms, rate_mbps, burst_bytes)

        def do() -> None:
            self._faults = faults
        self._call(do)

    def ctl_sent(self, end: int) -> list[tuple[int, bytes]]:
        """The latest control packets end `end` sent (at most CTL_KEPT), oldest first: (PDF, the
        raw packet, big-endian words with its CRC, as the device put it on the cable)."""
        return self._call(lambda: list(self._ctl_sent[end]))

    def inject_ctl(self, to: int, pdf: int, packet: bytes) -> bool:
        """A hostile or replaying peer: deliver a control packet to end `to` as if the other end
        had sent it (the device rewrites its route and CRC as for any). False if the link is
        down (nothing sent)."""
        def do() -> bool:
            if self._link_params() is None:
                return False
            self._deliver(1 - to, T_CTL, ctl_frame(pdf, packet))
            return True
        return self._call(do)

    def events(self) -> list[str]:
        """The latest connects, HELLOs, link changes and drops, timestamped: for failure messages."""
        return self._call(lambda: list(self._events))

    def stats(self) -> Stats:
        """A snapshot of the counters."""
        return self._call(lambda: Stats(tuple(replace(d) for d in self._dirs),  # type: ignore[arg-type]
                                        tuple(replace(e) for e in self._ends)))  # type: ignore[arg-type]

    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str = "",
                 interval: float = 0.05) -> T:
        return wait_for(predicate, timeout, what, interval)

    # ---- the relay thread ----

    def _call(self, fn: Callable[[], T]) -> T:
        """Run fn in the relay thread (all state lives there) and return its result."""
        if self._thread is None or not self._thread.is_alive():
            if self._failure is not None:
                raise RuntimeError("the cable relay thread died") from self._failure
            return fn()  # not started, or closed: nothing else touches the state
        fut: Future[T] = Future()
        self._calls.put((fn, fut))
        self._wake()
        return fut.result(timeout=10)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # already a wake-up pending, or closed

    def _loop(self) -> None:
        try:
            while not self._stopping:
                timeout = self._release_due()
                for key, events in self._sel.select(timeout):
                    kind, end = key.data
                    if kind == "wake":
                        self._drain_wake()
                    elif kind == "listen":
                        self._accept(end)
                    else:
                        self._service(end, key.fileobj, events)  # type: ignore[arg-type]
                self._run_calls()
                self._reap()
                for end in (0, 1):
                    self._watch(end)
        except BaseException as e:  # noqa: BLE001  (reported to the next API call)
            self._failure = e
            self._run_calls()
            raise

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _run_calls(self) -> None:
        while True:
            try:
                fn, fut = self._calls.get_nowait()
            except queue.Empty:
                return
            if self._failure is not None:
                fut.set_exception(RuntimeError(f"the cable relay thread died: {self._failure!r}"))
                continue
            try:
                fut.set_result(fn())
            except Exception as e:  # noqa: BLE001  (the caller gets it)
                fut.set_exception(e)

    def _note(self, what: str) -> None:
        self._events.append(f"{time.monotonic() - self._t0:9.3f} {what}")

    def _reap(self) -> None:
        """Drop the connections a write failed on (not at once: the caller was mid-update)."""
        for end, conn in enumerate(self._conns):
            if conn is not None and conn.broken:
                self._drop(end, conn.broken)

    def _accept(self, end: int) -> None:
        try:
            sock, _ = self._listeners[end].accept()
        except BlockingIOError:
            return
        if self._conns[end] is not None:
            # QEMU reconnects only after a drop; a second client means the old one is gone
            self._drop(end, "replaced by a new connection")
        sock.setblocking(False)
        self._conns[end] = _Conn(sock)
        self._ends[end].connects += 1
        self._note(f"end {end}: connected")
        self._sel.register(sock, selectors.EVENT_READ, ("conn", end))

    def _drop(self, end: int, why: str) -> None:
        conn = self._conns[end]
        if conn is None:
            return
        self._ends[end].last_error = why
        self._note(f"end {end}: disconnected ({why})")
        if conn.events:
            self._sel.unregister(conn.sock)
        conn.sock.close()
        self._conns[end] = None
        self._update_link()

    def _service(self, end: int, sock: socket.socket, events: int) -> None:
        conn = self._conns[end]
        if conn is None or conn.sock is not sock or conn.broken:
            return
        if events & selectors.EVENT_WRITE:
            self._flush(end)
        if conn.broken or not events & selectors.EVENT_READ:
            return
        try:
            chunk = sock.recv(RECV_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            self._drop(end, f"recv: {e}")
            return
        if not chunk:
            self._drop(end, "closed by the device")
            return
        conn.inbuf += chunk
        try:
            for ftype, raw in split_frames(conn.inbuf):
                self._frame_in(end, ftype, raw)
        except ProtocolError as e:
            self._ends[end].protocol_errors += 1
            self._drop(end, f"protocol error: {e}")

    def _frame_in(self, end: int, ftype: int, raw: bytes) -> None:
        conn = self._conns[end]
        assert conn is not None
        body = len(raw) - HEADER.size
        if ftype == T_HELLO:
            conn.hello = parse_hello(raw)
            self._note(f"end {end}: HELLO uid={conn.hello.uid:#x} {conn.hello.max_gbps} Gb/s x{conn.hello.max_lanes}")
            self._update_link()
            return
        if ftype == T_CTL and body < CTL_HEAD.size:
            raise ProtocolError(f"CTL of {body} bytes")
        if ftype == T_DATA and not DATA_HEAD.size < body <= DATA_HEAD.size + MAX_PAYLOAD:
            raise ProtocolError(f"DATA with {body - DATA_HEAD.size} payload bytes")
        if ftype not in (T_CTL, T_DATA):
            self._ends[end].ignored += 1
            return
        if ftype == T_CTL:
            pdf, = CTL_HEAD.unpack_from(raw, HEADER.size)
            self._ctl_sent[end].append((pdf, raw[HEADER.size + CTL_HEAD.size:]))
        stats, faults = self._dirs[end], self._faults
        if self._link_params() is None:
            stats.dropped_unplugged += 1
            return
        if self._rng.random() < (faults.drop_data if ftype == T_DATA else faults.drop_ctl):
            stats.dropped_fault += 1
            return
        if ftype == T_DATA and self._rng.random() < faults.crc_error:
            flags = HEADER.size + 4
            raw = raw[:flags] + bytes([raw[flags] | DATA_FLAG_CRC_ERROR]) + raw[flags + 1:]
            stats.crc_flagged += 1
        self._schedule(end, ftype, raw)

    def _schedule(self, end: int, ftype: int, raw: bytes) -> None:
        """Deliver now, or queue for later under a delay or rate limit (keeping the order)."""
        faults, pipe = self._faults, self._pipes[end]
        if not faults.delay_ms and faults.rate_mbps is None and not pipe.pending:
            self._deliver(end, ftype, raw)
            return
        now = time.monotonic()
        release = max(now + faults.delay_ms / 1000, pipe.last_release)
        if ftype == T_DATA and faults.rate_mbps:
            seconds_per_byte = 8 / (faults.rate_mbps * 1e6)
            release = max(release, pipe.tat - faults.burst_bytes * seconds_per_byte)
            pipe.tat = max(pipe.tat, release) + (len(raw) - HEADER.size - DATA_HEAD.size) * seconds_per_byte
        pipe.last_release = release
        pipe.pending.append((release, ftype, raw))
        pipe.pending_bytes += len(raw)

    def _release_due(self) -> float | None:
        """Deliver the queued frames whose time has come; the seconds until the next one (or None)."""
        now = time.monotonic()
        nxt = []
        for end, pipe in enumerate(self._pipes):
            while pipe.pending and pipe.pending[0][0] <= now:
                _, ftype, raw = pipe.pending.popleft()
                pipe.pending_bytes -= len(raw)
                if self._link_params() is None:
                    self._dirs[end].dropped_unplugged += 1
                else:
                    self._deliver(end, ftype, raw)
            if pipe.pending:
                nxt.append(pipe.pending[0][0])
        return max(0.0, min(nxt) - now) if nxt else None

    def _deliver(self, end: int, ftype: int, raw: bytes) -> None:
        stats, peer = self._dirs[end], 1 - end
        if not self._send(peer, raw):
            stats.dropped_overflow += 1
            return
        if ftype == T_CTL:
            stats.ctl += 1
        else:
            stats.data += 1
            stats.data_bytes += len(raw) - HEADER.size - DATA_HEAD.size

    def _send(self, end: int, raw: bytes, force: bool = False) -> bool:
        """Queue raw for `end` and write what the socket takes now; False: no room (dropped)."""
        conn = self._conns[end]
        if conn is None or conn.broken:
            return False
        if not force and len(conn.outbuf) + len(raw) > 4 * self.out_limit:
            return False
        conn.outbuf += raw
        self._flush(end)
        return True

    def _flush(self, end: int) -> None:
        conn = self._conns[end]
        if conn is None or conn.broken:
            return
        try:
            while conn.outbuf:
                sent = conn.sock.send(conn.outbuf)
                del conn.outbuf[:sent]
        except BlockingIOError:
            pass
        except OSError as e:
            conn.broken = f"send: {e}"
            return
        conn.writing = bool(conn.outbuf)  # the relay thread's loop applies it (_watch)

    def _held_back(self, end: int) -> bool:
        """Is what `end` sent still waiting to go out (out_limit or more)? Then do not read it."""
        peer = self._conns[1 - end]
        waiting = self._pipes[end].pending_bytes + (len(peer.outbuf) if peer is not None else 0)
        return waiting >= self.out_limit

    def _watch(self, end: int) -> None:
        """Have the selector watch `end` for what it needs now: input unless held back, room
        for output while some waits."""
        conn = self._conns[end]
        if conn is None or conn.broken:
            return
        events = (0 if self._held_back(end) else selectors.EVENT_READ) | \
            (selectors.EVENT_WRITE if conn.writing else 0)
        if events == conn.events:
            return
        if not conn.events:
            self._sel.register(conn.sock, events, ("conn", end))
        elif not events:
            self._sel.unregister(conn.sock)
        else:
            self._sel.modify(conn.sock, events, ("conn", end))
        conn.events = events

    def _link_params(self) -> tuple[int, int] | None:
        """The link's (gbps, lanes) if it should be up: plugged, both ends connected and said HELLO."""
        if self._plugged is None:
            return None
        hellos = [c.hello if c is not None else None for c in self._conns]
        if hellos[0] is None or hellos[1] is None:
            return None
        gbps, lanes = self._plugged
        return (min(gbps, hellos[0].max_gbps, hellos[1].max_gbps),
                min(lanes, hellos[0].max_lanes, hellos[1].max_lanes))

    def _update_link(self) -> None:
        """Tell each end what changed: LINK up (speed) or down. The relay is the only source of it."""
        params = self._link_params()
        if params != self._link_noted:
            self._note(f"link {'up %d Gb/s x%d' % params if params else 'down'}")
            self._link_noted = params
        if params is None:
            for pipe, stats in zip(self._pipes, self._dirs):
                stats.dropped_unplugged += len(pipe.pending)
                pipe.pending.clear()
                pipe.pending_bytes = 0
        for end, conn in enumerate(self._conns):
            if conn is None or conn.link_sent == params:
                continue
            if conn.link_sent is not None:  # up at another speed: retrain, down first
                self._send(end, link_frame(False), force=True)
            if params is not None:
                self._send(end, link_frame(True, *params), force=True)
            conn.link_sent = params


def wait_for(predicate: Callable[[], T], timeout: float, what: str = "", interval: float = 0.05) -> T:
    """Poll until predicate() is true; return its value. TimeoutError (naming `what`) at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what or predicate}")
        time.sleep(interval)
