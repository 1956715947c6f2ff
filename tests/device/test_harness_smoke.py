"""Smoke tests of the VM fixtures themselves (module, vcable, netns, rdma_env) and of cli/tbverbs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from vmlib import MODNAME, Cable, NetnsFactory, VcableFactory, tbverbs


def test_module_loads_and_registers_configfs(module: str) -> None:
    assert Path("/sys/module", MODNAME).is_dir()
    r = tbverbs("vcable", "list")  # mounts configfs if needed
    assert r.stdout.strip() == "no virtual cables"
    assert Path("/sys/kernel/config/tbverbs/vcable").is_dir()


def test_vcable_brings_up_two_devices(vcable: Cable) -> None:
    for end in vcable.ends:
        assert end.ibdev.startswith("usb4_rdma") and end.uuid
        assert Path("/sys/class/infiniband", end.ibdev).is_dir()
        if end.netdev:
            assert Path("/sys/class/net", end.netdev).is_dir()
    assert vcable.end0.ibdev != vcable.end1.ibdev
    listed = tbverbs("vcable", "list").stdout
    assert vcable.name in listed and vcable.end1.ibdev in listed
    assert "stats:" in tbverbs("vcable", "show", vcable.name).stdout
    status = tbverbs("status", vcable.end0.ibdev).stdout
    assert status.startswith(vcable.end0.ibdev) and "port 1:" in status


def test_vcable_unplug_plug(vcable_factory: VcableFactory) -> None:
    cable = vcable_factory.add(rails=2)
    tbverbs("vcable", "unplug", cable.name)
    assert tbverbs("vcable", "show", cable.name).stdout.count("plugged: 0") == 1
    assert "usb4_rdma" in tbverbs("vcable", "plug", cable.name).stdout
    vcable_factory.delete(cable.name)
    assert cable.name not in tbverbs("vcable", "list").stdout


def test_netns(netns: NetnsFactory) -> None:
    a, b = netns.add(), netns.add()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert a in names and b in names
    assert "lo" in netns.exec(a, "ip", "-o", "link").stdout


def test_rdma_env(rdma_env: dict[str, str]) -> None:
    tool = shutil.which("ibv_devices", path=rdma_env["PATH"])
    assert tool is not None, f"no ibv_devices on {rdma_env['PATH']}"
    r = subprocess.run([tool], capture_output=True, text=True, env=rdma_env, timeout=60)
    assert r.returncode == 0, r.stderr


def test_guest_clock_is_not_watchdogged() -> None:
    """The harness boots with tsc=reliable: without it a loaded TCG host got the TSC marked
    unstable mid-run, and the resulting live patch of sched_clock once panicked a CI guest."""
    assert "tsc=reliable" in Path("/proc/cmdline").read_text().split()
    current = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text()
    assert current.strip() == "tsc"


def test_the_guest_has_no_legacy_ptys_for_udev_to_coldplug() -> None:
    """512 legacy pty devices cost the sanitizer kernel's boot minutes of udev (tests/harness/vm.py)."""
    assert "pty.legacy_count=0" in Path("/proc/cmdline").read_text().split()
    ttys = [p.name for p in Path("/sys/class/tty").iterdir()]
    assert ttys, "no tty devices at all"
    legacy = [name for name in ttys if re.fullmatch(r"(pty|tty)[p-za-e][0-9a-f]", name)]
    assert legacy == [], legacy[:5]


def test_a_cable_left_behind_by_a_failed_test_is_removed_before_the_next_load() -> None:
    """A teardown that timed out leaves its cable in configfs, which pins tbverbs_vcable: the next
    test's module load deletes it first, instead of failing that test and every one after it."""
    from conftest import loaded_modules  # noqa: PLC0415  (the fixtures' own helper)
    from vmlib import load_module, leftover_cables, rmmod

    if Path("/sys/module", MODNAME).exists():
        assert rmmod().returncode == 0
    load_module()
    try:
        tbverbs("vcable", "add", "--name", "tvcleft")  # outside any factory: nobody deletes it
        assert leftover_cables() == ["tvcleft"]
        with loaded_modules():
            assert leftover_cables() == []
            assert tbverbs("vcable", "list").stdout.strip() == "no virtual cables"
    finally:
        if leftover_cables():
            tbverbs("vcable", "del", "tvcleft", check=False)
        if Path("/sys/module", MODNAME).exists():
            rmmod()
