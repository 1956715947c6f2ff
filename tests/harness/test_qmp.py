"""The QMP client (qmp.py) against a fake QEMU monitor on a UNIX socket. Host-only."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from qmp import Qmp, QmpError


def fake_qemu(path: Path, delay: float) -> threading.Thread:
    """Listen on `path` after `delay` s (QEMU not up yet); answer like QEMU's monitor, with an event."""
    def serve() -> None:
        time.sleep(delay)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lsock:
            lsock.bind(str(path))
            lsock.listen(1)
            conn, _ = lsock.accept()
            with conn, conn.makefile("rwb") as f:
                f.write(b'{"QMP": {"version": {"qemu": {"major": 7, "minor": 2}}, "capabilities": []}}\n')
                f.flush()
                props = {"crc_bad": 0}
                for line in f:
                    req = json.loads(line)
                    cmd, args = req["execute"], req.get("arguments", {})
                    f.write(b'{"event": "NIC_RX_FILTER_CHANGED", "data": {}}\n')
                    if cmd == "qom-get" and args["property"] in props:
                        reply = {"return": props[args["property"]]}
                    elif cmd == "qom-set":
                        props[args["property"]] = args["value"]
                        reply = {"return": {}}
                    elif cmd == "qmp_capabilities":
                        reply = {"return": {}}
                    else:
                        reply = {"error": {"class": "GenericError", "desc": f"no {cmd}"}}
                    f.write(json.dumps({**reply, "id": req["id"]}).encode() + b"\n")
                    f.flush()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_connects_when_qemu_comes_up_and_gets_and_sets_properties(tmp_path: Path) -> None:
    path = tmp_path / "qmp.sock"
    server = fake_qemu(path, delay=0.5)
    with Qmp(path, timeout=10) as qmp:
        assert qmp.version["qemu"]["major"] == 7
        assert qmp.qom_get("/machine/peripheral/nhi0", "crc_bad") == 0
        qmp.qom_set("/machine/peripheral/nhi0", "crc_bad", 3)
        assert qmp.qom_get("/machine/peripheral/nhi0", "crc_bad") == 3
        with pytest.raises(QmpError, match="GenericError: no query-nothing"):
            qmp.execute("query-nothing")
        assert qmp.events and qmp.events[0]["event"] == "NIC_RX_FILTER_CHANGED"
    server.join(timeout=5)


def test_gives_up_at_the_deadline(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError, match="no server"):
        Qmp(tmp_path / "nobody.sock", timeout=0.3)
