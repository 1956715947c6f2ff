"""A hostile peer on the control channel: its LOGIN replayed and mangled, storms of refused
logins, logouts and logins as fast as it can send them (issue 23, item 3).

End 1 of a virtual cable injects control packets it never sent (the cable's end1_ctl_inject
attribute, testing only) to end 0. The link stays up when it should, comes back after a storm,
and the kernel log gets a few lines, not one per packet. Each test has a cable of its own: most
take the link down on purpose.
"""

from __future__ import annotations

import random
import re
import struct
import time
from pathlib import Path

import pytest

from hostile import CFS
from pairlib import Pair, hw
from vmlib import KmsgReader, VcableFactory, wait_for

# on the sanitizer kernel too: make test-debug (issue 23: what a peer or a user can reach)
pytestmark = pytest.mark.sanitizer_subset


def protocol_uuids() -> tuple[bytes, bytes]:
    """The control protocol's UUIDs, one per direction of requests, read from the array in
    kernel/proto/tbv_login.c that the module is built from."""
    source = (Path(__file__).resolve().parents[2] / "kernel" / "proto" / "tbv_login.c").read_text()
    array = re.search(r"tbv_login_protocol_uuid\[2\]\[TBV_UUID_LEN\] = \{(.*?)\};", source, re.S)
    assert array, "tbv_login_protocol_uuid not found in kernel/proto/tbv_login.c"
    octets = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-fA-F]{2})", array.group(1)))
    assert len(octets) == 32, f"tbv_login_protocol_uuid has {len(octets)} bytes, not 2 x 16"
    return octets[:16], octets[16:]


PROTOCOL_UUIDS = protocol_uuids()


def other_direction(protocol_uuid: bytes) -> bytes:
    assert protocol_uuid in PROTOCOL_UUIDS, protocol_uuid.hex()
    return PROTOCOL_UUIDS[protocol_uuid == PROTOCOL_UUIDS[0]]


