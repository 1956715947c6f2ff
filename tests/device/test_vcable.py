"""Virtual cables: creation, device naming, parameters, unplug/replug, an incompatible peer."""

from __future__ import annotations

import errno
import struct
import subprocess
import time
from pathlib import Path

import pytest

from vmlib import MODNAME, VCABLE_MODNAME, KmsgReader, VcableFactory, rmmod, run, tbverbs, wait_for

# every test here is in make test-debug's run on the sanitizer kernel
pytestmark = pytest.mark.sanitizer_subset

CFS = Path("/sys/kernel/config/tbverbs/vcable")


class KernelLog:
    """The kernel log from now on, as a test reads it while it waits."""

    def __init__(self) -> None:
        self.reader = KmsgReader()
        self.lines: list[str] = []

    def logged(self, text: str) -> bool:
        """True once a line logged since the start contains @text."""
        self.lines.extend(self.reader.read_new())
        return any(text in line for line in self.lines)

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def close(self) -> None:
        self.reader.close()


@pytest.mark.kernels
def test_module_loads_next_to_thunderbolt_and_ib(module: str) -> None:
    # /sys/module lists built-in subsystems too (the debug kernel builds some in)
    for name in (MODNAME, VCABLE_MODNAME, "thunderbolt", "ib_core", "ib_uverbs"):
        assert Path("/sys/module", name).is_dir(), f"{name} is not loaded"
    assert CFS.is_dir()
    assert not list(Path("/sys/class/infiniband").glob("usb4_rdma*")), "no devices before a cable"


# sanitizer_full, not _ci: every other test of the lane brings a cable up too, and each test
# there costs a module load, a bring-up, an unplug and two kmemleak scans (3-5 min)
@pytest.mark.kernels
@pytest.mark.sanitizer_full
def test_cable_gives_two_devices_with_distinct_hosts(vcable_factory: VcableFactory) -> None:
    cable = vcable_factory.add(rails=2)
    assert (cable.end0.ibdev, cable.end1.ibdev) == ("usb4_rdma0", "usb4_rdma1")
    assert (cable.end0.netdev, cable.end1.netdev) == ("usb4_net0", "usb4_net1")
    assert cable.end0.uuid != cable.end1.uuid
    for end in cable.ends:
        dev = Path("/sys/class/infiniband", end.ibdev)
        assert (dev / "device" / "modalias").read_text().strip() == "platform:tbverbs_vcable"
        assert Path("/sys/class/net", end.netdev).is_dir()
        # the ib_device and the netdev hang off the same simulated host
        assert (dev / "device").resolve() == Path("/sys/class/net", end.netdev, "device").resolve()
        assert (dev / "ports/1/state").read_text().strip() == "4: ACTIVE"
    guids = {Path("/sys/class/infiniband", e.ibdev, "node_guid").read_text() for e in cable.ends}
    assert len(guids) == 2


def test_device_names_are_deterministic(vcable_factory: VcableFactory) -> None:
    a = vcable_factory.add("a")
    b = vcable_factory.add("b")
    assert [e.ibdev for e in a.ends + b.ends] == [f"usb4_rdma{i}" for i in range(4)]
    vcable_factory.delete("a")
    c = vcable_factory.add("c")
    # the freed numbers are reused, lowest first, end 0 before end 1
    assert [e.ibdev for e in c.ends] == ["usb4_rdma0", "usb4_rdma1"]
    assert [e.netdev for e in c.ends] == ["usb4_net0", "usb4_net1"]


@pytest.mark.parametrize("rails", [1, 2, 3, 4])
def test_rails_agreed(vcable_factory: VcableFactory, rails: int) -> None:
    reader = KmsgReader()
    cable = vcable_factory.add(rails=rails)
    log = "\n".join(reader.read_new())
    reader.close()
    assert f"{rails} rail(s)" in log
    tx_queues = list(Path("/sys/class/net", cable.end0.netdev, "queues").glob("tx-*"))
    assert len(tx_queues) == rails, "one netdev TX queue per rail"


def write_attr(path: Path, value: str) -> int:
    """Write like `echo`; return 0 or the errno the kernel answered."""
    try:
        path.write_text(value)
        return 0
    except OSError as e:
        return e.errno or -1


