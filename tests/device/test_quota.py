"""What one local user can take from a device (docs/security.md, "Local limits").

/dev/infiniband/uverbs* is open to every user. `nobody` creates the largest CQs and QPs the
device allows until the kernel refuses them (tests/tools/tbv_exhaust), once inside a memory
cgroup limited to 256 MiB and once without a memory limit: it must be refused while plenty
of memory is left, and root and a second unprivileged user must still be able to create
objects meanwhile. The same for the objects themselves (a share of each device limit) and
for pinned memory (a share of max_pinned_mb). Rings a process keeps mapped after their object
is destroyed or resized stay in the budget until the mapping goes (tests/tools/tbv_ring_hoard).
And what a user holds costs the cable's unplug no wait per object (its memory windows).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vmlib import (CABLE_DELETE_TIMEOUT_S, MODNAME, REPO, Cable, KmsgReader, VcableFactory,
                   leftover_cables, missing)

# On the sanitizer kernel too (make test-debug; issue 23: what a user can reach): every test but
# the memory cgroup's, as that kernel has no memory controller (CONFIG_MEMCG is off there).
on_sanitizer_kernel = pytest.mark.sanitizer_subset

EXHAUST = REPO / "build" / "tools" / "tbv_exhaust"
HOARD = REPO / "build" / "tools" / "tbv_ring_hoard"
PARAMS = Path("/sys/module/thunderbolt_ibverbs/parameters")
NOBODY = 65534
OTHER = 4242  # a second unprivileged user (no passwd entry needed)
MEMCG_LIMIT_MIB = 256
MIB = 1 << 20
# the tool stops by itself below this much MemAvailable: a kernel that does not refuse in time
# then fails the test instead of taking the VM down
FLOOR_MIB = 768
# object limits of a device (docs/architecture.md, "Limits") and the kinds tbv_exhaust counts
LIMITS = {"ctx": 1024, "pd": 4096, "cq": 4096, "qp": 4096}
MAX_MW = 65536  # memory windows (TBV_MAX_MW)
TRACING = Path("/sys/kernel/tracing")


def mem_available_mib() -> int:
    m = re.search(r"^MemAvailable:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
    assert m
    return int(m.group(1)) // 1024


def as_user(uid: int, *cmd: str, cgroup: Path | None = None, memlock_kib: int | None = None) -> list[str]:
    """`cmd` as `uid` (no capabilities, no groups), first in line for the OOM killer; in `cgroup`
    if given, and then with no RLIMIT_MEMLOCK so that tbv_exhaust can lock its own pages; with
    RLIMIT_MEMLOCK at `memlock_kib` if given."""
    script = "echo 1000 > /proc/self/oom_score_adj && "
    if memlock_kib is not None:
        script += f"ulimit -l {memlock_kib} && "
    if cgroup:
        script += f"echo $$ > {cgroup}/cgroup.procs && ulimit -l unlimited && "
    script += 'exec setpriv --reuid="$0" --regid="$0" --clear-groups -- "$@"'
    return ["sh", "-c", script, str(uid), *cmd]


class Holder:
    """tbv_exhaust in a mode that keeps what it made until released: its report, then the wait."""

    def __init__(self, cmd: list[str], env: dict[str, str], timeout: float = 900) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.report: dict[str, list[str]] = {}
        # the raw pipe: a buffered readline() may hold lines that select() then waits for
        fd, got = self.proc.stdout.fileno(), b""
        deadline = time.monotonic() + timeout
        while b"ready\n" not in got:
            ready, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                self.kill()
                pytest.fail(f"{cmd} ended or hung before it was ready (exit {self.proc.returncode}):"
                            f"\n{got.decode()}{self.proc.stderr.read()}")
            got += chunk
        for line in got.decode().splitlines()[:-1]:
            words = line.split()
            self.report[words[0]] = words[1:]

    def release(self) -> None:
        """Everything it holds is destroyed when it exits."""
        out, err = self.proc.communicate(input="", timeout=300)
        assert self.proc.returncode == 0 and out.strip() == "closed", (self.proc.returncode, out, err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def probe(env: dict[str, str], dev: str, uid: int | None = None) -> str:
    """One PD, CQ, QP and MR made by `uid` (None: root): "probe ok" or what was refused."""
    cmd = [str(EXHAUST), dev, "probe"]
    r = subprocess.run(as_user(uid, *cmd) if uid is not None else cmd, capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode in (0, 1), (r.returncode, r.stdout, r.stderr)
    return r.stdout.strip()


@pytest.fixture
def tool(rdma_env: dict[str, str]) -> dict[str, str]:
    """The environment to run tbv_exhaust in, as any user; this process out of the OOM killer's way."""
    if not EXHAUST.exists():
        missing(f"{EXHAUST} is not built (make tools)")
    for path in [EXHAUST, *EXHAUST.parents]:
        if path == Path("/"):
            break
        assert path.stat().st_mode & 0o005 == 0o005, f"{path} is not readable by other users"
    adj = Path("/proc/self/oom_score_adj")
    old = adj.read_text().strip()
    adj.write_text("-1000")
    try:
        yield rdma_env
    finally:
        adj.write_text(old)


