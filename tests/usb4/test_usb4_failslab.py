"""Allocation failures while the usb4 backend comes up, on the sanitizer kernel (failslab).

Sanitizer kernel only (`make test-vm2-failslab`; `make test-vm2` leaves this file out): it needs
FAILSLAB and FAIL_PAGE_ALLOC with their stack-trace filter. Guest B fails one allocation made
with our module's code on the stack (require-start/require-end = the module's text): ours,
and those `thunderbolt.ko`, the RDMA core and the network stack make for us (rings, HopIDs,
paths, the netdev, the ib_device). Probe and bring-up run in `thunderbolt.ko`'s and our work
items, not in a task the test could count allocations in, so the failure is placed by bytes:
a clean bring-up is measured first (`space` counts down the size of every allocation that
passes the filters, in bytes for failslab and in pages for fail_page_alloc; the first one
it does not cover fails), and each round fails the allocation at a fraction of that.

A round pulls the cable, arms one injector on B, plugs the cable back and waits for the
failure to fire or the devices to come up. Then both hosts must get their devices back: a
failed bring-up logs out and retries by itself (with fewer rails if some came up); a failed
probe leaves the peer's service unbound, which the next plug mends, so such a round plugs
once more. Neither kernel may log anything bad but the injected failures' reports, and at
the end, unloaded with the cable attached, kmemleak must find nothing of ours on either.

Not in CI: it can hit use-after-frees inside thunderbolt.ko 6.12 (docs/usb4-backend.md,
"Races"). Its second run hit one our login exposed (a response of ours, queued as a request
any XDomain response with our route and protocol UUID completes, was freed by the peer's
answer to our own login while tb_cfg_request() still used it; now one protocol UUID per
direction); its third, one of thunderbolt.ko's own discovery protocol (an answer freed while
still queued, read by tb_xdomain_match()).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from pair import Guest, Pair
from usb4lib import (KO, MODNAME, Host, bring_up, client_server, kmemleak, load_module, on_cable, pull_and_plug,
                     replug, unload_module, wait_cable_devices)
from vm2lib import FULL_LINK, fail, on_both, wait_xdomain
from vmlib import missing

pytestmark = pytest.mark.injects_alloc_failures

DEBUGFS = "/sys/kernel/debug"
INJECTORS = ("failslab", "fail_page_alloc")
SPACE_MAX = 2**31 - 1  # `space` is an int
# where in a clean bring-up's bytes each round fails an allocation: the probe and login come
# first, then the rails' frames and rings, the paths, the netdev and the ib_device last
FRACTIONS = (0.0, 0.005, 0.05, 0.3, 0.7, 0.99)
# B's kernel: the probe gave up (no device until the next plug)
PROBE_FAILED = re.compile(r"probe with driver \S+ failed with error")

# In a guest: the first and last address of the module's text (its t/T symbols)
TEXT_RANGE = (f"awk '$4 == \"[{MODNAME}]\" && ($2 == \"t\" || $2 == \"T\") {{ print $1 }}' /proc/kallsyms "
              "| sort | sed -n '1p;$p'")


def knob(guest: Guest, injector: str, name: str, value: int | str | None = None) -> str:
    path = f"{DEBUGFS}/{injector}/{name}"
    if value is None:
        return guest.run(["cat", path]).stdout.strip()
    guest.run(f"echo {value} > {path}")
    return str(value)


def filter_to_module(guest: Guest) -> None:
    """Both injectors off, verbose off, GFP_KERNEL included, limited to our module's call sites."""
    first, last = guest.run(TEXT_RANGE).stdout.split()
    start, end = int(first, 16), int(last, 16) + 4096
    for injector in INJECTORS:
        for name, value in (("probability", 0), ("times", 0), ("verbose", 0), ("ignore-gfp-wait", "N"),
                            ("task-filter", "N"), ("stacktrace-depth", 32),
                            ("require-start", start), ("require-end", end)):
            knob(guest, injector, name, value)
    # pages of any order (the default, 1 and up, would spare every frame's page)
    knob(guest, "fail_page_alloc", "min-order", 0)


def arm(guest: Guest, injector: str, space: int) -> None:
    """Fail the first allocation past `space` (bytes or pages) of filtered ones (once)."""
    knob(guest, injector, "space", space)
    knob(guest, injector, "times", 1)
    knob(guest, injector, "probability", 100)


