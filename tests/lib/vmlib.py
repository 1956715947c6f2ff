"""Helpers for the in-VM tests: paths, the CLI, kernel log reader, netns and vcable factories.

The fixtures that wrap these are in conftest.py; tests import what they need from here.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import kmsg

REPO = Path(__file__).resolve().parents[2]
# TBV_MODULE_KO: a .ko built elsewhere (e.g. against a debug kernel)
KO = Path(os.environ.get("TBV_MODULE_KO") or REPO / "kernel" / "thunderbolt_ibverbs.ko")
MODNAME = "thunderbolt_ibverbs"
VCABLE_MODNAME = "tbverbs_vcable"
CLI = REPO / "cli" / "tbverbs"
# Modules our .ko needs besides what `modinfo -F depends` says.
BASE_DEPS = ("thunderbolt", "ib_core", "ib_uverbs")
# ... and the virtual cable's module (its interface is configfs, built in on the debug kernel).
VCABLE_DEPS = ("configfs",)


def vcable_ko(ko: Path = KO) -> Path:
    """The virtual cable's module: a test backend built next to the main module (kernel/Kbuild)."""
    return ko.parent / f"{VCABLE_MODNAME}.ko"


VCABLE_KO = vcable_ko()
NOT_IN_VM = "must run inside the test VM: python3 tests/harness/vm.py -- python -m pytest tests/device"


def in_test_vm() -> bool:
    """virtme-ng puts virtme_* parameters on the guest kernel command line; a host never has them."""
    try:
        cmdline = Path("/proc/cmdline").read_text()
    except OSError:
        return False
    return any(tok.startswith(("virtme_", "virtme.")) for tok in cmdline.split())


IN_VM = in_test_vm()


def require_vm() -> None:
    if not IN_VM:
        pytest.skip(NOT_IN_VM)


def missing(what: str) -> None:
    """Something a test needs is not there: a failure under TBV_STRICT=1 (make test), else a skip."""
    if os.environ.get("TBV_STRICT") == "1":
        pytest.fail(f"{what} (TBV_STRICT=1: missing prerequisites fail)", pytrace=False)
    pytest.skip(what)


def task_stack(pid: int) -> str:
    """A task's kernel stack (for one that SIGKILL does not end: stuck in the kernel)."""
    try:
        return Path(f"/proc/{pid}/stack").read_text()
    except OSError as e:
        return f"(no stack: {e})"


