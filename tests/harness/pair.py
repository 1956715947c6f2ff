"""Two VMs joined by an emulated USB4 cable, driven from the host: the two-VM harness (tests/usb4).

    with Pair() as pair:
        pair.relay.plug()
        pair.a.run(["modprobe", "thunderbolt"])
        print(pair.b.run("ls /sys/bus/thunderbolt/devices").stdout)

Each VM (tests/harness/vm.py's run_vm, in a thread of its own) runs the QEMU built with the
usb4-nhi device (TBV_QEMU), one per cable; a cable's two devices are clients of the two ends of
its relay in this process (tests/harness/cable.py), which owns the link state. Each guest's
command is the agent (tests/harness/agent.py), reached over a virtio serial port whose host end is a UNIX socket here;
QMP is another socket. All sockets live in one short temp dir (UNIX paths must stay < 108 bytes).

The VMs' console, dmesg and agent output go to build/vm-logs/<stamp>-{a,b}-*.txt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HARNESS = Path(__file__).resolve().parent
sys.path.insert(0, str(HARNESS))
import vm  # noqa: E402
from cable import Relay  # noqa: E402
from qmp import Qmp, connect_unix  # noqa: E402

import kmsg  # noqa: E402  (on sys.path through vm)

AGENT = HARNESS / "agent.py"
# uid of each VM's usb4-nhi: the router UUID is made from it, so it must differ between the two
# VMs and between one VM's controllers (cable k's controller adds k << 16)
UIDS = {"a": 0x7462760000000A01, "b": 0x7462760000000B01}
# the emulated NHI's strictness (docs/emulator.md, "Profiles"); TBV_NHI_PROFILE unset or empty:
# the strictest, strix
NHI_PROFILES = ("lenient", "intel", "amd", "strix")
DEFAULT_NHI_PROFILE = "strix"
BOOT_TIMEOUT_S = 240.0  # two TCG guests share 2 host cores: boot until the agent's hello
REPLY_MARGIN_S = 30.0  # on top of a command's own timeout, for the agent's round trip
SHUTDOWN_WAIT_S = 180.0  # the agent's exit, the guest's dmesg dump and power-off
CONSOLE_TAIL = 40



def nhi_profile_from_env() -> str:
    """The emulated NHI's profile and overrides the run asks for (make test-vm2 NHI_PROFILE=...)."""
    return os.environ.get("TBV_NHI_PROFILE") or DEFAULT_NHI_PROFILE

class PairError(Exception):
    """A VM of the pair did not come up (its console's tail is in the message)."""


class AgentError(Exception):
    """The agent could not do what was asked (or the connection to it is gone)."""


@dataclass(frozen=True)
class RunResult:
    rc: int
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out


class CommandFailed(AssertionError):
    """A guest command exited non-zero or timed out (an assertion: tests report it as a failure)."""


# ---------------------------------------------------------------------------------------------
# The agent's host end


