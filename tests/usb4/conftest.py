"""Fixtures for the two-VM tests: they run ON THE HOST and boot two guests joined by an emulated cable.

    python3 -m pytest -v tests/usb4          (TBV_QEMU: the QEMU with usb4-nhi; TBV_STRICT=1: no skips)

One pair of VMs per session (tests/harness/pair.py): each guest has two emulated USB4 host
interfaces (QEMU's usb4-nhi), each on one end of a cable relay that lives in this process, and
runs the agent that the tests drive it through. Booting two TCG guests takes minutes, so every
test shares them; a test leaves the first cable plugged and the second one unplugged (only the
two-cable test plugs it).

Unlike tests/device, nothing here runs inside a VM: there is no default-deny (the guests' kernels are
the ones under test), and run inside a test VM these tests skip themselves.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for sub in ("tests/harness", "tests/lib"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))

import kmsg  # noqa: E402
from pair import Guest, Pair  # noqa: E402
from vm2lib import NHI, plugged_pair  # noqa: E402


CABLES = 2  # controllers per guest, cables between them


def pytest_configure(config: pytest.Config) -> None:
    # stopped from outside (make test's deadline): the pairs' guests and QEMUs go too (each
    # Pair stops its VMs as the exception leaves it)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    config.addinivalue_line("markers", "injects_alloc_failures: the kernel's reports of failed "
                            "allocations are expected in the guests' logs")
    config.addinivalue_line("markers", "beyond_ci: kept out of CI's time budget (make test); "
                            "make test-full runs it (README, Tests and CI)")
    config.addinivalue_line("markers", "kernels: the two-VM subset for 7.3's thunderbolt.ko (make "
                            "test-vm2-7.3 VM2_MARK=kernels; make test-full runs the whole suite "
                            "there; docs/kernels.md)")
    config.addinivalue_line("markers", "sanitizer_ci: in CI's sanitizer lane, on the sanitizer kernel "
                            "in both guests (make test-vm2-debug, run by make test-debug-ci-vm2)")
    config.addinivalue_line("markers", "sanitizer_full: added to make test-vm2-debug by make test-full "
                            "(TBV_FULL=1)")
    # a misspelt marker on a test is an error, not a silently empty selection
    config.option.strict_markers = True


@pytest.fixture(scope="session")
def pair() -> Iterator[Pair]:
    """The two VMs (pair.a, pair.b) with their host routers up and the first cable plugged (2 x 20 Gb/s)."""
    yield from plugged_pair(CABLES)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Remember each phase's report on the item, for the fixture below to see whether the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def nhi_counters(guest: Guest) -> str:
    """The non-zero counters of the guest's first usb4-nhi (what a strict profile dropped, gated, ...)."""
    try:
        names = [p["name"] for p in guest.qmp.execute("qom-list", path=NHI) if p["name"].startswith("stat-")]
        values = {n[5:]: guest.qmp.qom_get(NHI, n) for n in names}
    except Exception as e:  # noqa: BLE001  (a guest that is gone has no counters to show)
        return f"not read: {e}"
    return " ".join(f"{k}={v}" for k, v in values.items() if v)


@pytest.fixture(autouse=True)
def kernel_logs_clean(request: pytest.FixtureRequest, pair: Pair) -> Iterator[None]:
    """Fail (at teardown) when either guest's kernel logged a warning, oops, ... during the test.

    Both guests' new kernel log lines are attached to the report; a failed test also gets the
    cable relay's recent events and counters.
    """
    marks = {tag: guest.kmsg_mark() for tag, guest in pair.guests.items()}
    yield
    bad = []
    excused = bool(request.node.get_closest_marker("injects_alloc_failures"))
    for tag, guest in pair.guests.items():
        new = guest.kmsg_since(marks[tag])
        if new:
            request.node.add_report_section("teardown", f"kernel log {tag}", "\n".join(new))
        bad += [f"{tag}: {line}" for line in kmsg.find_bad(new, excused)]
    for tag, guest in pair.guests.items():
        request.node.add_report_section("teardown", f"usb4-nhi counters {tag}", nhi_counters(guest))
    call = getattr(request.node, "rep_call", None)
    if call is not None and call.failed:
        for k, relay in enumerate(pair.relays):
            request.node.add_report_section("teardown", f"cable relay {k}", "\n".join(
                [*relay.events(), repr(relay.stats())]))
    if bad:
        pytest.fail("kernel log has warnings/errors during this test:\n" + "\n".join(bad), pytrace=False)
