"""Our module's USB4 backend across two VMs: the real thunderbolt.ko discovers the peer, our
service binds, the login runs over XDomain messages, the rails over NHI DMA rings and paths.

`insmod thunderbolt_ibverbs.ko` with no parameters on both hosts must give each a usb4_rdmaN
device, and unmodified RDMA tools must work across the emulated cable as they do over the
in-module virtual cable.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from cable import Relay
from pair import Guest, Pair
from rdma_core_results import documented_skips, parse_results, skip_message, status
from usb4lib import (KO, MODNAME, RDMA_PREFIX, REPO, SYSTEM_ENV, VCABLE_MODNAME, ZERO_COPY, Host, bring_up,
                     check, client_server, devices_on, kmemleak, link_rails, load_module, on_cable, rail_packets,
                     rdma_env, replug, retried, server_and_client, unload_module, wait_cable_devices)
from vm2lib import FULL_LINK, NHI, RX_QUEUE_DEFAULT, XDOMAIN, fail, on_both, sysfs, wait_xdomain, xdomain

TRACE = "/sys/kernel/tracing"
TRACE_OUT = "/tmp/tbv-usb4-functions"
COVERAGE_REPORT = REPO / "build" / "usb4-backend-functions.txt"


def start_function_trace(guest: Guest) -> int | None:
    """Trace every call of the backend's functions (ftrace, filtered to tbv_usb4_*, set before the
    module loads); a reader drains the buffer so nothing early is overwritten. Its handle, or
    None on a kernel without the function tracer (the debug kernel)."""
    if not guest.run(f"[ -e {TRACE}/trace ] || mount -t tracefs nodev {TRACE}; "
                     f"[ -e {TRACE}/set_ftrace_filter ]", check=False).ok:
        return None
    # A filter naming only a module not loaded yet counts as empty (trace everything): one
    # loaded function (vfs_fsync, rare here) keeps it a filter until the module's apply.
    guest.run(f"[ -e {TRACE}/trace ] || mount -t tracefs nodev {TRACE}; "
              f"echo vfs_fsync > {TRACE}/set_ftrace_filter && "
              f"echo 'tbv_usb4_*:mod:{MODNAME}' >> {TRACE}/set_ftrace_filter && "
              f"echo function > {TRACE}/current_tracer && echo 1 > {TRACE}/tracing_on")
    return guest.spawn(f"grep -o 'tbv_usb4_[a-z0-9_]*' {TRACE}/trace_pipe > {TRACE_OUT}")


def function_coverage(guest: Guest, reader: int) -> str:
    """Stop the trace; which of the backend's functions (from the .ko's symbols) ran."""
    guest.run(f"echo nop > {TRACE}/current_tracer; echo > {TRACE}/set_ftrace_filter", check=False)
    guest.kill(reader)
    ran = set(guest.run(f"sort -u {TRACE_OUT}", check=False).stdout.split())
    nm = subprocess.run(["nm", str(KO)], capture_output=True, text=True, check=True).stdout
    defined = sorted({m.group(1) for m in re.finditer(r" [tT] (tbv_usb4_\w+)$", nm, re.M)})
    lines = [f"tbv_usb4.c functions that ran during tests/usb4/test_usb4_backend.py on guest {guest.tag}: "
             f"{len(ran & set(defined))} of {len(defined)}", ""]
    lines += [f"{'ran' if f in ran else 'NOT RUN':8} {f}" for f in defined]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def hosts(pair: Pair) -> Iterator[dict[str, Host]]:
    """Our module on both guests, its devices up over the emulated cable; unloaded afterwards.

    Guest A traces which of the backend's functions run, from module load to unload; the
    count goes to build/usb4-backend-functions.txt (docs/usb4-backend.md quotes it)."""
    if not KO.is_file():
        fail(f"{KO} is not built (make module)")
    wait_xdomain(pair, 60)
    reader = start_function_trace(pair.a)
    on_both(pair, lambda g: kmemleak(g, "clear"))
    on_both(pair, load_module)
    try:
        yield on_both(pair, bring_up)
    finally:
        # unloading with the cable attached and the link up: both hosts at once
        unloaded = on_both(pair, unload_module)
        assert all(unloaded.values()), f"rmmod {MODNAME} failed with the cable attached: {unloaded}"
        leaks = on_both(pair, lambda g: kmemleak(g, "scan"))
        assert not any(leaks.values()), f"kmemleak: objects leaked by thunderbolt_ibverbs: {leaks}"
        if reader is not None:
            COVERAGE_REPORT.parent.mkdir(parents=True, exist_ok=True)
            COVERAGE_REPORT.write_text(function_coverage(pair.a, reader))
            print(COVERAGE_REPORT.read_text())


@pytest.mark.kernels
@pytest.mark.sanitizer_ci
def test_devices_come_up_with_no_parameters(pair: Pair, hosts: dict[str, Host]) -> None:
    for tag, host in hosts.items():
        other = "b" if tag == "a" else "a"
        peer_uuid = sysfs(pair.guests[other], "/sys/bus/thunderbolt/devices/0-0/unique_id")
        assert sysfs(host.guest, f"{XDOMAIN}/unique_id") == peer_uuid
        # our service bound on the peer's XDomain (0-1.N) and logged in
        bound = host.guest.run(f"ls -d {XDOMAIN}.*/driver 2>/dev/null | xargs -r -n1 readlink", check=False)
        assert MODNAME in bound.stdout, bound.stdout
        log = "\n".join(host.guest.kmsg_since(0))
        assert f"up to peer {peer_uuid}" in log, log[-3000:]
        info = host.run(["ibv_devinfo", "-d", host.ibdev]).stdout
        assert "PORT_ACTIVE" in info, info
        # the product module alone: the virtual cable's module is neither loaded nor needed
        assert not host.guest.run(f"[ -e /sys/module/{VCABLE_MODNAME} ]", check=False).ok
        assert not host.guest.run("[ -e /sys/kernel/config/tbverbs ]", check=False).ok


def test_the_peers_service_autoloads_our_module(pair: Pair, hosts: dict[str, Host]) -> None:
    """The peer's service device (0-1.N) carries a modalias that resolves to our module: once
    installed (DKMS, a package), plugging a cable to a host running it loads it."""
    g = pair.a
    aliases = g.run(f"cat {XDOMAIN}.*/modalias").stdout.split()
    ours = [a for a in aliases if a.startswith("tbsvc:ktbverbs")]
    assert len(ours) == 1, aliases
    # an installed module, in a scratch module tree: depmod indexes its alias, modprobe resolves
    tree = "/tmp/tbv-modules"
    r = g.run(f"rm -rf {tree} && mkdir -p {tree}/lib/modules/$(uname -r)/extra && "
              f"cp {KO} {tree}/lib/modules/$(uname -r)/extra/ && depmod -b {tree} && "
              f"modprobe -d {tree} -R {shlex.quote(ours[0])}")
    assert r.stdout.split() == [MODNAME], r.stdout + r.stderr


def test_the_controllers_dma_goes_through_an_iommu(pair: Pair, hosts: dict[str, Host]) -> None:
    """Both guests have an emulated Intel IOMMU translating the NHI's DMA (as Thunderbolt hosts
    do): every frame and descriptor must be mapped through the DMA API, or the emulator's DMA
    faults (a `DMAR: [DMA ...` line, which fails any test) and the link does not come up."""
    for tag, host in hosts.items():
        types = host.run("cat /sys/bus/pci/drivers/thunderbolt/0000:*/iommu_group/type", check=False)
        assert types.ok and types.stdout.split(), f"{tag}: the NHI is in no IOMMU group:\n{types.stderr}"
        assert set(types.stdout.split()) <= {"DMA", "DMA-FQ"}, f"{tag}: NHI DMA not translated: {types.stdout}"


@pytest.mark.parametrize("size", [pytest.param(4096, marks=pytest.mark.kernels), 65536])
@pytest.mark.sanitizer_full
def test_rc_pingpong_across_vms(hosts: dict[str, Host], size: int) -> None:
    cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", str(size), "-n", "20"])
    assert "iters in" in cli and "iters in" in srv


def test_ud_pingpong_across_vms(hosts: dict[str, Host]) -> None:
    cli, _ = client_server(hosts, ["ibv_ud_pingpong", "-s", "1024", "-n", "20"])
    assert "iters in" in cli


@pytest.mark.parametrize("tool", [pytest.param("ib_write_bw", marks=pytest.mark.kernels),
                                  pytest.param("ib_read_bw", marks=pytest.mark.kernels),
                                  "ib_send_bw", "ib_send_lat"])
def test_perftest_across_vms(hosts: dict[str, Host], tool: str) -> None:
    size = 65536 if tool.endswith("_bw") else 64
    credits0 = sum(hw_counter(h, "credit_frames_rx") for h in hosts.values())
    rails0 = {tag: rail_packets(h) for tag, h in hosts.items()}
    zcopy0 = sum(hw_counter(h, "tx_zcopy_bytes") for h in hosts.values())
    cli, _ = client_server(hosts, [tool, "-F", "-n", "20", "-s", str(size)])
    # the result table has a row for our size
    assert any(line.split()[:1] == [str(size)] for line in cli.splitlines()), cli
    # software credits run over the NHI rings too: the data's sender hears the receiver's limits
    if tool.endswith("_bw"):
        credits = sum(hw_counter(h, "credit_frames_rx") for h in hosts.values()) - credits0
        assert credits > 0, "no credit frame crossed the link"
        # the one QP is striped over the link's rails: with two or more, its data came in on
        # more than one (whether one overtook another, stripe_held, is up to the scheduler)
        spread = {tag: [n - n0 for n, n0 in zip(rail_packets(h), rails0[tag])] for tag, h in hosts.items()}
        rails = link_rails(hosts["a"])
        used = max(sum(1 for n in per_rail if n > 0) for per_rail in spread.values())
        assert used >= min(rails, 2) and used <= rails, \
            f"one QP's packets came in on {used} rail(s) of the link's {rails}: {spread}"
        # zero-copy TX: the NHI read the data from the MR's pages, each mapped for it at send
        # (behind the emulated IOMMU an unmapped address faults, and that fails the test)
        zcopy = sum(hw_counter(h, "tx_zcopy_bytes") for h in hosts.values()) - zcopy0
        if ZERO_COPY:
            assert zcopy >= 20 * size, f"{zcopy} bytes sent from the MR's pages"
        else:
            assert zcopy == 0, f"{zcopy} bytes sent from the MR's pages, zero_copy off"


def uses_system_libibverbs(host: Host, tool: str) -> None:
    libs = host.guest.run(["ldd", tool], env=SYSTEM_ENV).stdout
    found = re.search(r"libibverbs\.so\.1 => (\S+)", libs)
    assert found and found.group(1).startswith(("/lib/", "/usr/lib/")), libs
    assert str(RDMA_PREFIX) not in libs, libs


# Debian 12's own rdma-core 44 and perftest over the emulated USB4 link, with nothing of the
# cache's rdma-core 59 in the environment: its stock rxe provider drives our device (issue 22).
@pytest.mark.parametrize("tool,args,expect", [
    ("ibv_rc_pingpong", ["-s", "4096", "-n", "20"], "iters in"),
    ("ibv_ud_pingpong", ["-s", "1024", "-n", "20"], "iters in"),
    ("ibv_srq_pingpong", ["-s", "4096", "-n", "20", "-q", "4"], "iters in"),
    ("ib_write_bw", ["-F", "-s", "65536", "-n", "20"], "65536"),
    ("ib_read_lat", ["-F", "-s", "2", "-n", "20"], "2"),
    ("ib_atomic_bw", ["-F", "-A", "FETCH_AND_ADD", "-n", "100"], "8"),
])
def test_debian_userspace_across_vms(hosts: dict[str, Host], tool: str, args: list[str], expect: str) -> None:
    path = f"/usr/bin/{tool}"
    uses_system_libibverbs(hosts["a"], path)
    cli, srv = client_server(hosts, [path, *args], env=SYSTEM_ENV)
    if expect == "iters in":
        assert "iters in" in cli and "iters in" in srv, (cli, srv)
    else:  # perftest's result table has a row for the message size
        assert any(line.split()[:1] == [expect] for line in cli.splitlines()), cli


def test_debian_rping_across_vms(hosts: dict[str, Host]) -> None:
    """Debian 12's rping over rdma_cm, each of its 10 pings verified (-V)."""
    uses_system_libibverbs(hosts["a"], "/usr/bin/rping")
    args = ["-a", hosts["b"].ip, "-C", "10", "-S", "1000", "-v", "-V"]
    cli, srv = server_and_client(hosts, ["/usr/bin/rping", "-s", *args], ["/usr/bin/rping", "-c", *args],
                                 timeout=180, env=SYSTEM_ENV)
    assert cli.count("ping data: rdma-ping-") == 10, cli
    assert "error" not in (srv + cli).lower(), srv + cli


