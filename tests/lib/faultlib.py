"""The virtual cable's fault injection and the integrity tool under it, shared by the fault tests."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pairlib import TOOLS, Pair

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
