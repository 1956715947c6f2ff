"""Allocation failures in every allocation our module makes: each path fails cleanly.

Debug kernel only (FAILSLAB with the stack-trace filter). Two injectors:
- /proc/self/fail-nth fails exactly the n-th allocation the calling task makes, counting only
  allocations with our module's code on the stack (the stack filter), so every allocation made
  synchronously by an operation (configfs mkdir and plug, insmod) is failed in turn, n = 1, 2, ...
  until the operation no longer reaches an n-th allocation.
- bring-up runs in work items, outside the task: there failslab fails one allocation at random
  (probability with times=1), repeated over many plugs.
After each run the operation must have either succeeded or failed with a clean error, the kernel
log must be clean (checked by the autouse fixture), nothing may leak (kmemleak, checked by the
module fixture) and a normal retry must work.
"""

from __future__ import annotations

import contextlib
import errno
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pairlib import hw
from vmlib import (BASE_DEPS, KO, MODNAME, VCABLE_DEPS, VCABLE_KO, VCABLE_MODNAME, load_module, missing,
                   module_deps, module_loaded, require_vm, rmmod, run, tbverbs)

# every test here makes allocations fail: the kernel's reports of that are expected
pytestmark = pytest.mark.injects_alloc_failures

REPO = Path(__file__).resolve().parents[2]

FAILSLAB = Path("/sys/kernel/debug/failslab")
# fail-nth is one counter per task shared by every fault type: page allocations must be
# filtered to our module too, or they use up the count before our first kmalloc.
FAIL_PAGE_ALLOC = Path("/sys/kernel/debug/fail_page_alloc")
CFS = Path("/sys/kernel/config/tbverbs/vcable")
MAX_K = 400
ULONG_MAX = 2**64 - 1


def module_text_range(names: tuple[str, ...] = (MODNAME, VCABLE_MODNAME)) -> tuple[int, int]:
    """One address range over the text of our modules (failslab filters on one range): it must
    hold no other module's text, or that module's own allocations would be failed too."""
    ours, others = [], []
    for line in Path("/proc/kallsyms").read_text().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[1] in "tT" and parts[3].startswith("["):
            (ours if parts[3].strip("[]") in names else others).append((int(parts[0], 16), parts[3]))
    for name in names:
        assert any(m == f"[{name}]" for _, m in ours), f"no symbols of {name} in /proc/kallsyms"
    start, end = min(a for a, _ in ours), max(a for a, _ in ours) + 4096
    between = sorted({m for a, m in others if start <= a < end})
    assert not between, f"other modules' text lies between ours, the stack filter would fail theirs: {between}"
    return start, end


def fs(attr: str, value: str | int) -> None:
    (FAILSLAB / attr).write_text(f"{value}\n")


def require_failslab() -> None:
    require_vm()
    if not (FAILSLAB / "require-start").exists():
        missing("needs the debug kernel with FAILSLAB and its stack-trace filter (make test-debug)")
    fs("probability", 0)
    fs("verbose", 0)            # an injected failure is not a kernel bug: no stack dump
    fs("ignore-gfp-wait", "N")  # GFP_KERNEL allocations too
    fs("stacktrace-depth", 32)


@pytest.fixture
def failslab(module: str):
    """failslab limited to allocations with the loaded module's code on the stack."""
    require_failslab()
    start, end = module_text_range()
    fs("task-filter", "N")      # bring-up runs in work items, not in the writing task
    fs("require-start", start)
    fs("require-end", end)
    page_filter = (FAIL_PAGE_ALLOC / "require-start").exists()
    if page_filter:
        (FAIL_PAGE_ALLOC / "stacktrace-depth").write_text("32\n")
        (FAIL_PAGE_ALLOC / "require-start").write_text(f"{start}\n")
        (FAIL_PAGE_ALLOC / "require-end").write_text(f"{end}\n")
    yield
    fs("probability", 0)
    fs("times", 0)
    fs("require-start", 0)
    fs("require-end", 0)
    if page_filter:
        (FAIL_PAGE_ALLOC / "times").write_text("1\n")
        (FAIL_PAGE_ALLOC / "require-start").write_text("0\n")
        (FAIL_PAGE_ALLOC / "require-end").write_text(f"{ULONG_MAX}\n")


def fail_nth(n: int) -> None:
    """Fail the n-th filtered allocation of this task (0 disables)."""
    Path("/proc/self/fail-nth").write_text(f"{n}\n")


def nth_fired() -> bool:
    """Whether the armed fail-nth fired; disarms it either way."""
    left = int(Path("/proc/self/fail-nth").read_text())
    fail_nth(0)
    return left == 0


