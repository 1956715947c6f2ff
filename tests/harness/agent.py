#!/usr/bin/env python3
"""The test agent: runs inside a guest of the two-VM harness (tests/harness/pair.py) as its command.

    python3 tests/harness/agent.py [--port-name tbv.agent]

The host-side tests drive each guest through it: they cannot use the VM's command line (one
command per boot) and the two guests must be driven together. It talks JSON lines over the
virtio serial port named `tbv.agent` (the host end is a UNIX socket of that VM's QEMU).

Requests (host -> guest), each answered by one reply carrying the request's "id":

    {"id": n, "op": "run", "argv": [...] | "sh": "...", "timeout": s, "env": {...}, "cwd": "..."}
        -> {"id": n, "rc": int, "stdout": str, "stderr": str, "timed_out": bool}
    {"op": "spawn", ...as run}          -> {"id", "handle": h}    (runs in the background)
    {"op": "wait", "handle": h, "timeout": s}
        -> as run's reply once it ended, else {"id", "running": true}
    {"op": "kill", "handle": h, "signal": 9} -> {"id", "killed": bool}
    {"op": "kmsg_mark"}                 -> {"id", "mark": m}
    {"op": "kmsg_since", "mark": m}     -> {"id", "lines": [...]}  (kernel log lines since the mark)
    {"op": "read_file", "path": p}      -> {"id", "data": str}
    {"op": "write_file", "path": p, "data": str} -> {"id", "ok": true}
    {"op": "ping"}                      -> {"id", "hello": hostname, "pid": pid}
    {"op": "shutdown"}                  -> {"id", "ok": true}, then the agent exits 0
    any failure                         -> {"id", "error": "..."}

On start the agent sends {"hello": hostname, "pid": pid}. Requests are served concurrently (a
thread each: a long "run" does not hold up a "kmsg_mark"); writes to the port are serialized.
Commands run in their own session, so a timeout or "kill" stops the whole process group.

When the agent exits, the VM's guest script (tests/harness/vm.py) saves the dmesg and powers off.
"""

from __future__ import annotations

import argparse
import base64
import errno
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lib"))
import kmsg  # noqa: E402  (shared kernel-log record parsing)

PORT_NAME = "tbv.agent"
VIRTIO_PORTS = Path("/sys/class/virtio-ports")
OUTPUT_LIMIT = 4 << 20  # characters of a command's stdout/stderr sent back (the end is kept)
KILL_WAIT_S = 5.0
# a virtio serial port whose host end is not open: reads return EOF, writes may block or fail
RETRY_ERRNOS = (errno.EAGAIN, errno.ENXIO, errno.EPIPE, errno.ECONNRESET, errno.EINTR)

KmsgRecord = tuple[int, str]  # (sequence number, formatted line)


def log(msg: str) -> None:
    print(f"agent: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The port


def find_port(name: str = PORT_NAME, sysfs: Path = VIRTIO_PORTS, dev: Path = Path("/dev"),
              timeout: float = 60.0) -> Path:
    """The device node of the virtio serial port called `name`, made from its major:minor if missing.

    The guest may have no udev to create it, and the port may show up a little after the
    command starts; hence the wait.
    """
    deadline = time.monotonic() + timeout
    while True:
        for entry in sorted(sysfs.glob("*")):
            try:
                if (entry / "name").read_text().strip() != name:
                    continue
                major, minor = (int(x) for x in (entry / "dev").read_text().split(":"))
            except (OSError, ValueError):
                continue
            node = dev / entry.name
            if not node.exists():
                os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(major, minor))
            return node
        if time.monotonic() > deadline:
            raise FileNotFoundError(f"no virtio serial port named {name} under {sysfs}")
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# Kernel log


def parse_seq(record: str) -> int | None:
    """The sequence number of one /dev/kmsg record ("prio,seq,usec,flags;text")."""
    head = record.partition(";")[0].split(",")
    try:
        return int(head[1])
    except (IndexError, ValueError):
        return None


def read_kmsg(path: str = "/dev/kmsg") -> list[KmsgRecord]:
    """Every record still in the kernel's ring buffer, oldest first."""
    records: list[KmsgRecord] = []
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:  # overwritten while we read: go on from the oldest
                    continue
                raise
            if not rec:
                break
            text = rec.decode(errors="replace")
            seq, line = parse_seq(text), kmsg.parse_kmsg_record(text)
            if seq is not None and line is not None:
                records.append((seq, line))
    finally:
        os.close(fd)
    return records


def kmsg_mark(records: list[KmsgRecord]) -> int:
    """A mark: the sequence number the next kernel log record will get."""
    return records[-1][0] + 1 if records else 0


def kmsg_since(records: list[KmsgRecord], mark: int) -> list[str]:
    lines = [line for seq, line in records if seq >= mark]
    if records and records[0][0] > mark:
        lines.insert(0, f"[kmsg: {records[0][0] - mark} record(s) since the mark were overwritten]")
    return lines


# ---------------------------------------------------------------------------------------------
# Commands


