#!/usr/bin/env python3
"""Boot the test VM with virtme-ng (QEMU, TCG) over the host filesystem and run one command in it.

    python3 tests/harness/vm.py [--kernel PATH] [--memory 3G] [--cpus 2] [--timeout 1800] -- CMD...
    python3 tests/harness/vm.py --qemu "$TBV_QEMU" --qemu-opt=-device --qemu-opt=usb4-nhi,uid=1 -- CMD...
    python3 tests/harness/vm.py --cpus 1 --icount 0 -- CMD...   (benchmarks: guest time counts instructions)

The guest sees the host's root filesystem read-only, with the repo at the same path and writable
(9p); /tmp, /var, /run, /etc are private writable overlays/tmpfs in the guest. CMD runs as root in
the current directory (if inside the repo, else the repo root) with the venv and the settings of
scripts/env.sh (TBV_*) in its environment. Its stdout and stderr stream to this process' stdout;
its exit status is ours. The guest kernel console goes to build/vm-logs/<stamp>-console.txt and
the guest's `dmesg` at the end to build/vm-logs/<stamp>-dmesg.txt (<stamp>-<tag>-... with --tag,
which keeps apart the logs of VMs started in the same second by one process, e.g. a pair).

With --root DIR the guest boots on another root file system instead of the host's (a Debian
root made for a test, e.g. the package install test's): read-write, without the host's caches;
the repo and the log directory are mounted into it as usual (their mount points are created).

Another QEMU binary (--qemu; the emulated USB4 host interface's is TBV_QEMU) and extra QEMU
arguments (--qemu-opt, one argument each) can be given; run_vm() can also send the command's
output somewhere else than our stdout, so that two VMs can run from two threads of one process.

Timeout: CMD is stopped inside the guest before the deadline (so the dmesg, with a dump of the
blocked tasks, is still saved), and the VM is killed at the deadline if the guest does not end.
Exit status 124 on a timeout, 255 when the guest did not finish (kernel panic, boot failure).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lib"))
import kmsg  # noqa: E402  (shared kernel-log patterns)

SETTINGS = ("KVER_612", "RDMA_CORE_VERSION", "VNG_VERSION", "TBV_CACHE", "TBV_VENV", "TBV_RDMA_PREFIX",
            "TBV_QEMU")
START_MARK = "tbverbs-vm: starting command"
GUEST_MARGIN_S = 60  # time left at the end of the VM's budget for the dmesg dump and power-off
# virtme-ng-init's line when it runs the command on the console (no virtio-serial ports)
CONSOLE_FALLBACK_MARK = b"starting script (console fallback)"
# The guest script's last kernel log line, on the console too: the command's exit status when
# the command ran on the console, where vng itself only ever returns 255
EXIT_MARK = "tbverbs-vm: command exited"
EXIT_MARK_RE = re.compile(EXIT_MARK.encode() + rb" (\d+)$")
DEADLINE_MARGIN_S = 30  # we end this long before TBV_DEADLINE (the caller's stop comes then)
MIN_RUN_S = 2 * GUEST_MARGIN_S  # a limit shorter than this could not even boot
KILL_GRACE_S = 10
EXIT_TIMEOUT = 124
EXIT_GUEST_DIED = 255
# vng joins its arguments into one shell command line without quoting them: what it passes on to
# QEMU and virtme-run must be plain words
SHELL_SAFE_RE = re.compile(r"[\w,.=:/+@%-]+")
# where the command's output goes: our stdout (None), a file (appended to) or a function
OutputSink = Path | Callable[[bytes], None] | None


def log(msg: str) -> None:
    print(f"vm: {msg}", file=sys.stderr, flush=True)


def tbv_settings() -> dict[str, str]:
    """The TBV_* settings: the environment's, else scripts/env.sh's defaults."""
    script = f'. "{REPO}/scripts/env.sh" && env -0'
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout.decode()
    env = dict(item.split("=", 1) for item in out.split("\0") if "=" in item)
    return {k: env[k] for k in SETTINGS if k in env}


@dataclass
class VmOptions:
    kernel: str  # a kernel image, or a kernel build tree (what `vng --run` takes)
    memory: str = "3G"
    cpus: int = 2
    timeout: float = 1800.0
    cwd: Path = REPO
    log_dir: Path = REPO / "build" / "vm-logs"
    append: list[str] = field(default_factory=list)  # extra kernel command line parameters
    show_console: bool = False  # also copy the kernel console to our stderr
    qemu: str | None = None  # the QEMU binary (vng --qemu); None: qemu-system-x86_64 from PATH
    qemu_opts: list[str] = field(default_factory=list)  # extra QEMU arguments, one per item
    name: str | None = None  # the guest's hostname and QEMU's -name (vng --name)
    tag: str | None = None  # in the log file names, to tell apart VMs started together
    root: str | None = None  # the guest's root file system (a directory), read-write; None: the host's
    # QEMU's -icount shift=N: the guest's clock advances 2^N ns per instruction executed, so time
    # in the guest measures instructions, whatever the host's load (benchmarks, docs/performance.md)
    icount: int | None = None
    # a host thread per vCPU (-accel tcg,thread=multi) instead of one for all: only for
    # benchmarks that need two vCPUs running at once (busy-polling latency); see SERIAL_TCG
    thread_per_vcpu: bool = False
    # Stop udev once the guest has booted (virtme-ng-init starts it before the command and
    # offers no way around that): a one-VM suite needs no rule of its (the kernel makes the
    # /dev nodes, with the modes the RDMA core sets; the tests load their modules), and every
    # cable's devices cost udev CPU beside the tests: 2.5 min of a 12-minute run on the sanitizer
    # kernel, taken from the VM running beside it. The two-VM suites keep it (module autoload).
    stop_udev: bool = False
    # Boot without udev at all (vng runs in a mount namespace of its own that hides udevd from
    # the guest; see HIDE_UDEVD): for kernels with every driver the guest needs built in (the
    # sanitizer kernel's). Its coldplug took 3.5 of that kernel's 5.2 minutes to boot, alone.
    udev: bool = True


@dataclass(frozen=True)
class VmLogs:
    """Where one run's files go; known before the boot, so a caller can watch the console."""

    script: Path  # the guest script (deleted after the run)
    console: Path
    dmesg: Path
    output: Path  # the command's output, when the caller sends it to a file of its own