def hw_counter(host: Host, name: str) -> int:
    base = f"/sys/class/infiniband/{host.ibdev}"
    return int(host.run(f"sleep 0.1; cat {base}/ports/1/hw_counters/{name} 2>/dev/null || "
                        f"cat {base}/hw_counters/{name}").stdout)


def all_hw_counters(host: Host) -> dict[str, int]:
    """Every hw counter of the host's device (port and device ones), in one guest command."""
    base = f"/sys/class/infiniband/{host.ibdev}"
    out = host.run(f"sleep 0.1; cd {base}/ports/1/hw_counters && grep -H . * ; "
                   f"cd {base}/hw_counters 2>/dev/null && grep -H . *", check=False).stdout
    seen = {}
    for line in out.splitlines():
        name, _, value = line.partition(":")
        if name != "lifespan" and value.strip().lstrip("-").isdigit():
            seen[name] = int(value)
    return seen


def test_rc_survives_lost_and_crc_flagged_frames(pair: Pair, hosts: dict[str, Host]) -> None:
    """2 % of data frames lost and 3 % flagged CRC-errored by the receiving controller: RC
    retransmits and every buffer arrives intact (-c validates them); the flagged frames are
    counted (rx_hw_errors) and never delivered.

    The loss stops before the pingpong's last exchange: the server exits (destroying its QP) once
    its own sends are acknowledged, so if the ACK of the client's last SEND is lost, the
    client's retransmissions find no QP and it ends with "transport retry counter exceeded".
    That is the tool's teardown on any lossy fabric (seen in CI: the peer counted the
    retransmissions as rdma_rx_no_qp), not a transport fault."""
    iters, lossy_frames = 400, 1200  # a 4 KiB exchange is about 6 frames: loss for half of it
    before = sum(hw_counter(h, "rx_hw_errors") for h in hosts.values())
    retransmits0 = sum(hw_counter(h, "retransmits") for h in hosts.values())
    stats0 = pair.relay.stats()

    def frames() -> int:
        return sum(d.data + d.dropped_fault for d in pair.relay.stats().dirs) - \
            sum(d.data + d.dropped_fault for d in stats0.dirs)

    def lossy_while_running(client: int) -> None:
        pair.relay.set_faults(drop_data=0.02, crc_error=0.03)
        try:
            pair.relay.wait_for(lambda: frames() > lossy_frames or
                                hosts["a"].guest.wait(client, timeout=0) is not None,
                                240, "the pingpong's traffic on the cable", interval=0.2)
        finally:
            pair.relay.set_faults()

    cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", "4096", "-n", str(iters), "-c"],
                             while_running=lossy_while_running)
    assert "iters in" in cli and "iters in" in srv
    stats1 = pair.relay.stats()
    flagged = sum(d1.crc_flagged - d0.crc_flagged for d0, d1 in zip(stats0.dirs, stats1.dirs))
    dropped = sum(d1.dropped_fault - d0.dropped_fault for d0, d1 in zip(stats0.dirs, stats1.dirs))
    counted = sum(hw_counter(h, "rx_hw_errors") for h in hosts.values()) - before
    assert flagged > 0 and dropped > 0, stats1
    # thunderbolt_net may share the cable (its own frames, its own counters): at most all of them
    assert 0 < counted <= flagged, (counted, flagged)
    retransmits = sum(hw_counter(h, "retransmits") for h in hosts.values()) - retransmits0
    assert retransmits > 0, "frames were lost but RC never retransmitted"