@pytest.fixture
def memcg() -> Iterator[Path]:
    """A memory cgroup limited to MEMCG_LIMIT_MIB (no swap); removed at teardown."""
    root = Path("/sys/fs/cgroup")
    if "memory" not in (root / "cgroup.controllers").read_text().split():
        missing("no memory controller in the cgroup v2 hierarchy")
    enabled = "memory" in (root / "cgroup.subtree_control").read_text().split()
    if not enabled:
        (root / "cgroup.subtree_control").write_text("+memory")
    cg = root / f"tbv-quota-{os.getpid()}"
    cg.mkdir()
    try:
        (cg / "memory.max").write_text(f"{MEMCG_LIMIT_MIB}M")
        if (cg / "memory.swap.max").exists():
            (cg / "memory.swap.max").write_text("0")
        yield cg
    finally:
        for pid in (cg / "cgroup.procs").read_text().split():
            os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while (cg / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.1)
        cg.rmdir()
        if not enabled:
            (root / "cgroup.subtree_control").write_text("-memory")


def memcg_stat(cg: Path, name: str) -> int:
    m = re.search(rf"^{name} (\d+)$", (cg / "memory.stat").read_text(), re.M)
    assert m, f"no {name} in memory.stat"
    return int(m.group(1))


def memcg_events(cg: Path) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in (cg / "memory.events").read_text().splitlines())}


def queue_budget_mib() -> int:
    """max_user_queue_mb, or its default: an eighth of RAM."""
    mb = int((PARAMS / "max_user_queue_mb").read_text())
    if mb:
        return mb
    total = int(re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M).group(1))
    return total // 1024 // 8


@on_sanitizer_kernel
def test_uverbs_is_open_to_every_user(vcable: Cable, tool: dict[str, str]) -> None:
    """The premise of the other tests: any local user can use the device."""
    nodes = list(Path("/dev/infiniband").glob("uverbs*"))
    assert nodes, "no /dev/infiniband/uverbs*"
    for node in nodes:
        assert stat.S_IMODE(node.stat().st_mode) & 0o666 == 0o666, f"{node}: {oct(node.stat().st_mode)}"
    assert probe(tool, vcable.end0.ibdev, NOBODY) == "probe ok"


def test_a_user_in_a_memory_cgroup_is_refused_within_it(vcable: Cable, tool: dict[str, str],
                                                         memcg: Path) -> None:
    """Queue memory is charged to the creator's memory cgroup, which refuses it: no OOM kill."""
    dev = vcable.end0.ibdev
    before = mem_available_mib()
    charged = int((memcg / "memory.current").read_text())
    hog = Holder(as_user(NOBODY, str(EXHAUST), dev, "big", str(FLOOR_MIB), cgroup=memcg), tool)
    try:
        # refused by the kernel (the cgroup's limit), not stopped by the tool's own floor
        assert hog.report["cq"][1] == "ENOMEM" and hog.report["qp"][1] == "ENOMEM", hog.report
        grown = int((memcg / "memory.current").read_text()) - charged
        # the queues reached the cgroup: most of its limit is the kernel memory they took
        assert grown > (MEMCG_LIMIT_MIB - 64) * MIB, f"memory.current grew by {grown >> 20} MiB"
        assert memcg_stat(memcg, "kernel") > (MEMCG_LIMIT_MIB - 64) * MIB
        assert memcg_events(memcg)["oom_kill"] == 0, "a refusal, not the OOM killer"
        assert int(hog.report["cq"][0]) > 0 and int(hog.report["qp"][0]) > 0, hog.report
        after = mem_available_mib()
        print(f"in a {MEMCG_LIMIT_MIB} MiB cgroup nobody made {hog.report['cq'][0]} CQs and "
              f"{hog.report['qp'][0]} QPs; memory.current +{grown >> 20} MiB, MemAvailable "
              f"{before} -> {after} MiB")
        assert after > before - MEMCG_LIMIT_MIB - 64
        # root, and another user outside the cgroup, still create what they need
        assert probe(tool, dev) == "probe ok"
        assert probe(tool, dev, OTHER) == "probe ok"
        hog.release()
    finally:
        hog.kill()
    assert int((memcg / "memory.current").read_text()) - charged < 32 * MIB, "given back at exit"


