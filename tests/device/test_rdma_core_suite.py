"""rdma-core's own test suite (tests/run_tests.py from the pyverbs sdist) against usb4_rdma0.

The whole suite runs on our device and on rdma_rxe in the same VM (on a dummy netdev); both
result lists are written side by side to build/rdma-core-suite.txt. rxe's results depend only on
the kernel and rdma-core, never on our code, so they are kept by a hash of those and the suite, and
rxe's run (as long as ours) is repeated only when one of them changes: the guest writes them to
build/rdma-core-suite-rxe/ (the cache is read-only in the guest), the Makefile copies them into
$TBV_CACHE/rdma-core-suite/ after the VM, and the next run, from any checkout, finds them there. No test may fail or error on
our device unless it fails the same way on rdma_rxe (what the kernel or rdma-core lacks, e.g. 6.1's
missing ATOMIC_WRITE; listed in the report), every test that passes on rxe must pass on ours (but for RXE_AHEAD), and every skip on our device must
have its reason explained in docs/rdma-core-suite.md (a table of the skip messages).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from rdma_core_results import SKIP_DOC, documented_skips, parse_results, skip_message, status
from vmlib import Cable, run, tbv_setting

# No module list: run_tests.py runs the whole suite (vendor modules skip on other devices).
MODULES: list[str] = []
REPO = Path(__file__).resolve().parents[2]


def report_path() -> Path:
    """build/rdma-core-suite.txt on the VM's default kernel; rdma-core-suite-<release>.txt on
    another (make test-vm-6.1 / test-vm-7.3), so the runs do not overwrite each other."""
    release = os.uname().release
    name = "rdma-core-suite.txt" if release == tbv_setting("KVER_612") else f"rdma-core-suite-{release}.txt"
    return REPO / "build" / name


# Features rxe has on newer kernels and we have not implemented: skipping their tests on our
# device is no regression (on 7.3 rxe passes the ODP tests; docs/rdma-core-suite.md).
RXE_AHEAD = ("ODP is not supported",)



def run_suite(env: dict[str, str], dev: str) -> tuple[dict[str, str], str]:
    script = Path(tbv_setting("TBV_RDMA_PREFIX")) / "share/doc/rdma-core/tests/run_tests.py"
    assert script.exists(), f"{script} missing (make setup)"
    r = subprocess.run(["/usr/bin/python3", str(script), "--dev", dev, "-v", *MODULES],
                       env=env, capture_output=True, text=True, timeout=1200, cwd="/tmp")
    results = parse_results(r.stderr)
    assert results, f"no results parsed from run_tests.py on {dev}:\n{r.stderr[-3000:]}"
    return results, r.stderr


RXE_KEPT = "rdma-core-suite"  # under TBV_CACHE, read-only in the guest
RXE_NEW = REPO / "build" / "rdma-core-suite-rxe"  # the guest's new results; make copies them


def rxe_cache_name() -> str:
    """The file name rxe's results for this kernel, rdma-core build and suite are kept under."""
    prefix = Path(tbv_setting("TBV_RDMA_PREFIX"))
    tests = prefix / "share/doc/rdma-core/tests"
    # the kernel (rdma_rxe), rdma-core's build (setup.sh's key) and the suite itself
    build_key = (prefix / ".key").read_text() if (prefix / ".key").exists() else "unkeyed"
    key = hashlib.sha256(f"{os.uname().release} {os.uname().version} {prefix} {build_key}".encode())
    for f in sorted(tests.rglob("*.py")):
        key.update(str(f.relative_to(tests)).encode() + b"\0" + f.read_bytes())
    return f"rxe-{key.hexdigest()[:16]}.json"


def rxe_results(env: dict[str, str], dev: str) -> dict[str, str]:
    """rxe's results: kept from an earlier run, else a run of the suite on it (then kept)."""
    name = rxe_cache_name()
    for kept in (Path(tbv_setting("TBV_CACHE")) / RXE_KEPT / name, RXE_NEW / name):
        if kept.exists():
            cached = json.loads(kept.read_text())
            if isinstance(cached, dict) and cached:
                return cached
    results, _ = run_suite(env, dev)
    RXE_NEW.mkdir(parents=True, exist_ok=True)
    tmp = RXE_NEW / (name + ".tmp")
    tmp.write_text(json.dumps(results, indent=0, sort_keys=True))
    tmp.rename(RXE_NEW / name)
    return results


@pytest.mark.kernels
def test_rdma_core_suite_beside_rxe(vcable: Cable, rdma_env: dict[str, str], rxe_device: str) -> None:
    for i, end in enumerate(vcable.ends, start=1):
        run(["ip", "addr", "add", f"10.66.0.{i}/24", "dev", end.netdev])
        run(["ip", "link", "set", end.netdev, "up"])
    ours, ours_log = run_suite(rdma_env, vcable.end0.ibdev)
    rxe = rxe_results(rdma_env, rxe_device)

    report = report_path()
    report.parent.mkdir(parents=True, exist_ok=True)
    names = sorted(set(ours) | set(rxe))
    width = max(map(len, names))
    lines = [f"{'test':{width}}  {'usb4_rdma0':10}  rdma_rxe", ""]
    lines += [f"{n:{width}}  {status(ours.get(n, '-')):10}  {status(rxe.get(n, '-'))}"
              for n in names]
    for label, res in (("usb4_rdma0", ours), ("rdma_rxe", rxe)):
        counts = {s: sum(status(v) == s for v in res.values()) for s in ("ok", "skipped",
                                                                         "ERROR", "FAIL")}
        lines.append(f"{label}: {counts}")
    skips: dict[str, int] = {}
    for v in ours.values():
        if status(v) == "skipped":
            skips[skip_message(v)] = skips.get(skip_message(v), 0) + 1
    lines += ["", "skip messages on usb4_rdma0 (count):"]
    lines += [f"{n:4}  {msg}" for msg, n in sorted(skips.items(), key=lambda kv: -kv[1])]
    # A test that fails the same way on rdma_rxe, on this kernel and with this rdma-core, shows
    # what they lack, not us: we speak rdma_rxe's ABI and do as it does (6.1 has no ATOMIC_WRITE:
    # rxe's provider posts it, and the kernel, rxe's or ours, completes it in error). Listed.
    failed = {n: v for n, v in ours.items() if status(v) in ("ERROR", "FAIL")}
    as_rxe = sorted(n for n, v in failed.items() if status(rxe.get(n, "-")) == status(v))
    lines += ["", "failing on usb4_rdma0 and, the same way, on rdma_rxe (not counted against us):"]
    lines += [f"  {n}: {status(failed[n])}" for n in as_rxe] or ["  none"]
    report.write_text("\n".join(lines) + "\n")

    broken = {n: v for n, v in failed.items() if n not in as_rxe}
    assert not broken, f"rdma-core tests failing on our device: {broken}\n{ours_log[-4000:]}"
    regressions = {n: ours.get(n, "missing") for n, v in rxe.items()
                   if status(v) == "ok" and status(ours.get(n, "missing")) != "ok"
                   and not skip_message(ours.get(n, "")).startswith(RXE_AHEAD)}
    assert not regressions, "pass on rxe, not on usb4_rdma0:\n" + "\n".join(
        f"{n}: {v}" for n, v in regressions.items())
    known = documented_skips()
    unexplained = sorted(m for m in skips if not any(m.startswith(k) for k in known))
    assert not unexplained, f"skips on usb4_rdma0 not explained in {SKIP_DOC.name}: {unexplained}"
    assert sum(status(v) == "ok" for v in ours.values()) >= 100