def clip(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else f"[... {len(text) - OUTPUT_LIMIT} chars cut]\n" + text[-OUTPUT_LIMIT:]


def kill_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> bool:
    try:
        os.killpg(proc.pid, sig)
        return True
    except ProcessLookupError:
        return False


class Job:
    """One command: started at once, its output collected by a thread, killed at its deadline."""

    def __init__(self, req: dict[str, Any]) -> None:
        if req.get("argv"):
            argv = [str(a) for a in req["argv"]]
        elif req.get("sh"):
            argv = ["/bin/sh", "-c", str(req["sh"])]
        else:
            raise ValueError("a command needs 'argv' (a list) or 'sh' (a string)")
        env = dict(os.environ, **{str(k): str(v) for k, v in (req.get("env") or {}).items()})
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=req.get("cwd"),
                                     start_new_session=True)
        self.timeout = req.get("timeout")
        self.timed_out = False
        self.result: dict[str, Any] | None = None
        self._collector = threading.Thread(target=self._collect, daemon=True)
        self._collector.start()

    def _collect(self) -> None:
        try:
            out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
            kill_group(self.proc)
            try:
                out, err = self.proc.communicate(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:  # a child left its own session with our pipes open
                self.proc.kill()
                out, err = b"", b"[agent: output lost: the pipes stayed open after the kill]"
                self.proc.wait()
        self.result = {"rc": self.proc.returncode, "stdout": clip(out.decode(errors="replace")),
                       "stderr": clip(err.decode(errors="replace")), "timed_out": self.timed_out}

    def wait(self, timeout: float | None) -> dict[str, Any] | None:
        """Its reply fields once it ended and its output is in, None if still running at the timeout."""
        self._collector.join(timeout)
        return None if self._collector.is_alive() else self.result


# ---------------------------------------------------------------------------------------------
# The agent


class Agent:
    """Serves requests read from `rfd`, writing replies to `wfd` (the same fd for the port).

    `eof_is_end`: a virtio serial port reads EOF while nobody is connected on the host side, which
    is no reason to stop (the host connects later, or again); a socket's EOF is the end.
    """

    def __init__(self, rfd: int, wfd: int, *, eof_is_end: bool = False,
                 kmsg_reader: Callable[[], list[KmsgRecord]] = read_kmsg) -> None:
        self.rfd, self.wfd = rfd, wfd
        self.eof_is_end = eof_is_end
        self.kmsg_reader = kmsg_reader
        self.jobs: dict[int, Job] = {}
        self._next_handle = 0
        self._jobs_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._done = threading.Event()

    def send(self, msg: dict[str, Any]) -> None:
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        with self._write_lock:
            while data:
                try:
                    data = data[os.write(self.wfd, data):]
                except BlockingIOError:
                    select.select([], [self.wfd], [], 1.0)
                except OSError as e:
                    if e.errno not in RETRY_ERRNOS:
                        raise
                    time.sleep(0.2)  # the host end is not open yet: try again

    def serve(self) -> int:
        """Read and dispatch requests until "shutdown" (0) or, with eof_is_end, EOF (0)."""
        self.send({"hello": socket.gethostname(), "pid": os.getpid()})
        buf = b""
        while not self._done.is_set():
            ready, _, _ = select.select([self.rfd], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(self.rfd, 65536)
            except BlockingIOError:
                continue
            except OSError as e:
                if e.errno not in RETRY_ERRNOS:
                    raise
                chunk = b""
            if not chunk:
                if self.eof_is_end:
                    break
                time.sleep(0.2)  # no host connected (select says readable for the hang-up)
                continue
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    threading.Thread(target=self._serve_one, args=(line,), daemon=True).start()
        self._kill_all()
        return 0

    def _serve_one(self, line: bytes) -> None:
        rid = None
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
            rid = req.get("id")
            reply = self.handle(req)
        except Exception as e:  # noqa: BLE001  (every failure is a reply, the agent goes on)
            reply = {"error": f"{type(e).__name__}: {e}"}
        self.send({"id": rid, **reply})
        if reply.get("shutdown"):
            self._done.set()

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "run":
            result = Job(req).wait(None)
            assert result is not None
            return result
        if op == "spawn":
            job = Job(req)
            with self._jobs_lock:
                self._next_handle += 1
                self.jobs[self._next_handle] = job
                return {"handle": self._next_handle}
        if op == "wait":
            result = self._job(req).wait(req.get("timeout"))
            return result if result is not None else {"running": True}
        if op == "kill":
            return {"killed": kill_group(self._job(req).proc, int(req.get("signal", signal.SIGKILL)))}
        if op == "kmsg_mark":
            return {"mark": kmsg_mark(self.kmsg_reader())}
        if op == "kmsg_since":
            return {"lines": kmsg_since(self.kmsg_reader(), int(req["mark"]))}
        if op == "read_file":
            data = Path(req["path"]).read_bytes()
            if req.get("binary"):
                return {"data": base64.b64encode(data).decode()}
            return {"data": data.decode(errors="replace")}
        if op == "write_file":
            data = req["data"]
            raw = base64.b64decode(data) if req.get("binary") else str(data).encode()
            with open(req["path"], "ab" if req.get("append") else "wb") as f:
                f.write(raw)
            return {"ok": True}
        if op == "ping":
            return {"hello": socket.gethostname(), "pid": os.getpid()}
        if op == "shutdown":
            return {"ok": True, "shutdown": True}
        raise ValueError(f"unknown op {op!r}")

    def _job(self, req: dict[str, Any]) -> Job:
        with self._jobs_lock:
            job = self.jobs.get(int(req["handle"]))
        if job is None:
            raise KeyError(f"no job with handle {req['handle']}")
        return job

    def _kill_all(self) -> None:
        """Stop what is still running in the background: the VM is about to power off."""
        with self._jobs_lock:
            jobs = list(self.jobs.values())
        for job in jobs:
            if job.proc.poll() is None:
                kill_group(job.proc)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="The two-VM harness' agent (runs in the guest).")
    p.add_argument("--port-name", default=PORT_NAME, help="virtio serial port name (default: %(default)s)")
    args = p.parse_args(argv)
    port = find_port(args.port_name)
    fd = os.open(port, os.O_RDWR | os.O_NOCTTY)
    log(f"serving on {port}")
    rc = Agent(fd, fd).serve()
    log("shutting down")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
