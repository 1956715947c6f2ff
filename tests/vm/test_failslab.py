"""Allocation failures in every allocation our module makes: each path fails cleanly.

Debug kernel only (FAILSLAB with the stack-trace filter): failslab is limited to
allocations with our module's code on the call stack, and the k-th such allocation of an
operation is made to fail, for k = 1, 2, ... until the operation no longer reaches a k-th
allocation. After each run the operation must have either succeeded or failed with a
clean error, the kernel log must be clean (checked by the autouse fixture), nothing may
leak (kmemleak, checked by the module fixture) and a normal retry must work.
"""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest

from vmlib import KO, BASE_DEPS, missing, module_loaded, require_vm, rmmod, run, tbverbs

FAILSLAB = Path("/sys/kernel/debug/failslab")
CFS = Path("/sys/kernel/config/tbverbs/vcable")
MAX_K = 400
ULONG_MAX = 2**64 - 1


def module_text_range(name: str = "thunderbolt_ibverbs") -> tuple[int, int]:
    addrs = []
    for line in Path("/proc/kallsyms").read_text().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == f"[{name}]" and parts[1] in "tT":
            addrs.append(int(parts[0], 16))
    assert addrs, "no symbols of the module in /proc/kallsyms"
    return min(addrs), max(addrs) + 4096


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
    yield
    fs("probability", 0)
    fs("times", 0)
    fs("require-start", 0)
    fs("require-end", 0)


def fail_kth(k: int) -> None:
    fs("interval", k)
    fs("times", 1)
    fs("probability", 100)


def injected() -> bool:
    fs("probability", 0)
    return int((FAILSLAB / "times").read_text()) == 0


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


def test_every_allocation_failure_in_plug_and_unplug_is_handled(failslab) -> None:
    tbverbs("vcable", "list")
    outcomes: dict[int, int] = {}
    for k in range(1, MAX_K + 1):
        fail_kth(k)
        rc = plug_once(f"fs{k}")
        hit = injected()
        if rc >= 0:
            (CFS / f"fs{k}").rmdir()  # unplugs whatever came up
        assert abs(rc) in (0, errno.ENOMEM), f"k={k}: failed with {errno.errorcode.get(abs(rc), rc)}"
        outcomes[k] = rc
        if not hit:
            break
    else:
        pytest.fail(f"more than {MAX_K} allocations in one plug: raise MAX_K")
    assert len(outcomes) > 5, f"only {len(outcomes)} allocation sites were reached"
    # and afterwards everything works as before
    cable = tbverbs("vcable", "add", "--name", "after")
    assert "usb4_rdma" in cable.stdout
    tbverbs("vcable", "del", "after")


def test_every_allocation_failure_in_module_load_is_handled() -> None:
    """Fail the k-th allocation of `insmod` (loader and our init alike): a clean error each time."""
    require_failslab()
    if not KO.exists():
        missing(f"{KO} is not built")
    if module_loaded():
        assert rmmod().returncode == 0
    run(["modprobe", "-a", *BASE_DEPS])
    fs("require-start", 0)
    fs("require-end", ULONG_MAX)  # no stack filter: the module is not loaded yet
    fs("task-filter", "Y")        # only the insmod process (make-it-fail below)
    try:
        for k in range(1, 4 * MAX_K + 1):
            fail_kth(k)
            r = run(["bash", "-c", f"echo 1 > /proc/self/make-it-fail && exec insmod {KO}"],
                    check=False)
            hit = injected()
            if r.returncode == 0:
                assert rmmod().returncode == 0, f"k={k}: loaded but does not unload"
            if not hit:
                assert r.returncode == 0, f"k={k}: insmod failed without an injected failure"
                break
            assert not module_loaded(), f"k={k}: a failed insmod left the module loaded"
        else:
            pytest.fail("insmod made too many allocations: raise the bound")
    finally:
        fs("probability", 0)
        fs("task-filter", "N")
    assert k > 5, "too few allocations reached"