def log_paths(opts: VmOptions) -> VmLogs:
    """The file names of a run starting now: <stamp>[-<tag>]-console.txt and so on."""
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}" + (f"-{opts.tag}" if opts.tag else "")
    return VmLogs(*(opts.log_dir / f"{stamp}-{what}" for what in ("run.sh", "console.txt", "dmesg.txt",
                                                                  "output.txt")))


@dataclass
class VmResult:
    returncode: int
    timed_out: bool  # the host had to kill the VM
    finished: bool  # the guest got to the end of the command and saved its dmesg
    boot_seconds: float | None  # from starting vng to the command starting in the guest
    seconds: float
    console: Path
    dmesg: Path
    output: Path | None = None  # the command's output, if it went to a file


def default_kernel(settings: dict[str, str]) -> str:
    return f"/boot/vmlinuz-{settings.get('KVER_612', '6.12.95+deb12-amd64')}"


def emulator_qemu(settings: dict[str, str]) -> str:
    """The QEMU with the emulated USB4 host interface (usb4-nhi): TBV_QEMU, else the cached build's."""
    if settings.get("TBV_QEMU"):
        return settings["TBV_QEMU"]
    cache = settings.get("TBV_CACHE") or "/var/lib/tbverbs"
    return str(Path(cache) / "qemu-usb4" / "current" / "qemu-system-x86_64")


