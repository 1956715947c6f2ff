"""RC under the faults a real cable and a real receiver produce, injected by the virtual cable.

The cable's endN_faults attributes (kernel/tbv_vcable_fault.c) lose, duplicate, reorder and
damage (CRC-flagged) the frames one end sends, or make the receiver stall. RC must deliver
exactly once and in order through all of it (the integrity tool checks every byte and every
atomic against its model); when the peer cannot answer at all, the spec's error completions
must come after the configured retries, and timeout 0 must never give up.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from test_netdev import hw
from test_verbs import TOOLS, Pair, pair  # noqa: F401  (pair is a fixture)

CFS = Path("/sys/kernel/config/tbverbs/vcable")
LOSSY = "drop_ppm=50000 dup_ppm=20000 reorder_ppm=20000 corrupt_ppm=10000"


def resolve_neighbours(pair: Pair) -> None:
    """Both ends learn each other's MAC while the link is clean.

    Connecting a RoCE QP resolves the peer's MAC over the link's IP netdev, and the kernel
    gives up after one second; a lost ARP frame would fail the connection (not the transfer
    the test is about). Real applications retry; perftest does not."""
    for host, peer_ip in ((pair.hosts[0], pair.ips[1]), (pair.hosts[1], pair.ips[0])):
        subprocess.run(["ip", "netns", "exec", host, "ping", "-c", "1", "-W", "5", peer_ip],
                       check=True, capture_output=True, timeout=30)


def set_faults(pair: Pair, spec: str, ends: tuple[int, ...] = (0, 1)) -> None:
    if spec != "clear":
        resolve_neighbours(pair)
    for end in ends:
        (CFS / pair.cable.name / f"end{end}_faults").write_text(spec + "\n")


def cable_stats(pair: Pair) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (CFS / pair.cable.name / "stats").read_text().splitlines():
        key, value = line.split()
        kind = key.split("_", 2)[2]  # end0_rail1_dropped_fault -> dropped_fault
        out[kind] = out.get(kind, 0) + int(value)
    return out


def integrity(pair: Pair, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TOOLS / "tbv_integrity"), *args,
                           pair.cable.end0.ibdev, str(pair.gids[0]),
                           pair.cable.end1.ibdev, str(pair.gids[1])],
                          env=pair.env, capture_output=True, text=True, timeout=timeout)


@contextmanager
def integrity_running(pair: Pair, *args: str) -> Iterator[subprocess.Popen]:
    """The integrity tool in the background; faults cleared and the tool gone afterwards."""
    tool = subprocess.Popen([str(TOOLS / "tbv_integrity"), *args,
                             pair.cable.end0.ibdev, str(pair.gids[0]),
                             pair.cable.end1.ibdev, str(pair.gids[1])],
                            env=pair.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        yield tool
    finally:
        set_faults(pair, "clear")
        if tool.poll() is None:
            tool.kill()
            tool.communicate()


def wait_connected(tool: subprocess.Popen) -> None:
    """-F cases connect first (address resolution needs the link), then wait for a line."""
    assert tool.stdout
    seen = []
    for line in tool.stdout:
        seen.append(line)
        if line.strip() == "connected":
            return
    raise AssertionError("tbv_integrity -F did not connect:\n" + "".join(seen))


def go(tool: subprocess.Popen) -> None:
    assert tool.stdin
    tool.stdin.write("go\n")
    tool.stdin.flush()


def counter(pair: Pair, name: str) -> int:
    return sum(hw(end.ibdev, name) for end in pair.cable.ends)


def test_fault_settings_are_validated(pair: Pair) -> None:
    path = CFS / pair.cable.name / "end0_faults"
    set_faults(pair, "drop_ppm=1000 burst=3", (0,))
    assert "drop_ppm=1000 burst=3 " in path.read_text()
    for bad in ("drop_ppm=1000001", "burst=1001", "stall=2", "bogus=1", "drop_ppm", "dup_ppm=-1"):
        try:
            path.write_text(bad + "\n")
        except OSError:
            pass
        else:
            raise AssertionError(f"{bad!r} accepted")
    assert "drop_ppm=1000 burst=3 " in path.read_text()  # nothing changed by a refused write
    set_faults(pair, "clear", (0,))
    assert path.read_text().split() == ["drop_ppm=0", "burst=0", "dup_ppm=0", "reorder_ppm=0",
                                        "corrupt_ppm=0", "stall=0"]


def test_rc_loses_nothing_under_loss_reordering_duplication_and_damage(pair: Pair) -> None:
    """5% loss, 2% duplication, 2% reordering and 1% damaged frames on both directions."""
    before = cable_stats(pair)
    recovered_before = counter(pair, "retransmits") + counter(pair, "seq_naks")
    set_faults(pair, LOSSY)
    try:
        r = integrity(pair, "-q", "4", "-t", "20", "-s", "65536", "-S", "5")
    finally:
        set_faults(pair, "clear")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 mismatches, 0 errors" in r.stdout, r.stdout
    summary = r.stdout.split("\n")[1].split()
    assert int(summary[0]) > 20 and int(summary[4]) > 0, r.stdout  # operations, atomics
    after = cable_stats(pair)
    for kind in ("dropped_fault", "duplicated", "reordered", "corrupted"):
        assert after[kind] > before[kind], f"no {kind} frames: the faults did not apply"
    assert counter(pair, "rx_hw_errors") > 0  # damaged frames were flagged and dropped
    assert counter(pair, "retransmits") + counter(pair, "seq_naks") > recovered_before


def test_perftest_rc_under_loss(pair: Pair) -> None:
    set_faults(pair, "drop_ppm=50000 reorder_ppm=20000 dup_ppm=20000")
    try:
        for tool in ("ib_write_bw", "ib_read_bw"):
            args = ["-n", "50", "-s", "65536", "-F"]
            _, cli = pair.run([tool, "-d", pair.cable.end1.ibdev, "-x", str(pair.gids[1]), *args],
                              [tool, "-d", pair.cable.end0.ibdev, "-x", str(pair.gids[0]), *args,
                               pair.ips[1]], timeout=300)
            assert any(line.split()[:1] == ["65536"] for line in cli.splitlines()), cli
    finally:
        set_faults(pair, "clear")


@pytest.mark.parametrize("case,faults,status", [
    ("retry", "drop_ppm=1000000", "transport retry counter exceeded"),  # the link loses all
    ("rnr", None, "RNR retry counter exceeded"),  # a SEND with no receive posted
])
def test_exhausted_retries_end_in_the_spec_error_and_an_error_qp(
        pair: Pair, case: str, faults: str | None, status: str) -> None:
    with integrity_running(pair, "-F", case) as tool:
        wait_connected(tool)
        if faults:
            set_faults(pair, faults)
        go(tool)
        out, _ = tool.communicate(timeout=120)
    assert tool.returncode == 0, out
    assert f"{case}: {status}" in out and "QP in error" in out, out


def test_timeout_zero_never_gives_up(pair: Pair) -> None:
    """A WRITE on a QP with timeout 0 and retry_cnt 0 survives 3 s of total loss."""
    with integrity_running(pair, "-F", "infinite") as tool:
        wait_connected(tool)
        set_faults(pair, "drop_ppm=1000000")
        go(tool)
        time.sleep(3)  # retry_cnt 0 with a finite timeout would have failed after ~0.1 s
        assert tool.poll() is None, "the WRITE completed (or failed) while the link lost everything"
        set_faults(pair, "clear")
        out, _ = tool.communicate(timeout=60)  # the 10 s probe resends it
    assert tool.returncode == 0, out
    assert "infinite: success" in out and "QP not in error" in out, out


def test_stalled_receiver_recovers(pair: Pair) -> None:
    """The receivers have no RX buffers for a moment (shorter than the retry budget of about
    8 x 100 ms) in the middle of traffic: RC resends what was lost and loses nothing."""
    with integrity_running(pair, "-q", "2", "-t", "8", "-S", "9") as tool:
        time.sleep(2)
        set_faults(pair, "stall=1")
        time.sleep(0.3)
        set_faults(pair, "clear")
        out, _ = tool.communicate(timeout=120)
    assert tool.returncode == 0, out
    assert " 0 mismatches, 0 errors" in out, out
    assert cable_stats(pair)["dropped_no_rx_buffer"] > 0


def test_kill_9_in_the_middle_of_transfers_leaves_nothing_behind(pair: Pair) -> None:
    """The pair fixture checks afterwards that every verbs object is gone and no frame is
    left in flight; here the process holding them dies mid-transfer under 5% loss."""
    set_faults(pair, LOSSY)
    with integrity_running(pair, "-q", "8", "-t", "60", "-S", "13") as tool:
        time.sleep(3)
        assert tool.poll() is None, "the tool ended before it could be killed"
        tool.kill()
        tool.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and counter(pair, "objects_qp") > 2:
        time.sleep(0.2)  # uverbs tears the context down after the process is gone
    assert counter(pair, "objects_qp") == 2  # QP1 of each end's MAD agent


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
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (CFS / pair.cable.name / "end0_ibdev").read_text().strip():
        time.sleep(0.2)
    assert (CFS / pair.cable.name / "end0_ibdev").read_text().strip(), "no device after re-plug"
