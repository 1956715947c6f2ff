"""A small synchronous QMP client over a UNIX socket (QEMU run with `-qmp unix:PATH,server=on,wait=off`).

The two-VM tests read and set the usb4-nhi device's QOM properties (counters, runtime knobs)
through it. Not `vng --qmp`: that is a fixed TCP port, which two VMs would fight over.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any


class QmpError(Exception):
    """QEMU answered a command with an error (its class and description are in the message)."""


class Qmp:
    """One QMP session: connect (retrying until QEMU has made the socket), negotiate, execute."""

    def __init__(self, path: str | Path, timeout: float = 60.0, reply_timeout: float = 30.0) -> None:
        self.path = str(path)
        self.reply_timeout = reply_timeout
        self.events: list[dict[str, Any]] = []  # asynchronous events seen while waiting for replies
        self._lock = threading.Lock()
        self._next_id = 0
        self._sock = connect_unix(self.path, timeout)
        self._sock.settimeout(reply_timeout)
        self._file = self._sock.makefile("rb")
        greeting = self._read()
        if "QMP" not in greeting:
            raise QmpError(f"not a QMP greeting: {greeting}")
        self.version = greeting["QMP"].get("version", {})
        self.execute("qmp_capabilities")

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> Qmp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> dict[str, Any]:
        line = self._file.readline()
        if not line:
            raise ConnectionError(f"QMP connection {self.path} closed (QEMU gone?)")
        return json.loads(line)

    def execute(self, command: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Run one command; its "return" value. Arguments with a '-' in their name go in `arguments`."""
        args = {**(arguments or {}), **kwargs}
        with self._lock:
            self._next_id += 1
            cid = self._next_id
            msg: dict[str, Any] = {"execute": command, "id": cid}
            if args:
                msg["arguments"] = args
            self._sock.sendall(json.dumps(msg).encode() + b"\n")
            while True:
                reply = self._read()
                if "event" in reply:
                    self.events.append(reply)
                    continue
                if reply.get("id") != cid:
                    continue  # a reply to an earlier command that timed out on our side
                if "error" in reply:
                    err = reply["error"]
                    raise QmpError(f"{command}: {err.get('class')}: {err.get('desc')}")
                return reply.get("return")

    def qom_get(self, path: str, prop: str) -> Any:
        return self.execute("qom-get", path=path, property=prop)

    def qom_set(self, path: str, prop: str, value: Any) -> None:
        self.execute("qom-set", path=path, property=prop, value=value)


def connect_unix(path: str, timeout: float) -> socket.socket:
    """A connected UNIX stream socket, retrying while the server has not made or opened it yet."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            if time.monotonic() > deadline:
                raise TimeoutError(f"no server on {path} after {timeout:g}s: {e}") from e
            time.sleep(0.2)