def preflight(opts: VmOptions, settings: dict[str, str]) -> list[str]:
    """What is missing to boot the VM, as messages (empty: all there)."""
    problems = []
    vng = Path(settings["TBV_VENV"]) / "bin" / "vng"
    if not os.access(vng, os.X_OK):
        problems.append(f"virtme-ng is not installed ({vng} missing)")
    if opts.qemu is not None:
        if not os.access(opts.qemu, os.X_OK):
            problems.append(f"QEMU binary {opts.qemu} is missing or not executable "
                            "(TBV_QEMU; the usb4-nhi one is built by scripts/build-qemu-usb4.sh)")
    elif shutil.which("qemu-system-x86_64") is None:
        problems.append("QEMU is not installed (qemu-system-x86_64 not on PATH)")
    for what, word in [("--qemu", opts.qemu), ("--name", opts.name), *(("QEMU option", o) for o in opts.qemu_opts)]:
        if word is not None and not SHELL_SAFE_RE.fullmatch(word):
            problems.append(f"{what} {word!r} is not a plain word (vng passes it through a shell unquoted)")
    if shutil.which("busybox") is None:
        problems.append("busybox is not installed (virtme-ng needs it for the initramfs of a modular kernel)")
    if not Path(opts.kernel).exists():
        problems.append(f"kernel image {opts.kernel} not found")
    if opts.root is not None:
        if not SHELL_SAFE_RE.fullmatch(opts.root):
            problems.append(f"--root {opts.root!r} is not a plain word (vng passes it through a shell unquoted)")
        elif not (Path(opts.root) / "bin" / "sh").exists():
            problems.append(f"--root {opts.root} has no /bin/sh: not a root file system")
    if not opts.udev:
        if opts.root is not None:
            problems.append("--no-udev hides the host's udevd: not with --root")
        if os.geteuid() != 0:
            problems.append("--no-udev needs root (vng runs in a mount namespace of its own)")
        if shutil.which("unshare") is None:
            problems.append("--no-udev needs unshare (util-linux)")
    return problems


# A host may have a .pth in the system's site-packages that imports certifi at every Python
# start (a container that trusts its egress proxy's CA so; the guest has no network). Under TCG
# that import cost 2-3 s of each Python start (3.3 s instead of 0.5 s, `python3 -X importtime`),
# and a suite starts Python hundreds of times (the tbverbs CLI, pyverbs scripts, pytest). The
# guest removes it from its view: its /usr is an overlay, so the host's file stays.
PTH_IMPORTING_CERTIFI = """for pth in /usr/lib/python3/dist-packages/*.pth /usr/local/lib/python3*/dist-packages/*.pth; do
    grep -qs 'import certifi' "$pth" && rm -f "$pth"
done"""

# udev's coldplug on a slow kernel can outlast virtme-ng-init's 300 s wait and then go on
# beside the tests (stop 36: a guest twice as slow as the same run before): udev keeps working,
# behind the command (its workers are forked from the main process, so they inherit it)
UDEV_AT_START = """for p in $(pgrep 'udev'); do renice -n 19 -p "$p" >/dev/null 2>&1; done
udev_cpu_at_start=$(ps -o time= -C systemd-udevd | head -n 1)
{stop_udev}"""
UDEV_AT_END = ("echo \"guest: udev's CPU time: $(ps -o time= -C systemd-udevd | head -n 1)"
               " (at the command's start: $udev_cpu_at_start)\"")

# --no-udev: udev runs only if vm.py could not hide it (its console log says why)
NO_UDEV_AT_START = """if pgrep -x systemd-udevd >/dev/null; then
    echo 'guest: udev runs (vm.py could not hide it; see the console log): stopping it'
    {stop_udev}
else
    echo 'guest: booted without udev (--no-udev)'
fi"""

# udevd ends its workers' current events and exits; one that does not within 30 s is killed
STOP_UDEV = """timeout 30 udevadm control --exit >/dev/null 2>&1 || pkill -KILL systemd-udevd
echo 'guest: udev stopped after the boot (--stop-udev)'"""