@on_sanitizer_kernel
def test_a_user_without_a_memory_limit_is_refused_by_its_queue_budget(vcable: Cable,
                                                                       tool: dict[str, str]) -> None:
    """Outside a limited cgroup, max_user_queue_mb (default an eighth of RAM) bounds a user."""
    dev = vcable.end0.ibdev
    budget = queue_budget_mib()
    before = mem_available_mib()
    hog = Holder(as_user(NOBODY, str(EXHAUST), dev, "big", str(FLOOR_MIB)), tool)
    try:
        assert hog.report["cq"][1] == "EDQUOT" and hog.report["qp"][1] == "EDQUOT", hog.report
        used = before - mem_available_mib()
        print(f"without a memory limit nobody made {hog.report['cq'][0]} CQs and "
              f"{hog.report['qp'][0]} QPs; MemAvailable {before} -> {before - used} MiB, "
              f"budget {budget} MiB")
        # the budget counts the queues; the QPs' and CQs' own structures come on top
        assert used < budget + 96, f"{used} MiB taken, the budget is {budget} MiB"
        # the budget is the user's over all devices: another process of nobody, on the
        # cable's other device, gets nothing (what is left is less than one of each)
        again = Holder(as_user(NOBODY, str(EXHAUST), vcable.end1.ibdev, "big", str(FLOOR_MIB)), tool)
        try:
            assert again.report == {"cq": ["0", "EDQUOT"], "qp": ["0", "EDQUOT"]}, again.report
            again.release()
        finally:
            again.kill()
        assert probe(tool, dev) == "probe ok"
        assert probe(tool, dev, OTHER) == "probe ok"
        hog.release()
    finally:
        hog.kill()
    assert probe(tool, dev, NOBODY) == "probe ok", "the budget is given back with the objects"


# tbv_ring_hoard's rings: 4096 and 8192 slots of 64 bytes for a CQ (an ib_uverbs_wc each), 2048
# and 4096 for the SRQ (a receive WQE with one SGE), each with a page of header; a budget of a
# few dozen of them, and where a kernel that does not refuse is stopped
HOARD_ENTRIES = {"cq_resize": 4095, "cq_create": 4095, "srq_modify": 2047}
HOARD_BUDGET_MIB = 8
HOARD_STOP_MIB = 64


def hoard(env: dict[str, str], dev: str, mode: str) -> dict[str, int | str]:
    """tbv_ring_hoard run by nobody to its end: its rings go with its exit."""
    cmd = [str(HOARD), dev, mode, str(HOARD_ENTRIES[mode]), str(HOARD_STOP_MIB)]
    r = subprocess.run(as_user(NOBODY, *cmd), capture_output=True, text=True, env=env, timeout=300)
    m = re.fullmatch(r"rings (\d+) mapped (\d+) largest (\d+) until (\w+)\n", r.stdout)
    assert r.returncode == 0 and m, (r.returncode, r.stdout, r.stderr)
    return {"rings": int(m[1]), "mapped": int(m[2]), "largest": int(m[3]), "until": m[4]}


