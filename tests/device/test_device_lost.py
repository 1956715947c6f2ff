"""rdma_rxe's module exit unregisters every device of its driver id (ib_unregister_driver()),
and ours share that id, so that rdma-core's stock rxe provider drives them (docs/rxe-abi.md,
1.3, R2). For the processes using our devices that is an unplug: their contexts fail. The link
stays up, and the module registers a new device under the same name a little later
(TBV_DEV_LOST_RETRY_MS in kernel/tbv_link.c); traffic then crosses again. The kernel-log check
(conftest) catches the WARN the core gives a driver without ops.dealloc_driver, and any use of a
device after the core freed it.
"""

from __future__ import annotations

import re
import subprocess
import time

from faultlib import integrity, integrity_running, wait_devices
from pairlib import Pair
from roce import gid_index
from vmlib import KmsgReader, run


def unregister_driver() -> None:
    """Load and unload rdma_rxe: its exit unregisters every device of rxe's driver id."""
    run(["modprobe", "rdma_rxe"])
    run(["modprobe", "-r", "rdma_rxe"])


def test_devices_another_module_unregisters_come_back(pair: Pair) -> None:
    """Under traffic, another module unregisters both ends' devices: the process using them
    fails, each device is announced lost once and registered again once, under its name, and
    data then crosses the cable intact."""
    names = (pair.cable.end0.ibdev, pair.cable.end1.ibdev)
    reader = KmsgReader()
    try:
        with integrity_running(pair, "-q", "4", "-t", "60", "-S", "43") as tool:
            time.sleep(3)
            assert tool.poll() is None, "the tool ended before the devices went"
            unregister_driver()
            # ib_unregister_driver() returned: every context of ours is disassociated
            out, _ = tool.communicate(timeout=180)
        assert tool.returncode != 0, "the tool did not notice its devices go:\n" + out
        assert wait_devices(pair) == names
        log = "\n".join(reader.read_new())
    finally:
        reader.close()
    for name in names:
        lost = re.findall(rf"{name} was unregistered by another module; registering it again in 2 s",
                          log)
        back = re.findall(rf"{name} registered again", log)
        assert (len(lost), len(back)) == (1, 1), log
    # the new devices have the netdev's addresses again; data crosses as before
    pair.gids = (gid_index(names[0], pair.ips[0]), gid_index(names[1], pair.ips[1]))
    r = integrity(pair, "-q", "2", "-t", "4", "-S", "47")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_device_lost_while_idle_keeps_no_context_alive(pair: Pair) -> None:
    """A context opened before the loss answers no more (the old device is gone, EIO), and a
    new one on the same name works: what a program that reopens the device sees."""
    script = ("import sys, time\n"
              "from pyverbs.device import Context\n"
              "from pyverbs.pyverbs_error import PyverbsRDMAError\n"
              "ctx = Context(name=sys.argv[1])\n"
              "print('open', flush=True)\n"
              "sys.stdin.readline()\n"
              "try:\n"
              "    ctx.query_device()\n"
              "    print('answered')\n"
              "except PyverbsRDMAError as err:\n"
              "    print('failed', err.error_code)\n")
    name = pair.cable.end0.ibdev
    holder = subprocess.Popen(["/usr/bin/python3", "-c", script, name], env=pair.env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        unregister_driver()
        out, _ = holder.communicate("\n", timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
    assert out.strip() == "failed 5", out  # EIO: the context was disassociated
    assert wait_devices(pair)[0] == name
    reopened = subprocess.run(["/usr/bin/python3", "-c",
                               "import sys\nfrom pyverbs.device import Context\n"
                               "print(Context(name=sys.argv[1]).query_port(1).state)", name],
                              env=pair.env, capture_output=True, text=True, timeout=60)
    assert reopened.returncode == 0 and reopened.stdout.strip() == "4", reopened  # ACTIVE
