"""The guest agent (agent.py) and its host end (pair.py's AgentClient/Guest) over a socketpair.

Host-only, no VM: the request handling the two-VM tests drive each guest through.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent
from pair import AgentClient, AgentError, CommandFailed, Guest


class Served:
    """An Agent serving one end of a socketpair in a thread; a Guest on the other end."""

    def __init__(self, records: list[agent.KmsgRecord] | None = None) -> None:
        self.records = records if records is not None else []
        host, guest = socket.socketpair()
        self.guest_sock = guest
        self.agent = agent.Agent(guest.fileno(), guest.fileno(), eof_is_end=True,
                                 kmsg_reader=lambda: list(self.records))
        self.rc: int | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.client = AgentClient(host, name="test")
        self.guest = Guest("t", self.client)

    def _serve(self) -> None:
        self.rc = self.agent.serve()

    def close(self) -> None:
        self.client.close()
        self.thread.join(timeout=10)
        self.guest_sock.close()


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served()
    assert s.client.hello_seen.wait(5), "no hello from the agent"
    try:
        yield s
    finally:
        s.close()


def test_hello_names_the_host_and_pid(served: Served) -> None:
    assert served.client.hello == {"hello": socket.gethostname(), "pid": os.getpid()}


def test_run_argv_and_shell(served: Served, tmp_path: Path) -> None:
    r = served.guest.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert (r.rc, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)
    r = served.guest.run('printf "%s %s" "$FOO" "$(pwd)"', env={"FOO": "bar"}, cwd=str(tmp_path))
    assert r.stdout == f"bar {tmp_path}"


def test_run_check_raises_with_the_output(served: Served) -> None:
    with pytest.raises(CommandFailed, match="(?s)exited 1.*stdout:\nnope"):
        served.guest.run("echo nope; false")


def test_run_timeout_kills_the_whole_process_group(served: Served, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    r = served.guest.run(f"sleep 60 & echo $! > {pidfile}; wait", timeout=0.5, check=False)
    assert r.timed_out and time.monotonic() - t0 < 10
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break  # killed, waiting for its reaper
        time.sleep(0.05)
    else:
        assert not Path(f"/proc/{child}").exists(), "the command's child survived the timeout"


def test_a_long_run_does_not_block_other_requests(served: Served) -> None:
    slow = threading.Thread(target=served.guest.run, args=("sleep 2",), daemon=True)
    slow.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    assert served.guest.read_file("/proc/self/stat")
    assert time.monotonic() - t0 < 1.5
    slow.join()


def test_spawn_wait_and_kill(served: Served) -> None:
    h = served.guest.spawn("sleep 0.5; echo done")
    assert served.guest.wait(h, timeout=0.05) is None
    r = served.guest.wait(h, timeout=10)
    assert r is not None and (r.rc, r.stdout) == (0, "done\n")
    assert served.guest.wait(h, timeout=1) == r, "waiting again gives the same result"

    h = served.guest.spawn(["sleep", "60"])
    assert served.guest.kill(h)
    r = served.guest.wait(h, timeout=10)
    assert r is not None and r.rc == -9 and not r.timed_out

    h = served.guest.spawn("sleep 60", timeout=0.3)
    r = served.guest.wait(h, timeout=10)
    assert r is not None and r.timed_out


def test_files_round_trip(served: Served, tmp_path: Path) -> None:
    path = str(tmp_path / "f")
    served.guest.write_file(path, "héllo\n")
    assert served.guest.read_file(path) == "héllo\n"
    with pytest.raises(AgentError, match="FileNotFoundError"):
        served.guest.read_file(str(tmp_path / "missing"))


def test_errors_are_replies(served: Served) -> None:
    with pytest.raises(AgentError, match="unknown op"):
        served.client.request("frobnicate", 5)
    with pytest.raises(AgentError, match="no job"):
        served.guest.wait(12345, timeout=0)
    with pytest.raises(AgentError, match="argv"):
        served.client.request("run", 5)
    served.client.sock.sendall(b"this is not json\n")
    assert served.guest.read_file("/proc/self/stat"), "the agent goes on after a bad line"


def test_kmsg_mark_and_since(served: Served) -> None:
    served.records[:] = [(5, "[0.1] a"), (6, "[0.2] b")]
    mark = served.guest.kmsg_mark()
    assert mark == 7 and served.guest.kmsg_since(mark) == []
    served.records.append((7, "[0.3] WARNING: c"))
    assert served.guest.kmsg_since(mark) == ["[0.3] WARNING: c"]
    served.records[:] = [(9, "[0.4] d")]  # 7 and 8 overwritten in the ring buffer
    assert served.guest.kmsg_since(mark) == ["[kmsg: 2 record(s) since the mark were overwritten]",
                                             "[0.4] d"]


def test_shutdown_replies_then_ends_and_stops_background_jobs(tmp_path: Path) -> None:
    s = Served()
    try:
        assert s.client.hello_seen.wait(5)
        h = s.guest.spawn(["sleep", "60"])
        job = s.agent.jobs[h]
        s.guest.shutdown()
        s.thread.join(timeout=5)
        assert not s.thread.is_alive() and s.rc == 0
        job.proc.wait(timeout=5)
        assert job.proc.returncode == -9
    finally:
        s.close()


def test_kmsg_record_parsing() -> None:
    assert agent.parse_seq("6,1234,5000000,-;text") == 1234
    assert agent.parse_seq("garbage") is None
    assert agent.kmsg_mark([]) == 0


def test_find_port_by_name_and_makes_a_missing_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, dev = tmp_path / "virtio-ports", tmp_path / "dev"
    for name, port, numbers in (("org.qemu.guest_agent.0", "vport0p1", "250:1"),
                                ("tbv.agent", "vport1p1", "249:1")):
        (sysfs / port).mkdir(parents=True)
        (sysfs / port / "name").write_text(name + "\n")
        (sysfs / port / "dev").write_text(numbers + "\n")
    dev.mkdir()
    made = []
    monkeypatch.setattr(agent.os, "mknod", lambda path, mode, device: made.append((path, mode, device)))
    assert agent.find_port("tbv.agent", sysfs, dev, timeout=0) == dev / "vport1p1"
    assert made == [(dev / "vport1p1", stat.S_IFCHR | 0o600, os.makedev(249, 1))]
    (dev / "vport1p1").touch()
    made.clear()
    assert agent.find_port("tbv.agent", sysfs, dev, timeout=0) == dev / "vport1p1"
    assert made == []
    with pytest.raises(FileNotFoundError):
        agent.find_port("other", sysfs, dev, timeout=0)


def test_client_fails_pending_requests_when_the_agent_goes_away() -> None:
    host, guest = socket.socketpair()
    client = AgentClient(host, name="gone")
    try:
        result: list[BaseException] = []

        def ask() -> None:
            try:
                client.request("ping", 10)
            except AgentError as e:
                result.append(e)
        t = threading.Thread(target=ask)
        t.start()
        time.sleep(0.2)
        guest.close()
        t.join(timeout=5)
        assert result and "closed" in str(result[0])
        with pytest.raises(AgentError, match="closed"):
            client.request("ping", 1)
    finally:
        client.close()
