"""The usb4-nhi device's profiles as QEMU resolves them (docs/emulator.md, "Profiles").

Host-only, no guest: the built QEMU (TBV_QEMU, else the cached build's) is started stopped, with
one usb4-nhi, and asked over QMP what each setting came to.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import vm

QEMU = vm.emulator_qemu(dict(os.environ))
pytestmark = pytest.mark.skipif(not os.access(QEMU, os.X_OK), reason=f"no QEMU with usb4-nhi at {QEMU}")
SETTINGS = ["vendor-id", "device-id", "rings", "msix-vectors", "transport-packets", "sof", "rx-queue",
            "replay-on-unmask", "status-gates-msix", "auto-clear", "throttle", "tx-stall-link-down"]


def resolved(device: str) -> dict[str, object] | str:
    """Each setting of `-device usb4-nhi,<device>` once realized, or QEMU's error when it refuses."""
    cmds = [{"execute": "qmp_capabilities"}]
    cmds += [{"execute": "qom-get", "arguments": {"path": "/machine/peripheral/n", "property": p}} for p in SETTINGS]
    cmds.append({"execute": "quit"})
    r = subprocess.run([QEMU, "-M", "q35", "-nodefaults", "-display", "none", "-S", "-qmp", "stdio",
                        "-device", f"usb4-nhi,id=n,uid=1,{device}"],
                       input="".join(json.dumps(c) + "\n" for c in cmds), capture_output=True, text=True, timeout=60)
    replies = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    returns = [m["return"] for m in replies if "return" in m]
    if len(returns) < 1 + len(SETTINGS):
        return r.stderr
    return dict(zip(SETTINGS, returns[1:1 + len(SETTINGS)]))


LENIENT = {"vendor-id": 0x1b36, "device-id": 0x4e48, "rings": 16, "msix-vectors": 16, "transport-packets": 0,
           "sof": "first", "rx-queue": 1024, "replay-on-unmask": 1, "status-gates-msix": 0, "auto-clear": 0,
           "throttle": 0, "tx-stall-link-down": 0}
STRICT = {"transport-packets": 1, "sof": "one-packet-zero", "rx-queue": 0, "replay-on-unmask": 1, "throttle": 1,
          "tx-stall-link-down": 1}


@pytest.mark.parametrize("device, expect", [
    ("max-lanes=2", LENIENT),
    ("profile=lenient", LENIENT),
    ("profile=intel", {**LENIENT, **STRICT, "vendor-id": 0x8086, "rings": 12, "auto-clear": 1}),
    ("profile=amd", {**LENIENT, **STRICT, "status-gates-msix": 1}),
    ("profile=strix", {**LENIENT, **STRICT, "status-gates-msix": 1, "rings": 3}),
    # a setting given overrides the profile's, before or after profile=
    ("rings=8,profile=strix,sof=zero,msix-vectors=4", {**LENIENT, **STRICT, "status-gates-msix": 1, "rings": 8,
                                                       "sof": "zero", "msix-vectors": 4}),
    ("profile=strix,replay-on-unmask=0", {**LENIENT, **STRICT, "status-gates-msix": 1, "rings": 3,
                                          "replay-on-unmask": 0}),
    ("profile=amd,rx-queue=16,transport-packets=0", {**LENIENT, **STRICT, "status-gates-msix": 1, "rx-queue": 16,
                                                     "transport-packets": 0}),
])
def test_a_profile_sets_each_setting_and_a_setting_given_wins(device: str, expect: dict[str, object]) -> None:
    assert resolved(device) == expect


@pytest.mark.parametrize("device, error", [
    ("profile=strict", "profile=strict: not lenient, intel, amd or strix"),
    ("sof=last", "sof=last: not first, one-packet-zero or zero"),
    ("rings=17", "rings must be 2..16"),
    ("msix-vectors=0", "msix-vectors must be 1..16"),
])
def test_a_bad_setting_stops_qemu_with_a_clear_error(device: str, error: str) -> None:
    assert error in str(resolved(device))
