"""A host suspends and resumes with our link up, across two VMs on the emulated cable.

Not in tests/usb4, because the guest that suspends is lost afterwards: virtme-ng's root
filesystem is virtio-9p, whose driver has no freeze/restore, and the virtio core resets every
device on resume, so after it nothing in that guest can open a file or start a program. Its
kernel still runs and prints to its console, which the host reads. So this test boots a pair
of its own, puts guest B through one s2idle cycle (every device's suspend and resume
callbacks run, ours among them, with `pm_test=devices`: the cycle ends by itself, no wake-up
source needed; not S3: the emulated NHI cannot wake from it), reads B's kernel log from its
console and A's through A's agent, and then abandons B (its VM is stopped at the end, not
asked to shut down).

    make test-vm2-suspend          (TBV_QEMU as for tests/usb4; TBV_STRICT=1: no skips)
    make test-vm2-debug            (also runs it on the sanitizer kernel)

What it shows: B's PM hooks say LOGOUT and take the link down (rings and paths of the real
thunderbolt.ko), A drops its device at once, and after the resume B logs in again and both
ends come back up with their rails, A's device ACTIVE and healthy again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import pytest

import kmsg
from pair import AgentError, Pair
from usb4lib import KO, Host, bring_up, check, client_server, load_module
from vm2lib import fail, on_both, plugged_pair, wait_xdomain
from vmlib import missing

# B's kernel, in this order, from the suspend to the link being back
B_SEQUENCE = (r"link \d+: suspended", r"link \d+: resumed; logging in again",
              r"link \d+: up to peer [0-9a-f-]+: \d+ rail")
# pm_test (CONFIG_PM_DEBUG: Debian's kernel and kernel-debug/debug.config) runs the devices'
# callbacks, skips the platform's part and resumes after a pause
SUSPEND = "echo devices > /sys/power/pm_test && echo freeze > /sys/power/state"
# Well before the hung-task detector (120 s) would name B's tasks stuck on the dead root
AFTER_RESUME_S = 90


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    if not KO.is_file():
        fail(f"{KO} is not built (make module)")
    yield from plugged_pair(cables=1)


def console_since(pair: Pair, tag: str, offset: int) -> str:
    return pair.threads[tag].logs.console.read_text(errors="replace")[offset:]


def wait_for_sequence(text_now: Callable[[], str], patterns: tuple[str, ...], timeout: float) -> list[str]:
    """Wait until text_now() shows every pattern, each after the previous one; the lines that did."""
    deadline = time.monotonic() + timeout
    while True:
        lines, found, pos = text_now().splitlines(), [], 0
        for pattern in patterns:
            hit = next((i for i in range(pos, len(lines)) if re.search(pattern, lines[i])), None)
            if hit is None:
                break
            found.append(lines[hit])
            pos = hit + 1
        if len(found) == len(patterns) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_a_host_suspends_and_resumes_and_the_link_comes_back(pair: Pair) -> None:
    if not pair.b.run("[ -e /sys/power/pm_test ]", check=False).ok:
        missing("B's kernel has no /sys/power/pm_test (CONFIG_PM_DEBUG)")
    wait_xdomain(pair, 60)
    on_both(pair, load_module)
    hosts: dict[str, Host] = on_both(pair, bring_up)
    cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", "4096", "-n", "20"])
    assert "iters in" in cli and "iters in" in srv

    a, b = pair.a, pair.b
    mark = a.kmsg_mark()
    offset = len(console_since(pair, "b", 0))
    # from here B's agent may never answer again: nothing below asks it anything
    pair.abandon("b")
    # a second's delay, so the agent's reply to the spawn leaves before everything freezes
    try:
        # its output goes to B's kernel log, so the console shows why a suspend did not start
        b.spawn(f"exec > /dev/kmsg 2>&1; sleep 1; {SUSPEND}")
    except AgentError:
        pass  # the reply was caught by the suspend; B's console tells what happened
    seen = wait_for_sequence(lambda: console_since(pair, "b", offset), B_SEQUENCE, AFTER_RESUME_S)
    b_log = console_since(pair, "b", offset)
    assert len(seen) == len(B_SEQUENCE), (
        f"B's kernel showed only {seen} of {list(B_SEQUENCE)}:\n{b_log[-4000:]}")
    assert "PM: suspend exit" in b_log, f"B's suspend did not finish:\n{b_log[-4000:]}"
    bad = kmsg.find_bad(b_log.splitlines())
    assert not bad, "B's kernel during suspend and resume:\n" + "\n".join(bad)

    # A heard B log out (its devices went at once), then logged in again with B
    a_seq = wait_for_sequence(lambda: "\n".join(a.kmsg_since(mark)),
                              (r"peer [0-9a-f-]+ logged out", r"link \d+: up to peer"), 60)
    a_log = a.kmsg_since(mark)
    assert len(a_seq) == 2, f"A's kernel showed only {a_seq}:\n" + "\n".join(a_log[-40:])
    assert not kmsg.find_bad(a_log), "\n".join(kmsg.find_bad(a_log))
    if not a.wait_until("grep -q ACTIVE /sys/class/infiniband/usb4_rdma*/ports/1/state", 60):
        fail("A's usb4_rdma port is not ACTIVE again after B's resume")
    rc, out = check(Host(a))
    assert rc == 0 and "OK: link 2 x 20 Gb/s" in out, out
