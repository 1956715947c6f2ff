"""A cable pulled while our bring-up opens its paths and the peer replays its login (issue 23,
item 1), on the emulated host interface with Linux's own thunderbolt.ko in both guests.

thunderbolt.ko calls a service driver's remove() holding its domain lock (tb->lock), and our
bring-up opening a DMA path waits for that lock. Before the link's life cycle became one state
machine, the bring-up held the link's lock meanwhile, a LOGIN from the peer left the backend's
control work waiting for that lock, and remove() waited for the control work: hot-plug on that
domain hung for good and the module could not be unloaded.

The window between the backend's last unplug check and the path call that waits for the lock is
a few instructions wide, so B loads the module's test build (`make module-hooks`) with
usb4_test_hold_paths_ms, a parameter only that build has:
its bring-up waits there until the peer is unplugged. The cable relay then replays A's LOGIN to
B (a peer repeating its login: it must be answered) and pulls the cable. The bring-up must end,
and the module must unload.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pair import Guest, Pair
from usb4lib import DEPS, HOOKS_KO, KO, MODNAME
from vm2lib import FULL_LINK, TB_DEVICES, fail, host_router_up, on_both, wait_xdomain

# in CI's sanitizer lane (make test-vm2-debug)
pytestmark = pytest.mark.sanitizer_ci

PDF_XDOMAIN_REQ = 6
LOGIN, LOGIN_RESPONSE = 1, 2
HOLD_MS = 120000
HOLDING = "testing: the bring-up waits up to"


def msg_type(packet: bytes) -> int:
    """Our control message's type (word 15: after the route, length and three UUIDs), or 0."""
    return struct.unpack_from(">I", packet, 60)[0] if len(packet) >= 64 else 0


def load(guest: Guest, *params: str, ko: Path = KO) -> None:
    guest.run(["modprobe", "-a", *DEPS])
    guest.run(["insmod", str(ko), *params])


def logged(guest: Guest, mark: int, text: str) -> bool:
    return any(text in line for line in guest.kmsg_since(mark))


def reload_thunderbolt(guest: Guest, cables: int) -> None:
    """thunderbolt.ko 6.12 opens a DMA tunnel for a bring-up that was waiting for its lock when
    the peer went, and nothing removes it (docs/usb4-backend.md, "Races"): start it afresh."""
    guest.run("modprobe -r thunderbolt_net 2>/dev/null; modprobe -r thunderbolt", timeout=120)
    host_router_up(guest, cables)


def test_unplug_while_a_bring_up_opens_its_paths_and_the_peer_replays_its_login(pair: Pair) -> None:
    a, b, relay = pair.a, pair.b, pair.relay
    for ko, target in ((KO, "module"), (HOOKS_KO, "module-hooks")):
        if not ko.is_file():
            fail(f"{ko} is not built (make {target})")
    wait_xdomain(pair, 60)
    mark = b.kmsg_mark()
    load(a)
    load(b, f"usb4_test_hold_paths_ms={HOLD_MS}", ko=HOOKS_KO)
    try:
        relay.wait_for(lambda: logged(b, mark, HOLDING), 180, "B's bring-up held before its paths open",
                       interval=1)
        logins = [p for pdf, p in relay.ctl_sent(0) if pdf == PDF_XDOMAIN_REQ and msg_type(p) == LOGIN]
        assert logins, "A sent B no LOGIN the relay saw"
        sent_by_b = relay.stats().dirs[1].ctl
        assert relay.inject_ctl(1, PDF_XDOMAIN_REQ, logins[-1])

        def b_answered() -> bool:
            new = relay.stats().dirs[1].ctl - sent_by_b
            return new > 0 and any(msg_type(p) == LOGIN_RESPONSE for _, p in relay.ctl_sent(1)[-new:])

        # answered at once; before the fix its control work waits for the bring-up instead
        try:
            relay.wait_for(b_answered, 20, "B's answer to the replayed LOGIN", interval=0.5)
            answered = True
        except TimeoutError:
            answered = False
        relay.unplug()
        # remove() must neither wait for the bring-up nor hang; the bring-up gives up
        try:
            relay.wait_for(lambda: logged(b, mark, "bring-up abandoned: the link is being removed"), 120,
                           "B's bring-up to end", interval=1)
        except TimeoutError:
            fail("B's bring-up neither finished nor failed within 120 s of the unplug (hung)\n"
                 + "\n".join(b.kmsg_since(mark)[-30:]))
        assert logged(b, mark, "once its bring-up or teardown ends"), "B's remove() waited for its bring-up"
        # a stuck rmmod cannot be killed: it is left, not waited for
        rmmod = b.spawn(["rmmod", MODNAME])
        result = b.wait(rmmod, timeout=120)
        assert result is not None, f"rmmod {MODNAME} on B hung (120 s)"
        assert result.ok, f"rmmod {MODNAME} on B failed: {result.stderr}"
        assert answered, "B did not answer A's replayed LOGIN while its bring-up waited"
        assert not b.run(f"ls -d {TB_DEVICES}/0-1 2>/dev/null", check=False).stdout.strip()
    finally:
        on_both(pair, lambda g: g.run(f"! [ -e /sys/module/{MODNAME} ] || rmmod {MODNAME}", timeout=120,
                                      check=False))
    reload_thunderbolt(b, pair.cables)
    relay.plug(**FULL_LINK)
    wait_xdomain(pair, 90)