def plug_once(name: str) -> int:
    """mkdir + plug, then wait for the login: 0, the plug write's errno, or -errno of mkdir."""
    d = CFS / name
    try:
        d.mkdir()  # allocates the cable
    except OSError as e:
        return -(e.errno or 1)
    try:
        (d / "plugged").write_text("1")
    except OSError as e:
        return e.errno or -1
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (d / "end1_ibdev").read_text().strip():
        time.sleep(0.1)
    return 0


# A plug makes about a hundred allocations, each run a whole bring-up and unplug on the debug
# kernel (about 8 s each): CI's lane fails every third one, make test-full all of them.
PLUG_STRIDE = 3


@pytest.mark.parametrize("first", [
    pytest.param(first, id=f"n={first},{first + PLUG_STRIDE},...",
                 marks=pytest.mark.sanitizer_full)  # 11 min a third under lockdep here: make test-full
    for first in range(1, PLUG_STRIDE + 1)])
def test_every_allocation_failure_in_plug_and_unplug_is_handled(failslab, first: int) -> None:
    tbverbs("vcable", "list")
    outcomes: dict[int, int] = {}
    for n in range(first, MAX_K + 1, PLUG_STRIDE):
        fail_nth(n)
        rc = plug_once(f"fs{n}")
        hit = nth_fired()
        if rc >= 0:
            (CFS / f"fs{n}").rmdir()  # unplugs whatever came up
        # Any error is fine when a failure was injected: the driver core itself turns some
        # allocation failures into other errors (device_add without a name: EINVAL).
        assert rc == 0 or hit, f"n={n}: failed with {errno.errorcode.get(abs(rc), rc)} uninjected"
        outcomes[n] = rc
        if not hit:
            assert rc == 0, f"n={n}: plug failed without an injected failure"
            break
    else:
        pytest.fail(f"more than {MAX_K} allocations in one plug: raise MAX_K")
    assert len(outcomes) > 3, f"only {len(outcomes)} allocation sites were reached"
    # and afterwards everything works as before
    cable = tbverbs("vcable", "add", "--name", "after")
    assert "usb4_rdma" in cable.stdout
    tbverbs("vcable", "del", "after")


def test_random_allocation_failures_in_bring_up_are_handled(failslab) -> None:
    """Bring-up work (login, rings, netdev, ib_device) with one random allocation failed."""
    fs("probability", 2)
    injected_runs = 0
    for i in range(60):
        fs("times", 1)
        rc = plug_once(f"bu{i}")
        hit = int((FAILSLAB / "times").read_text()) == 0
        fs("times", 0)
        injected_runs += hit
        assert rc == 0 or hit, f"run {i}: failed with {errno.errorcode.get(abs(rc), rc)} uninjected"
        if rc >= 0:
            (CFS / f"bu{i}").rmdir()
    fs("probability", 0)
    assert injected_runs >= 3, f"only {injected_runs} runs had an injected failure"
    cable = tbverbs("vcable", "add", "--name", "after")
    assert "usb4_rdma" in cable.stdout
    tbverbs("vcable", "del", "after")


@contextlib.contextmanager
def page_allocations_out_of_fail_nth() -> Iterator[None]:
    """fail-nth counts slab allocations only: page allocations of order below fail_page_alloc's
    min-order never reach the shared counter, so no allocation of any order does here.

    Otherwise the n-th "allocation" may be a page (an exec's, a page-cache read's): it fails
    with failslab's `times` untouched (the injection goes unseen), and a failed page-cache
    read can break the next command (a shared library that does not load).
    """
    min_order = FAIL_PAGE_ALLOC / "min-order"
    if not min_order.exists():
        yield
        return
    saved = min_order.read_text().strip()
    min_order.write_text("4096\n")
    try:
        yield
    finally:
        min_order.write_text(f"{saved}\n")


def insmod_failing_nth(ko: Path, name: str, n: int) -> tuple[bool, bool]:
    """insmod with its n-th allocation failed: (loaded, the failure was injected)."""
    fs("times", 1)
    r = run(["bash", "-c", f"echo {n} > /proc/self/fail-nth && exec insmod {ko}"], check=False)
    hit = int((FAILSLAB / "times").read_text()) == 0
    fs("times", 0)
    loaded = r.returncode == 0
    if loaded:
        assert run(["rmmod", name], check=False).returncode == 0, f"n={n}: loaded but does not unload"
    else:
        assert hit, f"n={n}: insmod failed without an injected failure: {r.stderr.strip()}"
        assert not module_loaded(name), f"n={n}: a failed insmod left {name} loaded"
    return loaded, hit