def wait_counter(ibdev: str, name: str, want: int, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while (value := hw(ibdev, name)) < want and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def test_control_channel_replays_and_garbage_change_nothing(pair: Pair) -> None:
    """The peer's control channel: its own login replayed many times is answered and changes
    nothing; malformed requests (short, long, wrong length field, unknown type, addressed to
    another host or from another sender) are counted and dropped; the link stays up."""
    cfs = CFS / pair.cable.name
    dev = pair.cable.end0.ibdev
    login = (cfs / "end1_ctl_last").read_bytes()
    assert len(login) >= 68 and struct.unpack_from("<I", login, 60)[0] == 1, login.hex()  # LOGIN
    ups, rejected = hw(dev, "link_ups"), hw(dev, "ctl_rx_rejected")

    def inject(data: bytes) -> None:
        (cfs / "end1_ctl_inject").write_bytes(data)

    for _ in range(50):
        inject(login)
    time.sleep(1)  # answered in the control work; nothing to count
    assert hw(dev, "ctl_rx_rejected") == rejected
    assert hw(dev, "link_ups") == ups

    rng = random.Random(11)
    words = len(login) // 4

    def with_word(data: bytes, offset: int, value: int) -> bytes:
        return data[:offset] + struct.pack("<I", value) + data[offset + 4:]

    bad = [
        login[:-4],                                            # short (length field too)
        with_word(login[:-4], 8, (struct.unpack_from("<I", login, 8)[0] & ~0x3F) | (words - 4)),
        login + bytes(4),                                      # long
        with_word(login, 8, struct.unpack_from("<I", login, 8)[0] ^ 1),  # length field
        with_word(login, 60, 99),                              # unknown type
        login[:44] + rng.randbytes(16) + login[60:],           # to another host
        login[:28] + rng.randbytes(16) + login[44:],           # from another host
        login[:12] + other_direction(login[12:28]) + login[28:],  # our UUID of the other direction
    ]
    expected = rejected
    for i in range(10):
        for data in bad:
            inject(data)
            expected += 1
        # the receiving queue holds 64: let it drain before the next round
        assert wait_counter(dev, "ctl_rx_rejected", expected) == expected, f"round {i}"
    assert hw(dev, "link_ups") == ups
    assert (cfs / "end0_ibdev").read_text().strip() == dev
    # a flood beyond the queue is dropped, not queued without bound; the link stays up
    for _ in range(500):
        inject(bad[4])
    assert wait_counter(dev, "ctl_rx_rejected", expected + 500, timeout=3) <= expected + 500
    assert hw(dev, "link_ups") == ups
    # and still carries traffic
    srv, cli = pair.run(["ibv_rc_pingpong", "-d", pair.cable.end1.ibdev, "-g", str(pair.gids[1]),
                         "-n", "20"],
                        ["ibv_rc_pingpong", "-d", dev, "-g", str(pair.gids[0]), "-n", "20",
                         pair.ips[1]])
    assert "iters in" in cli and "iters in" in srv


# kernel/proto/tbv_peer_limit.h: lines about the peer a minute, peer-forced teardowns a minute
PEER_LOG_LINES = 5
CHURN_MAX = 6
LOGIN_SESSION, LOGIN_RAILS, MSG_TYPE, LENGTH_SN = 104, 76, 60, 8
LOGIN, LOGOUT = 1, 3


def with_word(data: bytes, offset: int, value: int) -> bytes:
    return data[:offset] + struct.pack("<I", value) + data[offset + 4:]


def logout_of(login: bytes) -> bytes:
    """A LOGOUT from the host that sent `login`: its header alone (14 words after the first 3)."""
    length_sn = struct.unpack_from("<I", login, LENGTH_SN)[0]
    return with_word(with_word(login[:68], LENGTH_SN, (length_sn & ~0x3F) | 14), MSG_TYPE, LOGOUT)


def link_lines(lines: list[str], ibdev: str, text: str) -> list[str]:
    """The kernel log lines of the link whose ib device is `ibdev` (link N: usb4_rdmaN) with `text`."""
    tag = f"link {ibdev.removeprefix('usb4_rdma')}: "
    return [line for line in lines if tag in line and text in line]


def test_a_storm_of_refused_logins_logs_a_few_lines(vcable_factory: VcableFactory) -> None:
    """Issue 23, item 3: the peer sends 200 LOGINs, each as a new session with parameters we
    refuse (no rails). Each is refused; the first takes the link down; the log gets at most
    PEER_LOG_LINES lines about them in the minute, not one per session (before: 200). The
    peer's genuine login then brings the link back, once."""
    cable = vcable_factory.add()
    cfs = CFS / cable.name
    dev = cable.end0.ibdev
    login = (cfs / "end1_ctl_last").read_bytes()
    assert struct.unpack_from("<I", login, MSG_TYPE)[0] == LOGIN, login.hex()
    ups = hw(dev, "link_ups")
    reader = KmsgReader()
    try:
        for i in range(200):
            (cfs / "end1_ctl_inject").write_bytes(with_word(with_word(login, LOGIN_SESSION, 0x7000 + i),
                                                            LOGIN_RAILS, 0))
            if i % 40 == 39:
                time.sleep(1)  # the control queue holds 64 packets
        assert wait_for(lambda: not (cfs / "end0_ibdev").read_text().strip(), 10), "the link stayed up"
        time.sleep(1)
        lines = reader.read_new()
        refusals = link_lines(lines, dev, "refusing peer")
        assert 1 <= len(refusals) <= PEER_LOG_LINES, \
            f"{len(refusals)} refusal lines:\n" + "\n".join(refusals[:8])
        (cfs / "end1_ctl_inject").write_bytes(login)  # the peer's own session again
        assert wait_for(lambda: (cfs / "end0_ibdev").read_text().strip() == dev, 30), "the link did not come back"
        assert wait_for(lambda: hw(dev, "link_ups") == ups + 1, 5), hw(dev, "link_ups")
        assert hw(dev, "peer_teardowns") == 1  # a new cable's link: from 0
    finally:
        reader.close()


def test_logout_and_login_cycles_back_off(vcable_factory: VcableFactory) -> None:
    """Issue 23, item 3: the peer logs out and in again as fast as it can for 25 s (each LOGOUT
    while up takes our devices down). Our next login waits 1 s, then 2, 4, 8 s ..., and never so
    little that more than CHURN_MAX teardowns fall in a minute: at most CHURN_MAX bring-ups in
    the storm (before: one per cycle, dozens), the delays logged as they double, at most
    PEER_LOG_LINES lines about the LOGOUTs, and the link back up after it."""
    cable = vcable_factory.add()
    cfs = CFS / cable.name
    dev = cable.end0.ibdev
    login = (cfs / "end1_ctl_last").read_bytes()
    assert struct.unpack_from("<I", login, MSG_TYPE)[0] == LOGIN, login.hex()
    logout = logout_of(login)
    ups = hw(dev, "link_ups")
    reader = KmsgReader()
    try:
        cycles = 0
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            (cfs / "end1_ctl_inject").write_bytes(logout)
            (cfs / "end1_ctl_inject").write_bytes(login)
            cycles += 1
            time.sleep(0.2)
        lines = reader.read_new()
        bring_ups = link_lines(lines, dev, "up to peer")
        assert cycles >= 50 and bring_ups, (cycles, bring_ups)
        assert len(bring_ups) <= CHURN_MAX, f"{len(bring_ups)} bring-ups in a storm of {cycles} cycles"
        delays = [int(m.group(1)) for line in link_lines(lines, dev, "took the link down")
                  if (m := re.search(r"next login in (\d+) ms", line))]
        assert delays[:4] == [1000, 2000, 4000, 8000][:len(delays)], delays
        assert all(d >= 16000 for d in delays[4:]), delays
        assert len(link_lines(lines, dev, "logged out")) <= PEER_LOG_LINES
        # back once the storm is over (the last wait may be most of a minute)
        assert wait_for(lambda: (cfs / "end0_ibdev").read_text().strip() == dev, 90), "the link did not come back"
        done = hw(dev, "peer_teardowns")  # a new cable's link: from 0
        assert 3 <= done <= CHURN_MAX, done
        assert len(delays) == done - 1, (delays, done)
        assert 1 <= hw(dev, "link_ups") - ups <= done
    finally:
        reader.close()