# virtme-ng-init starts the udevd it finds in the guest's root (the host's), and offers no way
# around that; so vng runs in a mount namespace of its own where systemd-udevd is not there (an
# overlay with a whiteout on its directory), and the guest boots without udev. Only the names
# udevd goes by are hidden: udevadm, which systemd-udevd links to, stays. The guest then runs
# the command on its console (no udev: no /dev/virtio-ports links), which pump_console handles.
HIDE_UDEVD = """hide() {
    dirs=$(for d in /usr/lib/systemd /lib/systemd; do [ -e "$d/systemd-udevd" ] && realpath "$d"; done | sort -u)
    [ -n "$dirs" ] || return 0  # no udevd on this host: nothing to hide
    white=$(mktemp -d) || return 1
    mount -t tmpfs tbv-no-udevd "$white" || { rmdir "$white"; return 1; }
    ok=0
    if mknod "$white/systemd-udevd" c 0 0; then
        ok=1
        for d in $dirs; do mount -t overlay tbv-no-udevd -o "lowerdir=$white:$d" "$d" || ok=0; done
    fi
    umount -l "$white"
    rmdir "$white"
    [ "$ok" = 1 ] && [ ! -e /usr/lib/systemd/systemd-udevd ] && [ ! -e /lib/systemd/systemd-udevd ] &&
        ! command -v udevd >/dev/null
}
# the boot must not depend on it: a guest that finds udevd stops it before the command
hide || echo "vm.py: could not hide udevd from the guest (above): it boots with udev" >&2
exec "$@"
"""


def without_udev(cmd: list[str]) -> list[str]:
    """`cmd` (vng) run where the guest will find no udevd (HIDE_UDEVD); needs root."""
    return ["unshare", "--mount", "--propagation", "private", "bash", "-c", HIDE_UDEVD, "hide-udevd", *cmd]


def guest_script(cmd: list[str], opts: VmOptions, settings: dict[str, str], dmesg: Path) -> str:
    """The bash script the guest runs: environment, CMD under a deadline, dmesg dump."""
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in settings.items())
    venv_bin = shlex.quote(str(Path(settings["TBV_VENV"]) / "bin"))
    budget = int(opts.timeout) - GUEST_MARGIN_S
    icount = f" TBV_ICOUNT_SHIFT={opts.icount}" if opts.icount is not None else ""
    # Only on the host's root, which the guest sees through an overlay (another --root is the
    # real thing, read-write)
    drop_pth = "" if opts.root else PTH_IMPORTING_CERTIFI
    if opts.udev:
        udev_at_start = UDEV_AT_START.format(stop_udev=STOP_UDEV if opts.stop_udev else "")
        udev_at_end = UDEV_AT_END
    else:
        udev_at_start, udev_at_end = NO_UDEV_AT_START.format(stop_udev=STOP_UDEV), ""
    return f"""# generated by tests/harness/vm.py; runs inside the test VM
exec 2>&1
{exports}
{drop_pth}
# PY_COLORS=0: run on the console (virtme-ng-init's fallback), pytest would colour its lines
export PATH={venv_bin}:"$PATH" TBVERBS_TEST_VM=1 PYTHONDONTWRITEBYTECODE=1 PY_COLORS=0{icount}
cd {shlex.quote(str(opts.cwd))} || exit 125
left=$(( {budget} - $(cut -d. -f1 /proc/uptime) ))
[ "$left" -gt 10 ] || left=10
echo "<5>{START_MARK} (deadline ${{left}}s): "{shlex.quote(shlex.join(cmd))} >/dev/kmsg
{udev_at_start}
timeout -k 10 "$left" {shlex.join(cmd)}
rc=$?
{udev_at_end}
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "vm: command timed out in the guest after ${{left}}s; blocked tasks are in the dmesg"
    # and here, briefly: CI keeps only this output (the Python tracebacks are above: SIGTERM)
    echo w >/proc/sysrq-trigger
    echo "vm: tasks in D state, with their kernel stacks:"
    for t in /proc/[0-9]*; do
        grep -qs '^State:.*D' "$t/status" || continue
        echo "-- ${{t#/proc/}} $(tr '\\0' ' ' <"$t/cmdline" | cut -c1-160)"
        head -n 25 "$t/stack" 2>/dev/null
    done
    rc=124
fi
echo "<5>{EXIT_MARK} $rc" >/dev/kmsg
dmesg >{shlex.quote(str(dmesg))}
exit "$rc"
"""


