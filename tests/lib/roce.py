"""RoCE v2 GID lookup, shared by the single-VM tests and the guests of the two-VM suite.

No test-framework imports: a guest runs it as a script, `python3 roce.py IBDEV IP`, which
prints the GID index.
"""

from __future__ import annotations

import ipaddress
import sys
import time
from pathlib import Path


def gid_index(ibdev: str, ip: str) -> int:
    """Index of the RoCE v2 GID of an IPv4 (as ::ffff:a.b.c.d) or IPv6 address on port 1."""
    port = Path("/sys/class/infiniband", ibdev, "ports/1")
    addr = ipaddress.ip_address(ip)
    if addr.version == 4:
        addr = ipaddress.IPv6Address("::ffff:" + ip)
    want = addr.exploded
    for _ in range(100):  # GIDs appear shortly after the address
        for gid in sorted((port / "gids").iterdir(), key=lambda p: int(p.name)):
            try:
                value = gid.read_text().strip()
                kind = (port / "gid_attrs/types" / gid.name).read_text().strip()
            except OSError:
                continue
            if value == want and kind == "RoCE v2":
                return int(gid.name)
        time.sleep(0.1)
    raise AssertionError(f"no RoCE v2 GID for {ip} on {ibdev}")


if __name__ == "__main__":
    try:
        print(gid_index(sys.argv[1], sys.argv[2]))
    except AssertionError as e:
        sys.exit(str(e))