@on_sanitizer_kernel
@pytest.mark.kernels  # the fix hands each mapping to ib_core's VMA tracking, whose type we copy
@pytest.mark.parametrize("mode", sorted(HOARD_ENTRIES))
def test_rings_a_user_keeps_mapped_stay_in_its_queue_budget(vcable: Cable, tool: dict[str, str],
                                                            mode: str) -> None:
    """A ring's memory lives as long as a mapping of it, so it counts until the last one goes:
    nobody maps every new ring of a resized CQ or SRQ (or of CQs it destroys) and unmaps none.
    The refusal comes within max_user_queue_mb, counting exactly what is mapped; once the
    process is gone (its mappings with it) the budget is whole: a second run gets as far."""
    if not HOARD.exists():
        missing(f"{HOARD} is not built (make tools)")
    dev = vcable.end0.ibdev
    param = PARAMS / "max_user_queue_mb"
    old = param.read_text().strip()
    param.write_text(str(HOARD_BUDGET_MIB))
    log = KmsgReader()
    try:
        first = hoard(tool, dev, mode)
        lines = log.read_new()
        second = hoard(tool, dev, mode)
    finally:
        log.close()
        param.write_text(old)
    budget = HOARD_BUDGET_MIB * MIB
    print(f"{mode}: nobody mapped {first['rings']} rings, {first['mapped'] >> 10} KiB, budget "
          f"{budget >> 10} KiB, until {first['until']}; again: {second}")
    assert first["until"] == "EDQUOT", (f"nobody kept {first['mapped'] >> 20} MiB of rings mapped "
                                        f"under a budget of {HOARD_BUDGET_MIB} MiB: {first}")
    # refused within the budget, and only when the next ring would not fit
    assert budget - first["largest"] < first["mapped"] <= budget, first
    # what the refusal counted is what was mapped (the queue budget's one user, here), plus the
    # ring asked for: "uid 65534 refused: KIB KiB of queues, more than its 8192 (max_user_queue_mb)"
    refusals = [int(m[1]) for m in (re.search(rf"uid {NOBODY} refused: (\d+) KiB of queues", line)
                                    for line in lines) if m]
    assert refusals, lines
    asked = (refusals[0] << 10) - first["mapped"]
    assert 0 < asked <= first["largest"], (refusals, first)
    assert second == first, "the budget is whole again once the mappings are gone"


@on_sanitizer_kernel
@pytest.mark.parametrize("kind", sorted(LIMITS))
def test_a_user_holds_at_most_its_share_of_each_object_limit(vcable: Cable, tool: dict[str, str],
                                                              kind: str) -> None:
    dev = vcable.end0.ibdev
    share = PARAMS / "max_user_share"
    assert share.read_text().strip() == "50"
    share.write_text("25")  # fewer objects to make under TCG; the arithmetic is the same
    try:
        hog = Holder(as_user(NOBODY, str(EXHAUST), dev, "count", kind), tool)
        try:
            assert hog.report[kind] == [str(LIMITS[kind] // 4), "EDQUOT"], hog.report
            assert probe(tool, dev) == "probe ok"
            assert probe(tool, dev, OTHER) == "probe ok"
            # per device: the other end is another device
            assert probe(tool, vcable.end1.ibdev, NOBODY) == "probe ok"
            hog.release()
        finally:
            hog.kill()
    finally:
        share.write_text("50")


PIN_SCRIPT = r"""
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.libibverbs_enums as e

pd = PD(Context(name=sys.argv[1]))
mrs = []
for mib in map(int, sys.argv[2:]):
    try:
        mrs.append(MR(pd, mib << 20, e.IBV_ACCESS_LOCAL_WRITE))
        print(mib, "ok")
    except PyverbsRDMAError as err:
        print(mib, "refused", err.error_code)
"""


@on_sanitizer_kernel
def test_a_user_pins_at_most_its_share_of_max_pinned_mb(vcable: Cable, tool: dict[str, str]) -> None:
    """Within RLIMIT_MEMLOCK (8 MiB here), a user pins at most max_user_share of max_pinned_mb."""
    param = PARAMS / "max_pinned_mb"
    old = param.read_text().strip()
    param.write_text("8")  # nobody's share: 4 MiB
    try:
        def pin(uid: int | None, *mib: int) -> list[str]:
            cmd = ["/usr/bin/python3", "-c", PIN_SCRIPT, vcable.end0.ibdev, *map(str, mib)]
            r = subprocess.run(as_user(uid, *cmd) if uid is not None else cmd, capture_output=True,
                               text=True, env=tool, timeout=120)
            assert r.returncode == 0, (r.stdout, r.stderr)
            return r.stdout.strip().splitlines()

        assert pin(NOBODY, 3, 2, 1) == ["3 ok", "2 refused 122", "1 ok"]  # EDQUOT
        assert pin(OTHER, 3) == ["3 ok"]
        assert pin(None, 6) == ["6 ok"]  # root (CAP_SYS_RESOURCE) is not held to a share
    finally:
        param.write_text(old)


@on_sanitizer_kernel
def test_a_user_pins_at_most_its_rlimit_memlock(vcable: Cable, tool: dict[str, str]) -> None:
    """MRs of user memory count against the process's RLIMIT_MEMLOCK, as every ib_umem user's
    do: beyond it a registration is refused (ENOMEM) and what was pinned stays; a larger limit
    lets the same registrations through. max_pinned_mb is far above both here."""
    limit_mb = int((PARAMS / "max_pinned_mb").read_text())
    assert limit_mb == 0 or limit_mb >= 64, "the device-wide limit would refuse first"  # 0: half of RAM

    def pin(memlock_kib: int, *mib: int) -> list[str]:
        cmd = ["/usr/bin/python3", "-c", PIN_SCRIPT, vcable.end0.ibdev, *map(str, mib)]
        r = subprocess.run(as_user(NOBODY, *cmd, memlock_kib=memlock_kib), capture_output=True,
                           text=True, env=tool, timeout=120)
        assert r.returncode == 0, (r.stdout, r.stderr)
        return r.stdout.strip().splitlines()

    assert pin(4096, 3, 2, 1) == ["3 ok", "2 refused 12", "1 ok"]  # 4 MiB: ENOMEM at 5
    assert pin(16384, 3, 2, 1) == ["3 ok", "2 ok", "1 ok"]


@contextlib.contextmanager
def counted_calls(**probes: str) -> Iterator[Callable[[], dict[str, int]]]:
    """Count the calls of kernel functions, `name="[module:]function"` each: a kprobe event per
    function (enabled, so registered), whose hits kprobe_profile reports. Yields a function that
    returns the counts so far; the probes are removed afterwards."""
    if not (TRACING / "kprobe_events").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACING)], check=False)
    if not (TRACING / "kprobe_events").exists():
        missing("no kprobe events (CONFIG_KPROBE_EVENTS) to count calls with")
    group = "tbvcount"
    added = []

    def kprobe_events(line: str) -> None:
        # appended (O_APPEND without the seek Python's "a" mode makes, which tracefs refuses):
        # other probes stay
        fd = os.open(TRACING / "kprobe_events", os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line.encode() + b"\n")
        finally:
            os.close(fd)

    try:
        for name, function in probes.items():
            kprobe_events(f"p:{group}/{name} {function}")
            added.append(name)
        (TRACING / "events" / group / "enable").write_text("1")

        def hits() -> dict[str, int]:
            counts = {}
            for line in (TRACING / "kprobe_profile").read_text().splitlines():
                words = line.split()
                if words and words[0] in probes:
                    counts[words[0]] = int(words[1])
            return counts

        yield hits
    finally:
        if added:
            (TRACING / "events" / group / "enable").write_text("0")
            for name in added:
                kprobe_events(f"-:{group}/{name}")