def shared_cache_dirs(settings: dict[str, str]) -> list[Path]:
    """TBV_CACHE (venv, rdma-core), and the venv/prefix if they live elsewhere, that exist.

    virtme-ng mounts an empty tmpfs over the guest's /var/cache (and /var/tmp, /var/log, ...);
    TBV_CACHE defaults to /var/lib/tbverbs, outside those, but may be set anywhere: export
    these again, read-only, so the guest always sees them.
    """
    dirs: list[Path] = []
    for key in ("TBV_CACHE", "TBV_VENV", "TBV_RDMA_PREFIX"):
        path = Path(settings[key]).resolve() if settings.get(key) else None
        if path and path.is_dir() and not any(path.is_relative_to(d) for d in dirs):
            dirs.append(path)
    return dirs


SERIAL_TCG = ("-accel", "tcg,thread=single")
PARALLEL_TCG = ("-accel", "tcg,thread=multi")


def vng_command(opts: VmOptions, settings: dict[str, str], script: Path) -> list[str]:
    cmd = [
        str(Path(settings["TBV_VENV"]) / "bin" / "vng"),
        "--run", opts.kernel,
        "--disable-kvm",  # KVM does not work for these kernels here; TCG it is
        "--disable-microvm",
        "--verbose",  # kernel console on vng's stderr (the command's output is on stdout)
        "--memory", opts.memory,
        "--cpus", str(opts.cpus),
    ]
    shared = [REPO] + ([] if opts.log_dir.is_relative_to(REPO) else [opts.log_dir])
    if opts.root:
        # Another system: the host's venv and rdma-core are not part of it. virtme takes a
        # plain --rwdir and --cwd as paths inside the root, so the shared directories are
        # named guest=host; the guest script changes to the working directory itself.
        cmd += ["--root", opts.root, "--rw"]
        cmd += [f"--rwdir={d}={d}" for d in shared]
    else:
        for d in shared:
            cmd += ["--rwdir", str(d)]
        cmd += ["--cwd", str(opts.cwd)]
        for path in shared_cache_dirs(settings):
            cmd += ["--rodir", str(path)]
    # Under TCG a loaded host makes the clocksource watchdog see the TSC skew and mark it unstable;
    # the kernel then live-patches sched_clock's static key, and that patching raced with
    # another vCPU once in CI ("Oops: int3" in sched_clock_cpu, a panic). The emulated TSC is one
    # host clock for all vCPUs, so it is reliable: say so and the watchdog leaves it alone.
    # No legacy BSD ptys: a kernel built with them (the sanitizer kernel: alldefconfig) has 512
    # tty devices more, and virtme-ng-init waits for udev's coldplug of each; on that kernel
    # that took 4.7 of its 6 minutes to boot, 1.1 without them (Debian's kernels have none).
    for param in ["tsc=reliable", "pty.legacy_count=0", *opts.append]:
        cmd += ["--append", param]
    if opts.name:
        cmd += ["--name", opts.name]
    if opts.qemu:
        cmd += ["--qemu", opts.qemu]
    # One host thread runs all vCPUs in turn (they still interleave, preemptively). With a thread
    # per vCPU (QEMU's default), a vCPU went on running code another vCPU had just live-patched:
    # the kernel patches static keys (networking toggles some on every ping) through a
    # transient int3, and CI guests panicked twice on an "Oops: int3" the kernel had already
    # removed (sched_clock_cpu, then __netif_receive_skb_core). Measured: no slower here.
    cmd += [f"--qemu-opts={opt}" for opt in (PARALLEL_TCG if opts.thread_per_vcpu else SERIAL_TCG)]
    if opts.icount is not None:
        # Instruction counting needs the single TCG thread above. The default sleep=on: while
        # every vCPU is idle (waiting on the host's 9p, say) the clock follows the host's; with
        # sleep=off it would leap to the next timer at each such wait, and the guest's own
        # deadlines went by long before the host's.
        cmd += ["--qemu-opts=-icount", f"--qemu-opts=shift={opts.icount}"]
    # the `=` form: a value such as "-device" would otherwise be taken for an option of vng's
    cmd += [f"--qemu-opts={opt}" for opt in opts.qemu_opts]
    cmd += ["--exec", f"bash {shlex.quote(str(script))}"]
    return cmd if opts.udev else without_udev(cmd)