def test_invalid_parameters_are_refused(module: str) -> None:
    tbverbs("vcable", "list")  # mounts configfs
    d = CFS / "bad"
    d.mkdir()
    try:
        for attr, value in [("rails", "0"), ("rails", "5"), ("lanes", "3"), ("lane_gbps", "15"),
                            ("ring_size", "100"), ("ring_size", "16"), ("ring_size", "2048"),
                            ("rails", "x"), ("plugged", "maybe"), ("end1_dma_tunnels", "5")]:
            assert write_attr(d / attr, value) == errno.EINVAL, f"{attr}={value} accepted"
        assert (d / "rails").read_text().strip() == "1", "a refused write changes nothing"
        assert write_attr(d / "rails", "3") == 0
        assert write_attr(d / "plugged", "1") == 0
        assert write_attr(d / "rails", "2") == errno.EBUSY, "parameters are fixed while plugged"
        assert (d / "rails").read_text().strip() == "3"
        assert write_attr(d / "plugged", "1") == 0, "plugging twice is harmless"
    finally:
        d.rmdir()  # unplugs first
    assert not list(Path("/sys/class/infiniband").glob("usb4_rdma*"))


@pytest.mark.kernels
def test_unplug_and_replug(vcable_factory: VcableFactory) -> None:
    cable = vcable_factory.add()
    tbverbs("vcable", "unplug", cable.name)
    for end in cable.ends:
        assert not Path("/sys/class/infiniband", end.ibdev).exists()
        assert not Path("/sys/class/net", end.netdev).exists()
    assert (CFS / cable.name / "end0_ibdev").read_text().strip() == ""
    out = tbverbs("vcable", "plug", cable.name).stdout
    assert "usb4_rdma0" in out and "usb4_rdma1" in out
    assert Path("/sys/class/infiniband/usb4_rdma0").is_dir()


def test_rmmod_is_refused_while_a_cable_exists(vcable_factory: VcableFactory) -> None:
    vcable_factory.add()
    for name in (VCABLE_MODNAME, MODNAME):  # the cable's directory pins its module, which pins ours
        r = run(["rmmod", name], check=False)
        assert r.returncode != 0 and "in use" in r.stderr, (name, r.stderr)
    assert Path("/sys/class/infiniband/usb4_rdma0").is_dir(), "nothing was torn down"


@pytest.mark.kernels
def test_main_module_is_pinned_by_the_vcable_module(module: str) -> None:
    """No cable: still the virtual cable's module uses the main module's link API."""
    r = run(["rmmod", MODNAME], check=False)
    assert r.returncode != 0 and VCABLE_MODNAME in r.stderr, r.stderr
    assert CFS.is_dir()
    holders = Path("/sys/module", MODNAME, "holders")
    assert [h.name for h in holders.iterdir()] == [VCABLE_MODNAME]


def test_incompatible_peer_is_refused_with_a_log_line(module: str) -> None:
    tbverbs("vcable", "list")
    d = CFS / "old"
    d.mkdir()
    reader = KmsgReader()
    try:
        (d / "end1_proto_version").write_text("7")
        (d / "plugged").write_text("1")
        lines: list[str] = []

        def refusals() -> list[str]:
            lines.extend(reader.read_new())
            return [line for line in lines if "refus" in line]

        # each end refuses the other, or learns it was refused: one line per end
        assert wait_for(lambda: len(refusals()) >= 2, timeout=20), "\n".join(lines)
        found = refusals()
        assert all("no common protocol version" in line for line in found), found
        assert {"link 0:" in line for line in found} == {True, False}, found
        time.sleep(2)
        assert len(refusals()) == 2, "refused once, logged once: no flood from retries"
        assert (d / "end0_ibdev").read_text().strip() == ""
        assert (d / "end1_ibdev").read_text().strip() == ""
        assert not list(Path("/sys/class/infiniband").glob("usb4_rdma*"))
    finally:
        reader.close()
        d.rmdir()