def test_rc_survives_lost_transport_packets(pair: Pair, hosts: dict[str, Host]) -> None:
    """Both controllers lose 0.2 % of the transport packets they receive (`lose-packet-ppm`, a
    relay fault inside a strict profile's framing): a lost packet that ended a frame merges
    it with the next, one lost inside a frame cuts it. Neither may be taken for a good frame:
    RC resends, every buffer arrives intact (-c), and the kernels stay quiet (the per-test
    log check). A profile without transport packets (lenient) loses none."""
    packets = int(pair.a.qmp.qom_get(NHI, "transport-packets"))
    stat = "stat-rx_packet_lost"
    lost0 = on_both(pair, lambda g: g.qmp.qom_get(NHI, stat))
    names = ("retransmits", "seq_naks", "rx_malformed", "rdma_rx_malformed", "rx_hw_errors")
    before = {n: sum(hw_counter(h, n) for h in hosts.values()) for n in names}
    stats0 = pair.relay.stats()

    def lossy_while_running(client: int) -> None:
        on_both(pair, lambda g: g.qmp.qom_set(NHI, "lose-packet-ppm", 2000))
        try:
            pair.relay.wait_for(lambda: sum(d.data for d in pair.relay.stats().dirs) -
                                sum(d.data for d in stats0.dirs) > 1500 or
                                hosts["a"].guest.wait(client, timeout=0) is not None,
                                240, "the pingpong's traffic on the cable", interval=0.2)
        finally:
            on_both(pair, lambda g: g.qmp.qom_set(NHI, "lose-packet-ppm", 0))

    cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", "65536", "-n", "200", "-c"],
                             while_running=lossy_while_running)
    assert "iters in" in cli and "iters in" in srv
    lost = sum(n - lost0[tag] for tag, n in on_both(pair, lambda g: g.qmp.qom_get(NHI, stat)).items())
    grew = {n: sum(hw_counter(h, n) for h in hosts.values()) - before[n] for n in names}
    print(f"transport packets lost: {lost}; counters: {grew}")
    if not packets:
        assert lost == 0, "a profile without transport packets lost some"
        return
    assert lost > 0, "no transport packet was lost: nothing tested"
    assert grew["retransmits"] + grew["seq_naks"] > 0, f"packets were lost but RC never resent: {grew}"