def disarm(guest: Guest, injector: str) -> tuple[bool, int]:
    """Stop injecting: (whether the failure fired, what is left of `space`)."""
    knob(guest, injector, "probability", 0)
    fired = int(knob(guest, injector, "times")) == 0
    left = int(knob(guest, injector, "space"))
    knob(guest, injector, "times", 0)
    return fired, left


@pytest.fixture(scope="module")
def loaded(pair: Pair) -> Iterator[dict[str, Host]]:
    """Our module on both guests, up over cable 0; B's injectors filtered to it. At the end:
    unloaded with the cable attached, and nothing of ours leaked on either guest."""
    if not KO.is_file():
        fail(f"{KO} is not built")
    if pair.b.run(f"[ -e {DEBUGFS}/failslab/require-start ] && [ -e {DEBUGFS}/fail_page_alloc/space ]",
                  check=False).rc:
        missing("needs the sanitizer kernel (FAILSLAB, FAIL_PAGE_ALLOC, stack filter): make test-vm2-failslab")
    wait_xdomain(pair, 60)
    on_both(pair, lambda g: kmemleak(g, "clear"))
    on_both(pair, load_module)
    try:
        hosts = on_both(pair, bring_up)
        filter_to_module(pair.b)
        yield hosts
    finally:
        for injector in INJECTORS:
            knob(pair.b, injector, "probability", 0)
        unloaded = on_both(pair, unload_module)
        assert all(unloaded.values()), f"rmmod {MODNAME} failed with the cable attached: {unloaded}"
        leaks = on_both(pair, lambda g: kmemleak(g, "scan"))
        assert not any(leaks.values()), f"kmemleak: objects leaked by {MODNAME}: {leaks}"


def plug_with(pair: Pair, injector: str, space: int) -> tuple[bool, int]:
    """Pull the cable, arm B, plug it back; disarm once the failure fired or B's device is up."""
    pair.relay.unplug()
    wait_cable_devices(pair, 0, gone=True, timeout=60)
    arm(pair.b, injector, space)
    try:
        pair.relay.plug(**FULL_LINK)
        pair.b.wait_until(f"[ $(cat {DEBUGFS}/{injector}/times) = 0 ] || {on_cable(0)}", 180)
    finally:
        fired, left = disarm(pair.b, injector)
    return fired, left


def both_up(pair: Pair, timeout: float) -> bool:
    return all(on_both(pair, lambda g: g.wait_until(on_cable(0), timeout)).values())


@pytest.mark.parametrize("injector", INJECTORS)
def test_one_failed_allocation_in_bring_up_is_survived(pair: Pair, loaded: dict[str, Host], injector: str) -> None:
    # a clean bring-up, counted: how much filtered allocations it makes
    fired, left = plug_with(pair, injector, SPACE_MAX)
    assert not fired, f"{injector}: an allocation failed with space {SPACE_MAX}"
    assert both_up(pair, 120), "no devices after a clean plug"
    total = SPACE_MAX - left
    assert total > 0, f"{injector}: no allocation of ours counted during a bring-up"
    unit = "pages" if injector == "fail_page_alloc" else "bytes"
    print(f"{injector}: a bring-up allocates {total} {unit} with {MODNAME} on the stack")

    outcomes = []
    for fraction in FRACTIONS:
        space = int(total * fraction)
        mark = pair.b.kmsg_mark()
        fired, _ = plug_with(pair, injector, space)
        replugged = False
        if not both_up(pair, 90):
            log = "\n".join(pair.b.kmsg_since(mark))
            assert fired and PROBE_FAILED.search(log), (
                f"{injector} at {space} of {total}: no devices 90 s after the plug, and no "
                f"failed probe to explain it:\n{log[-3000:]}")
            pull_and_plug(pair, **FULL_LINK)
            replugged = True
            assert both_up(pair, 180), f"{injector} at {space}: no devices after a second, clean plug"
        rails = [m.group(1) for line in pair.b.kmsg_since(mark)
                 if (m := re.search(r"up to peer \S+: (\d+) rail", line))]
        outcomes.append(f"{fraction:g}: {'failed' if fired else 'nothing failed'}"
                        f"{', re-plugged' if replugged else ''}, up with {rails[-1] if rails else '?'} rail(s)")
    print(f"{injector}:\n  " + "\n  ".join(outcomes))
    assert sum("nothing failed" not in o for o in outcomes) >= len(FRACTIONS) - 1, outcomes

    # the link as it was: all rails, traffic
    replug(pair, loaded, **FULL_LINK)
    cli, srv = client_server(loaded, ["ibv_rc_pingpong", "-s", "4096", "-n", "20"])
    assert "iters in" in cli and "iters in" in srv