def sink_writer(sink: OutputSink) -> Callable[[bytes], None]:
    """A function that writes bytes where `sink` says the command's output goes."""
    if callable(sink):
        return sink
    if sink is None:
        def to_stdout(data: bytes) -> None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        return to_stdout
    path = sink

    def to_file(data: bytes) -> None:
        with open(path, "ab") as out:
            out.write(data)
    return to_file


def pump_console(src: IO[bytes], dst: IO[bytes], echo: bool, started: list[float],
                 output: Callable[[bytes], None] | None = None, exited: list[int] | None = None) -> None:
    """Copy vng's stderr (the kernel console) to the console log; note when the command starts
    and, in `exited`, the exit status the guest logs at its end.

    A guest without udev (--no-udev), or whose udev has not settled in time, has no
    virtio-serial port links, and virtme-ng-init runs the command on the console instead:
    from then on the console is also copied to `output`, so the command's output is not lost
    to whoever reads only that (CI).
    """
    fallback = False
    for line in iter(src.readline, b""):
        dst.write(line)
        dst.flush()
        if not started and START_MARK.encode() in line:
            started.append(time.monotonic())
        if exited is not None and (m := EXIT_MARK_RE.search(line.rstrip())):
            exited.append(int(m.group(1)))
        if echo:
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
        if fallback and output and not echo:  # (echoed: it is on our stderr already)
            output(line)
        elif CONSOLE_FALLBACK_MARK in line:
            fallback = True
            if output:
                output(b"vm: the guest runs the command on its console (no udev, or it had not settled: "
                       b"no virtio-serial port links): its output follows, with the kernel's\n")