RX_QUEUE_SMALL = 4  # B's NHI's RX queue while it is stopped below: a controller holds a few frames
CREDITS_PARAM = f"/sys/module/{MODNAME}/parameters/credits"
QPS = 16  # x 192 packets in flight: 3072 frames, B's 4 rails post 1024 RX buffers
RAILS = 4
# Starved, a rail asks within the limit at once, then beyond it after 4, 6, 10, 18, ... request-timer
# ticks (10 ms), at most a second apart (kernel/proto/tbv_credit.h): in a 3 s stop about 8 per rail.
OVER_PER_RAIL_IN_A_STOP = 12


def write_bw_with_b_stopped(pair: Pair, hosts: dict[str, Host], stop_s: float = 3.0) -> dict[str, int]:
    """ib_write_bw from A to B with B's vCPUs stopped for a while in the middle: B's driver
    posts no RX buffers and sends no credits then, but its controller (QEMU's device model)
    still takes frames, into the buffers posted before and then a queue of RX_QUEUE_SMALL.
    Returns what changed: B's controller's RX overruns (frames dropped for want of a
    buffer), the sequence NAKs B sent, the gaps its resequencer gave up, the packets that
    came after their gap was given up and the striped packets it dropped, and A's credit
    waits, credit requests (all, and those beyond B's limit: in the whole run, and while B
    was stopped) and RC retransmissions (ACK timer).

    One QP has at most TBV_TX_WINDOW (192) packets unacknowledged, fewer than one rail's RX
    ring: QPS of them can have more in flight than B's rings hold. The QP timeout (-u 24:
    69 s) outlasts the whole run, so RC resends only what B NAKs, i.e. what was lost: with
    -u 21 (8.6 s) the ACK timer of a few QPs fired on a machine busy with other VMs (B's
    vCPUs, slowed, took that long after the stop to reach their packets: 7-8 resends, no frame
    dropped but requests beyond B's limit), and a resend restarts the TSNs, so B then gives up
    gaps it held for nothing (tbv_stripe_tx_restart())."""
    names = ("credit_waits", "credit_requests", "credit_requests_over", "retransmits")
    over_while_stopped = []

    def now() -> dict[str, int]:
        seen = {name: hw_counter(hosts["a"], name) for name in names}
        seen |= {name: hw_counter(hosts["b"], name)
                 for name in ("seq_naks", "stripe_gaps", "stripe_late", "stripe_dropped")}
        return seen | {"rx_overrun": int(pair.b.qmp.qom_get(NHI, "stat-rx_overrun"))}

    def stop_b(client: int) -> None:
        before = pair.relay.stats().dirs[0].data
        pair.relay.wait_for(lambda: pair.relay.stats().dirs[0].data > before + 500, 120,
                            "ib_write_bw traffic on the cable", interval=0.2)
        pair.b.qmp.qom_set(NHI, "rx-queue", RX_QUEUE_SMALL)
        pair.b.qmp.execute("stop")
        try:
            over = hw_counter(hosts["a"], "credit_requests_over")
            time.sleep(stop_s)
            over_while_stopped.append(hw_counter(hosts["a"], "credit_requests_over") - over)
        finally:
            pair.b.qmp.execute("cont")
            pair.b.qmp.qom_set(NHI, "rx-queue", RX_QUEUE_DEFAULT)

    before = now()
    cli, _ = client_server(hosts, ["ib_write_bw", "-F", "-s", "65536", "-q", str(QPS), "-D", "12", "-u", "24"],
                           while_running=stop_b)
    assert any(line.split()[:1] == ["65536"] for line in cli.splitlines()), cli
    after = now()
    return {name: after[name] - before[name] for name in after} | {"over_while_stopped": over_while_stopped[0]}