def test_fewer_rails_when_the_peer_opens_only_one(module: str) -> None:
    """End 1 opens one rail's paths, as a firmware connection manager allows one DMA tunnel
    per peer: it logs in again offering one rail, and both ends come up on one."""
    tbverbs("vcable", "list")  # mounts configfs
    d = CFS / "onetunnel"
    d.mkdir()
    reader = KmsgReader()
    lines: list[str] = []
    try:
        (d / "rails").write_text("4")
        (d / "end1_dma_tunnels").write_text("1")
        (d / "plugged").write_text("1")

        def both_up() -> bool:
            lines.extend(reader.read_new())
            return all((d / f"end{i}_ibdev").read_text().strip() for i in (0, 1))

        assert wait_for(both_up, timeout=30), "\n".join(lines)

        def ups() -> list[str]:
            lines.extend(reader.read_new())
            return [line for line in lines if ": up to peer" in line]

        assert wait_for(lambda: len(ups()) >= 2 and all("1 rail(s)" in u for u in ups()[-2:]),
                        timeout=10), ups()
        log = "\n".join(lines)
        assert "rail 1 did not come up (-95); logging in again with 1 rail(s)" in log, log
        for i in (0, 1):
            netdev = (d / f"end{i}_netdev").read_text().strip()
            assert len(list(Path("/sys/class/net", netdev, "queues").glob("tx-*"))) == 1
            ibdev = (d / f"end{i}_ibdev").read_text().strip()
            assert Path("/sys/class/infiniband", ibdev, "ports/1/state").read_text().strip() == "4: ACTIVE"
        assert "link stays down" not in log
    finally:
        reader.close()
        d.rmdir()
    assert not list(Path("/sys/class/infiniband").glob("usb4_rdma*"))


def test_a_bring_up_without_rings_logs_out_and_retries(module: str) -> None:
    """End 1 finds no rings when it opens its paths (another peer took the controller's free
    rings since probe): it logs out, so end 0 does not keep a device that leads nowhere, and
    logs in again later, waiting longer each time; once rings are free the link comes up."""
    tbverbs("vcable", "list")  # mounts configfs
    d = CFS / "norings"
    d.mkdir()
    log = KernelLog()

    def devices() -> list[str]:
        return [name for i in (0, 1) if (name := (d / f"end{i}_ibdev").read_text().strip())]

    try:
        (d / "end1_rings_busy").write_text("1")
        (d / "plugged").write_text("1")
        assert wait_for(lambda: log.logged("bring-up failed (-16); logging out, retrying in 1 s"),
                        timeout=30), log
        assert wait_for(lambda: log.logged("logged out"), timeout=10), log
        assert wait_for(lambda: log.logged("retrying in 2 s"), timeout=30), log
        assert wait_for(lambda: not devices(), timeout=10), devices()
        (d / "end1_rings_busy").write_text("0")
        assert wait_for(lambda: len(devices()) == 2, timeout=30), log
        assert Path("/sys/class/infiniband", devices()[1], "ports/1/state").read_text().strip() \
            == "4: ACTIVE"
    finally:
        log.close()
        d.rmdir()
    assert not list(Path("/sys/class/infiniband").glob("usb4_rdma*"))


@pytest.mark.sanitizer_ci
def test_unplug_while_a_bring_up_opens_its_paths(module: str) -> None:
    """Unplug holds the cable's connection-manager lock while it stops each end's control
    channel (waiting for its work) and then its link, as thunderbolt.ko holds its domain lock
    around a service's remove(); end 1's bring-up then waits for that lock to open its paths,
    and end 0 replays its login to end 1 meanwhile (issue 23, item 1). The unplug must wait
    neither for that bring-up nor for a control work stuck behind it: the login is answered,
    the unplug leaves the link to the bring-up, which gives up, and nothing is left behind."""
    tbverbs("vcable", "list")  # mounts configfs
    d = CFS / "slowpaths"
    d.mkdir()
    log = KernelLog()
    hung = False
    try:
        (d / "rails").write_text("2")
        (d / "end1_paths_delay_ms").write_text("8000")
        (d / "plugged").write_text("1")
        assert wait_for(lambda: log.logged("end 1 opens its paths in 8000 ms (testing)"),
                        timeout=30), log
        login = (d / "end0_ctl_last").read_bytes()
        assert struct.unpack_from("<I", login, 60)[0] == 1, login.hex()  # end 0's LOGIN
        (d / "end0_ctl_inject").write_bytes(login)
        time.sleep(2)  # end 1's control work takes the replay (before the fix: and waits there)
        # hangs for good if unplug waits for the bring-up or that work: a bounded wait decides
        # (a writer stuck in the kernel cannot be killed: it is left, not waited for)
        unplug = subprocess.Popen(["sh", "-c", f"echo 0 > {d / 'plugged'}"])
        try:
            assert unplug.wait(timeout=60) == 0
        except subprocess.TimeoutExpired:
            hung = True
            pytest.fail("the unplug hung (60 s): it waits for end 1's control work, which waits for "
                        "the bring-up, which waits for the unplug's lock", pytrace=False)
        assert log.logged("end 1: removing the link once its bring-up or teardown ends"), log
        assert log.logged("bring-up abandoned: the link is being removed"), log
        assert (d / "end1_ibdev").read_text().strip() == ""
        assert not list(Path("/sys/class/infiniband").glob("usb4_rdma*"))
        assert not list(Path("/sys/class/net").glob("usb4_net*"))
        # the same cable comes up normally once the delay is gone
        (d / "end1_paths_delay_ms").write_text("0")
        (d / "plugged").write_text("1")
        assert wait_for(lambda: all((d / f"end{i}_ibdev").read_text().strip() for i in (0, 1)),
                        timeout=30)
    finally:
        log.close()
        if not hung:  # a hung unplug holds the cable: removing it would hang too
            d.rmdir()


