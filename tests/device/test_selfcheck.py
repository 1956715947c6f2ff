"""The bring-up self-check (docs/hardware.md, docs/wire-protocol.md "Calibration").

Before a link carries traffic, each end sends calibration frames of 12 (our smallest frame),
255, 256, 257, 4095 and 4096 bytes on every rail, and on a link with split packets (zero_copy)
two with a split packet's PDFs; the other end judges them and says its verdict. A rail whose
frames do not arrive as sent is left out with one log line saying what came; the link logs in
again with the rails that passed (from rail 0 up) and without split packets if those failed,
or, with no rail left, does not come up and retries later. The virtual cable's `cut` fault
delivers a frame longer than N bytes as two frames, `cut_split` a split packet's frame as
N-byte frames, as a controller whose RX masks end frames at the wrong packet would.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultlib import CFS
from pairlib import Pair, hw
from vmlib import Cable, CableEnd, KmsgReader, NetnsFactory, VcableFactory, new_kernel_log, tbverbs, wait_for

ZERO_COPY = Path("/sys/module/thunderbolt_ibverbs/parameters/zero_copy")
PLAIN_SIZES = [12, 255, 256, 257, 4095, 4096]
SPLIT_SIZES = [4096, 257]


@pytest.fixture
def zero_copy() -> Iterator[Path]:
    yield ZERO_COPY
    ZERO_COPY.write_text("N\n")


def selftest(dev: str) -> tuple[int, dict]:
    r = tbverbs("selftest", "--json", dev, check=False)
    assert r.stdout, r.stderr
    doc = json.loads(r.stdout)
    assert [d["device"] for d in doc["devices"]] == [dev]
    return r.returncode, doc["devices"][0]


def rail_report(report: dict, rail: int) -> dict:
    return next(r for r in report["rail"] if r["rail"] == rail)


def add_faulty(factory: VcableFactory, rails: int, faults: str, wait: bool = True) -> dict:
    """A cable whose ends have @faults before it is plugged in (tbverbs vcable add --faults)."""
    name = f"tvc{len(factory.names)}"
    factory.names.append(name)  # the factory removes it
    args = ["vcable", "add", "--json", "--name", name, "--rails", str(rails), "--faults", faults]
    args += ["--timeout", "120"] if wait else ["--no-wait"]
    return json.loads(tbverbs(*args, timeout=150).stdout)


def as_cable(info: dict) -> Cable:
    return Cable(info["name"], CableEnd(**info["end0"]), CableEnd(**info["end1"]))


def pingpong_64k(pair: Pair) -> None:
    common = ["-s", "65536", "-n", "50", "-c"]
    srv, cli = pair.run(["ibv_rc_pingpong", "-d", pair.cable.end1.ibdev, "-g", str(pair.gids[1]), *common],
                        ["ibv_rc_pingpong", "-d", pair.cable.end0.ibdev, "-g", str(pair.gids[0]), *common,
                         pair.ips[1]])
    assert "50 iters in" in cli and "50 iters in" in srv, cli + srv


@pytest.mark.parametrize("split", [False, True], ids=["plain", "zero_copy"])
def test_a_healthy_cable_passes_on_every_rail(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        zero_copy: Path, split: bool) -> None:
    zero_copy.write_text("Y\n" if split else "N\n")
    with new_kernel_log() as log:
        cable = vcable_factory.add(rails=2)
    assert not [line for line in log if "self-check" in line or "calibration" in line], log
    sizes = PLAIN_SIZES + (SPLIT_SIZES if split else [])
    for end in cable.ends:
        rc, rep = selftest(end.ibdev)
        assert rc == 0, rep
        assert rep["rails"] == 2 and rep["split"] == ("on" if split else "off"), rep
        for rail in (0, 1):
            r = rail_report(rep, rail)
            assert (r["current"], r["result"], r["peer"]) == ("yes", "pass", "pass"), r
            assert r["split"] == ("pass" if split else "n/a"), r
            assert [f["sent"] for f in r["frames"]] == sizes, r
            assert [f["pieces"] for f in r["frames"]] == [[s] for s in sizes], r
            assert all(f["result"] == "pass" for f in r["frames"]), r
        counters = rep["counters"]
        assert counters["calibration_frames_tx"] >= 2 * len(sizes), counters
        assert counters["calibration_frames_rx"] >= 2 * len(sizes), counters
        assert counters["calibration_failed_rails"] == counters["calibration_split_failed"] == 0, counters
    pair = Pair(cable, netns, rdma_env)
    pingpong_64k(pair)
    if split:
        assert hw(cable.end0.ibdev, "tx_zcopy_bytes") > 0


def test_a_rail_that_cuts_frames_is_left_out(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """Rail 1 of two delivers frames over 256 bytes as two frames: each end logs one line for
    rail 1 saying what came, and the link comes up on rail 0 alone, carrying RDMA traffic."""
    with new_kernel_log() as log:
        info = add_faulty(vcable_factory, 2, "cut=256 rails=2")
    cut = [line for line in log if "not using this rail" in line]
    assert len(cut) == 2, "\n".join(log)  # one per end of the cable
    for line in cut:
        assert re.search(r"link \d+: rail 1: calibration frame of 257 bytes came as 256 \+ 1 bytes: "
                         r"not using this rail$", line), line
    assert len([line for line in log if "logging in again with the 1 rail(s) that passed" in line]) >= 1, log
    assert not [line for line in log if re.search(r"rail 0: .*not using", line)], log
    for end in ("end0", "end1"):
        dev = info[end]["ibdev"]
        rc, rep = selftest(dev)
        assert rc == 1 and rep["rails"] == 1, rep
        assert (rail_report(rep, 0)["current"], rail_report(rep, 0)["result"]) == ("yes", "pass"), rep
        r1 = rail_report(rep, 1)
        assert (r1["current"], r1["result"]) == ("no", "fail"), r1
        pieces = {f["sent"]: f["pieces"] for f in r1["frames"]}
        assert pieces[256] == [256] and pieces[257] == [256, 1] and pieces[4096] == [256, 3840], r1
        assert rep["counters"]["calibration_failed_rails"] >= 1, rep
    stats = (CFS / info["name"] / "stats").read_text()
    assert int(re.search(r"end0_rail1_cut (\d+)", stats).group(1)) > 0, stats
    pingpong_64k(Pair(as_cable(info), netns, rdma_env))


def test_a_cable_whose_every_rail_cuts_frames_does_not_come_up(vcable_factory: VcableFactory) -> None:
    """Both rails cut: no device; each link says why in one line (and each rail what came),
    then logs in again later; with the fault gone, the link comes up."""
    reader = KmsgReader()
    try:
        info = add_faulty(vcable_factory, 2, "cut=256", wait=False)
        name = info["name"]
        log: list[str] = []

        def refused_twice() -> bool:
            log.extend(reader.read_new())
            return len([line for line in log if "no rail passed the self-check" in line]) >= 2
        assert wait_for(refused_twice, timeout=60), log
        why = [line for line in log if "no rail passed the self-check" in line]
        assert all(re.search(r"link \d+: no rail passed the self-check; logging out, retrying in \d+ s$", line)
                   for line in why), why
        for rail in (0, 1):
            lines = [line for line in log if f"rail {rail}: calibration frame of" in line]
            assert lines and all(line.endswith("not using this rail") for line in lines), log
        assert not (CFS / name / "end0_ibdev").read_text().strip()
        assert not (CFS / name / "end1_ibdev").read_text().strip()
        for end in (0, 1):
            (CFS / name / f"end{end}_faults").write_text("clear\n")
        # the retry (after 1, 2, 4 ... s) finds a good cable
        assert wait_for(lambda: (CFS / name / "end0_ibdev").read_text().strip() and
                 (CFS / name / "end1_ibdev").read_text().strip(), timeout=90)
    finally:
        reader.close()
    dev = (CFS / name / "end0_ibdev").read_text().strip()
    rc, rep = selftest(dev)
    assert rc == 0 and rep["rails"] == 2, rep
    assert rep["counters"]["calibration_failed_rails"] >= 2, rep


def test_split_packets_that_do_not_arrive_whole_are_not_used(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str],
        zero_copy: Path) -> None:
    """zero_copy=Y at both ends, and a controller that ends a frame with a split packet's PDFs
    at every 256-byte packet (cut_split=256): plain frames pass, split frames do not, so the
    link logs in again without split packets and runs (copied payloads, no zero-copy)."""
    zero_copy.write_text("Y\n")
    with new_kernel_log() as log:
        info = add_faulty(vcable_factory, 2, "cut_split=256")
    split_lines = [line for line in log if "not using split packets" in line]
    assert split_lines, log
    assert all(re.search(r"rail \d: calibration frame of 4096 bytes with PDFs \d+/\d+ came as "
                         r"256 \+ 256 \+ 256 \+ 256 \+ \.\.\. \(16 frames, 4096 bytes\): not using split packets$", line) for line in split_lines), split_lines
    assert [line for line in log if "logging in again without split packets, which failed the self-check" in line], log
    assert not [line for line in log if "not using this rail" in line], log
    cable = as_cable(info)
    for end in cable.ends:
        rc, rep = selftest(end.ibdev)
        assert rc == 1 and rep["split"] == "failed" and rep["rails"] == 2, rep
        for rail in (0, 1):
            assert rail_report(rep, rail)["result"] == "pass", rep
        assert rep["counters"]["calibration_split_failed"] >= 1, rep
    pair = Pair(cable, netns, rdma_env)
    pingpong_64k(pair)
    assert hw(cable.end0.ibdev, "tx_zcopy_bytes") == 0
    assert hw(cable.end0.ibdev, "tx_copied_bytes") == 0
    assert hw(cable.end0.ibdev, "rx_split_dropped") == 0


def calib_header(flags: int, rail: int, index: int, round_: int, count: int, seed: int, size: int) -> bytes:
    """A calibration frame's 12-byte header (kernel/proto/tbv_calib.h)."""
    return bytes([0x05, flags]) + (size - 4).to_bytes(2, "little") + \
        bytes([rail, index, round_, count]) + seed.to_bytes(4, "little")