def test_a_stopped_receiver_costs_its_sender_credits_not_frames(pair: Pair, hosts: dict[str, Host]) -> None:
    """Software credits on the real rings: while B cannot post RX buffers (its vCPUs stopped),
    A sends no more data than the buffers B had posted and waits for credits: no data frame
    is lost to B's controller, so B's resequencer gives up no gap (a rail that falls behind
    is waited for), B NAKs nothing and A resends nothing. The only frames B's controller may
    drop are A's credit requests beyond B's limit (A counts them: credit_requests_over), a
    few per rail while B is stopped, as their back-off allows.
    With credits off (module parameter, agreed at login) the same stop loses data frames,
    which B NAKs and RC resends: the first checks can fail."""
    seen = write_bw_with_b_stopped(pair, hosts)
    print(f"B stopped, credits on: {seen}")
    assert seen["credit_waits"] > 0, f"A never waited for credits while B was stopped: {seen}"
    assert seen["rx_overrun"] <= seen["credit_requests_over"], \
        f"B's controller dropped more frames than A sent beyond B's limit: data was lost: {seen}"
    assert 0 < seen["over_while_stopped"] <= RAILS * OVER_PER_RAIL_IN_A_STOP, \
        f"starved rails did not back off their requests beyond B's limit while B was stopped: {seen}"
    resent = {name: seen[name] for name in ("stripe_gaps", "stripe_late", "stripe_dropped", "seq_naks",
                                             "retransmits")}
    assert not any(resent.values()), f"frames given up on, NAKed or resent with credits on: {seen}"

    try:
        on_both(pair, lambda g: g.run(f"echo N > {CREDITS_PARAM}"))
        replug(pair, hosts, **FULL_LINK)
        seen = write_bw_with_b_stopped(pair, hosts)
        print(f"B stopped, credits off: {seen}")
        assert seen["credit_waits"] == 0 and seen["credit_requests"] == 0, \
            f"credits used though not agreed: {seen}"
        assert seen["rx_overrun"] > 0, f"no RX overrun on B with credits off: {seen}"
        assert seen["seq_naks"] + seen["retransmits"] > 0, \
            f"frames were lost but B NAKed no gap and RC resent nothing: {seen}"
    finally:
        on_both(pair, lambda g: g.run(f"echo Y > {CREDITS_PARAM}"))
        replug(pair, hosts, **FULL_LINK)


