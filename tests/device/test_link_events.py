"""A cable whose link goes away and comes back in the middle of traffic: pulled and plugged
again, flapping, a peer host that vanishes without a word or suspends, the module unloaded
while a process holds the devices. The process sees its devices go, the kernel stays clean
(the kernel-log check), nothing is left behind, and the link comes back with a new session.

Each test has a cable of its own (they take it down on purpose); faults on a cable that stays
up are test_faults.py's.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from faultlib import CFS, LOSSY, cable_stats, integrity_running, set_faults, wait_devices
from pairlib import Pair, hw, kill_and_reap
from vmlib import KmsgReader, NetnsFactory, VcableFactory, load_module, rmmod


def test_cable_pulled_under_load(pair: Pair) -> None:
    """Unplugging the cable while traffic runs: the process sees the device go, the kernel
    stays clean (the kernel-log check), and the cable comes back up when plugged again."""
    plugged = CFS / pair.cable.name / "plugged"
    set_faults(pair, LOSSY + " burst=50")
    with integrity_running(pair, "-q", "4", "-t", "60", "-S", "17") as tool:
        time.sleep(3)
        plugged.write_text("0")
        out, _ = tool.communicate(timeout=120)
    assert tool.returncode != 0, "the tool did not notice the cable was pulled:\n" + out
    assert cable_stats(pair)["dropped_fault"] > 0
    plugged.write_text("1")
    # a new plug starts the fault counters from zero (the faults were cleared before it)
    after = cable_stats(pair)
    assert [after[k] for k in ("dropped_fault", "duplicated", "reordered", "corrupted")] == \
        [0, 0, 0, 0], after
    # both ends: the fixture then reads both devices' counters
    assert all(wait_devices(pair)), "no devices after re-plug"


def test_cable_pulled_under_a_process_that_only_polls(pair: Pair) -> None:
    """ib_write_bw keeps its send queue full and then only polls its CQ, a ring in memory it
    maps (rdma_rxe's ABI). With the peer's receiver stalled nothing completes, and when the
    device goes none of the tool's system calls fails: the core replaces the ring's pages with a
    zeroed one. Its outstanding work must complete, flushed, into that ring before then, so that
    the tool ends with an error rather than poll for ever."""
    end0, end1 = pair.cable.end0, pair.cable.end1
    # an ACK timeout of 4.096 us x 2^20 = 4.3 s: no retry gives up while the test looks on
    args = ["-s", "65536", "-D", "120", "-F", "-u", "20"]
    plugged = CFS / pair.cable.name / "plugged"
    server = subprocess.Popen(["ip", "netns", "exec", pair.hosts[1], "ib_write_bw", "-d", end1.ibdev,
                               "-x", str(pair.gids[1]), *args], env=pair.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = None
    try:
        deadline = time.monotonic() + 60
        while client is None or (client.poll() is not None and time.monotonic() < deadline):
            time.sleep(1)  # the server listening
            client = subprocess.Popen(["ip", "netns", "exec", pair.hosts[0], "ib_write_bw", "-d",
                                       end0.ibdev, "-x", str(pair.gids[0]), *args, pair.ips[1]],
                                      env=pair.env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
            time.sleep(5)  # connected (or refused: the server not listening yet)
        assert client.poll() is None, "ib_write_bw did not start:\n" + kill_and_reap(client)
        # its data flowing (it connects over TCP first: seconds on the sanitizer kernel)
        before = hw(end0.ibdev, "tx_frames")
        deadline = time.monotonic() + 120
        while hw(end0.ibdev, "tx_frames") < before + 100 and client.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert client.poll() is None and hw(end0.ibdev, "tx_frames") >= before + 100, \
            "no traffic before the stall:\n" + kill_and_reap(client)
        set_faults(pair, "stall=1")
        time.sleep(3)  # its send queue full, nothing completing: it only polls
        assert client.poll() is None, "ib_write_bw ended under the stall:\n" + kill_and_reap(client)
        plugged.write_text("0")
        try:
            out, _ = client.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("ib_write_bw still polls 60 s after its device went: no "
                                 "completion reached its CQ ring\n" + kill_and_reap(client)) from None
        assert client.returncode != 0, "ib_write_bw did not notice the cable was pulled:\n" + out
        assert "Completion with error" in out, out
    finally:
        if client is not None:
            kill_and_reap(client)
        kill_and_reap(server)
        set_faults(pair, "clear")
        plugged.write_text("1")
    assert all(wait_devices(pair)), "no devices after re-plug"


def interrupt_transfer(pair: Pair, attr: str, value: str, seed: str) -> None:
    """The integrity tool runs; 3 s in, end 1 goes (`attr` = `value`): the tool must notice and
    fail, and end 1's device is gone."""
    cfs = CFS / pair.cable.name
    with integrity_running(pair, "-q", "4", "-t", "60", "-S", seed) as tool:
        time.sleep(3)
        assert tool.poll() is None, f"the tool ended before {attr}={value}"
        (cfs / attr).write_text(value)
        out, _ = tool.communicate(timeout=180)
    assert tool.returncode != 0, f"the tool did not notice {attr}={value}:\n" + out
    assert (cfs / attr).read_text().strip() == value
    assert (cfs / "end1_ibdev").read_text().strip() == ""


def test_peer_vanishes_mid_transfer_and_comes_back(pair: Pair) -> None:
    """The host at end 1 stops without a word (a crash, a power cut; the cable stays in).
    End 0's transfers fail, end 0 keeps its device until the host boots again; then end 0
    sees a new login session, resets its device, and both come back."""
    cfs = CFS / pair.cable.name
    ups = hw(pair.cable.end0.ibdev, "link_ups")
    interrupt_transfer(pair, "end1_running", "0", "31")
    assert (cfs / "end0_ibdev").read_text().strip() == pair.cable.end0.ibdev
    assert hw(pair.cable.end0.ibdev, "link_ups") == ups  # no reset while the peer is silent
    (cfs / "end1_running").write_text("1")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        names = wait_devices(pair)
        if hw(names[0], "link_ups") > ups:
            break
        time.sleep(0.2)
    assert hw(wait_devices(pair)[0], "link_ups") == ups + 1, "end 0 did not reset for the new session"
    assert (cfs / "end1_running").read_text().strip() == "1"


def test_host_suspends_and_resumes(pair: Pair) -> None:
    """The host at end 1 suspends in the middle of a transfer (as the USB4 backend's PM hooks
    do: LOGOUT, devices down, silent), then resumes: end 0 drops its device at the logout,
    not at a timeout, and both come back with a new session."""
    cfs = CFS / pair.cable.name
    ups = [hw(pair.cable.end0.ibdev, "link_ups"), hw(pair.cable.end1.ibdev, "link_ups")]
    reader = KmsgReader()
    try:
        interrupt_transfer(pair, "end1_suspended", "1", "41")
        log = "\n".join(reader.read_new())
        assert "logged out" in log and ": suspended" in log, log
        time.sleep(1)  # end 0 keeps knocking; the sleeping host answers nothing
        assert (cfs / "end0_ibdev").read_text().strip() == ""
        (cfs / "end1_suspended").write_text("0")
        names = wait_devices(pair)
        assert names == (pair.cable.end0.ibdev, pair.cable.end1.ibdev)
        # one new link-up each (the counters are cached for 10 ms from the device's registration)
        deadline = time.monotonic() + 30
        while [hw(n, "link_ups") for n in names] != [ups[0] + 1, ups[1] + 1] and time.monotonic() < deadline:
            time.sleep(0.2)
            names = wait_devices(pair)
        assert [hw(n, "link_ups") for n in names] == [ups[0] + 1, ups[1] + 1]
        assert ": resumed; logging in again" in "\n".join(reader.read_new())
        for name in names:
            assert Path("/sys/class/infiniband", name, "ports/1/state").read_text().strip() == "4: ACTIVE"
    finally:
        reader.close()


def test_repeated_link_flaps(pair: Pair) -> None:
    """The cable drops and returns five times in quick succession, the first time under load:
    every time both devices come back, and nothing is left behind (the fixture's checks)."""
    plugged = CFS / pair.cable.name / "plugged"
    with integrity_running(pair, "-q", "4", "-t", "60", "-S", "37") as tool:
        time.sleep(2)
        for flap in range(5):
            plugged.write_text("0")
            time.sleep(0.05 * flap)
            plugged.write_text("1")
            if flap == 0:
                tool.communicate(timeout=120)
                assert tool.returncode != 0
        assert wait_devices(pair) == (pair.cable.end0.ibdev, pair.cable.end1.ibdev)


def test_module_unload_under_load(vcable_factory: VcableFactory, netns: NetnsFactory,
                                  rdma_env: dict[str, str], module: str) -> None:
    """The cable is removed and the module unloaded while a process moves data through it
    and still holds the devices open: the process sees its devices go, the module unloads
    (the kernel-log and kmemleak checks follow), and loads again."""
    cable = vcable_factory.add(rails=2)
    p = Pair(cable, netns, rdma_env)
    with integrity_running(p, "-q", "4", "-t", "60", "-S", "41") as tool:
        time.sleep(3)
        assert tool.poll() is None, "the tool ended before the cable was removed"
        vcable_factory.delete(cable.name)
        r = rmmod(timeout=30)
        assert r.returncode == 0, f"rmmod under load: {r.stderr}"
        out, _ = tool.communicate(timeout=120)
    assert tool.returncode != 0, "the tool did not notice its devices were gone:\n" + out
    load_module()  # the fixture unloads it again, with its checks
    assert Path("/sys/kernel/config/tbverbs/vcable").is_dir()