# The main module alone, then the virtual cable's on top of it (its init registers configfs).
@pytest.mark.parametrize("which", ["main", "vcable"])
def test_every_allocation_failure_in_module_load_is_handled(which: str) -> None:
    """Fail the n-th allocation of `insmod` (exec, loader and our init alike): a clean error each time.

    The kernel's loader makes a few hundred allocations before it calls our init, and every
    insmod under KASAN and TCG costs about a second, so the run is bounded: the allocation count
    N of one insmod is found by bisection, then the last LAST_N allocations (our init and its
    teardown on failure, which run after the loader) are each failed, plus a sample of the
    loader's own.
    """
    require_failslab()
    ko, name = (KO, MODNAME) if which == "main" else (VCABLE_KO, VCABLE_MODNAME)
    for needed in (KO, ko):
        if not needed.exists():
            missing(f"{needed} is not built")
    if module_loaded():
        assert rmmod().returncode == 0
    if which == "main":
        run(["modprobe", "-a", *module_deps(KO, BASE_DEPS)])
    else:
        load_module(vcable=False)
        run(["modprobe", "-a", *module_deps(VCABLE_KO, VCABLE_DEPS)])
    fs("require-start", 0)
    fs("require-end", ULONG_MAX)  # no stack filter: the module is not loaded yet
    fs("probability", 0)          # only fail-nth injects
    last_n = 60
    with page_allocations_out_of_fail_nth():
        insmod_bisected(ko, name, last_n)
    # and afterwards a normal load works
    r = run(["insmod", str(ko)], check=False)
    assert r.returncode == 0, r.stderr
    assert rmmod().returncode == 0
    assert not module_loaded(MODNAME) and not module_loaded(VCABLE_MODNAME)


def insmod_bisected(ko: Path, name: str, last_n: int) -> None:
    """Find the allocation count n of one insmod of `ko`; fail its last `last_n` and a sample of the rest."""
    try:
        lo, hi = 1, 16384         # insmod reaches allocation lo, never reaches hi
        assert insmod_failing_nth(ko, name, lo)[1], "fail-nth injected nothing into insmod"
        assert not insmod_failing_nth(ko, name, hi)[1], f"insmod made more than {hi} allocations"
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if insmod_failing_nth(ko, name, mid)[1]:
                lo = mid
            else:
                hi = mid
        n = lo
        assert n > 5, "too few allocations reached"
        ns = sorted(set(range(max(1, n - last_n), n + 3)) | set(range(1, n, max(1, n // 8))))
        for k in ns:
            insmod_failing_nth(ko, name, k)
    finally:
        fs("times", 0)


def test_every_allocation_failure_in_verbs_objects_is_handled(failslab, vcable, rdma_env) -> None:
    """Open a context, create PD, CQ, MR, SRQ and three QPs, destroy them: fail each allocation.

    fail-nth counts only allocations with our module on the stack, made by the probe process
    (uverbs calls our verbs in its context), so every one of our allocation sites on this path is
    failed in turn. Each run must end in success or a clean error of one step, every object must
    be gone afterwards (the objects_* counters) and a normal run must still work.
    """
    probe = str(REPO / "build" / "tools" / "verbs_check")
    dev = vcable.end0.ibdev
    counters = ("objects_qp", "objects_cq", "objects_mr", "objects_pd", "objects_srq")
    baseline = {c: hw(dev, c) for c in counters}
    fs("probability", 0)          # only fail-nth injects
    page_times = FAIL_PAGE_ALLOC / "times"
    for n in range(1, MAX_K + 1):
        fs("times", 1)
        page_times.write_text("1\n")
        r = run(["bash", "-c", f"echo {n} > /proc/self/fail-nth && exec {probe} objects {dev}"],
                check=False, env=rdma_env)
        # injected into a slab or a page allocation (fail-nth fires in whichever comes n-th)
        hit = int((FAILSLAB / "times").read_text()) == 0 or int(page_times.read_text()) == 0
        fs("times", 0)
        page_times.write_text("0\n")
        assert r.returncode in (0, 2, 3), f"n={n}: probe crashed: {r.returncode} {r.stderr}"
        assert r.returncode == 0 or hit, f"n={n}: failed without an injected failure: {r.stdout}"
        now = {c: hw(dev, c) for c in counters}
        assert now == baseline, f"n={n}: objects left behind: {now} (before {baseline})"
        if not hit:
            break
    else:
        pytest.fail(f"more than {MAX_K} allocations: raise MAX_K")
    assert n > 5, f"only {n - 1} allocation sites reached"
    assert run([probe, "objects", dev], env=rdma_env).returncode == 0
