"""The virtual cable's fault injection and the integrity tool under it, shared by the fault tests."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pairlib import TOOLS, Pair, hw

CFS = Path("/sys/kernel/config/tbverbs/vcable")
# 5% loss, 2% duplication, 2% reordering and 1% damaged frames
LOSSY = "drop_ppm=50000 dup_ppm=20000 reorder_ppm=20000 corrupt_ppm=10000"


def set_faults(pair: Pair, spec: str, ends: tuple[int, ...] = (0, 1)) -> None:
    if spec != "clear":
        pair.resolve_neighbours()  # while the link is clean
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


def integrity_intact_under(pair: Pair, faults: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The integrity tool under @faults on both ends (cleared after): it ends well and every
    byte it moved was checked and right."""
    set_faults(pair, faults)
    try:
        r = integrity(pair, *args)
    finally:
        set_faults(pair, "clear")
    assert r.returncode == 0 and " 0 mismatches, 0 errors" in r.stdout, r.stdout + r.stderr
    return r


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
        if (CFS / pair.cable.name).is_dir():  # a test may have removed the cable
            set_faults(pair, "clear")
        if tool.poll() is None:
            tool.kill()
            tool.communicate()


def wait_devices(pair: Pair, timeout: float = 60) -> tuple[str, str]:
    """The names of both ends' devices, once both have one (the cable's end<i>_ibdev)."""
    cfs = CFS / pair.cable.name
    deadline = time.monotonic() + timeout
    while True:
        names = tuple((cfs / f"end{i}_ibdev").read_text().strip() for i in (0, 1))
        if all(names):
            return names  # type: ignore[return-value]
        assert time.monotonic() < deadline, f"devices not back: {names}"
        time.sleep(0.2)


def killed_mid_transfer(pair: Pair, *args: str, counter: str | None = None) -> int:
    """The integrity tool, under LOSSY, killed (-9) a few seconds in (with @counter: once that
    counter of both ends has grown, the tool's set-up taking minutes on the sanitizer kernel):
    the process holding the verbs objects dies mid-transfer; returns how much @counter had
    grown by then. Waits until uverbs has torn its objects down."""
    def total() -> int:
        return sum(hw(end.ibdev, counter) for end in pair.cable.ends) if counter else 0

    before = total()
    set_faults(pair, LOSSY)
    with integrity_running(pair, *args) as tool:
        time.sleep(3)
        deadline = time.monotonic() + 300
        while counter and total() == before and time.monotonic() < deadline and tool.poll() is None:
            time.sleep(0.2)
        assert tool.poll() is None, "the tool ended before it could be killed"
        grown = total() - before
        tool.kill()
        tool.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(hw(e.ibdev, "objects_qp") for e in pair.cable.ends) > 2:
        time.sleep(0.2)  # uverbs tears the context down after the process is gone
    assert sum(hw(e.ibdev, "objects_qp") for e in pair.cable.ends) == 2  # the MAD agents' QP1s
    return grown
