"""The cable relay (cable.py) against two fake usb4-nhi devices on its real UNIX sockets.

Host-only, no VM: what the two-VM tests rely on when they plug, unplug and inject faults, and the
wire format the device's C side must speak (any change here is a change to the device too).
"""

from __future__ import annotations

import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cable
from cable import (HEADER, T_CTL, T_DATA, T_LINK, Relay, ctl_frame, data_frame, hello_frame, link_frame,
                   split_frames, wait_for)

UID0, UID1 = 0x7462760000000A01, 0x7462760000000B01


class FakeDevice:
    """A device's end of the cable: raw frames over the socket, as QEMU's chardev client would."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.buf = bytearray()
        self.frames: list[tuple[int, bytes]] = []

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def recv(self, timeout: float = 5.0) -> tuple[int, bytes]:
        """The next frame (type, whole frame); TimeoutError if none comes."""
        deadline = time.monotonic() + timeout
        while not self.frames:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise ConnectionError("relay closed the connection")
            self.buf += chunk
            self.frames += split_frames(self.buf)
        return self.frames.pop(0)

    def nothing(self, wait: float = 0.3) -> bool:
        """True if no frame arrives within `wait` s."""
        try:
            self.recv(wait)
        except TimeoutError:
            return True
        return False

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the relay closed this connection (what it already sent is read and dropped)."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        except socket.timeout:
            return False
        return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def relay() -> Iterator[Relay]:
    with tempfile.TemporaryDirectory(prefix="tbv2-", dir="/tmp") as d:
        r = Relay(d, out_limit=256 * 1024, seed=1).start()
        try:
            yield r
        finally:
            r.close()


def connect_pair(relay: Relay, gbps: tuple[int, int] = (20, 20), lanes: tuple[int, int] = (1, 1)
                 ) -> tuple[FakeDevice, FakeDevice]:
    devs = (FakeDevice(relay.paths[0]), FakeDevice(relay.paths[1]))
    devs[0].send(hello_frame(UID0, gbps[0], lanes[0]))
    devs[1].send(hello_frame(UID1, gbps[1], lanes[1]))
    wait_for(lambda: relay.hello(0) == UID0 and relay.hello(1) == UID1, 5, "both HELLOs")
    return devs


def plugged_pair(relay: Relay, **plug: int) -> tuple[FakeDevice, FakeDevice]:
    devs = connect_pair(relay)
    relay.plug(**plug)
    for dev in devs:
        assert dev.recv()[0] == T_LINK
    return devs


def link_of(raw: bytes) -> tuple[int, int, int]:
    up, gbps, lanes, _ = cable.LINK.unpack_from(raw, HEADER.size)
    return up, gbps, lanes


def test_no_link_until_plugged_then_link_up_at_the_lowest_speed(relay: Relay) -> None:
    a, b = connect_pair(relay, gbps=(20, 10), lanes=(2, 2))
    assert relay.connected(0) and relay.connected(1)
    assert a.nothing() and b.nothing(), "LINK before the cable is plugged"
    assert relay.link() is None
    relay.plug(gbps=20, lanes=2)
    for dev in (a, b):
        ftype, raw = dev.recv()
        assert ftype == T_LINK and raw == link_frame(True, 10, 2)
    assert relay.link() == (10, 2)


def test_link_waits_for_both_hellos(relay: Relay) -> None:
    relay.plug()
    a = FakeDevice(relay.paths[0])
    a.send(hello_frame(UID0))
    b = FakeDevice(relay.paths[1])
    wait_for(lambda: relay.hello(0) == UID0 and relay.connected(1), 5, "end 0's HELLO, end 1 connected")
    assert a.nothing(), "LINK up before the other end said HELLO"
    b.send(hello_frame(UID1, 10, 1))
    assert link_of(a.recv()[1]) == (1, 10, 1)
    assert link_of(b.recv()[1]) == (1, 10, 1)


def test_ctl_and_data_are_forwarded_byte_exact(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    ctl = ctl_frame(6, bytes(range(40)))
    data = data_frame(8, bytes(range(256)) * 16, sof=1, eof=1)
    a.send(ctl + data)
    assert b.recv() == (T_CTL, ctl)
    assert b.recv() == (T_DATA, data)
    back = data_frame(9, b"\xff" * 4096, sof=2, eof=3)
    b.send(back)
    assert a.recv() == (T_DATA, back)
    s = relay.stats()
    assert (s.dirs[0].ctl, s.dirs[0].data, s.dirs[0].data_bytes) == (1, 1, 4096)
    assert (s.dirs[1].ctl, s.dirs[1].data, s.dirs[1].data_bytes) == (0, 1, 4096)


def test_control_packets_are_remembered_and_can_be_replayed(relay: Relay) -> None:
    """A replaying peer: what end 0 sent is kept (newest CTL_KEPT) and can be delivered to end 1
    again, byte for byte; nothing is injected while the cable is out."""
    a, b = plugged_pair(relay)
    packets = [bytes([i]) * 40 for i in range(cable.CTL_KEPT + 3)]
    for packet in packets:
        a.send(ctl_frame(6, packet))
    for packet in packets:
        assert b.recv() == (T_CTL, ctl_frame(6, packet))
    assert relay.ctl_sent(0) == [(6, p) for p in packets[-cable.CTL_KEPT:]]
    assert relay.ctl_sent(1) == []
    assert relay.inject_ctl(1, 6, packets[-1])
    assert b.recv() == (T_CTL, ctl_frame(6, packets[-1]))
    assert a.nothing()
    relay.unplug()
    assert link_of(a.recv()[1])[0] == 0 and link_of(b.recv()[1])[0] == 0
    assert not relay.inject_ctl(1, 6, packets[-1])
    assert b.nothing()


def test_unplug_sends_link_down_and_drops_frames(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    relay.unplug()
    assert link_of(a.recv()[1])[0] == 0 and link_of(b.recv()[1])[0] == 0
    a.send(ctl_frame(6, b"\0" * 12) + data_frame(8, b"x"))
    b.send(data_frame(8, b"y"))
    wait_for(lambda: relay.stats().dirs[0].dropped_unplugged == 2 and
             relay.stats().dirs[1].dropped_unplugged == 1, 5, "frames counted as dropped")
    assert a.nothing() and b.nothing()
    relay.plug(gbps=10)
    assert link_of(a.recv()[1]) == (1, 10, 1) and link_of(b.recv()[1]) == (1, 10, 1)


def test_replug_at_another_speed_retrains(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    relay.plug(gbps=10)
    for dev in (a, b):
        assert link_of(dev.recv()[1]) == (0, 0, 0)
        assert link_of(dev.recv()[1]) == (1, 10, 1)


def test_other_end_disconnecting_takes_the_link_down(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    b.close()
    assert link_of(a.recv()[1])[0] == 0
    assert not relay.connected(1)
    b2 = FakeDevice(relay.paths[1])  # QEMU reconnects and says HELLO again
    b2.send(hello_frame(UID1))
    assert link_of(a.recv()[1]) == (1, 20, 1)
    assert link_of(b2.recv()[1]) == (1, 20, 1)


def test_drop_data_fault_drops_every_data_frame_but_no_ctl(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    relay.set_faults(drop_data=1.0)
    for i in range(10):
        a.send(data_frame(8, bytes([i]) * 100))
    ctl = ctl_frame(7, b"\1" * 16)
    a.send(ctl)
    assert b.recv() == (T_CTL, ctl)
    assert b.nothing()
    s = relay.stats().dirs[0]
    assert (s.dropped_fault, s.data, s.ctl) == (10, 0, 1)


def test_crc_error_fault_flags_data_frames(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    relay.set_faults(crc_error=1.0)
    a.send(data_frame(8, b"payload", sof=1, eof=2))
    ftype, raw = b.recv()
    assert ftype == T_DATA and raw == data_frame(8, b"payload", sof=1, eof=2, flags=1)
    assert relay.stats().dirs[0].crc_flagged == 1


def test_delay_keeps_order_and_rate_limit_paces_data(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    relay.set_faults(delay_ms=200)
    t0 = time.monotonic()
    frames = [data_frame(8, bytes([i]) * 10) for i in range(5)] + [ctl_frame(6, b"c" * 8)]
    a.send(b"".join(frames))
    got = [b.recv()[1] for _ in frames]
    assert got == frames
    assert time.monotonic() - t0 >= 0.19
    # 1 Mb/s with a 16 KiB bucket: 16 KiB pass at once, the next 32 KiB take ~0.26 s
    relay.set_faults(rate_mbps=1.0)
    t0 = time.monotonic()
    for i in range(12):
        a.send(data_frame(8, bytes([i]) * 4096))
    got = [b.recv()[1][HEADER.size + 8] for _ in range(12)]
    assert got == list(range(12))
    assert time.monotonic() - t0 >= 0.2
    assert relay.stats().dirs[0].dropped_fault == 0


def test_oversize_frame_closes_that_connection_only(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    a.send(HEADER.pack(cable.MAGIC, cable.VERSION, T_DATA, cable.MAX_LEN + 1))
    assert a.closed_by_peer()
    assert link_of(b.recv()[1])[0] == 0, "the other end sees the link go down"
    s = relay.stats().ends[0]
    assert s.protocol_errors == 1 and "too long" in s.last_error


@pytest.mark.parametrize("raw", [
    struct.pack("<HBBI", 0x1234, 1, T_CTL, 4) + b"\0" * 4,  # bad magic
    struct.pack("<HBBI", cable.MAGIC, 2, T_CTL, 4) + b"\0" * 4,  # bad version
    cable.frame(T_DATA, cable.DATA_HEAD.pack(8, 0, 0, 0)),  # DATA without payload
    cable.frame(cable.T_HELLO, b"\0" * 4),  # short HELLO
], ids=["magic", "version", "empty-data", "short-hello"])
def test_malformed_frames_close_the_connection(relay: Relay, raw: bytes) -> None:
    dev = FakeDevice(relay.paths[0])
    dev.send(raw)
    assert dev.closed_by_peer()
    wait_for(lambda: relay.stats().ends[0].protocol_errors == 1, 5, "the protocol error counted")


def test_unknown_frame_types_are_skipped(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    a.send(cable.frame(99, b"future") + link_frame(True, 20, 1))  # LINK is relay -> device only
    ctl = ctl_frame(6, b"after")
    a.send(ctl)
    assert b.recv() == (T_CTL, ctl)
    assert relay.stats().ends[0].ignored == 2


def test_a_device_that_does_not_read_holds_its_peer_back_and_loses_nothing(relay: Relay) -> None:
    """As a link's credits would: once out_limit bytes wait for b, the relay stops reading a
    (a's writes block), drops nothing, and the other direction still flows; once b reads,
    every frame a sent arrives, in order."""
    a, b = plugged_pair(relay)
    b.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    a.sock.setblocking(False)
    size = len(data_frame(8, bytes(4096)))
    out = bytearray()
    sent = frames = 0
    blocked_since = None
    deadline = time.monotonic() + 20
    # b does not read: a writes until its writes have blocked for a second
    while time.monotonic() < deadline:
        if len(out) < size:
            out += data_frame(8, frames.to_bytes(4, "little") + bytes(4092))
            frames += 1
        try:
            n = a.sock.send(out)
            del out[:n]
            sent += n
            blocked_since = None
        except BlockingIOError:
            blocked_since = blocked_since or time.monotonic()
            if time.monotonic() - blocked_since > 1.0:
                break
            time.sleep(0.01)
    assert blocked_since is not None, f"a's writes never blocked after {sent} bytes"
    assert sent >= relay.out_limit, f"held back after {sent} bytes, less than out_limit"
    assert relay.stats().dirs[0].dropped_overflow == 0
    back = data_frame(9, b"still flowing")
    b.send(back)
    a.sock.setblocking(True)
    while (got := a.recv())[0] != T_DATA:
        pass
    assert got[1] == back
    # the rest of the last frame goes once b reads
    a.sock.settimeout(None)
    rest = threading.Thread(target=a.sock.sendall, args=(bytes(out),))
    rest.start()
    for i in range(frames):
        while (got := b.recv())[0] != T_DATA:
            pass
        assert int.from_bytes(got[1][HEADER.size + 8:HEADER.size + 12], "little") == i
    rest.join(5)
    assert relay.stats().dirs[0].dropped_overflow == 0
    assert relay.stats().dirs[0].data == frames

def test_second_connection_on_an_end_replaces_the_first(relay: Relay) -> None:
    a, b = plugged_pair(relay)
    b2 = FakeDevice(relay.paths[1])
    assert b.closed_by_peer()
    assert link_of(a.recv()[1])[0] == 0
    b2.send(hello_frame(UID1 + 1))
    assert link_of(a.recv()[1])[0] == 1
    assert relay.hello(1) == UID1 + 1
    assert relay.stats().ends[1].connects == 2
    assert any("disconnected (replaced" in e for e in relay.events())


def test_socket_paths_must_be_short() -> None:
    with pytest.raises(ValueError, match="too long"):
        Relay("/tmp/" + "x" * 120)
