"""Fixtures for the tests that run INSIDE the test VM (as root, with the venv's python).

Run them with:  python3 tests/harness/vm.py -- python -m pytest tests/device

On the host every test in tests/device is skipped ("must run inside the test VM") unless it is marked
`@pytest.mark.anywhere` (pure tests such as test_kmsg_patterns.py). Default-deny: a new test that
forgets a marker is still never run against the host kernel (insmod, configfs, netns as root), and
a plain `pytest` over the whole tree on the host stays green and harmless instead of failing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# The helpers shared with tests/usb4, tests/suspend, the harness and bench/ live in tests/lib.
_LIB = str(Path(__file__).resolve().parents[1] / "lib")
if _LIB not in sys.path:
    sys.path.insert(0, _LIB)

import kmsg  # noqa: E402
from pairlib import Pair, hw, objects  # noqa: E402
from vmlib import (IN_VM, KO, MODNAME, NOT_IN_VM, VCABLE_KO, VCABLE_MODNAME, Cable, KmsgReader, NetnsFactory,
                   VcableFactory, kmemleak_available, kmemleak_clear, kmemleak_scan, leaks_of, load_module,
                   missing, module_loaded, rdma_environment, require_vm, rmmod, run, tbv_setting)  # noqa: E402

VM_DIR = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
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
    if IN_VM:
        return
    skip = pytest.mark.skip(reason=NOT_IN_VM)
    for item in items:
        in_vm_dir = VM_DIR in Path(str(item.fspath)).resolve().parents
        if in_vm_dir and not item.get_closest_marker("anywhere"):
            item.add_marker(skip)


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
    reader = KmsgReader()
    try:
        yield
        new = reader.read_new()
    finally:
        reader.close()
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


@pytest.fixture
def module() -> Iterator[str]:
    """thunderbolt_ibverbs and the virtual cable's module (tbverbs_vcable) loaded from the repo's
    kernel/ for this test; both unloaded (asserted) after."""
    require_vm()
    for ko in (KO, VCABLE_KO):
        if not ko.exists():
            missing(f"{ko} is not built (make module)")
    if module_loaded():
        r = rmmod()
        assert r.returncode == 0, f"a previous {MODNAME} is loaded and does not unload: {r.stderr}"
    leak_check = kmemleak_available()
    if leak_check:
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


@pytest.fixture
def netns() -> Iterator[NetnsFactory]:
    """Factory: `ns = netns.add()`; `netns.exec(ns, "ip", "link")`. All deleted at teardown."""
    require_vm()
    factory = NetnsFactory()
    try:
        yield factory
    finally:
        errors = factory.cleanup()
    assert not errors, "\n".join(errors)


@pytest.fixture
def vcable_factory(module: str) -> Iterator[VcableFactory]:
    """Factory: `cable = vcable_factory.add(rails=2)`. Every cable is deleted at teardown."""
    factory = VcableFactory()
    try:
        yield factory
    finally:
        errors = factory.cleanup()
    assert not errors, "\n".join(errors)


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
    """An rdma_rxe device, tbvrxe0, on a dummy netdev with 10.77.0.1/24; removed (and rdma_rxe
    unloaded) at teardown. Its name does not start with "rxe", so libibverbs can bind the rxe
    provider to it only by its driver id, as it must bind usb4_rdma (docs/rxe-abi.md)."""
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
        subprocess.run(["modprobe", "-r", "rdma_rxe"], capture_output=True)


@pytest.fixture
def pair(vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]):
    cable = vcable_factory.add(rails=2)
    # The kernel's own MAD agent holds QP1 with its CQ, PD and DMA MR: that is the baseline.
    baseline = {end.ibdev: objects(end.ibdev) for end in cable.ends}
    p = Pair(cable, netns, rdma_env)
    yield p
    for end in cable.ends:
        now = objects(end.ibdev)
        assert now == baseline[end.ibdev], f"{end.ibdev} objects {now}, before the test {baseline}"
        # every TX frame back in its pool (a credit frame or a last ACK may still be on the
        # wire for a moment; a leaked frame never comes back)
        deadline = time.monotonic() + 5
        while hw(end.ibdev, "tx_frames_in_flight") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hw(end.ibdev, "tx_frames_in_flight") == 0
