"""Pure unit test of the kernel-log matcher; runs on the host and in the guest."""

import pytest

import kmsg

pytestmark = pytest.mark.anywhere

BAD = [
    "[   12.345678] WARNING: CPU: 1 PID: 321 at drivers/infiniband/core/device.c:1234 ib_dealloc_device+0x5/0x10 [ib_core]",
    "[   12.3] BUG: kernel NULL pointer dereference, address: 0000000000000008",
    "[   12.3] BUG: KASAN: slab-use-after-free in tbv_qp_destroy+0x42/0x90 [thunderbolt_ibverbs]",
    "[   12.3] UBSAN: array-index-out-of-bounds in /work/main/kernel/tbv_ring.c:88:9",
    "[   12.3] kernel BUG at mm/slub.c:456!",
    "[   12.3] Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] PREEMPT SMP NOPTI",
    "[   12.3] Oops: 0002 [#1] PREEMPT SMP NOPTI",
    "[   12.3] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [kworker/0:1:12]",
    "[   12.3] watchdog: Watchdog detected hard LOCKUP on cpu 1",
    "[  242.1] INFO: task rmmod:812 blocked for more than 120 seconds.",
    "[   12.3] Call Trace:",
    "[   12.3] BUG: sleeping function called from invalid context at kernel/locking/mutex.c:283",
    "[   12.3] list_add corruption. prev->next should be next (ffff8880), but was 0000000000000000.",
    "[   12.3] list_del corruption, ffff888012345678->next is LIST_POISON1 (dead000000000100)",
    "[   12.3] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
    "[   12.3] WARNING: possible recursive locking detected",
    "[   12.3] WARNING: possible circular locking dependency detected",
    "[   12.3] WARNING: inconsistent lock state",
    "[   12.3] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
    "[   12.3] Kernel panic - not syncing: Fatal exception",
    "[   12.3] DMAR: [DMA Write NO_PASID] Request device [00:0b.0] fault addr 0x7f000000 [fault reason 0x05] PTE Write access is not set",
    "[   12.3] AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000e address=0xfffc0000 flags=0x0020]",
]

GOOD = [
    "[    1.0] thunderbolt_ibverbs: loading out-of-tree module taints kernel.",
    "[    1.0] thunderbolt_ibverbs: DEBUG: ring 0 posted 16 descriptors",  # DEBUG: is not BUG:
    "[    1.0] usb4_rdma0: warning: link retrained at lower speed",  # lowercase warning
    "[    1.0] infiniband usb4_rdma0: ib_register_device done",
    "[    1.0] kasan: KernelAddressSanitizer initialized",  # debug-kernel boot banner
    "[    1.0] kmemleak: Kernel memory leak detector initialized (mem pool available: 15762)",
    "[    1.0] Bugzilla says Oopsie",  # "Oops" only as a word
    "[    1.0] IPv6: ADDRCONF(NETDEV_CHANGE): tbv0: link becomes ready",
    "",
]


@pytest.mark.parametrize("line", BAD, ids=range(len(BAD)))
def test_bad_lines_match(line: str) -> None:
    assert kmsg.is_bad(line)


@pytest.mark.parametrize("line", GOOD, ids=range(len(GOOD)))
def test_good_lines_do_not_match(line: str) -> None:
    assert not kmsg.is_bad(line)


def test_find_bad_keeps_order_and_strips_newlines() -> None:
    lines = [GOOD[0] + "\n", BAD[0] + "\n", GOOD[1] + "\n", BAD[10] + "\n"]
    assert kmsg.find_bad(lines) == [BAD[0], BAD[10]]


def test_parse_kmsg_record() -> None:
    record = "4,1234,12345678,-;WARNING: CPU: 0 PID: 1 at foo.c:1 bar\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:01.0\n"
    text = kmsg.parse_kmsg_record(record)
    assert text == "[   12.345678] WARNING: CPU: 0 PID: 1 at foo.c:1 bar"
    assert kmsg.is_bad(text)
    assert kmsg.parse_kmsg_record("garbage without header") is None


def test_cli_exit_status(tmp_path) -> None:
    clean = tmp_path / "clean.txt"
    clean.write_text("\n".join(GOOD) + "\n")
    dirty = tmp_path / "dirty.txt"
    dirty.write_text("\n".join(GOOD + BAD[:2]) + "\n")
    assert kmsg.main([str(clean)]) == 0
    assert kmsg.main([str(dirty)]) == 1


ALLOC_REPORT = [
    "[  132.852621] verbs_check: vmalloc error: size 2304, vm_struct allocation failed, mode:0xcc0(GFP_KERNEL), nodemask=(null)",
    "[  132.857550] CPU: 1 UID: 0 PID: 124 Comm: verbs_check Tainted: G           O       6.12.117-tbvdebug #1",
    "[  132.865246] Tainted: [O]=OOT_MODULE",
    "[  132.865246] Hardware name: QEMU Standard PC (Q35 + ICH9, 2009), BIOS 1.16.2-debian-1.16.2-1 04/01/2014",
    "[  132.865581] Call Trace:",
    "[  132.865600]  <TASK>",
]


def test_allocation_failure_reports_are_excused_only_when_asked() -> None:
    assert kmsg.find_bad(ALLOC_REPORT) == [ALLOC_REPORT[4]]
    assert kmsg.find_bad(ALLOC_REPORT, excuse_alloc_failures=True) == []
    # a stack dump of anything else, or a real warning, still counts
    later = ["[  140.0] x"] * 10 + ["[  141.0] Call Trace:", "[  141.1] WARNING: CPU: 0 PID: 1 at x"]
    assert kmsg.find_bad(ALLOC_REPORT + later, excuse_alloc_failures=True) == later[-2:]