class AgentClient:
    """JSON-lines requests to one agent over a connected socket; replies matched by id.

    A reader thread takes the replies; any number of threads may send requests at once.
    """

    def __init__(self, sock: socket.socket, name: str = "agent") -> None:
        self.sock = sock
        self.name = name
        self.hello: dict[str, Any] | None = None
        self.hello_seen = threading.Event()
        self.closed = threading.Event()
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # one request's line at a time on the socket
        self._next_id = 0
        self._reader = threading.Thread(target=self._read_loop, name=f"{name}-reader", daemon=True)
        self._reader.start()

    def _read_loop(self) -> None:
        buf = b""
        try:
            while chunk := self.sock.recv(65536):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        msg = json.loads(line) if line.strip() else None
                    except ValueError:
                        continue  # not the agent's (no reply can be matched to it anyway)
                    if isinstance(msg, dict):
                        self._dispatch(msg)
        except OSError:
            pass
        finally:
            self.closed.set()
            with self._lock:
                pending, self._pending = self._pending, {}
            for fut in pending.values():
                fut.set_exception(AgentError(f"{self.name}: connection to the agent closed"))

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "hello" in msg and "id" not in msg:
            self.hello = msg
            self.hello_seen.set()
            return
        with self._lock:
            fut = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if fut is not None:
            fut.set_result(msg)

    def request(self, op: str, wait: float, **fields: Any) -> dict[str, Any]:
        """Send one request and return its reply; AgentError on an error reply or no reply in `wait` s."""
        fut: Future[dict[str, Any]] = Future()
        with self._lock:
            if self.closed.is_set():
                raise AgentError(f"{self.name}: connection to the agent closed")
            self._next_id += 1
            rid = self._next_id
            self._pending[rid] = fut
        try:
            with self._send_lock:
                self.sock.sendall(json.dumps({"id": rid, "op": op, **fields}).encode() + b"\n")
            reply = fut.result(timeout=wait)
        except TimeoutError as e:
            raise AgentError(f"{self.name}: no reply to {op} in {wait:g}s") from e
        except OSError as e:
            raise AgentError(f"{self.name}: {op}: {e}") from e
        finally:
            with self._lock:
                self._pending.pop(rid, None)
        if "error" in reply:
            raise AgentError(f"{self.name}: {op}: {reply['error']}")
        return reply

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(timeout=5)


def command_fields(cmd: list[str] | str, timeout: float | None, env: dict[str, str] | None,
                   cwd: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"argv": list(cmd)} if isinstance(cmd, list) else {"sh": cmd}
    if timeout is not None:
        fields["timeout"] = timeout
    if env:
        fields["env"] = env
    if cwd:
        fields["cwd"] = cwd
    return fields


def result_of(reply: dict[str, Any]) -> RunResult:
    return RunResult(reply["rc"], reply["stdout"], reply["stderr"], reply["timed_out"])


def describe(cmd: list[str] | str, r: RunResult) -> str:
    what = " ".join(cmd) if isinstance(cmd, list) else cmd
    how = "timed out" if r.timed_out else f"exited {r.rc}"
    return f"{what!r} {how}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


class Guest:
    """One VM of the pair, as the tests see it: commands, files, kernel log, QMP."""

    def __init__(self, tag: str, client: AgentClient, qmp_path: Path | None = None) -> None:
        self.tag = tag
        self.agent = client
        self.qmp_path = qmp_path
        self._qmp: Qmp | None = None

    def __repr__(self) -> str:
        return f"Guest({self.tag})"

    def run(self, cmd: list[str] | str, timeout: float = 120, check: bool = True,
            env: dict[str, str] | None = None, cwd: str | None = None) -> RunResult:
        """Run argv (a list) or a shell command line (a str); check: CommandFailed unless it exits 0."""
        reply = self.agent.request("run", timeout + REPLY_MARGIN_S, **command_fields(cmd, timeout, env, cwd))
        r = result_of(reply)
        if check and not r.ok:
            raise CommandFailed(f"{self.tag}: {describe(cmd, r)}")
        return r

    def spawn(self, cmd: list[str] | str, timeout: float | None = None, env: dict[str, str] | None = None,
              cwd: str | None = None) -> int:
        """Start a command in the background; a handle for wait() and kill()."""
        return self.agent.request("spawn", REPLY_MARGIN_S, **command_fields(cmd, timeout, env, cwd))["handle"]

    def wait(self, handle: int, timeout: float = 60) -> RunResult | None:
        """The spawned command's result, or None if it is still running after `timeout` s."""
        reply = self.agent.request("wait", timeout + REPLY_MARGIN_S, handle=handle, timeout=timeout)
        return None if reply.get("running") else result_of(reply)

    def kill(self, handle: int, sig: int = 9) -> bool:
        return self.agent.request("kill", REPLY_MARGIN_S, handle=handle, signal=sig)["killed"]

    def kmsg_mark(self) -> int:
        return self.agent.request("kmsg_mark", REPLY_MARGIN_S)["mark"]

    def kmsg_since(self, mark: int) -> list[str]:
        return self.agent.request("kmsg_since", REPLY_MARGIN_S, mark=mark)["lines"]

    def read_file(self, path: str) -> str:
        return self.agent.request("read_file", REPLY_MARGIN_S, path=path)["data"]

    def write_file(self, path: str, data: str) -> None:
        self.agent.request("write_file", REPLY_MARGIN_S, path=path, data=data)

    def wait_until(self, condition: str, timeout: float, interval: float = 0.2) -> bool:
        """Whether the shell condition became true within `timeout` s (polled in the guest: one round trip)."""
        r = self.run(f"until {condition}; do sleep {interval}; done", timeout=timeout, check=False)
        return r.ok

    def wait_for_path(self, path: str, timeout: float, gone: bool = False) -> bool:
        test = f"[ {'!' if gone else ''} -e {path} ]"
        return self.wait_until(test, timeout)

    @property
    def qmp(self) -> Qmp:
        """The VM's QMP session (connected on first use)."""
        if self._qmp is None:
            if self.qmp_path is None:
                raise AgentError(f"{self.tag}: no QMP socket")
            self._qmp = Qmp(self.qmp_path, timeout=30)
        return self._qmp

    def qemu_pid(self) -> int:
        """The host process of the VM's QEMU: the one its first vCPU thread belongs to (QMP)."""
        tid = self.qmp.execute("query-cpus-fast")[0]["thread-id"]
        status = Path(f"/proc/{tid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Tgid:")))

    def shutdown(self) -> None:
        """Ask the agent to exit: the guest then saves its dmesg and powers off."""
        self.agent.request("shutdown", REPLY_MARGIN_S)

    def close(self) -> None:
        if self._qmp is not None:
            self._qmp.close()
            self._qmp = None
        self.agent.close()


