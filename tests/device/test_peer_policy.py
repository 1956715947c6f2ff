"""Peer policy: the allowed_peers module parameter (kernel/proto/tbv_policy.c).

Empty (the default), every peer is accepted; otherwise only the listed host UUIDs get a link,
and a refused peer is logged with the reason. A malformed list is refused when it is set.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from vmlib import KmsgReader

PARAM = Path("/sys/module/thunderbolt_ibverbs/parameters/allowed_peers")
CFS = Path("/sys/kernel/config/tbverbs/vcable")
STRANGER = "01020304-0506-0708-090a-0b0c0d0e0f10"


@pytest.fixture
def cable_dir(module: str):
    d = CFS / "policy0"
    d.mkdir()
    try:
        yield d
    finally:
        PARAM.write_text("\n")
        (d / "plugged").write_text("0")
        d.rmdir()


def plug(d: Path) -> int:
    """Exactly one write (a buffered file object would retry a failed write on close)."""
    fd = os.open(d / "plugged", os.O_WRONLY)
    try:
        os.write(fd, b"1")
    except OSError as e:
        return e.errno or -1
    finally:
        os.close(fd)
    return 0


def test_malformed_lists_are_refused(module: str) -> None:
    for bad in ("nonsense", STRANGER[:-1], STRANGER + "0", STRANGER + ";" + STRANGER):
        with pytest.raises(OSError) as e:
            PARAM.write_text(bad + "\n")
        assert e.value.errno == errno.EINVAL
    assert PARAM.read_text().strip() == ""  # unchanged: still "any peer"


def test_only_listed_peers_get_a_link(cable_dir: Path) -> None:
    uuids = [(cable_dir / f"end{i}_uuid").read_text().strip() for i in (0, 1)]
    log = KmsgReader()
    try:
        PARAM.write_text(f"{STRANGER}\n")
        assert plug(cable_dir) == errno.EPERM
        lines = log.read_new()
    finally:
        log.close()
    refused = [line for line in lines if "refused: not in allowed_peers" in line]
    assert refused and uuids[1] in refused[0], lines  # end 0 refuses its peer, end 1
    assert len(refused) == 1  # the first refusal ends the plug
    assert (cable_dir / "plugged").read_text().strip() == "0"

    PARAM.write_text(f"{uuids[1]}, {uuids[0]}\n")
    assert plug(cable_dir) == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (cable_dir / "end1_ibdev").read_text().strip():
        time.sleep(0.2)
    assert (cable_dir / "end0_ibdev").read_text().strip().startswith("usb4_rdma")
    assert (cable_dir / "end1_ibdev").read_text().strip().startswith("usb4_rdma")