# Grace periods a cable's deletion may wait for, however many windows its devices held: the
# test's deletion waited for 10 (synchronize_rcu() and its expedited form, called by the core,
# the netdevs' unregistration and ours); one per window, the old module's, is what it rules out.
GP_WAITS_BOUND = 256


def test_a_user_s_windows_do_not_stall_the_unplug(vcable_factory: VcableFactory,
                                                  tool: dict[str, str]) -> None:
    """`nobody` holds as many memory windows as it may on a device (its share: 32768, type 1
    and type 2 in turn) when the cable is pulled (deleted): the device goes and the cable is
    deleted within the harness's limit, every window deallocated meanwhile, and the teardown
    waits for no RCU grace period per window (counted: the calls of synchronize_rcu() and
    synchronize_rcu_expedited() while the cable is deleted). Deallocating a window used to
    wait for one (tbv_dealloc_mw()), under the link's lock, which blocks the cable's deletion
    and every login: minutes."""
    cable = vcable_factory.add()
    dev = cable.end0.ibdev
    assert (PARAMS / "max_user_share").read_text().strip() == "50"
    windows = MAX_MW // 2
    hog = Holder(as_user(NOBODY, str(EXHAUST), dev, "count", "mw"), tool)
    try:
        assert hog.report["mw"] == [str(windows), "EDQUOT"], hog.report
        with counted_calls(gp_wait="synchronize_rcu", gp_wait_exp="synchronize_rcu_expedited",
                           dealloc_mw=f"{MODNAME}:tbv_dealloc_mw") as hits:
            try:
                vcable_factory.delete(cable.name)  # within CABLE_DELETE_TIMEOUT_S, or it raises
            except subprocess.TimeoutExpired:
                pytest.fail(f"deleting the cable took over {CABLE_DELETE_TIMEOUT_S} s; "
                            f"meanwhile {hits()}", pytrace=False)
            counts = hits()
        print(f"deleting a cable whose device held {windows} windows: {counts}")
        assert not Path("/sys/class/infiniband", dev).exists(), f"{dev} is still there"
        assert cable.name not in leftover_cables()
        # the windows went with the device, not later with the process
        assert counts["dealloc_mw"] == windows, counts
        assert counts["gp_wait"] + counts["gp_wait_exp"] < GP_WAITS_BOUND, counts
        hog.release()  # its context is disassociated: it only has to exit
    finally:
        hog.kill()