def pump_output(src: IO[bytes], sink: OutputSink = None) -> None:
    """Copy the command's output to our stdout (or `sink`) as it comes.

    Never hand our stdout to vng directly: QEMU reopens it as a file chardev
    (path=/proc/self/fd/1), which truncates it and writes from offset 0 when it is a regular file.
    """
    write = sink_writer(sink)
    while chunk := os.read(src.fileno(), 65536):
        write(chunk)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop vng and its QEMU (they run in their own session/process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_vm(proc: subprocess.Popen[bytes], timeout: float, stop: threading.Event | None) -> int | None:
    """vng's exit status, or None at the deadline or once `stop` is set."""
    if stop is None:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    deadline = time.monotonic() + timeout
    while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
        try:
            return proc.wait(timeout=min(left, 0.5))
        except subprocess.TimeoutExpired:
            continue
    return None


def run_vm(cmd: list[str], opts: VmOptions, settings: dict[str, str] | None = None, *,
           output: OutputSink = None, logs: VmLogs | None = None,
           stop: threading.Event | None = None) -> VmResult:
    """Boot, run `cmd`, return its exit status and where the logs are.

    The command's output streams to our stdout, or to `output` (a file or a function: two VMs run
    from two threads must not interleave on one stdout). `logs` (from log_paths) names the files,
    for a caller that wants to read the console while the guest boots. Setting `stop` kills the VM
    (a caller giving up on it from another thread); the result then says it did not finish.
    """
    settings = settings or tbv_settings()
    opts.log_dir.mkdir(parents=True, exist_ok=True)
    logs = logs or log_paths(opts)
    script, console, dmesg = logs.script, logs.console, logs.dmesg
    script.write_text(guest_script(cmd, opts, settings, dmesg))
    if opts.root:  # mount points of the directories shared with the guest
        for shared in (REPO, opts.log_dir):
            (Path(opts.root) / shared.relative_to("/")).mkdir(parents=True, exist_ok=True)

    env = dict(os.environ, PATH=f"{Path(settings['TBV_VENV']) / 'bin'}:{os.environ.get('PATH', '')}")
    t0 = time.monotonic()
    started: list[float] = []
    exited: list[int] = []
    sys.stdout.flush()
    with open(console, "wb") as console_f:
        proc = subprocess.Popen(vng_command(opts, settings, script), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=opts.cwd,
                                start_new_session=True)
        assert proc.stdout is not None and proc.stderr is not None
        pumps = [threading.Thread(target=pump_output, args=(proc.stdout, output), daemon=True),
                 threading.Thread(target=pump_console, args=(proc.stderr, console_f, opts.show_console, started,
                                                             sink_writer(output), exited), daemon=True)]
        for pump in pumps:
            pump.start()
        timed_out = False
        try:
            status = wait_vm(proc, opts.timeout, stop)
            if status is None:  # the deadline, or the caller stopped it
                timed_out = stop is None or not stop.is_set()
                kill_group(proc)
                status = EXIT_TIMEOUT if timed_out else EXIT_GUEST_DIED
            rc = status
        except KeyboardInterrupt:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not stop this
            kill_group(proc)
            raise
        for pump in pumps:
            pump.join(timeout=5)
    script.unlink(missing_ok=True)
    finished = dmesg.exists()
    if not finished and not timed_out:
        rc = rc or EXIT_GUEST_DIED
    elif finished and rc == EXIT_GUEST_DIED and exited:
        rc = exited[-1]  # the command ran on the console (no virtio-serial port for its status)
    return VmResult(rc, timed_out, finished, started[0] - t0 if started else None,
                    time.monotonic() - t0, console, dmesg,
                    output if isinstance(output, Path) else None)


def report(result: VmResult) -> None:
    """Tell on stderr how the run went, where the logs are, and any bad kernel log lines."""
    boot = f"booted in {result.boot_seconds:.1f}s, " if result.boot_seconds is not None else ""
    log(f"{boot}total {result.seconds:.1f}s, exit status {result.returncode}")
    if result.timed_out:
        log("TIMEOUT: the VM did not finish in time and was killed")
    elif not result.finished:
        log("the guest did not finish the command (kernel panic? boot failure?); end of the console:")
        lines = result.console.read_text(errors="replace").splitlines()
        print("\n".join(lines[-40:]), file=sys.stderr)
    kernel_log = result.dmesg if result.finished else result.console
    bad = kmsg.find_bad(kernel_log.read_text(errors="replace").splitlines())
    if bad:
        log(f"{len(bad)} suspicious kernel log line(s) in {kernel_log}:")
        print("\n".join(bad[:30]) + ("\n..." if len(bad) > 30 else ""), file=sys.stderr)
    log(f"console: {result.console}")
    if result.finished:
        log(f"dmesg:   {result.dmesg}")


def run_deadline(timeout: float, deadline: str | None, now: float | None = None) -> float:
    """The run's limit: `timeout`, or less when TBV_DEADLINE (seconds since the epoch, set by
    make test within CI's time) comes first. The guest then still reaches its own limit, and
    prints its hung tasks, before whoever set the deadline stops us."""
    if not deadline:
        return timeout
    left = float(deadline) - (time.time() if now is None else now) - DEADLINE_MARGIN_S
    if left < timeout:
        log(f"limit {max(left, MIN_RUN_S):.0f}s instead of {timeout:.0f}s: TBV_DEADLINE comes first")
        return max(left, MIN_RUN_S)
    return timeout


def main(argv: list[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        own, cmd = argv[:split], argv[split + 1:]
    else:
        own, cmd = argv, []
    settings = tbv_settings()
    p = argparse.ArgumentParser(prog="vm.py", usage="%(prog)s [options] -- CMD...",
                                description="Run CMD inside the test VM (virtme-ng, TCG).")
    p.add_argument("--kernel", default=default_kernel(settings),
                   help="kernel image or kernel build tree (default: %(default)s)")
    p.add_argument("--memory", default="3G", help="guest memory (default: %(default)s)")
    p.add_argument("--cpus", type=int, default=2, help="guest vCPUs (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole run (default: %(default)s)")
    p.add_argument("--append", action="append", default=[], metavar="PARAM",
                   help="extra kernel command line parameter (repeatable)")
    p.add_argument("--log-dir", type=Path, default=REPO / "build" / "vm-logs",
                   help="where the console and dmesg logs go (default: build/vm-logs)")
    p.add_argument("--show-console", action="store_true", help="also print the kernel console to stderr")
    p.add_argument("--qemu", nargs="?", const=emulator_qemu(settings), metavar="BIN",
                   help="another QEMU binary; without BIN the usb4-nhi one (%(const)s)")
    p.add_argument("--qemu-opt", action="append", default=[], metavar="ARG",
                   help="one extra QEMU argument, e.g. --qemu-opt=-device --qemu-opt=usb4-nhi,uid=1 (repeatable)")
    p.add_argument("--name", help="the guest's hostname")
    p.add_argument("--tag", help="added to the log file names")
    p.add_argument("--root", help="boot on this root file system (a directory) instead of the host's, read-write")
    p.add_argument("--thread-per-vcpu", action="store_true",
                   help="a host thread per vCPU (TCG thread=multi); the guest may panic on live-patched "
                        "kernel text (see SERIAL_TCG): for busy-polling benchmarks only")
    p.add_argument("--stop-udev", action="store_true",
                   help="stop udev once the guest has booted (one-VM suites: no module autoload, "
                        "no rules for the devices the tests make)")
    p.add_argument("--no-udev", action="store_true",
                   help="boot without udev (the host's udevd hidden from the guest; needs root): "
                        "for kernels with every driver the guest needs built in, such as the sanitizer kernel")
    p.add_argument("--icount", type=int, choices=range(0, 11), metavar="SHIFT",
                   help="QEMU -icount shift=SHIFT: guest time counts instructions (2^SHIFT ns each), "
                        "not the host's; for benchmarks (docs/performance.md)")
    args = p.parse_args(own)
    if not cmd:
        p.error("no command given (put it after --)")

    cwd = Path.cwd()
    timeout = run_deadline(args.timeout, os.environ.get("TBV_DEADLINE"))
    opts = VmOptions(kernel=args.kernel, memory=args.memory, cpus=args.cpus, timeout=timeout,
                     cwd=cwd if cwd.is_relative_to(REPO) else REPO, log_dir=args.log_dir.resolve(),
                     append=args.append, show_console=args.show_console, qemu=args.qemu,
                     qemu_opts=args.qemu_opt, name=args.name, tag=args.tag, root=args.root,
                     icount=args.icount, thread_per_vcpu=args.thread_per_vcpu,
                     stop_udev=args.stop_udev, udev=not args.no_udev)
    if opts.icount is not None and opts.thread_per_vcpu:
        p.error("--icount needs the single TCG thread: not with --thread-per-vcpu")
    problems = preflight(opts, settings)
    if problems:
        for problem in problems:
            log(f"error: {problem}")
        log("run `make setup` (scripts/setup.sh) to install the VM tools and kernels")
        return 2
    # stopped from outside (make test's deadline): the guest and its QEMU go too
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        result = run_vm(cmd, opts, settings)
    except KeyboardInterrupt:
        log("stopped (SIGTERM or ^C): the guest was killed")
        return EXIT_TIMEOUT
    report(result)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
