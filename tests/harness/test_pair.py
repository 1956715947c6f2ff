"""The Pair's life cycle (pair.py) with a fake run_vm standing in for vng and QEMU. Host-only, no VM.

The fake plays the part of a VM: it serves the agent socket QEMU would make (an Agent on it, as
the guest would run), then writes the dmesg the guest script would save. What is tested is the
harness around it: two VMs from two threads, hello, shutdown, the final logs, boot failures.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import agent
import pair as pairmod
import vm
from pair import Pair, PairError

SETTINGS = {"TBV_VENV": "/nonexistent/venv", "TBV_CACHE": "/nonexistent/cache", "KVER_612": "6.12.95+deb12-amd64"}
FakeVm = Callable[..., vm.VmResult]


def agent_socket(opts: vm.VmOptions) -> str:
    joined = " ".join(opts.qemu_opts)
    found = re.search(r"socket,id=agent,path=([^,]+),server=on", joined)
    assert found, joined
    return found.group(1)


def fake_vm(dmesg_lines: dict[str, list[str]], fail: str = "", silent: str = "") -> FakeVm:
    """A run_vm that serves an agent; VM `fail` dies at boot, VM `silent` never says hello."""
    def run_vm(cmd: list[str], opts: vm.VmOptions, settings: dict[str, str] | None = None, *,
               output: vm.OutputSink = None, logs: vm.VmLogs | None = None,
               stop: threading.Event | None = None) -> vm.VmResult:
        assert cmd[-1].endswith("tests/harness/agent.py") and logs is not None and stop is not None
        assert opts.tag is not None
        logs.console.write_text(f"booting {opts.name}\n")
        if opts.tag == fail:
            with logs.console.open("a") as f:
                f.write("Kernel panic - not syncing: VFS: Unable to mount root fs\n")
            return vm.VmResult(vm.EXIT_GUEST_DIED, False, False, None, 0.1, logs.console, logs.dmesg)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lsock:
            lsock.bind(agent_socket(opts))
            lsock.listen(1)
            lsock.settimeout(0.1)
            while not stop.is_set():
                try:
                    conn, _ = lsock.accept()
                    break
                except socket.timeout:
                    continue
            else:
                return vm.VmResult(vm.EXIT_GUEST_DIED, False, False, None, 0.1, logs.console, logs.dmesg)
            with conn:
                if opts.tag == silent:
                    stop.wait()
                    return vm.VmResult(vm.EXIT_GUEST_DIED, False, False, None, 0.1, logs.console, logs.dmesg)
                served = agent.Agent(conn.fileno(), conn.fileno(), eof_is_end=True,
                                     kmsg_reader=lambda: [(0, "[0.0] Linux version 6.12")])
                rc = served.serve()
        logs.dmesg.write_text("\n".join(dmesg_lines.get(opts.tag, [])) + "\n")
        return vm.VmResult(rc, False, True, 1.0, 2.0, logs.console, logs.dmesg)
    return run_vm


def make_pair(tmp_path: Path, **kw: float) -> Pair:
    return Pair(qemu="/opt/qemu", kernel="/boot/vmlinuz", settings=SETTINGS, log_dir=tmp_path, **kw)


def test_two_vms_come_up_run_commands_and_shut_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pairmod.vm, "run_vm", fake_vm({"b": ["[1.0] ok", "[2.0] WARNING: CPU: 0 PID: 1 at x"]}))
    with make_pair(tmp_path) as p:
        assert p.dir is not None and (p.dir / "cable0.sock").exists() and (p.dir / "cable1.sock").exists()
        assert p.a.run("echo a").stdout == "a\n"
        assert p.b.run(["sh", "-c", "echo b"]).stdout == "b\n"
        assert p.a.kmsg_since(p.a.kmsg_mark()) == []
        assert not p.relay.connected(0)
        temp = p.dir
    assert not temp.exists(), "the temp dir with the sockets is left behind"
    assert {tag: r.returncode for tag, r in p.results.items() if r} == {"a": 0, "b": 0}
    assert p.final_bad == {"a": [], "b": ["[2.0] WARNING: CPU: 0 PID: 1 at x"]}
    names = sorted(f.name for f in tmp_path.iterdir())
    assert any(n.endswith("-a-console.txt") for n in names) and any(n.endswith("-b-dmesg.txt") for n in names)


def test_a_vm_that_dies_at_boot_raises_with_its_console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pairmod.vm, "run_vm", fake_vm({}, fail="b"))
    p = make_pair(tmp_path)
    with pytest.raises(PairError, match="(?s)VM b: the VM ended before its agent said hello.*Kernel panic"):
        with p:
            pass
    assert all(not t.is_alive() for t in p.threads.values())
    assert p.results["a"] is not None and p.results["a"].finished, "VM a was not shut down cleanly"


def test_an_agent_that_never_says_hello_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pairmod.vm, "run_vm", fake_vm({}, silent="a"))
    p = make_pair(tmp_path, boot_timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(PairError, match="(?s)VM a: no hello from the agent in 1s.*booting tbv-a"):
        with p:
            pass
    assert time.monotonic() - t0 < 30, "the silent VM was waited for instead of stopped"
    assert all(not t.is_alive() for t in p.threads.values())


def test_each_cable_gives_each_vm_a_controller_on_its_own_relay(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """cables=2: each VM has two usb4-nhi (distinct uids, so distinct host router UUIDs), the
    k-th on end `VM` of cable k's relay, and every relay's sockets exist."""
    seen: dict[str, list[str]] = {}
    inner = fake_vm({})

    def run_vm(cmd: list[str], opts: vm.VmOptions, *args: object, **kw: object) -> vm.VmResult:
        assert opts.tag is not None
        seen[opts.tag] = list(opts.qemu_opts)
        return inner(cmd, opts, *args, **kw)

    monkeypatch.setattr(pairmod.vm, "run_vm", run_vm)
    with Pair(qemu="/opt/qemu", kernel="/boot/vmlinuz", settings=SETTINGS, log_dir=tmp_path, cables=2) as p:
        assert p.dir is not None
        assert len(p.relays) == 2 and p.relay is p.relays[0]
        for k in range(2):
            for end in range(2):
                assert (Pair.cable_dir(p.dir, k) / f"cable{end}.sock").exists(), (k, end)
        assert not p.relays[1].connected(0)
        temp = p.dir
    uids = set()
    for end, tag in enumerate(("a", "b")):
        joined = " ".join(seen[tag])
        devices = re.findall(r"usb4-nhi,id=nhi(\d),chardev=(\w+),uid=(0x[0-9a-f]+)", joined)
        assert [d[0] for d in devices] == ["0", "1"], joined
        for k, chardev, uid in devices:
            path = re.search(rf"socket,id={chardev},path=([^,]+),", joined)
            assert path and path.group(1) == f"{Pair.cable_dir(temp, int(k))}/cable{end}.sock", joined
            uids.add(uid)
    assert len(uids) == 4, f"the four controllers' uids are not distinct: {uids}"
    with pytest.raises(ValueError, match="cables=0"):
        Pair(qemu="/opt/qemu", kernel="/boot/vmlinuz", settings=SETTINGS, log_dir=tmp_path, cables=0)


def test_an_abandoned_guest_is_stopped_not_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A guest that said hello and then cannot answer (its root filesystem gone after a
    suspend): abandon() makes the end stop its VM at once instead of asking its agent and
    waiting minutes; the other guest still shuts down cleanly."""
    inner = fake_vm({})

    def run_vm(cmd: list[str], opts: vm.VmOptions, settings: dict[str, str] | None = None, *,
               output: vm.OutputSink = None, logs: vm.VmLogs | None = None,
               stop: threading.Event | None = None) -> vm.VmResult:
        if opts.tag != "b":
            return inner(cmd, opts, settings, output=output, logs=logs, stop=stop)
        assert logs is not None and stop is not None
        logs.console.write_text("booting tbv-b\n")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lsock:
            lsock.bind(agent_socket(opts))
            lsock.listen(1)
            conn, _ = lsock.accept()
            with conn:
                conn.sendall(b'{"hello":"tbv-b","pid":1}\n')
                stop.wait()  # never answers again; only the stop event ends it
        return vm.VmResult(vm.EXIT_GUEST_DIED, False, False, None, 0.1, logs.console, logs.dmesg)

    monkeypatch.setattr(pairmod.vm, "run_vm", run_vm)
    with make_pair(tmp_path) as p:
        p.abandon("b")
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 30, "the abandoned guest was waited for"
    assert p.results["a"] is not None and p.results["a"].finished
    assert p.results["b"] is not None and not p.results["b"].finished