# How long and how often the host takes both guests' vCPUs away below: each stall outlasts the
# ACK timeout of perftest's default (-u 14: 67 ms, raised to TBV_MIN_ACK_TIMEOUT_MS, 100 ms).
STALL_S = 0.5
STALLS = 4


def deschedule(guests: list[Guest], seconds: float) -> None:
    """The host stops the guests' QEMU processes (SIGSTOP) for `seconds`, as a busy host
    deschedules vCPUs: unlike QMP's stop, their clocks run on, so each guest's time jumps
    when it runs again."""
    pids = [g.qemu_pid() for g in guests]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


# Open (2026-11-28): with the ACK timer counting ticks (tbv_comp.c) the four stalls cost 0-2
# ACK timeouts and 0-202 duplicate packets a run (five runs), against 4 and 588 with the timer
# counting the clock. What is left: after a stall, now and then, no ACK reaches A for 100 ms
# of its time (instrumented: one WQE of 17 packets outstanding); docs/performance.md. Out of
# CI: it depends on the host.
@pytest.mark.beyond_ci
@pytest.mark.xfail(reason="after a stall no ACK comes for 100 ms now and then (docs/performance.md)",
                   strict=False)
def test_a_host_that_deschedules_both_guests_costs_no_retransmission(pair: Pair,
                                                                      hosts: dict[str, Host]) -> None:
    """ib_write_bw from A to B with perftest's default QP timeout, and the host stopping both
    guests for 0.5 s four times, as a busy host deschedules vCPUs (their clocks run on). A's ACK
    timer counts its wait in ticks, a late one worth one tick (kernel/tbv_comp.c): a tick that
    comes late means the guest was away and the ACKs that arrived meanwhile are not polled yet.
    So A resends nothing and B sees no duplicate and NAKs nothing; an ACK timer counting the
    clock would see each stall as a lost packet (the test then fails)."""
    a, b = hosts["a"], hosts["b"]
    spurious = ("a.retransmits", "b.rdma_rx_duplicates", "b.seq_naks")

    def now() -> dict[str, int]:
        return {f"{tag}.{name}": value for tag, host in (("a", a), ("b", b))
                for name, value in all_hw_counters(host).items()}

    def stall_both(client: int) -> None:
        before = pair.relay.stats().dirs[0].data
        pair.relay.wait_for(lambda: pair.relay.stats().dirs[0].data > before + 500, 120,
                            "ib_write_bw traffic on the cable", interval=0.2)
        for _ in range(STALLS):
            sent = pair.relay.stats().dirs[0].data
            deschedule([a.guest, b.guest], STALL_S)
            pair.relay.wait_for(lambda: pair.relay.stats().dirs[0].data > sent + 200, 60,
                                "ib_write_bw traffic after the stall", interval=0.2)

    before = now()
    cli, _ = client_server(hosts, ["ib_write_bw", "-F", "-s", "65536", "-D", "12"], while_running=stall_both)
    assert any(line.split()[:1] == ["65536"] for line in cli.splitlines()), cli
    changed = {n: v - before[n] for n, v in now().items() if v != before[n]}
    seen = {n: changed.get(n, 0) for n in spurious}
    print(f"{STALLS} stalls of {STALL_S} s: {seen}")
    assert not any(seen.values()), \
        f"a stall of both guests was taken for lost packets: {seen}; every counter that moved: {changed}"


@pytest.mark.sanitizer_full
def test_a_second_cable_is_a_second_device(pair: Pair, hosts: dict[str, Host]) -> None:
    """Two hosts joined by two cables (each host with two USB4 controllers): each cable is a link
    of its own, with its own usb4_rdmaN and usb4_netN, logged in to the peer's host router on
    that cable. Both carry RDMA at once, each over its own cable; pulling the second leaves the
    first device as it was."""
    assert pair.cables >= 2, "the session pair has one cable"
    second_relay = pair.relays[1]
    assert second_relay.link() is None, "cable 1 is plugged before the test plugs it"
    second_relay.plug(**FULL_LINK)
    try:
        wait_xdomain(pair, 60, cable=1)
        second = on_both(pair, lambda g: bring_up(g, cable=1))
        for tag, host in second.items():
            assert host.ibdev != hosts[tag].ibdev, (host.ibdev, hosts[tag].ibdev)
            other = "b" if tag == "a" else "a"
            peer_uuid = sysfs(pair.guests[other], "/sys/bus/thunderbolt/devices/1-0/unique_id")
            assert sysfs(host.guest, f"{xdomain(1)}/unique_id") == peer_uuid
            assert f"up to peer {peer_uuid}" in "\n".join(host.guest.kmsg_since(0))
            rc, out = check(host)
            assert rc == 0 and out.count("OK: link 2 x 20 Gb/s") == 2, out

        def data_frames(relay: Relay) -> int:
            return sum(d.data for d in relay.stats().dirs)

        before = [data_frames(r) for r in pair.relays[:2]]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            first_run = pool.submit(client_server, hosts, ["ibv_rc_pingpong", "-p", "18516", "-s", "4096",
                                                           "-n", "50"])
            second_run = pool.submit(client_server, second, ["ib_write_bw", "-p", "18517", "-F", "-n", "50",
                                                             "-s", "65536"])
            cli, srv = first_run.result()
            assert "iters in" in cli and "iters in" in srv
            cli, _ = second_run.result()
            assert any(line.split()[:1] == ["65536"] for line in cli.splitlines()), cli
        moved = [data_frames(r) - b for r, b in zip(pair.relays[:2], before)]
        # 50 x 64 KiB written is 800 frames of 4 KiB at least; 50 x 4 KiB each way about 100
        assert moved[1] >= 800 and moved[0] >= 100, f"data frames per cable: {moved}"

        second_relay.unplug()
        wait_cable_devices(pair, 1, gone=True, timeout=60)
        for tag, host in hosts.items():
            assert devices_on(host.guest, "infiniband", "usb4_rdma") == {0: host.ibdev}, tag
        cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", "4096", "-n", "20"])
        assert "iters in" in cli and "iters in" in srv
    finally:
        # pulled again for the tests after this one; a failure here must not hide the test's own
        if second_relay.link() is not None:
            second_relay.unplug()
            gone = on_both(pair, lambda g: g.wait_until(f"! {on_cable(1)}", 60))
            if not all(gone.values()) and sys.exc_info()[0] is None:
                fail(f"cable 1's usb4_rdma devices still there 60 s after it was pulled: {gone}")