# ---------------------------------------------------------------------------------------------
# The pair


class VmThread(threading.Thread):
    """run_vm in a thread; `result` (a VmResult) or `error` once it ends."""

    def __init__(self, cmd: list[str], opts: vm.VmOptions, settings: dict[str, str]) -> None:
        super().__init__(name=f"vm-{opts.tag}", daemon=True)
        self.cmd, self.opts, self.settings = cmd, opts, settings
        self.logs = vm.log_paths(opts)
        self.stop = threading.Event()
        self.result: vm.VmResult | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = vm.run_vm(self.cmd, self.opts, self.settings, output=self.logs.output,
                                    logs=self.logs, stop=self.stop)
        except BaseException as e:  # noqa: BLE001  (the Pair reports it)
            self.error = e

    def console_tail(self, lines: int = CONSOLE_TAIL) -> str:
        try:
            text = self.logs.console.read_text(errors="replace")
        except OSError:
            return f"(no console log at {self.logs.console})"
        return "\n".join(text.splitlines()[-lines:])


class Pair:
    """Two VMs (a, b) joined by `cables` cables (unplugged at first): for each cable, one usb4-nhi
    in each VM (a host controller of its own, as a host with two USB4 ports on two
    controllers) and a relay between them."""

    def __init__(self, *, qemu: str | None = None, kernel: str | None = None, cpus: int = 1,
                 memory: str = "2G", boot_timeout: float = BOOT_TIMEOUT_S, vm_timeout: float = 3600.0,
                 append: list[str] | None = None, settings: dict[str, str] | None = None,
                 iommu: bool = True, cables: int = 1, log_dir: Path = vm.REPO / "build" / "vm-logs",
                 udev: bool = True, nhi_profile: str | None = None) -> None:
        if not 1 <= cables <= 4:
            raise ValueError(f"cables={cables}: a pair has 1 to 4 cables")
        # make test-vm2 NHI_PROFILE=amd passes it as TBV_NHI_PROFILE
        self.nhi_profile = nhi_profile_from_env() if nhi_profile is None else nhi_profile
        # a profile and settings overriding it: "amd,msix-vectors=4,sof=zero"
        name, *overrides = self.nhi_profile.split(",")
        if name not in NHI_PROFILES:
            raise ValueError(f"NHI profile {name!r}: not one of {', '.join(NHI_PROFILES)}")
        bad = [o for o in overrides if not re.fullmatch(r"[a-z-]+=[a-z0-9-]+", o)]
        if bad:
            raise ValueError(f"NHI profile {self.nhi_profile!r}: {bad[0]!r} is not a setting=value")
        self.settings = settings or vm.tbv_settings()
        self.qemu = qemu or vm.emulator_qemu(self.settings)
        self.kernel = kernel or vm.default_kernel(self.settings)
        self.cpus, self.memory = cpus, memory
        # make test's deadline (TBV_DEADLINE) may come first: the guests stop before it
        self.boot_timeout = boot_timeout
        self.vm_timeout = vm.run_deadline(vm_timeout, os.environ.get("TBV_DEADLINE"))
        self.append = ["modprobe.blacklist=thunderbolt,thunderbolt_net", *(append or [])]
        # an emulated Intel IOMMU translating every DMA of the NHI, as on real Thunderbolt hosts
        # (the emulator's DMA goes through pci_dma_*, so a wrong mapping faults)
        self.iommu = iommu
        if iommu:
            self.append.append("intel_iommu=on")
        self.cables = cables
        self.log_dir = log_dir
        # False: guests boot without udev (vm.VmOptions.udev; the modules are loaded by the tests)
        self.udev = udev
        self.dir: Path | None = None
        self._relays: list[Relay] = []
        self.threads: dict[str, VmThread] = {}
        self.guests: dict[str, Guest] = {}
        self.abandoned: set[str] = set()  # guests that cannot answer any more: stopped, not asked
        self.results: dict[str, vm.VmResult | None] = {}
        self.final_bad: dict[str, list[str]] = {}  # bad kernel log lines of each VM's whole run

    @property
    def relay(self) -> Relay:
        """The first cable's relay (end 0: VM a, end 1: VM b)."""
        return self.relays[0]

    @property
    def relays(self) -> list[Relay]:
        """Every cable's relay, by cable number (cable k joins each VM's k-th usb4-nhi)."""
        if not self._relays:
            raise RuntimeError("the pair is not started (use it as a context manager)")
        return self._relays

    @property
    def a(self) -> Guest:
        return self.guests["a"]

    @property
    def b(self) -> Guest:
        return self.guests["b"]

    @staticmethod
    def cable_dir(d: Path, cable: int) -> Path:
        """Where cable `cable`'s relay puts its two sockets."""
        return d if cable == 0 else d / f"c{cable}"

    def options(self, tag: str, end: int, d: Path) -> vm.VmOptions:
        """VM `tag`'s options: its devices on end `end` of each cable, its agent and QMP sockets in `d`."""
        nhis = []
        for k in range(self.cables):
            nhis += ["-chardev", f"socket,id=cable{k},path={self.cable_dir(d, k)}/cable{end}.sock,reconnect=1",
                     "-device", f"usb4-nhi,id=nhi{k},chardev=cable{k},uid={UIDS[tag] + (k << 16):#x},max-lanes=2"
                     + f",profile={self.nhi_profile}"]
        qemu_opts = [
            *(["-device", "intel-iommu,intremap=off"] if self.iommu else []),
            *nhis,
            "-chardev", f"socket,id=agent,path={d}/{tag}-agent.sock,server=on,wait=off",
            "-device", "virtio-serial-pci,id=tbvser",
            "-device", "virtserialport,bus=tbvser.0,name=tbv.agent,chardev=agent",
            "-qmp", f"unix:{d}/{tag}-qmp.sock,server=on,wait=off",
        ]
        return vm.VmOptions(kernel=self.kernel, memory=self.memory, cpus=self.cpus, timeout=self.vm_timeout,
                            log_dir=self.log_dir, append=list(self.append), qemu=self.qemu,
                            qemu_opts=qemu_opts, name=f"tbv-{tag}", tag=tag, udev=self.udev)

    def preflight(self) -> list[str]:
        """What is missing to boot the pair (the QEMU with usb4-nhi, vng, the kernel), as messages."""
        return vm.preflight(self.options("a", 0, Path("/tmp/tbv2-x")), self.settings)

    def __enter__(self) -> Pair:
        self.dir = Path(tempfile.mkdtemp(prefix="tbv2-", dir="/tmp"))
        try:
            self._start()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _start(self) -> None:
        assert self.dir is not None
        for k in range(self.cables):
            self.cable_dir(self.dir, k).mkdir(exist_ok=True)
            self._relays.append(Relay(self.cable_dir(self.dir, k)).start())
        cmd = ["python3", str(AGENT)]
        for end, tag in enumerate(("a", "b")):
            thread = VmThread(cmd, self.options(tag, end, self.dir), self.settings)
            self.threads[tag] = thread
            thread.start()
        deadline = time.monotonic() + self.boot_timeout
        for tag in ("a", "b"):
            self.guests[tag] = self._connect(tag, deadline)

    def _connect(self, tag: str, deadline: float) -> Guest:
        """The guest's agent, once it said hello; PairError if the VM ends or stays silent too long."""
        assert self.dir is not None
        thread = self.threads[tag]
        client = None
        try:
            while client is None or not client.hello_seen.wait(0.5):
                if not thread.is_alive():
                    raise PairError(self._failure(tag, "the VM ended before its agent said hello"))
                if time.monotonic() > deadline:
                    raise PairError(self._failure(tag, f"no hello from the agent in {self.boot_timeout:g}s"))
                if client is None:
                    try:
                        sock = connect_unix(str(self.dir / f"{tag}-agent.sock"), timeout=0.5)
                    except TimeoutError:
                        continue  # QEMU has not made the socket yet
                    client = AgentClient(sock, name=f"tbv-{tag}")
                elif client.closed.is_set():
                    raise PairError(self._failure(tag, "the agent's socket closed before its hello"))
        except BaseException:
            if client is not None:
                client.close()
            raise
        return Guest(tag, client, self.dir / f"{tag}-qmp.sock")

    def _failure(self, tag: str, what: str) -> str:
        thread = self.threads[tag]
        detail = ""
        if thread.error is not None:
            detail = f" (run_vm raised {thread.error!r})"
        elif thread.result is not None:
            detail = f" (exit status {thread.result.returncode})"
        return (f"VM {tag}: {what}{detail}\nconsole {thread.logs.console}, agent output {thread.logs.output}; "
                f"end of the console:\n{thread.console_tail()}")

    def abandon(self, tag: str) -> None:
        """Guest `tag` can no longer answer (its root filesystem is gone): at the end its VM is
        stopped at once, not asked to shut down; its kernel log is then its console."""
        self.abandoned.add(tag)

    def _stop(self) -> None:
        """Shut both agents down, wait for the VMs (killing what does not end), collect the dmesgs."""
        for tag, thread in self.threads.items():
            if tag not in self.guests or tag in self.abandoned:
                thread.stop.set()  # never reached its agent, or it cannot answer: nothing to wait for
        for tag, guest in self.guests.items():
            if tag in self.abandoned:
                continue
            try:
                guest.shutdown()
            except AgentError:
                pass  # already gone: the VM ends (or is killed) below anyway
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        for thread in self.threads.values():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        for thread in self.threads.values():
            if thread.is_alive():
                thread.stop.set()
                thread.join(timeout=60)
        for guest in self.guests.values():
            guest.close()
        for relay in self._relays:
            relay.close()
        for tag, thread in self.threads.items():
            self.results[tag] = thread.result
            self.final_bad[tag] = final_bad_lines(thread.result, thread.logs)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> str:
        """Where each VM's logs are, for messages."""
        return "\n".join(f"{tag}: console {t.logs.console}, dmesg {t.logs.dmesg}, agent output {t.logs.output}"
                         for tag, t in self.threads.items())


def final_bad_lines(result: vm.VmResult | None, logs: vm.VmLogs) -> list[str]:
    """Bad kernel log lines of a whole run: from its dmesg, or its console if it did not finish."""
    path = result.dmesg if result is not None and result.finished else logs.console
    try:
        return kmsg.find_bad(path.read_text(errors="replace").splitlines())
    except OSError:
        return [f"(no kernel log: {path} is missing)"]