def test_calibration_frames_from_a_hostile_peer_are_counted_and_harmless(
        vcable_factory: VcableFactory, netns: NetnsFactory, rdma_env: dict[str, str]) -> None:
    """Once the link is up, calibration frames the peer should not send (whole rounds, lying
    headers, random bytes after the type byte) are taken and counted, answered with a round of
    ours at most every 100 ms (a peer that brought its link up again alone needs one), and
    change nothing: the self-check's report stays, and the link carries traffic."""
    cable = vcable_factory.add(rails=1)
    pair = Pair(cable, netns, rdma_env)
    dev = cable.end1.ibdev
    _, before = selftest(dev)
    rx0, tx0 = hw(dev, "calibration_frames_rx"), hw(dev, "calibration_frames_tx")
    rng = random.Random(41)
    frames = [calib_header(0, 0, i, 7, 6, 0x1234, s) + bytes(s - 12) for i, s in enumerate(PLAIN_SIZES)]
    for _ in range(300):  # valid headers that lie about everything else
        count = rng.choice((6, 8))
        frames.append(calib_header(rng.randrange(8), rng.randrange(4), rng.randrange(count),
                                   rng.randrange(256), count, rng.randrange(1 << 32), rng.randrange(12, 4097))
                      + rng.randbytes(rng.randrange(0, 300)))
    garbage = [bytes([0x05]) + rng.randbytes(rng.randrange(0, 4000)) for _ in range(300)]
    inject = CFS / cable.name / "end0_inject"
    start = time.monotonic()
    for f in frames + garbage:
        inject.write_bytes(bytes([0, 1, 2, 0]) + f)
    elapsed = time.monotonic() - start
    taken = hw(dev, "calibration_frames_rx") - rx0
    assert taken >= len(frames), (taken, len(frames))
    answered = hw(dev, "calibration_frames_tx") - tx0
    assert 6 <= answered <= 6 * (int(elapsed / 0.1) + 2), (answered, elapsed)  # the whole round: one
    _, after = selftest(dev)
    assert after["rail"] == before["rail"] and after["split"] == before["split"], (before, after)
    pingpong_64k(pair)
