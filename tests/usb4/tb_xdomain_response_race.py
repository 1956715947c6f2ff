#!/usr/bin/env python3
"""Reproducer (by hand, not part of the suite): thunderbolt.ko's control channel runs an XDomain
response's completion work twice and drops its last reference twice (docs/kernels.md, "The
control-channel oops").

thunderbolt.ko sends an XDomain response (xdomain.c, __tb_xdomain_response) as a control request
that waits for nothing: it is queued on the control channel's request list with the XDomain
matcher, and its completion work puts the caller's reference (response_ready) and then the
queue's (tb_cfg_request_dequeue). While it is on that list, any ERROR packet and any XDomain
response with the same route and protocol UUID "answers" it and schedules its work again; when
that happens while the work runs, the second run finds the request freed.

This boots one pair: guest A on one kernel, guest B on another (by default 7.3.4 and 6.12.95, so
one run exercises both thunderbolt.ko versions), brings thunderbolt_net up across the emulated
cable, then has the cable relay play a peer that sends both hosts XDomain UUID requests (each
answered with such a response) interleaved with XDomain responses, while a reader in each guest
keeps the control channel's locks busy (thunderbolt's debugfs register dumps). A guest whose
console shows an oops or a refcount warning is left alone from then on; the run ends when both
have, or after --seconds, and says what each console showed.

    TBV_QEMU=$(cat build/qemu-usb4) $TBV_VENV/bin/python tests/usb4/tb_xdomain_response_race.py

Exit status: 0 if neither guest logged an oops or a refcount warning, 1 if one did, 2 if the pair
could not be brought up.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for sub in ("tests/harness", "tests/lib"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))

import vm  # noqa: E402
from pair import Pair  # noqa: E402
from vm2lib import FULL_LINK, NHI, host_router_up, net_up, on_both  # noqa: E402

PDF_XDOMAIN_REQ, PDF_XDOMAIN_RESP = 6, 7
UUID_RESPONSE, UUID_REQUEST = 2, 12
# the XDomain discovery protocol's UUID (b638d70e-42ff-40bb-97c2-90e2c0b2ff07) as the driver puts
# it on the wire: uuid_t bytes read as little-endian words, each sent big-endian
XDP_UUID_WORDS = struct.unpack("<4I", bytes.fromhex("b638d70e42ff40bb97c290e2c0b2ff07"))
BAD = re.compile(r"refcount_t: |BUG: |Oops|general protection fault|list_(add|del) corruption|"
                 r"KASAN|use-after-free")


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def xdp_packet(msg_type: int, sequence: int, payload_words: tuple[int, ...] = ()) -> bytes:
    """An XDomain discovery-protocol packet: route (rewritten by the device), length and
    sequence, the protocol UUID, the type, the payload; big-endian words and the CRC."""
    words = (0, 1, (5 + len(payload_words)) | (sequence & 3) << 27, *XDP_UUID_WORDS, msg_type,
             *payload_words)
    body = struct.pack(f">{len(words)}I", *words)
    return body + struct.pack(">I", crc32c(body))


class MixedPair(Pair):
    """A pair whose two guests boot different kernels."""

    def __init__(self, kernels: dict[str, str], **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.kernels = kernels

    def options(self, tag: str, end: int, d: Path) -> vm.VmOptions:
        return dataclasses.replace(super().options(tag, end, d), kernel=self.kernels[tag])


def bad_lines(pair: Pair, offsets: dict[str, int]) -> dict[str, list[str]]:
    found = {}
    for tag, thread in pair.threads.items():
        try:
            text = thread.logs.console.read_text(errors="replace")[offsets.get(tag, 0):]
        except OSError:
            continue
        hits = [line for line in text.splitlines() if BAD.search(line)]
        if hits:
            found[tag] = hits
    return found


def main() -> int:
    settings = vm.tbv_settings()
    # 7.3's image as `make test-vm2-7.3` boots it (the Makefile's KERNEL_IMAGE, KVER_73)
    release = subprocess.run(["bash", "-c", f'. "{REPO}/scripts/env.sh" && echo "$KVER_73"'],
                             capture_output=True, text=True, check=True).stdout.strip()
    k73 = f"{settings['TBV_CACHE']}/kernels/{release}"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a-kernel", default=f"{k73}/boot/vmlinuz-{Path(k73).name}")
    ap.add_argument("--b-kernel", default=vm.default_kernel(settings))
    ap.add_argument("--seconds", type=float, default=300.0, help="how long the peer keeps sending")
    ap.add_argument("--responses", type=int, default=4, help="XDomain responses after each request")
    ap.add_argument("--pause", type=float, default=0.005, help="seconds between rounds of 4 requests")
    ap.add_argument("--no-reader", action="store_true", help="no debugfs reader in the guests")
    args = ap.parse_args()

    pair = MixedPair({"a": args.a_kernel, "b": args.b_kernel}, iommu=True, boot_timeout=600.0)
    problems = pair.preflight()
    if problems:
        print("cannot boot the pair: " + "; ".join(problems))
        return 2
    print(f"A: {args.a_kernel}\nB: {args.b_kernel}", flush=True)
    with pair:
        print(pair.logs(), flush=True)
        try:
            on_both(pair, lambda g: host_router_up(g))
            pair.relay.plug(**FULL_LINK)
            net_up(pair)
        except BaseException as e:  # noqa: BLE001  (the helpers fail with pytest's outcome)
            print(f"the pair did not come up: {e}")
            return 2
        print("thunderbolt_net up on both", flush=True)
        offsets = {tag: t.logs.console.stat().st_size for tag, t in pair.threads.items()}
        readers = {}
        if not args.no_reader:
            for tag, g in pair.guests.items():
                g.run("mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug")
                regs = g.run("ls /sys/kernel/debug/thunderbolt/0-0/regs /sys/kernel/debug/thunderbolt/0-0/port*/regs",
                             check=False).stdout.split()
                print(f"{tag}: reading {len(regs)} debugfs register dumps in a loop", flush=True)
                if regs:
                    readers[tag] = g.spawn(f"while :; do cat {' '.join(regs)} >/dev/null 2>&1; done",
                                           timeout=args.seconds + 120)
        before = pair.relay.stats()
        start = time.monotonic()
        rounds = injected = 0
        found: dict[str, list[str]] = {}
        ends = {"a": 0, "b": 1}
        while time.monotonic() - start < args.seconds and len(found) < 2:
            # a host that oopsed is left alone; the other one goes on
            targets = [end for tag, end in ends.items() if tag not in found]
            for seq in range(4):
                for to in targets:
                    if not pair.relay.inject_ctl(to, PDF_XDOMAIN_REQ, xdp_packet(UUID_REQUEST, seq)):
                        print("the link went down", flush=True)
                        return 2
                    injected += 1
                    for _ in range(args.responses):
                        # a UUID response: the sender's UUID (4 words) and route (2 words)
                        pair.relay.inject_ctl(to, PDF_XDOMAIN_RESP,
                                              xdp_packet(UUID_RESPONSE, seq, (1, 2, 3, 4, 0, 1)))
                        injected += 1
            rounds += 1
            time.sleep(args.pause)
            if rounds % 25 == 0:
                seen = bad_lines(pair, offsets)
                for tag in seen.keys() - found.keys():
                    print(f"{tag}: kernel trouble after {time.monotonic() - start:.0f} s, "
                          f"{injected} packets injected", flush=True)
                found = seen
        time.sleep(5)  # let the last works run
        found = bad_lines(pair, offsets)
        after = pair.relay.stats()
        elapsed = time.monotonic() - start
        for tag, handle in readers.items():
            try:
                pair.guests[tag].kill(handle)
            except Exception as e:  # noqa: BLE001  (an oopsed guest may not answer)
                print(f"{tag}: could not stop the reader: {e!r}")
        print(f"{injected} packets injected in {elapsed:.0f} s ({rounds} rounds); control packets sent "
              f"A->B {after.dirs[0].ctl - before.dirs[0].ctl}, B->A {after.dirs[1].ctl - before.dirs[1].ctl}")
        for tag in ("a", "b"):
            try:
                counters = {name: pair.guests[tag].qmp.qom_get(NHI, f"stat-{name}")
                            for name in ("ctl_from_cable", "ctl_to_cable", "rx_overrun")}
            except Exception as e:  # noqa: BLE001  (QEMU answers even when the guest oopsed)
                counters = {"error": repr(e)}
            print(f"{tag}: its controller's counters for the whole run: {counters}")
            lines = found.get(tag, [])
            print(f"{tag} ({pair.kernels[tag]}): {'%d bad line(s)' % len(lines) if lines else 'clean'}")
            for line in lines[:12]:
                print(f"    {line}")
        if found:
            # an oopsed guest's shutdown may hang: stop it at once
            for tag in found:
                pair.abandon(tag)
        return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