def test_cli_vanish_boot_flap_and_status(vcable_factory: VcableFactory) -> None:
    """The CLI's peer-vanishes, boot and flap commands against the real module, and the
    resources `status` reports."""
    cable = vcable_factory.add()
    cfs = Path("/sys/kernel/config/tbverbs/vcable", cable.name)
    tbverbs("vcable", "vanish", cable.name, "--end", "1")
    assert (cfs / "end1_running").read_text().strip() == "0"
    assert (cfs / "end1_ibdev").read_text().strip() == ""
    assert (cfs / "end0_ibdev").read_text().strip() == cable.end0.ibdev
    tbverbs("vcable", "boot", cable.name, "--end", "1", "--timeout", "60")
    assert (cfs / "end1_running").read_text().strip() == "1"
    assert (cfs / "end1_ibdev").read_text().strip() == cable.end1.ibdev
    out = tbverbs("vcable", "flap", cable.name, "--times", "2", "--down-ms", "20").stdout
    assert out.count("link up after") == 2, out
    unplugged = tbverbs("vcable", "unplug", cable.name)
    assert unplugged.returncode == 0
    r = tbverbs("vcable", "vanish", cable.name, "--end", "0", check=False)
    assert r.returncode != 0 and "unplugged" in r.stderr, r.stderr
    tbverbs("vcable", "plug", cable.name)
    deadline = time.monotonic() + 60
    while not (cfs / "end0_ibdev").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    status = tbverbs("status", (cfs / "end0_ibdev").read_text().strip()).stdout
    # the kernel's MAD agent holds one QP, CQ, PD and (DMA, unpinned) MR
    assert "resources: qp 1/" in status and " pinned 0 B/" in status, status


def test_a_peer_that_never_answers_the_login_is_reported_once(vcable_factory: VcableFactory) -> None:
    """A host whose peer advertises our service but never answers the login (here: the peer's
    host is down while ours boots) keeps trying, and says so once in its log, not silently."""
    cable = vcable_factory.add()
    cfs = CFS / cable.name
    tbverbs("vcable", "vanish", cable.name, "--end", "1")
    reader = KmsgReader()
    tbverbs("vcable", "vanish", cable.name, "--end", "0")
    (cfs / "end0_running").write_text("1")  # end 0 boots; end 1 stays down
    said: list[str] = []

    def silence_reported() -> bool:
        said.extend(line for line in reader.read_new() if "has not answered" in line)
        return bool(said)

    assert wait_for(silence_reported, timeout=90, step=1), "no log line about the silent peer in 90 s"
    assert len(said) == 1 and "has not answered 30 logins; still trying" in said[0], said
    time.sleep(3)
    silence_reported()
    assert len(said) == 1, f"said more than once: {said}"
    tbverbs("vcable", "boot", cable.name, "--end", "1", "--timeout", "60")
    assert wait_for(lambda: (cfs / "end0_ibdev").read_text().strip(), timeout=60), "end 0 never came up"