def run(cmd: list[str], check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    """subprocess.run with text output captured; on failure the message has the command and output.

    At `timeout` the command is killed and subprocess.TimeoutExpired raised, as subprocess.run
    does, but without waiting for ever on a command stuck in the kernel (uninterruptible): then
    the TimeoutExpired says so, with its kernel stack."""
    # (not `with Popen`: its exit waits for the process with no limit)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as e:  # the timeout, or the test's own limit (tests/lib/testlimit.py)
        proc.kill()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            if isinstance(e, subprocess.TimeoutExpired):
                e.stderr = f"survives SIGKILL: stuck in the kernel at\n{task_stack(proc.pid)}"
        raise
    r = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check and r.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def tbverbs(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
    """Run the user CLI (cli/tbverbs) with this interpreter."""
    return run([sys.executable, str(CLI), *args], check=check, **kw)


# ---------------------------------------------------------------------------------------------
# Kernel log


class KmsgReader:
    """Reads the kernel log records appended since construction, from /dev/kmsg (non-blocking)."""

    def __init__(self) -> None:
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def read_new(self) -> list[str]:
        lines: list[str] = []
        while True:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:  # the ring buffer wrapped past our position: go on
                    lines.append("[kmsg: some records were overwritten before they could be read]")
                    continue
                raise
            if not rec:
                break
            text = kmsg.parse_kmsg_record(rec.decode(errors="replace"))
            if text is not None:
                lines.append(text)
        return lines

    def close(self) -> None:
        os.close(self.fd)


@contextlib.contextmanager
def new_kernel_log() -> Iterator[list[str]]:
    """The kernel log lines logged during the block: in the list it gives, once the block ends."""
    reader = KmsgReader()
    lines: list[str] = []
    try:
        yield lines
        lines.extend(reader.read_new())
    finally:
        reader.close()


# ---------------------------------------------------------------------------------------------
# kmemleak (debug kernels only)

KMEMLEAK = Path("/sys/kernel/debug/kmemleak")
KMEMLEAK_MIN_AGE_S = 5.5  # kmemleak ignores objects younger than 5 s (MSECS_MIN_AGE)


def kmemleak_available() -> bool:
    if not Path("/sys/kernel/debug/kmemleak").exists():
        subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True)
    return KMEMLEAK.exists()


def kmemleak_scan_on_demand_only() -> None:
    """Stop kmemleak's own scans (every 10 min; 20-60 s each under TCG, beside the tests): the
    tests scan when they check, and the lane's VM shares the machine with another."""
    KMEMLEAK.write_text("scan=off")


def kmemleak_clear() -> None:
    """Forget what is already reported or unreferenced: only new leaks count from here."""
    KMEMLEAK.write_text("clear")


def kmemleak_scan(wait: bool = True) -> list[str]:
    """Scan now (after letting recent objects age) and return the report's records.

    Two scans: a stale copy of a pointer (a register, a stack slot) can keep an object
    looking referenced through the first one.
    """
    if wait:
        time.sleep(KMEMLEAK_MIN_AGE_S)
    KMEMLEAK.write_text("scan")
    KMEMLEAK.write_text("scan")
    report = KMEMLEAK.read_text()
    return [r for r in report.split("unreferenced object ") if r.strip()]


def leaks_of(records: list[str], *symbols: str) -> list[str]:
    """The kmemleak records whose allocation backtrace names one of `symbols`."""
    return [r for r in records if any(sym in r for sym in symbols)]


# ---------------------------------------------------------------------------------------------
# Module


def module_loaded(name: str = MODNAME) -> bool:
    return Path("/sys/module", name).exists()


def rmmod(timeout: float = 5.0) -> subprocess.CompletedProcess[str]:
    """rmmod the virtual cable's module if it is loaded, then the main module (which the first
    one pins by its symbol use), each retried briefly while still busy (references dropped
    asynchronously); the first failure, or the main module's rmmod."""
    deadline = time.monotonic() + timeout
    for name in (VCABLE_MODNAME, MODNAME):
        if name == VCABLE_MODNAME and not module_loaded(name):
            continue
        while True:
            r = run(["rmmod", name], check=False)
            if r.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if r.returncode != 0:
            return r
    return r


IB_CLASS = Path("/sys/class/infiniband")
# our devices come back this long after another module unregistered them (TBV_DEV_LOST_RETRY_MS)
DEVICE_BACK_TIMEOUT_S = 60


def unload_rdma_rxe() -> subprocess.CompletedProcess[str]:
    """`modprobe -r rdma_rxe`. Its exit unregisters every device of its driver id, which ours
    share (docs/rxe-abi.md, R2): they come back under their names about 2 s later. Waits for
    that, so that the caller finds the devices it had; fails if one does not come back."""
    ours = sorted(p.name for p in IB_CLASS.glob("usb4_rdma*"))
    r = run(["modprobe", "-r", "rdma_rxe"], check=False)
    back = wait_for(lambda: all((IB_CLASS / n / "ports/1/hw_counters").is_dir() for n in ours),
                    DEVICE_BACK_TIMEOUT_S)
    if not back:
        pytest.fail(f"after modprobe -r rdma_rxe, not all of {ours} came back: "
                    f"{sorted(p.name for p in IB_CLASS.iterdir())}", pytrace=False)
    return r


VCABLE_CONFIGFS = Path("/sys/kernel/config/tbverbs/vcable")
# A cable's unplug tears down both links (and their devices' user contexts): seconds under TCG,
# minutes on the sanitizer kernel of a loaded machine.
CABLE_DELETE_TIMEOUT_S = 300


def leftover_cables() -> list[str]:
    """The virtual cables in configfs (each pins tbverbs_vcable)."""
    try:
        return sorted(p.name for p in VCABLE_CONFIGFS.iterdir() if p.is_dir())
    except OSError:
        return []


def remove_leftover_cables() -> list[str]:
    """Delete every virtual cable a failed test left behind (its teardown timed out): else each
    later test would fail on the module that cannot be unloaded. Returns what could not be."""
    errors = []
    for name in leftover_cables():
        try:
            r = tbverbs("vcable", "del", name, check=False, timeout=CABLE_DELETE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            errors.append(f"tbverbs vcable del {name}: still running after {CABLE_DELETE_TIMEOUT_S}s")
            continue
        if r.returncode != 0 and "no such cable" not in r.stderr:
            errors.append(f"tbverbs vcable del {name}: {r.stderr.strip()}")
    return errors


def module_deps(ko: Path, base: tuple[str, ...]) -> list[str]:
    """`base` and what `modinfo -F depends` names for `ko`, but not our own modules."""
    info = run(["modinfo", "-F", "depends", str(ko)], check=False)
    deps = list(base)
    deps += [d for d in info.stdout.strip().split(",") if d and d not in deps and d != MODNAME]
    return deps


def load_module(ko: Path = KO, vcable: bool = True) -> None:
    """modprobe the dependencies, then insmod the main module (the repo's .ko by default) and,
    unless `vcable` is False, the virtual cable's module next to it."""
    deps = module_deps(ko, BASE_DEPS)
    if vcable:
        deps += [d for d in module_deps(vcable_ko(ko), VCABLE_DEPS) if d not in deps]
    run(["modprobe", "-a", *deps])
    # configfs may be built in and not mounted yet (the debug kernel): mount it as systemd would
    if vcable and not Path("/sys/kernel/config/tbverbs").exists() and \
            " /sys/kernel/config " not in Path("/proc/mounts").read_text():
        run(["mount", "-t", "configfs", "none", "/sys/kernel/config"])
    run(["insmod", str(ko)])
    if vcable:
        run(["insmod", str(vcable_ko(ko))])


# ---------------------------------------------------------------------------------------------
# Network namespaces


class NetnsFactory:
    """Creates network namespaces (`ip netns add`) and deletes them all in cleanup()."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def add(self, name: str | None = None) -> str:
        name = name or f"tbvt{len(self.names)}"
        run(["ip", "netns", "add", name])
        self.names.append(name)
        return name

    def exec(self, ns: str, *cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
        return run(["ip", "netns", "exec", ns, *cmd], check=check, **kw)

    def delete(self, name: str) -> None:
        run(["ip", "netns", "del", name])
        self.names.remove(name)

    def cleanup(self) -> list[str]:
        """Delete every namespace still here; returns the errors instead of stopping at the first."""
        errors = []
        for name in reversed(self.names):
            r = run(["ip", "netns", "del", name], check=False)
            if r.returncode != 0:
                errors.append(f"ip netns del {name}: {r.stderr.strip()}")
        self.names.clear()
        return errors


# ---------------------------------------------------------------------------------------------
# Virtual cables


@dataclass(frozen=True)
class CableEnd:
    uuid: str
    ibdev: str
    netdev: str


@dataclass(frozen=True)
class Cable:
    name: str
    end0: CableEnd
    end1: CableEnd

    @property
    def ends(self) -> tuple[CableEnd, CableEnd]:
        return (self.end0, self.end1)


@dataclass
class VcableFactory:
    """Adds virtual cables through the CLI; removes every one it added in cleanup()."""

    names: list[str] = field(default_factory=list)

    def add(self, name: str | None = None, *, rails: int | None = None, lanes: int | None = None,
            lane_speed: int | None = None, ring_size: int | None = None, irq_throttle_us: int | None = None,
            rx_sof: int | None = None, irq_replay: int | None = None, timeout: float = 120) -> Cable:
        # 120 s for the link: a first bring-up on the sanitizer kernel, with other VMs on the
        # machine, took 93 s (2026-11-27); a link that comes up is never waited on longer
        name = name or f"tvc{len(self.names)}"
        self.names.append(name)  # before adding: a half-made cable is cleaned up too
        args = ["vcable", "add", "--json", "--name", name, "--timeout", str(timeout)]
        for opt, val in (("--rails", rails), ("--lanes", lanes), ("--lane-speed", lane_speed),
                         ("--ring-size", ring_size), ("--irq-throttle-us", irq_throttle_us),
                         ("--rx-sof", rx_sof), ("--irq-replay", irq_replay)):
            if val is not None:
                args += [opt, str(val)]
        info = json.loads(tbverbs(*args, timeout=timeout + 30).stdout)
        return Cable(info["name"], CableEnd(**info["end0"]), CableEnd(**info["end1"]))

    def delete(self, name: str) -> None:
        tbverbs("vcable", "del", name, timeout=CABLE_DELETE_TIMEOUT_S)
        self.names.remove(name)

    def cleanup(self) -> list[str]:
        errors = []
        for name in reversed(self.names):
            try:
                r = tbverbs("vcable", "del", name, check=False, timeout=CABLE_DELETE_TIMEOUT_S)
            except subprocess.TimeoutExpired as e:
                errors.append(f"tbverbs vcable del {name}: still running after {e.timeout}s {e.stderr or ''}")
                continue
            if r.returncode != 0 and "no such cable" not in r.stderr:
                errors.append(f"tbverbs vcable del {name}: {r.stderr.strip()}")
        self.names.clear()
        return errors


# ---------------------------------------------------------------------------------------------
# rdma-core

ENV_FILE_NAMES = ("env.sh", "env", "tbverbs-env.sh", "rdma-env.sh")


def tbv_setting(name: str) -> str:
    """A setting from the environment, else its default from scripts/env.sh."""
    if os.environ.get(name):
        return os.environ[name]
    script = f'. "{REPO}/scripts/env.sh" && printf %s "${name}"'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


def source_env_file(path: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment after sourcing a shell env file on top of `base`."""
    out = subprocess.run(["bash", "-c", f'set -a; . "{path}" >/dev/null; env -0'],
                         capture_output=True, check=True, env=base).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def rdma_environment(prefix: Path, base: dict[str, str]) -> dict[str, str]:
    """`base` plus what it takes to run rdma-core's tools and providers from `prefix`."""
    for name in ENV_FILE_NAMES:
        if (prefix / name).is_file():
            return source_env_file(prefix / name, base)
    env = dict(base)
    libdirs = [str(d) for d in (prefix / "lib", prefix / "lib64") if d.is_dir()]
    env["PATH"] = f"{prefix / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["LD_LIBRARY_PATH"] = ":".join(libdirs + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
    return env


# Every environment variable that would make libibverbs load something other than the system's.
FOREIGN_ENV = re.compile(r"^(LD_LIBRARY_PATH|LD_PRELOAD|RDMAV_.*|IBV_.*|VERBS_.*)$")


def system_env() -> dict[str, str]:
    """This environment without what would make a program use another rdma-core than the
    distribution's (the cache's rdma-core 59: rdma_environment())."""
    env = {k: v for k, v in os.environ.items() if not FOREIGN_ENV.match(k)}
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def wait_for(pred, timeout: float = 20.0, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step)
    return pred()