@contextlib.contextmanager
def write_bw_flowing(pair: Pair, hosts: dict[str, Host]) -> Iterator[tuple[int, int]]:
    """ib_write_bw from A to B (64 KiB, up to 600 s), entered once its traffic crosses cable 0:
    the (client, server) handles; whatever still runs is killed on the way out."""
    a, b = hosts["a"], hosts["b"]
    tool = ["ib_write_bw", "-F", "-s", "65536", "-D", "600"]
    server = b.guest.spawn([*tool, "-d", b.ibdev, "-x", str(b.gid)], timeout=900, env=rdma_env())
    client_cmd = shlex.join([*tool, "-d", a.ibdev, "-x", str(a.gid), b.ip])
    # retried until B listens, but never once traffic has run: a retry after the link went
    # would wait on the re-created link (on the debug kernel, past the test's patience)
    connected = "/tmp/tbv-write-bw-connected"
    a.guest.run(["rm", "-f", connected])
    client = a.guest.spawn(retried(client_cmd, unless=connected), timeout=900, env=rdma_env())
    try:
        before = pair.relay.stats().dirs[0].data
        pair.relay.wait_for(lambda: pair.relay.stats().dirs[0].data > before + 200, 120,
                            "ib_write_bw traffic on the cable", interval=0.5)
        a.guest.run(["touch", connected])
        yield client, server
    finally:
        for guest, handle in ((a.guest, client), (b.guest, server)):
            if guest.wait(handle, timeout=0) is None:
                guest.kill(handle)


def ends_by_itself(guest, handle, what: str) -> None:
    """The tool ends within 60 s of its device going. One that only polls its CQ ring (ib_write_bw
    with a full send queue) meets no failing system call: it ends on the flushed completions the
    module writes to that ring before the device goes. Killed if not, so the test can go on."""
    if guest.wait(handle, timeout=60) is None:
        guest.kill(handle)
        guest.wait(handle, timeout=60)
        fail(f"{what} still runs 60 s after its device went")


# sanitizer_full, not _ci: 8.4 of the sanitizer pair's 23.4 minutes (stop 37), which put CI
# past its deadline; it runs in CI on the stock kernel (make test-vm2)
@pytest.mark.kernels
@pytest.mark.sanitizer_full
def test_cable_pulled_under_load_then_health_check(pair: Pair, hosts: dict[str, Host]) -> None:
    """The cable goes while ib_write_bw runs: both hosts drop their devices and the tools end;
    plugged back at 1 x 10 Gb/s the link returns and `tbverbs check` calls it degraded; at
    2 x 20 Gb/s it is healthy and RC traffic flows again."""
    if pair.relay.link() != (FULL_LINK["gbps"], FULL_LINK["lanes"]):
        replug(pair, hosts, **FULL_LINK)
    a, b = hosts["a"], hosts["b"]
    rc, out = check(a)
    assert rc == 0 and "OK: link 2 x 20 Gb/s" in out, out
    refused0 = on_both(pair, paths_disable_failures)
    stalled0 = on_both(pair, lambda g: g.qmp.qom_get(NHI, "stat-tx_stalled"))
    with write_bw_flowing(pair, hosts) as (client, server):
        replug(pair, hosts, gbps=10, lanes=1)
        # the tools saw their device go: they end (with an error), they do not hang
        ends_by_itself(a.guest, client, "ib_write_bw client")
        ends_by_itself(b.guest, server, "ib_write_bw server")
    for host in hosts.values():
        rc, out = check(host)
        assert rc == 1 and "DEGRADED: the cable trained at 1 x 10 Gb/s" in out, out
    # the paths of a peer that went closed without an error (thunderbolt.ko's HOPS disable)
    assert on_both(pair, paths_disable_failures) == refused0, "disabling the DMA paths failed"
    # (a strict profile's rings held their frames while the link was down: tx-stall-link-down)
    print("TX ring passes stalled for the link:",
          {tag: n - stalled0[tag] for tag, n in on_both(pair, lambda g: g.qmp.qom_get(NHI, "stat-tx_stalled")).items()})
    replug(pair, hosts, **FULL_LINK)
    for host in hosts.values():
        rc, out = check(host)
        assert rc == 0, out
    cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", "4096", "-n", "20"])
    assert "iters in" in cli and "iters in" in srv


