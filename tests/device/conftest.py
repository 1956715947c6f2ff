"""Fixtures for the tests that run INSIDE the test VM (as root, with the venv's python).

Run them with:  python3 tests/harness/vm.py -- python -m pytest tests/device

On the host every test in tests/device is skipped ("must run inside the test VM") unless it is marked
`@pytest.mark.anywhere` (pure tests such as test_kmsg_patterns.py). Default-deny: a new test that
forgets a marker is still never run against the host kernel (insmod, configfs, netns as root), and
a plain `pytest` over the whole tree on the host stays green and harmless instead of failing.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

# The helpers shared with tests/usb4, tests/suspend, the harness and bench/ live in tests/lib.
_LIB = str(Path(__file__).resolve().parents[1] / "lib")
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)

import kmsg  # noqa: E402
import testlimit  # noqa: E402
from pairlib import Pair, hw, objects  # noqa: E402
from vmlib import (IN_VM, KO, MODNAME, NOT_IN_VM, VCABLE_KO, VCABLE_MODNAME, Cable, NetnsFactory,
                   new_kernel_log,
                   VcableFactory, kmemleak_available, kmemleak_clear, kmemleak_scan,
                   kmemleak_scan_on_demand_only, leaks_of, load_module,
                   leftover_cables, missing, module_loaded, rdma_environment, remove_leftover_cables,
                   require_vm, rmmod, run, tbv_setting, unload_rdma_rxe)  # noqa: E402

VM_DIR = Path(__file__).resolve().parent
F = TypeVar("F", VcableFactory, NetnsFactory)


def pytest_configure(config: pytest.Config) -> None:
    if IN_VM:
        # The guest's deadline stops a hung run with SIGTERM: each thread's Python stack then goes
        # to the real stderr (CI keeps only the run's output). Capture is suspended here.
        faulthandler.register(signal.SIGTERM, file=os.dup(2), all_threads=True, chain=True)
        # and a hung test fails on its own (TBV_TEST_TIMEOUT) instead of using up the guest's time
        config.pluginmanager.register(testlimit, "testlimit")
    config.addinivalue_line("markers", "beyond_ci: kept out of CI's time budget (make test); "
                            "make test-full runs it (README, Tests and CI)")
    config.addinivalue_line("markers", "anywhere: pure test, also runs on the host (outside the VM)")
    config.addinivalue_line("markers", "kernels: in the subset run on every kernel we support, not only "
                            "6.12 (make test-vm-6.1, make test-vm-7.3; docs/kernels.md)")
    config.addinivalue_line("markers", "injects_alloc_failures: the kernel's reports of failed "
                            "allocations (warn_alloc stack dumps) are expected, not bugs")
    config.addinivalue_line("markers", "plants_kernel_bug: the test makes the kernel report a bug "
                            "on purpose; the kernel-log check must catch it instead of failing")
    # make's selections on the sanitizer kernel (docs/sanitizers.md): -m, not lists of node ids
    config.addinivalue_line("markers", "sanitizer_subset: in make test-debug's run on the sanitizer "
                            "kernel (beside test_sanitizers.py and test_failslab.py, which it runs whole)")
    config.addinivalue_line("markers", "sanitizer_ci: in CI's sanitizer lane (make test-debug-ci-vm)")
    config.addinivalue_line("markers", "sanitizer_full: added to CI's sanitizer lane by make test-full "
                            "(TBV_FULL=1; make test-debug-ci-vm)")
    config.addinivalue_line("markers", "sanitizer_cold: what CI's sanitizer lane runs when it had to "
                            "build the sanitizer kernel in this run (make test-debug-ci-vm, cold cache)")
    # a misspelt marker on a test is an error, not a silently empty selection
    config.option.strict_markers = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A planted bug's KASAN report taints the kernel, which turns lockdep off for the rest of
    # the boot: the tests that plant one run last (stable: each file's order kept).
    items.sort(key=lambda item: bool(item.get_closest_marker("plants_kernel_bug")))
    if IN_VM:
        return
    skip = pytest.mark.skip(reason=NOT_IN_VM)
    for item in items:
        in_vm_dir = VM_DIR in Path(str(item.fspath)).resolve().parents
        if in_vm_dir and not item.get_closest_marker("anywhere"):
            item.add_marker(skip)


def lockdep_turned_off() -> bool:
    """On a kernel with lockdep (the sanitizer lane's), whether it has stopped checking."""
    try:
        stats = Path("/proc/lockdep_stats").read_text()
    except OSError:
        return False  # no lockdep
    m = re.search(r"^\s*debug_locks:\s*(\d+)", stats, re.M)
    return bool(m) and m.group(1) == "0"


@pytest.fixture(autouse=True)
def kernel_log_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail (as an error at teardown) when the kernel logged a warning, oops, leak, ... during the test.

    Autouse and function-scoped, so it is set up before and torn down after the test's other
    function-scoped fixtures: a WARN during module unload in `module`'s teardown is still caught.
    The new kernel log lines are attached to the report of every test that has any.
    """
    if not IN_VM:
        yield
        return
    if lockdep_turned_off() and not request.node.get_closest_marker("plants_kernel_bug"):
        pytest.fail("lockdep was turned off earlier in this boot (a lockdep report, or a taint such "
                    "as KASAN's): this test's locking would go unchecked", pytrace=False)
    with new_kernel_log() as new:
        yield
    if new:
        request.node.add_report_section("teardown", "kernel log", "\n".join(new))
    # tests that inject allocation failures expect the kernel's reports of them
    bad = kmsg.find_bad(new, bool(request.node.get_closest_marker("injects_alloc_failures")))
    if request.node.get_closest_marker("plants_kernel_bug"):
        if not bad:
            pytest.fail("a planted kernel bug went unnoticed by the kernel-log check", pytrace=False)
        return
    if bad:
        pytest.fail("kernel log has warnings/errors during this test:\n" + "\n".join(bad), pytrace=False)


@contextlib.contextmanager
def loaded_modules() -> Iterator[str]:
    """thunderbolt_ibverbs and the virtual cable's module (tbverbs_vcable) loaded from the repo's
    kernel/; both unloaded (asserted) after, with no leak of theirs (where kmemleak is on)."""
    require_vm()
    for ko in (KO, VCABLE_KO):
        if not ko.exists():
            missing(f"{ko} is not built (make module)")
    if module_loaded():
        # a test before this one may have failed to delete its cable (a timed-out teardown;
        # that test failed already): delete it, so that this one is not failed for it too
        left = leftover_cables()
        errors = remove_leftover_cables()
        r = rmmod()
        assert r.returncode == 0, (f"a previous {MODNAME} is loaded and does not unload: {r.stderr}"
                                   f" (cables left behind: {left}; {errors})")
    leak_check = kmemleak_available()
    if leak_check:
        kmemleak_scan_on_demand_only()
        kmemleak_clear()
    load_module()
    yield MODNAME
    if leak_check:
        # Before rmmod, while the backtraces still resolve to our symbols.
        leaks = leaks_of(kmemleak_scan(), f"[{MODNAME}]", f"[{VCABLE_MODNAME}]", "tbv_")
        assert not leaks, "kmemleak: objects leaked by our modules:\n" + "\n".join(leaks)
    r = rmmod()
    assert r.returncode == 0, f"rmmod failed: {r.stderr.strip()}"
    for name in (VCABLE_MODNAME, MODNAME):
        assert not module_loaded(name), f"{name} still in /sys/module after rmmod"


@contextlib.contextmanager
def cleaned_up(factory: F) -> Iterator[F]:
    """A VcableFactory or NetnsFactory whose every cable or namespace goes at the end (asserted)."""
    try:
        yield factory
    finally:
        errors = factory.cleanup()
    assert not errors, "\n".join(errors)


@contextlib.contextmanager
def kernel_log_checked(what: str) -> Iterator[None]:
    """kernel_log_clean's check, for what happens outside every test (a file's shared fixture)."""
    with new_kernel_log() as new:
        yield
    bad = kmsg.find_bad(new, False)
    assert not bad, f"kernel log has warnings/errors {what}:\n" + "\n".join(bad)


@pytest.fixture
def module() -> Iterator[str]:
    """Our modules loaded for this test (loaded_modules)."""
    with loaded_modules() as name:
        yield name


@pytest.fixture
def netns() -> Iterator[NetnsFactory]:
    """Factory: `ns = netns.add()`; `netns.exec(ns, "ip", "link")`. All deleted at teardown."""
    require_vm()
    with cleaned_up(NetnsFactory()) as factory:
        yield factory


@pytest.fixture
def vcable_factory(module: str) -> Iterator[VcableFactory]:
    """Factory: `cable = vcable_factory.add(rails=2)`. Every cable is deleted at teardown."""
    with cleaned_up(VcableFactory()) as factory:
        yield factory


@pytest.fixture
def vcable(vcable_factory: VcableFactory) -> Cable:
    """One plugged virtual cable with default parameters, link up on both ends."""
    return vcable_factory.add()


@pytest.fixture(scope="session")
def rdma_env() -> dict[str, str]:
    """os.environ plus PATH/LD_LIBRARY_PATH (or the prefix's env file) for rdma-core from $TBV_RDMA_PREFIX."""
    require_vm()
    prefix = Path(tbv_setting("TBV_RDMA_PREFIX"))
    if not (prefix / "bin").is_dir():
        missing(f"rdma-core is not built in {prefix} (make setup)")
    return rdma_environment(prefix, dict(os.environ))


@pytest.fixture
def rxe_device() -> Iterator[str]:
    """An rdma_rxe device, tbvrxe0, on a dummy netdev with 10.77.0.1/24; removed at teardown, and
    rdma_rxe unloaded (unload_rdma_rxe: ours go and come back). Its name does not start with
    "rxe", so libibverbs can bind the rxe provider to it only by its driver id, as it binds
    usb4_rdma (docs/rxe-abi.md)."""
    require_vm()
    run(["modprobe", "rdma_rxe"])
    run(["ip", "link", "add", "tbvdummy0", "type", "dummy"])
    try:
        run(["ip", "addr", "add", "10.77.0.1/24", "dev", "tbvdummy0"])
        run(["ip", "link", "set", "tbvdummy0", "up"])
        run(["rdma", "link", "add", "tbvrxe0", "type", "rxe", "netdev", "tbvdummy0"])
        yield "tbvrxe0"
    finally:
        subprocess.run(["rdma", "link", "delete", "tbvrxe0"], capture_output=True)
        subprocess.run(["ip", "link", "delete", "tbvdummy0"], capture_output=True)
        unload_rdma_rxe()


@contextlib.contextmanager
def nothing_left_behind(cable: Cable) -> Iterator[None]:
    """After the block, the verbs objects of both ends are as before it and no TX frame is out."""
    # The kernel's own MAD agent holds QP1 with its CQ, PD and DMA MR: that is the baseline.
    baseline = {end.ibdev: objects(end.ibdev) for end in cable.ends}
    yield
    for end in cable.ends:
        now = objects(end.ibdev)
        assert now == baseline[end.ibdev], f"{end.ibdev} objects {now}, before the test {baseline}"
        # every TX frame back in its pool (a credit frame or a last ACK may still be on the
        # wire for a moment; a leaked frame never comes back)
        deadline = time.monotonic() + 5
        while hw(end.ibdev, "tx_frames_in_flight") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hw(end.ibdev, "tx_frames_in_flight") == 0


@pytest.fixture
def pair(vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> Iterator[Pair]:
    """A 2-rail cable split into two hosts, for this test (checked: nothing_left_behind)."""
    cable = vcable_factory.add(rails=2)
    with nothing_left_behind(cable):
        yield Pair(cable, netns, rdma_env)


@pytest.fixture(scope="module")
def file_pair(request: pytest.FixtureRequest, rdma_env: dict[str, str]) -> Iterator[Pair]:
    """`pair`, but one for a whole test file whose tests leave the cable as they found it: a
    bring-up and an unload cost seconds each under TCG, and more on the sanitizer kernel. Use
    it through `shared_pair`. The kernel log of its bring-up and of its teardown (leaks, unload)
    is checked here, as every test's is in kernel_log_clean. A file may set MODULE_PARAMS
    ({name: value}): set once the module is loaded, before its cable is made (the module is
    unloaded after the file)."""
    stack = contextlib.ExitStack()
    try:
        with kernel_log_checked("while the file's shared cable came up"):
            stack.enter_context(loaded_modules())
            for name, value in getattr(request.module, "MODULE_PARAMS", {}).items():
                (Path("/sys/module") / MODNAME / "parameters" / name).write_text(value)
            cable = stack.enter_context(cleaned_up(VcableFactory())).add(rails=2)
            p = Pair(cable, stack.enter_context(cleaned_up(NetnsFactory())), rdma_env)
        yield p
    finally:
        with kernel_log_checked("while the file's shared cable went down"):
            stack.close()


@pytest.fixture
def shared_pair(file_pair: Pair) -> Iterator[Pair]:
    """The file's pair (file_pair), each test checked as with `pair` (nothing_left_behind)."""
    file_pair.resolve_neighbours()  # a neighbour entry may have gone stale since the last test
    with nothing_left_behind(file_pair.cable):
        yield file_pair