BUSY_POLL_PARAM = f"/sys/module/{MODNAME}/parameters/busy_poll_us"


def paths_disable_failures(guest: Guest) -> int:
    """The backend's `rail N: disabling the DMA paths failed` lines in the guest's kernel log."""
    return sum("disabling the DMA paths failed" in line for line in guest.kmsg_since(0))


@pytest.mark.sanitizer_full
def test_unload_under_load_while_busy_polling(pair: Pair, hosts: dict[str, Host]) -> None:
    """B unloads the module while ib_write_bw floods it and its rails busy-poll (busy_poll_us:
    NAPI keeps each RX ring's interrupt masked while it polls). Its rings must stop without a
    kernel warning (thunderbolt.ko warns when it stops a ring whose interrupt is masked; the
    per-test log check fails on it), A drops its device at B's logout and its client ends,
    B's server dies when killed; loaded again, B's device comes back and RC traffic flows."""
    a, b = hosts["a"], hosts["b"]
    on_both(pair, lambda g: g.run(f"echo 10000 > {BUSY_POLL_PARAM}"))
    polled = hw_counter(b, "rx_busy_polled")
    refused0 = on_both(pair, paths_disable_failures)
    try:
        with write_bw_flowing(pair, hosts) as (client, server):
            assert hw_counter(b, "rx_busy_polled") > polled, "B busy-polled no frame under load"
            assert unload_module(b.guest), f"rmmod {MODNAME} on B failed under load"
            if not a.guest.wait_until(f"! {on_cable(0)}", 60):
                fail("A still has its usb4_rdma device 60 s after B unloaded the module")
            ends_by_itself(a.guest, client, "ib_write_bw client")
            # B's server may wait on its TCP socket, whose netdev went with the module: it must
            # die when killed, not hang in the kernel on the device it had open
            if b.guest.wait(server, timeout=5) is None:
                b.guest.kill(server)
                assert b.guest.wait(server, timeout=60) is not None, "ib_write_bw server on B survives SIGKILL"
        assert on_both(pair, paths_disable_failures) == refused0, "disabling the DMA paths failed"
    finally:
        on_both(pair, lambda g: g.run(f"[ ! -e {BUSY_POLL_PARAM} ] || echo 0 > {BUSY_POLL_PARAM}"))
        if not b.guest.run(f"[ -e /sys/module/{MODNAME} ]", check=False).ok:
            load_module(b.guest)
    hosts.update(on_both(pair, bring_up))
    cli, srv = client_server(hosts, ["ibv_rc_pingpong", "-s", "4096", "-n", "20"])
    assert "iters in" in cli and "iters in" in srv


# 3.5 of the two-VM suite's 12 minutes; the same suite runs on the virtual cable's device in CI
# (the verbs layer is the same; the backend's own paths have the pingpongs and perftest here)
@pytest.mark.beyond_ci
def test_rdma_core_suite_on_a_usb4_device(hosts: dict[str, Host]) -> None:
    """rdma-core's own suite (run_tests.py) on the usb4-backed device, with the bar the virtual
    cable's device meets beside rdma_rxe (tests/device/test_rdma_core_suite.py): nothing fails or
    errors, every skip is explained in docs/rdma-core-suite.md, at least 100 pass."""
    a = hosts["a"]
    script = RDMA_PREFIX / "share/doc/rdma-core/tests/run_tests.py"
    r = a.run(["/usr/bin/python3", str(script), "--dev", a.ibdev, "-v"], timeout=1800, check=False, cwd="/tmp")
    results = parse_results(r.stderr)
    assert results, f"no results parsed from run_tests.py:\n{r.stderr[-3000:]}"
    counts = {s: sum(status(v) == s for v in results.values()) for s in ("ok", "skipped", "ERROR", "FAIL")}
    print(f"rdma-core suite on {a.ibdev} (usb4 backend): {counts}")
    broken = {n: v for n, v in results.items() if status(v) in ("ERROR", "FAIL")}
    assert not broken, f"rdma-core tests failing on the usb4 device: {broken}\n{r.stderr[-4000:]}"
    known = documented_skips()
    skips = {skip_message(v) for v in results.values() if status(v) == "skipped"}
    unexplained = sorted(m for m in skips if not any(m.startswith(k) for k in known))
    assert not unexplained, f"skips not explained in docs/rdma-core-suite.md: {unexplained}"
    assert counts["ok"] >= 100, counts
