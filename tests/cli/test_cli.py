"""Host-side unit tests of cli/tbverbs against fake configfs and sysfs trees.

The vcable commands are driven in-process with a FakeModuleConfigFs that behaves like the module's
configfs (attributes appear on mkdir, writes are validated, plugging brings the link up, a host can
vanish and boot); the read-only commands also run as a subprocess with TBVERBS_CONFIGFS /
TBVERBS_SYSFS pointing at a tree, status with a fake ibv_devinfo (or none) on TBV_RDMA_PREFIX.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clilib import load_cli, run_cli

cli = load_cli()

DEFAULTS = {"rails": "1", "lanes": "2", "lane_gbps": "20", "ring_size": "256", "irq_throttle_us": "0",
            "end1_proto_version": "0", "plugged": "0"}
VALID = {
    "rails": lambda v: 1 <= v <= 4,
    "lanes": lambda v: v in (1, 2),
    "lane_gbps": lambda v: v in (10, 20, 40),
    "ring_size": lambda v: 32 <= v <= 1024 and v & (v - 1) == 0,
    "irq_throttle_us": lambda v: 0 <= v <= 10000,
    "end1_proto_version": lambda v: 0 <= v <= 65535,
    "plugged": lambda v: v in (0, 1),
}
# endN_faults as the module has them (tbv_vcable_fault.c): key -> largest value, in the kernel's order
FAULT_MAX = {"drop_ppm": 1000000, "burst": 1000, "dup_ppm": 1000000, "reorder_ppm": 1000000,
             "corrupt_ppm": 1000000, "stall": 1, "delay_us": 1000000, "rate_mbps": 1000000, "rails": 15,
             "cut": 4096, "cut_split": 4096}
FAULT_MIN = {"rails": 1}
CLEARED = {**dict.fromkeys(FAULT_MAX, 0), "rails": 15}  # what "clear" gives
OLD_FAULT_KEYS = ("drop_ppm", "burst", "dup_ppm", "reorder_ppm", "corrupt_ppm", "stall")  # modules before delay_us
NO_FAULTS = ("drop_ppm=0 burst=0 dup_ppm=0 reorder_ppm=0 corrupt_ppm=0 stall=0 delay_us=0 rate_mbps=0 rails=15 "
             "cut=0 cut_split=0")
OLD_NO_FAULTS = "drop_ppm=0 burst=0 dup_ppm=0 reorder_ppm=0 corrupt_ppm=0 stall=0"


def fault_line(**changed: int) -> str:
    """An endN_faults line as the module shows it: CLEARED with some keys changed."""
    return " ".join(f"{k}={v}" for k, v in {**CLEARED, **changed}.items())
STAT_COUNTERS = ("tx_frames", "tx_bytes", "dropped_no_rx_buffer", "dropped_path_closed", "dropped_fault",
                 "duplicated", "reordered", "corrupted")


def kernel_faults_store(current: str, page: str) -> str:
    """tbv_vcable_faults_parse(): named keys updated, "clear" resets, EINVAL (nothing changed) otherwise.

    The keys the module knows are those it shows (an older module has no delay_us, rate_mbps, rails)."""
    f = {k: int(v) for k, v in (w.split("=") for w in current.split())}
    for tok in page.split():
        if tok == "clear":
            f = {k: CLEARED[k] for k in f}
            continue
        key, sep, val = tok.partition("=")
        try:
            v = int(val, 0)
        except ValueError:
            v = -1
        if not sep or key not in f or not FAULT_MIN.get(key, 0) <= v <= FAULT_MAX[key]:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        f[key] = v
    return " ".join(f"{k}={v}" for k, v in f.items())


class FakeModuleConfigFs(cli.ConfigFs):
    """A plain directory tree that reacts like the module's configfs.

    link_up_after: how many reads of end1_ibdev happen before the link comes up after plugging or
    booting a host (None: never). old_module: endN_faults without delay_us, rate_mbps and rails, and
    no endN_running, as modules before them.
    """

    def __init__(self, root: Path, link_up_after: int | None = 0, old_module: bool = False):
        super().__init__(str(root))
        self.cables.mkdir(parents=True, exist_ok=True)
        self.link_up_after = link_up_after
        self.old_module = old_module
        self.pending: dict[str, int] = {}
        self.writes: list[tuple[str, str, str]] = []

    def mkdir(self, name: str) -> None:
        super().mkdir(name)
        d = self.path(name)
        for attr, value in DEFAULTS.items():
            (d / attr).write_text(value + "\n")
        n = len(list(self.cables.iterdir()))
        for i in (0, 1):
            (d / f"end{i}_uuid").write_text(f"00000000-0000-4000-8000-0000000{n:02d}{i:03d}\n")
            (d / f"end{i}_ibdev").write_text("\n")
            (d / f"end{i}_netdev").write_text("\n")
            (d / f"end{i}_faults").write_text((OLD_NO_FAULTS if self.old_module else NO_FAULTS) + "\n")
            if not self.old_module:
                (d / f"end{i}_running").write_text("0\n")
        (d / "stats").write_text("".join(f"end{i}_rail0_{c} 0\n" for i in (0, 1) for c in STAT_COUNTERS))

    def rmdir(self, name: str) -> None:  # configfs removes the attribute files itself
        if not self.exists(name):
            raise cli.CliError(f"cannot remove cable {name}: No such file or directory")
        shutil.rmtree(self.path(name))

    def write_raw(self, path: Path, data: bytes) -> None:
        name, attr, value = path.parent.name, path.name, data.decode().strip()
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        if attr in ("end0_faults", "end1_faults"):  # settable at any time, plugged or not
            new = kernel_faults_store(path.read_text(), data.decode())
            self.writes.append((name, attr, value))
            path.write_text(new + "\n")
            return
        if attr in ("end0_running", "end1_running"):
            self._write_running(name, int(attr[3]), value)
            return
        if attr not in VALID or not VALID[attr](int(value)):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        if attr != "plugged" and (path.parent / "plugged").read_text().strip() == "1":
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        self.writes.append((name, attr, value))
        path.write_text(value + "\n")
        if attr == "plugged":
            if value == "1" and self.link_up_after is not None:
                self.pending[name] = self.link_up_after
            if value == "0":
                self.pending.pop(name, None)
                self._set_link(name, up=False)
            self._set_running(name, (0, 1), value)

    def _write_running(self, name: str, idx: int, value: str) -> None:
        """tbv_vcable_end_set_running(): ENOTCONN unplugged; 0 drops that end's device only, 1 logs in
        anew: the other end resets its device, both come back up."""
        if value not in ("0", "1"):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        d = self.path(name)
        if (d / "plugged").read_text().strip() != "1":
            raise OSError(errno.ENOTCONN, os.strerror(errno.ENOTCONN))
        self.writes.append((name, f"end{idx}_running", value))
        if (d / f"end{idx}_running").read_text().strip() == value:
            return
        self._set_running(name, (idx,), value)
        if value == "0":
            (d / f"end{idx}_ibdev").write_text("\n")
            (d / f"end{idx}_netdev").write_text("\n")
        else:
            for i in (0, 1):
                (d / f"end{i}_ibdev").write_text("\n")
                (d / f"end{i}_netdev").write_text("\n")
            if self.link_up_after is not None:
                self.pending[name] = self.link_up_after

    def _set_running(self, name: str, idxs: tuple[int, ...], value: str) -> None:
        for i in idxs:
            if (self.path(name) / f"end{i}_running").exists():
                (self.path(name) / f"end{i}_running").write_text(value + "\n")

    def read(self, name: str, attr: str) -> str:
        if attr == "end1_ibdev" and name in self.pending:
            if self.pending[name] == 0:
                del self.pending[name]
                self._set_link(name, up=True)
            else:
                self.pending[name] -= 1
        return super().read(name, attr)

    def _set_link(self, name: str, up: bool) -> None:
        idx = sorted(self.cables.iterdir()).index(self.path(name))
        for i in (0, 1):
            n = 2 * idx + i
            (self.path(name) / f"end{i}_ibdev").write_text(f"usb4_rdma{n}\n" if up else "\n")
            (self.path(name) / f"end{i}_netdev").write_text(f"tbv{n}\n" if up else "\n")


def parse(*argv: str):
    return cli.parser().parse_args(list(argv))


@pytest.fixture
def fake(tmp_path: Path) -> FakeModuleConfigFs:
    return FakeModuleConfigFs(tmp_path / "config")


# ---------------------------------------------------------------------------------------------
# vcable add


def test_add_defaults_prints_both_ends(fake: FakeModuleConfigFs, capsys) -> None:
    assert cli.cmd_add(fake, parse("vcable", "add")) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "vc0"
    assert "usb4_rdma0" in out and "usb4_rdma1" in out and "tbv0" in out and "tbv1" in out
    assert fake.read("vc0", "plugged") == "1"
    # only plugged is written: parameters left to the module's defaults
    assert fake.writes == [("vc0", "plugged", "1")]


def test_add_picks_first_free_name(fake: FakeModuleConfigFs, capsys) -> None:
    for name in ("vc0", "vc2"):
        fake.mkdir(name)
    cli.cmd_add(fake, parse("vcable", "add"))
    assert capsys.readouterr().out.splitlines()[0] == "vc1"


def test_add_json_and_parameters(fake: FakeModuleConfigFs, capsys) -> None:
    args = parse("vcable", "add", "--name", "a", "--rails", "2", "--lanes", "1", "--lane-speed", "40",
                 "--ring-size", "64", "--irq-throttle-us", "128", "--json")
    cli.cmd_add(fake, args)
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == "a"
    assert set(info["end0"]) == {"uuid", "ibdev", "netdev"}
    assert info["end0"]["ibdev"] == "usb4_rdma0" and info["end1"]["netdev"] == "tbv1"
    assert info["end0"]["uuid"] != info["end1"]["uuid"]
    assert fake.writes == [("a", "rails", "2"), ("a", "lanes", "1"), ("a", "lane_gbps", "40"),
                           ("a", "ring_size", "64"), ("a", "irq_throttle_us", "128"), ("a", "plugged", "1")]


def test_add_kernel_error_names_attribute_and_errno_and_removes_cable(fake: FakeModuleConfigFs) -> None:
    with pytest.raises(cli.CliError) as e:
        cli.cmd_add(fake, parse("vcable", "add", "--name", "x", "--ring-size", "100"))
    msg = str(e.value)
    assert "x/ring_size" in msg and "'100'" in msg and "EINVAL" in msg
    assert not fake.exists("x")


def test_add_existing_name_fails(fake: FakeModuleConfigFs) -> None:
    fake.mkdir("x")
    with pytest.raises(cli.CliError, match="already exists"):
        cli.cmd_add(fake, parse("vcable", "add", "--name", "x"))


def test_add_waits_for_link(tmp_path: Path, capsys) -> None:
    fake = FakeModuleConfigFs(tmp_path, link_up_after=5)
    cli.cmd_add(fake, parse("vcable", "add", "--timeout", "10"))
    assert "usb4_rdma1" in capsys.readouterr().out


def test_add_timeout_leaves_cable_for_inspection(tmp_path: Path) -> None:
    fake = FakeModuleConfigFs(tmp_path, link_up_after=None)
    with pytest.raises(cli.CliError, match="link not up after 0.2 s") as e:
        cli.cmd_add(fake, parse("vcable", "add", "--timeout", "0.2"))
    assert "tbverbs vcable del vc0" in str(e.value)
    assert fake.exists("vc0")


def test_main_reports_errors_with_exit_1(fake: FakeModuleConfigFs, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli, "ConfigFs", lambda: fake)
    assert cli.main(["vcable", "add", "--rails", "9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tbverbs: writing '9' to vc0/rails failed:") and "EINVAL" in err


# ---------------------------------------------------------------------------------------------
# del / plug / unplug


def test_del_unplugs_then_removes(fake: FakeModuleConfigFs, capsys) -> None:
    cli.cmd_add(fake, parse("vcable", "add"))
    assert cli.cmd_del(fake, parse("vcable", "del", "vc0")) == 0
    assert fake.writes[-1] == ("vc0", "plugged", "0")
    assert not fake.exists("vc0")


@pytest.mark.parametrize("cmd", ["del", "plug", "unplug", "show", "fault"])
def test_unknown_cable(fake: FakeModuleConfigFs, cmd: str) -> None:
    args = parse("vcable", cmd, "nope")
    with pytest.raises(cli.CliError, match="no such cable: nope"):
        args.func(fake, args)


def test_plug_unplug_and_busy_parameters(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c")
    cli.cmd_plug(fake, parse("vcable", "plug", "c"))
    assert "usb4_rdma0" in capsys.readouterr().out
    with pytest.raises(cli.CliError, match=r"c/rails failed: .*EBUSY"):
        fake.write("c", "rails", "2")
    cli.cmd_unplug(fake, parse("vcable", "unplug", "c"))
    assert fake.read("c", "plugged") == "0"
    assert fake.read("c", "end0_ibdev") == ""
    fake.write("c", "rails", "2")


# ---------------------------------------------------------------------------------------------
# list / show as a subprocess against a tree


def test_list_and_show_subprocess(fake: FakeModuleConfigFs, capsys) -> None:
    cli.cmd_add(fake, parse("vcable", "add"))
    fake.mkdir("vc1")
    env = {"TBVERBS_CONFIGFS": str(fake.root)}

    r = run_cli("vcable", "list", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PLUGGED", "END0", "END1"]
    assert lines[1].split() == ["vc0", "1", "usb4_rdma0", "usb4_rdma1"]
    assert lines[2].split() == ["vc1", "0", "-", "-"]

    r = run_cli("vcable", "show", "vc0", env=env)
    assert r.returncode == 0, r.stderr
    assert "  plugged: 1" in r.stdout and "  rails: 1" in r.stdout
    assert "  end1_netdev: tbv1" in r.stdout
    assert "  stats:\n    end0_rail0_tx_frames 0\n    end0_rail0_tx_bytes 0" in r.stdout
    assert f"  end0_netdev: tbv0\n  end0_running: 1\n  end0_faults: {NO_FAULTS}\n  end1_uuid:" in r.stdout
    assert f"  end1_netdev: tbv1\n  end1_running: 1\n  end1_faults: {NO_FAULTS}\n  stats:" in r.stdout


def test_list_empty(fake: FakeModuleConfigFs) -> None:
    r = run_cli("vcable", "list", env={"TBVERBS_CONFIGFS": str(fake.root)})
    assert (r.returncode, r.stdout.strip()) == (0, "no virtual cables")


def test_module_not_loaded(tmp_path: Path) -> None:
    r = run_cli("vcable", "list", env={"TBVERBS_CONFIGFS": str(tmp_path)})
    assert r.returncode == 1
    assert "tbverbs/vcable does not exist: is the tbverbs_vcable module loaded?" in r.stderr


# ---------------------------------------------------------------------------------------------
# fault


def faults(fake: FakeModuleConfigFs, name: str, end: int) -> dict[str, int]:
    return {k: int(v) for k, v in (w.split("=") for w in fake.read(name, f"end{end}_faults").split())}


@pytest.mark.parametrize("text,ppm", [
    ("5", 50000), ("5%", 50000), (" 2.5 % ", 25000), ("0.1", 1000), ("0", 0), ("100", 1000000),
    ("100%", 1000000), ("0.0001", 1), ("0.00005", 1), ("0.00004", 0), ("1e-3", 10), ("33.33333", 333333),
    ("0.29", 2900),
])
def test_percent_to_ppm(text: str, ppm: int) -> None:
    assert cli.percent_to_ppm("drop", text) == ppm


@pytest.mark.parametrize("text", ["101", "100.00001", "-1", "-0.5%", "abc", "", "%", "5%%", "nan", "inf", "0x10"])
def test_percent_to_ppm_rejects(text: str) -> None:
    with pytest.raises(cli.CliError, match=r"invalid --drop .*percentage from 0 to 100"):
        cli.percent_to_ppm("drop", text)


def test_fault_sets_both_ends_by_default(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    args = parse("vcable", "fault", "c0", "--drop", "5", "--reorder", "2", "--dup", "2%")
    assert cli.cmd_fault(fake, args) == 0
    line = "drop_ppm=50000 dup_ppm=20000 reorder_ppm=20000"
    assert fake.writes == [("c0", "end0_faults", line), ("c0", "end1_faults", line)]
    expect = {**CLEARED, "drop_ppm": 50000, "dup_ppm": 20000, "reorder_ppm": 20000}
    assert faults(fake, "c0", 0) == faults(fake, "c0", 1) == expect
    out = capsys.readouterr().out  # the faults as they are now
    assert out.splitlines() == ["c0",
                                ("  end0_faults: drop_ppm=50000 burst=0 dup_ppm=20000 reorder_ppm=20000 "
                                 "corrupt_ppm=0 stall=0 delay_us=0 rate_mbps=0 rails=15 cut=0 cut_split=0"),
                                ("  end1_faults: drop_ppm=50000 burst=0 dup_ppm=20000 reorder_ppm=20000 "
                                 "corrupt_ppm=0 stall=0 delay_us=0 rate_mbps=0 rails=15 cut=0 cut_split=0")]


def test_fault_all_options_one_write_in_kernel_order(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "0", "--stall", "--corrupt", "0.5",
                              "--burst", "3", "--reorder", "1", "--dup", "0", "--drop", "10"))
    assert fake.writes == [("c0", "end0_faults",
                            "drop_ppm=100000 burst=3 dup_ppm=0 reorder_ppm=10000 corrupt_ppm=5000 stall=1")]
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "0", "--no-stall"))
    assert fake.writes[-1] == ("c0", "end0_faults", "stall=0")
    assert faults(fake, "c0", 0)["stall"] == 0 and faults(fake, "c0", 0)["burst"] == 3


@pytest.mark.parametrize("end", ["0", "1"])
def test_fault_end_selection(fake: FakeModuleConfigFs, capsys, end: str) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", end, "--drop", "1"))
    other = 1 - int(end)
    assert fake.writes == [("c0", f"end{end}_faults", "drop_ppm=10000")]
    assert faults(fake, "c0", int(end))["drop_ppm"] == 10000
    assert fake.read("c0", f"end{other}_faults") == NO_FAULTS
    out = capsys.readouterr().out
    assert f"end{end}_faults: drop_ppm=10000" in out and f"end{other}_faults" not in out


def test_fault_options_not_given_keep_their_value(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--drop", "5", "--burst", "4"))
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--dup", "1"))
    assert fake.writes[-1] == ("c0", "end1_faults", "dup_ppm=10000")
    assert faults(fake, "c0", 1) == {**CLEARED, "drop_ppm": 50000, "burst": 4, "dup_ppm": 10000}


def test_fault_clear(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--drop", "5", "--dup", "1", "--stall"))
    fake.writes.clear()
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--clear", "--reorder", "3"))
    # clear first, in the same write
    assert fake.writes == [("c0", "end0_faults", "clear reorder_ppm=30000"),
                           ("c0", "end1_faults", "clear reorder_ppm=30000")]
    assert faults(fake, "c0", 0) == {**CLEARED, "reorder_ppm": 30000}
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--clear", "--end", "1"))
    assert fake.writes[-1] == ("c0", "end1_faults", "clear")
    assert fake.read("c0", "end1_faults") == NO_FAULTS
    assert faults(fake, "c0", 0)["reorder_ppm"] == 30000


def test_fault_without_options_prints_and_writes_nothing(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "1", "--drop", "0.5"))
    fake.writes.clear()
    capsys.readouterr()
    cli.cmd_fault(fake, parse("vcable", "fault", "c0"))
    assert fake.writes == []
    assert capsys.readouterr().out == (f"c0\n  end0_faults: {NO_FAULTS}\n"
                                       f"  end1_faults: {fault_line(drop_ppm=5000)}\n")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "1", "--json"))
    assert json.loads(capsys.readouterr().out) == {
        "name": "c0", "end1": {**CLEARED, "drop_ppm": 5000}}
    assert fake.writes == []


@pytest.mark.parametrize("argv,match", [
    (["--drop", "150"], r"invalid --drop '150': expected a percentage from 0 to 100"),
    (["--dup", "x"], r"invalid --dup 'x'"),
    (["--reorder", "-1"], r"invalid --reorder '-1'"),
    (["--corrupt", "nan"], r"invalid --corrupt 'nan'"),
    (["--burst", "1001"], r"invalid --burst '1001': expected frames lost in a row, 0 to 1000"),
    (["--burst", "2.5"], r"invalid --burst '2.5'"),
    (["--drop", "5", "--burst", "-1"], r"invalid --burst '-1'"),  # a valid option before does not get written
    (["--clear", "--dup", "200%"], r"invalid --dup '200%'"),       # nor does the clear
])
def test_fault_invalid_values_write_nothing(fake: FakeModuleConfigFs, argv: list[str], match: str) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--stall"))
    fake.writes.clear()
    with pytest.raises(cli.CliError, match=match):
        cli.cmd_fault(fake, parse("vcable", "fault", "c0", *argv))
    assert fake.writes == []
    assert faults(fake, "c0", 0)["stall"] == faults(fake, "c0", 1)["stall"] == 1


def test_fault_invalid_value_via_main_exits_1(fake: FakeModuleConfigFs, monkeypatch, capsys) -> None:
    fake.mkdir("c0")
    monkeypatch.setattr(cli, "ConfigFs", lambda: fake)
    assert cli.main(["vcable", "fault", "c0", "--drop", "101%"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("tbverbs: invalid --drop '101%': expected a percentage from 0 to 100")
    assert captured.out == "" and fake.writes == []
    assert cli.main(["vcable", "fault", "nope", "--drop", "1"]) == 1
    assert "tbverbs: no such cable: nope" in capsys.readouterr().err


def test_fault_bad_end_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as e:
        parse("vcable", "fault", "c0", "--end", "2")
    assert e.value.code == 2


def test_fault_kernel_refusal_names_attribute_and_errno(fake: FakeModuleConfigFs, monkeypatch) -> None:
    fake.mkdir("c0")
    real = fake.write_raw

    def refuse_end1(path: Path, data: bytes) -> None:
        if path.name == "end1_faults":
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        real(path, data)

    monkeypatch.setattr(fake, "write_raw", refuse_end1)
    with pytest.raises(cli.CliError) as e:
        cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--reorder", "1"))
    msg = str(e.value)
    assert "writing 'reorder_ppm=10000' to c0/end1_faults failed" in msg and "ENOMEM" in msg
    assert "end0_faults already changed" in msg
    assert faults(fake, "c0", 0)["reorder_ppm"] == 10000


def test_fault_kernel_einval(fake: FakeModuleConfigFs, monkeypatch) -> None:
    fake.mkdir("c0")  # the CLI validates first; should the kernel refuse anyway, its errno is reported
    monkeypatch.setattr(cli, "MAX_BURST", 5000)
    with pytest.raises(cli.CliError, match=r"writing 'burst=2000' to c0/end0_faults failed: .*EINVAL"):
        cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--burst", "2000"))
    assert fake.read("c0", "end0_faults") == NO_FAULTS


def test_fault_works_while_plugged(fake: FakeModuleConfigFs, capsys) -> None:
    cli.cmd_add(fake, parse("vcable", "add", "--name", "c0"))
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--drop", "1"))
    assert faults(fake, "c0", 0)["drop_ppm"] == faults(fake, "c0", 1)["drop_ppm"] == 10000


def test_fault_module_without_fault_injection(fake: FakeModuleConfigFs) -> None:
    fake.mkdir("c0")
    (fake.path("c0") / "end1_faults").unlink()
    with pytest.raises(cli.CliError, match="cable c0 has no end1_faults: the loaded module has no fault injection"):
        cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--drop", "1"))
    assert fake.writes == []
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "0"))  # end0 alone is fine


def test_show_faults_and_counters(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "0", "--drop", "5", "--burst", "2"))
    stats = fake.path("c0") / "stats"
    stats.write_text(stats.read_text().replace("end0_rail0_dropped_fault 0", "end0_rail0_dropped_fault 17"))
    capsys.readouterr()
    cli.cmd_show(fake, parse("vcable", "show", "c0"))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert f"  end0_faults: {fault_line(drop_ppm=50000, burst=2)}" in lines
    assert f"  end1_faults: {NO_FAULTS}" in lines
    # each end's running state after its other attributes, its faults last, then stats
    assert lines.index("  end1_netdev: ") + 1 == lines.index("  end1_running: 0")
    assert lines.index("  end1_running: 0") + 1 == lines.index(f"  end1_faults: {NO_FAULTS}") == lines.index("  stats:") - 1
    for counter in ("dropped_fault 17", "duplicated 0", "reordered 0", "corrupted 0"):
        assert f"    end0_rail0_{counter}" in lines
    assert "    end1_rail0_dropped_fault 0" in lines

    cli.cmd_show(fake, parse("vcable", "show", "c0", "--json"))
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == "c0" and info["plugged"] == 0 and info["rails"] == 1
    assert info["end0"]["faults"] == {**CLEARED, "drop_ppm": 50000, "burst": 2}
    assert info["end1"]["faults"] == CLEARED
    assert set(info["end0"]) == {"uuid", "ibdev", "netdev", "running", "faults"}
    assert info["end0"]["running"] == info["end1"]["running"] == 0
    assert info["stats"]["end0_rail0_dropped_fault"] == 17 and info["stats"]["end1_rail0_corrupted"] == 0


@pytest.mark.parametrize("attr,content,mode", [
    ("end0_inject", b"", 0o200),  # CONFIGFS_BIN_ATTR_WO: reading gives EACCES
    ("end1_ctl_last", bytes([0xed, 0xff, 0x00, 0x80]) * 17, 0o444),  # BIN_ATTR_RO: not text
])
def test_show_skips_write_only_and_binary_attributes(fake: FakeModuleConfigFs, capsys, attr: str,
                                                     content: bytes, mode: int) -> None:
    fake.mkdir("c0")
    path = fake.path("c0") / attr
    path.write_bytes(content)
    path.chmod(mode)
    cli.cmd_show(fake, parse("vcable", "show", "c0"))
    out = capsys.readouterr().out
    assert attr not in out and "end0_faults" in out
    cli.cmd_show(fake, parse("vcable", "show", "c0", "--json"))
    assert attr not in json.loads(capsys.readouterr().out)


def test_fault_and_show_json_subprocess(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "1", "--corrupt", "0.01"))
    env = {"TBVERBS_CONFIGFS": str(fake.root)}
    r = run_cli("vcable", "fault", "c0", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["end1"]["corrupt_ppm"] == 100
    r = run_cli("vcable", "show", "c0", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["end1"]["faults"]["corrupt_ppm"] == 100
    r = run_cli("vcable", "fault", "c0", "--drop", "abc", env=env)
    assert r.returncode == 1 and "tbverbs: invalid --drop 'abc'" in r.stderr


@pytest.mark.parametrize("text,mask", [
    ("all", 15), ("0", 1), ("0,2", 5), ("3", 8), ("1, 2", 6), (" 2,1 ", 6), ("0,0", 1), ("0,1,2,3", 15),
])
def test_rails_mask(text: str, mask: int) -> None:
    assert cli.rails_mask(text) == mask


@pytest.mark.parametrize("text", ["4", "0,4", "", "0,", ",1", "-1", "a", "0x1", "1-2", "0;2", "ALL", "all,0", "1.0"])
def test_rails_mask_rejects(text: str) -> None:
    with pytest.raises(cli.CliError, match=r"invalid --rails .*expected all or rail numbers 0 to 3 separated by commas"):
        cli.rails_mask(text)


def test_fault_delay_rate_rails_one_write_in_kernel_order(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    fake.write("c0", "rails", "4")
    fake.writes.clear()
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "1", "--rails", "2,0", "--rate-mbps", "1000",
                              "--delay-us", "200", "--drop", "1"))
    assert fake.writes == [("c0", "end1_faults", "drop_ppm=10000 delay_us=200 rate_mbps=1000 rails=5")]
    assert faults(fake, "c0", 1) == {**CLEARED, "drop_ppm": 10000, "delay_us": 200, "rate_mbps": 1000, "rails": 5}
    assert fake.read("c0", "end0_faults") == NO_FAULTS
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "c0", ("  end1_faults: drop_ppm=10000 burst=0 dup_ppm=0 reorder_ppm=0 corrupt_ppm=0 stall=0 "
               "delay_us=200 rate_mbps=1000 rails=5 cut=0 cut_split=0")]
    assert captured.err == ""  # rails 0 and 2 exist on a 4-rail cable
    # the extremes are accepted; rate 0 lifts the limit
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "1", "--delay-us", "1000000", "--rate-mbps", "0",
                              "--rails", "all"))
    assert fake.writes[-1] == ("c0", "end1_faults", "delay_us=1000000 rate_mbps=0 rails=15")
    assert faults(fake, "c0", 1) == {**CLEARED, "drop_ppm": 10000, "delay_us": 1000000}


def test_fault_clear_resets_delay_rate_and_rails(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--delay-us", "50", "--rate-mbps", "10", "--rails", "3"))
    assert faults(fake, "c0", 0) == {**CLEARED, "delay_us": 50, "rate_mbps": 10, "rails": 8}
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--clear", "--rails", "1"))
    assert fake.writes[-2:] == [("c0", "end0_faults", "clear rails=2"), ("c0", "end1_faults", "clear rails=2")]
    assert faults(fake, "c0", 1) == {**CLEARED, "rails": 2}
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--clear"))
    assert fake.read("c0", "end0_faults") == fake.read("c0", "end1_faults") == NO_FAULTS


def test_fault_rails_that_the_cable_lacks_warn(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")  # 1 rail: rail 0 only
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "0", "--rails", "1,3", "--delay-us", "5"))
    assert fake.writes == [("c0", "end0_faults", "delay_us=5 rails=10")]  # written all the same
    assert capsys.readouterr().err == ("tbverbs: warning: cable c0 has 1 rail(s) (0-0): "
                                       "the faults apply to none of them\n")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "0", "--rails", "0,3"))
    assert capsys.readouterr().err == ""


def test_fault_new_keys_in_json(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "0", "--delay-us", "300", "--rails", "0"))
    capsys.readouterr()
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--json"))
    assert json.loads(capsys.readouterr().out) == {
        "name": "c0", "end0": {**CLEARED, "delay_us": 300, "rails": 1}, "end1": CLEARED}
    cli.cmd_show(fake, parse("vcable", "show", "c0", "--json"))
    info = json.loads(capsys.readouterr().out)
    assert info["end0"]["faults"] == {**CLEARED, "delay_us": 300, "rails": 1}
    assert info["end1"]["faults"]["rails"] == 15 and info["end1"]["faults"]["rate_mbps"] == 0


@pytest.mark.parametrize("argv,match", [
    (["--delay-us", "1000001"], r"invalid --delay-us '1000001': expected microseconds, 0 to 1000000$"),
    (["--delay-us", "-5"], r"invalid --delay-us '-5'"),
    (["--delay-us", "1.5"], r"invalid --delay-us '1.5'"),
    (["--delay-us", "1ms"], r"invalid --delay-us '1ms'"),
    (["--rate-mbps", "1000001"], r"invalid --rate-mbps '1000001': expected megabit/s \(0: no limit\), 0 to 1000000$"),
    (["--rate-mbps", "fast"], r"invalid --rate-mbps 'fast'"),
    (["--rails", "4"], r"invalid --rails '4': expected all or rail numbers 0 to 3 separated by commas \(e.g. 0 or 0,2\)$"),
    (["--rails", "0,x"], r"invalid --rails '0,x'"),
    (["--rails", ""], r"invalid --rails ''"),
    (["--delay-us", "10", "--rails", "5"], r"invalid --rails '5'"),  # nothing written, delay included
    (["--clear", "--rate-mbps", "-1"], r"invalid --rate-mbps '-1'"),
])
def test_fault_invalid_new_values_write_nothing(fake: FakeModuleConfigFs, argv: list[str], match: str) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--delay-us", "7"))
    fake.writes.clear()
    with pytest.raises(cli.CliError, match=match):
        cli.cmd_fault(fake, parse("vcable", "fault", "c0", *argv))
    assert fake.writes == []
    assert faults(fake, "c0", 0) == faults(fake, "c0", 1) == {**CLEARED, "delay_us": 7}


def test_fault_new_options_on_an_older_module(tmp_path: Path, capsys) -> None:
    fake = FakeModuleConfigFs(tmp_path, old_module=True)
    fake.mkdir("c0")
    with pytest.raises(cli.CliError) as e:
        cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--drop", "1", "--delay-us", "100", "--rails", "0"))
    assert str(e.value) == ("cable c0: the loaded module has no delay_us, rails in end0_faults (it has drop_ppm "
                            "burst dup_ppm reorder_ppm corrupt_ppm stall): load a newer thunderbolt_ibverbs")
    assert fake.writes == []
    # the old keys still work, and show has no running state to show
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--drop", "1"))
    assert fake.read("c0", "end1_faults") == "drop_ppm=10000 " + OLD_NO_FAULTS.partition(" ")[2]
    capsys.readouterr()
    cli.cmd_show(fake, parse("vcable", "show", "c0", "--json"))
    info = json.loads(capsys.readouterr().out)
    assert set(info["end0"]) == {"uuid", "ibdev", "netdev", "faults"}
    assert info["end0"]["faults"] == {**dict.fromkeys(OLD_FAULT_KEYS, 0), "drop_ppm": 10000}
    cli.cmd_show(fake, parse("vcable", "show", "c0"))
    assert "running" not in capsys.readouterr().out


def test_fault_new_options_subprocess(fake: FakeModuleConfigFs) -> None:
    fake.mkdir("c0")
    env = {"TBVERBS_CONFIGFS": str(fake.root)}
    r = run_cli("vcable", "fault", "c0", "--rails", "0,9", env=env)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == ("tbverbs: invalid --rails '0,9': expected all or rail numbers 0 to 3 separated by "
                        "commas (e.g. 0 or 0,2)\n")
    r = run_cli("vcable", "fault", "c0", "--delay-us", "2000000", env=env)
    assert r.returncode == 1 and "tbverbs: invalid --delay-us '2000000': expected microseconds" in r.stderr
    assert fake.read("c0", "end0_faults") == NO_FAULTS


def test_fault_cut_options(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "1", "--cut", "256", "--cut-split", "512",
                              "--rails", "1"))
    assert faults(fake, "c0", 1) == {**CLEARED, "cut": 256, "cut_split": 512, "rails": 2}
    assert faults(fake, "c0", 0) == CLEARED
    with pytest.raises(cli.CliError, match=r"invalid --cut '4097'"):
        cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--cut", "4097"))


def test_add_with_faults_sets_them_before_plugging(fake: FakeModuleConfigFs, capsys) -> None:
    cli.cmd_add(fake, parse("vcable", "add", "--name", "c0", "--faults", "cut=256 rails=2", "--no-wait"))
    assert faults(fake, "c0", 0) == faults(fake, "c0", 1) == {**CLEARED, "cut": 256, "rails": 2}
    order = [attr for _, attr, _ in fake.writes]
    assert order.index("plugged") > max(order.index("end0_faults"), order.index("end1_faults")), order


# ---------------------------------------------------------------------------------------------
# vanish / boot: a host at one end crashes and comes back


def test_vanish_then_boot(fake: FakeModuleConfigFs, capsys) -> None:
    cli.cmd_add(fake, parse("vcable", "add", "--name", "c0"))
    capsys.readouterr()
    assert fake.read("c0", "end0_running") == fake.read("c0", "end1_running") == "1"
    assert cli.cmd_vanish(fake, parse("vcable", "vanish", "c0", "--end", "0")) == 0
    assert fake.writes[-1] == ("c0", "end0_running", "0")
    assert capsys.readouterr().out == ""
    # the host at end 0 is gone; end 1 keeps its device, the cable stays plugged
    assert fake.read("c0", "end0_ibdev") == "" and fake.read("c0", "end1_ibdev") == "usb4_rdma1"
    assert fake.read("c0", "plugged") == "1"
    cli.cmd_show(fake, parse("vcable", "show", "c0"))
    lines = capsys.readouterr().out.splitlines()
    assert "  end0_running: 0" in lines and "  end1_running: 1" in lines
    cli.cmd_show(fake, parse("vcable", "show", "c0", "--json"))
    info = json.loads(capsys.readouterr().out)
    assert (info["end0"]["running"], info["end1"]["running"]) == (0, 1)

    assert cli.cmd_boot(fake, parse("vcable", "boot", "c0", "--end", "0")) == 0
    assert fake.writes[-1] == ("c0", "end0_running", "1")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "c0"
    assert out[1].startswith("  end0: uuid ") and out[1].endswith("ibdev usb4_rdma0  netdev tbv0")
    assert out[2].endswith("ibdev usb4_rdma1  netdev tbv1")
    assert fake.read("c0", "end0_running") == "1"


def test_boot_waits_for_both_devices_json(tmp_path: Path, capsys) -> None:
    fake = FakeModuleConfigFs(tmp_path, link_up_after=4)
    cli.cmd_add(fake, parse("vcable", "add", "--name", "c0"))
    cli.cmd_vanish(fake, parse("vcable", "vanish", "c0", "--end", "1"))
    assert fake.read("c0", "end1_ibdev") == "" and fake.read("c0", "end0_ibdev") == "usb4_rdma0"
    capsys.readouterr()
    cli.cmd_boot(fake, parse("vcable", "boot", "c0", "--end", "1", "--timeout", "10", "--json"))
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == "c0"
    assert (info["end0"]["ibdev"], info["end1"]["ibdev"]) == ("usb4_rdma0", "usb4_rdma1")
    assert "c0" not in fake.pending  # it did wait for the link, not just for end 0's old device


def test_boot_timeout(fake: FakeModuleConfigFs, capsys) -> None:
    cli.cmd_add(fake, parse("vcable", "add", "--name", "c0"))
    cli.cmd_vanish(fake, parse("vcable", "vanish", "c0", "--end", "1"))
    fake.link_up_after = None  # the booted host never logs in
    with pytest.raises(cli.CliError) as e:
        cli.cmd_boot(fake, parse("vcable", "boot", "c0", "--end", "1", "--timeout", "0.2"))
    assert str(e.value).startswith("cable c0: end 1 booted, but link not up after 0.2 s "
                                   "(end0_ibdev='', end1_ibdev=''); inspect with `tbverbs vcable show c0`")
    assert fake.read("c0", "end1_running") == "1"


@pytest.mark.parametrize("cmd,value", [("vanish", "0"), ("boot", "1")])
def test_vanish_boot_on_unplugged_cable(fake: FakeModuleConfigFs, monkeypatch, capsys, cmd: str, value: str) -> None:
    fake.mkdir("c0")
    monkeypatch.setattr(cli, "ConfigFs", lambda: fake)
    assert cli.main(["vcable", cmd, "c0", "--end", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"tbverbs: writing '{value}' to c0/end1_running failed: Transport endpoint is not "
                            "connected (ENOTCONN): cable c0 is unplugged (plug it in first: tbverbs vcable plug c0)\n")
    assert fake.writes == []


def test_vanish_other_kernel_errors_pass_through(fake: FakeModuleConfigFs, monkeypatch) -> None:
    cli.cmd_add(fake, parse("vcable", "add", "--name", "c0"))

    def fail(path: Path, data: bytes) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(fake, "write_raw", fail)
    with pytest.raises(cli.CliError) as e:
        cli.cmd_vanish(fake, parse("vcable", "vanish", "c0", "--end", "0"))
    assert str(e.value) == "writing '0' to c0/end0_running failed: Input/output error (EIO)"
    assert e.value.errno == errno.EIO


@pytest.mark.parametrize("cmd", ["vanish", "boot"])
def test_vanish_boot_older_module_and_unknown_cable(tmp_path: Path, cmd: str) -> None:
    fake = FakeModuleConfigFs(tmp_path, old_module=True)
    cli.cmd_add(fake, parse("vcable", "add", "--name", "c0"))
    args = parse("vcable", cmd, "c0", "--end", "0")
    with pytest.raises(cli.CliError, match=r"^cable c0 has no end0_running: the loaded module cannot stop and boot a host$"):
        args.func(fake, args)
    args = parse("vcable", cmd, "nope", "--end", "0")
    with pytest.raises(cli.CliError, match="no such cable: nope"):
        args.func(fake, args)
    assert fake.writes == [("c0", "plugged", "1")]


@pytest.mark.parametrize("argv", [["vanish", "c0"], ["boot", "c0"], ["vanish", "c0", "--end", "both"],
                                  ["boot", "c0", "--end", "2"], ["boot", "c0", "--end", "0", "--timeout", "x"],
                                  ["flap", "c0", "--times", "two"], ["flap", "c0", "--down-ms", "x"]])
def test_vanish_boot_flap_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parse("vcable", *argv)
    assert e.value.code == 2


# ---------------------------------------------------------------------------------------------
# flap


POLL = 0.05  # wait_link_up's sleep between two looks
FLAP_LINE = r"^vc0: flap (\d+)/(\d+): link up after \d+\.\d{3} s \(usb4_rdma0, usb4_rdma1\)$"


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """time.sleep, recorded instead of slept."""
    calls: list[float] = []
    monkeypatch.setattr(cli.time, "sleep", calls.append)
    return calls


def test_flap_times_and_down_time(fake: FakeModuleConfigFs, capsys, sleeps: list[float]) -> None:
    cli.cmd_add(fake, parse("vcable", "add"))
    fake.writes.clear()
    capsys.readouterr()
    assert cli.cmd_flap(fake, parse("vcable", "flap", "vc0", "--times", "3", "--down-ms", "250")) == 0
    assert fake.writes == [("vc0", "plugged", "0"), ("vc0", "plugged", "1")] * 3
    assert [t for t in sleeps if t != POLL] == [0.25] * 3
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    for n, line in enumerate(lines, 1):
        m = re.match(FLAP_LINE, line)
        assert m and m.groups() == (str(n), "3"), line
    assert fake.read("vc0", "end0_ibdev") == "usb4_rdma0"


def test_flap_defaults_once_100ms(fake: FakeModuleConfigFs, capsys, sleeps: list[float]) -> None:
    cli.cmd_add(fake, parse("vcable", "add"))
    capsys.readouterr()
    cli.cmd_flap(fake, parse("vcable", "flap", "vc0"))
    assert [t for t in sleeps if t != POLL] == [0.1]
    [line] = capsys.readouterr().out.splitlines()
    assert re.match(FLAP_LINE, line) and "flap 1/1:" in line


def test_flap_waits_for_the_link(tmp_path: Path, capsys) -> None:
    fake = FakeModuleConfigFs(tmp_path, link_up_after=3)
    cli.cmd_add(fake, parse("vcable", "add"))
    capsys.readouterr()
    cli.cmd_flap(fake, parse("vcable", "flap", "vc0", "--times", "2", "--down-ms", "1"))
    lines = capsys.readouterr().out.splitlines()
    assert [re.match(FLAP_LINE, line).groups() for line in lines] == [("1", "2"), ("2", "2")]
    seconds = [float(re.search(r"after (\S+) s", line).group(1)) for line in lines]
    assert all(0.1 <= s < 5 for s in seconds), seconds  # 3 reads of 50 ms polling: at least 0.15 s


def test_flap_timeout(fake: FakeModuleConfigFs, capsys, sleeps: list[float]) -> None:
    cli.cmd_add(fake, parse("vcable", "add"))
    capsys.readouterr()
    fake.link_up_after = None  # the link does not come back after the first flap
    with pytest.raises(cli.CliError) as e:
        cli.cmd_flap(fake, parse("vcable", "flap", "vc0", "--times", "2", "--timeout", "0"))
    assert str(e.value).startswith("cable vc0: flap 1/2: link not up after 0 s (end0_ibdev='', end1_ibdev='')")
    assert fake.writes[-1] == ("vc0", "plugged", "1")  # left plugged in, for inspection
    assert capsys.readouterr().out == ""


def test_flap_interrupted_while_out_plugs_back_in(fake: FakeModuleConfigFs, monkeypatch, capsys) -> None:
    cli.cmd_add(fake, parse("vcable", "add"))

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.time, "sleep", interrupt)
    monkeypatch.setattr(cli, "ConfigFs", lambda: fake)
    assert cli.main(["vcable", "flap", "vc0", "--times", "5"]) == 130
    assert fake.writes[-2:] == [("vc0", "plugged", "0"), ("vc0", "plugged", "1")]
    assert fake.read("vc0", "plugged") == "1"


@pytest.mark.parametrize("argv,match", [
    (["--times", "0"], r"^invalid --times 0: expected 1 or more$"),
    (["--times", "-3"], r"^invalid --times -3: expected 1 or more$"),
    (["--down-ms", "-1"], r"^invalid --down-ms -1: expected 0 to 3600000 milliseconds$"),
    (["--down-ms", "nan"], r"^invalid --down-ms nan"),
])
def test_flap_invalid_values(fake: FakeModuleConfigFs, argv: list[str], match: str) -> None:
    cli.cmd_add(fake, parse("vcable", "add"))
    fake.writes.clear()
    with pytest.raises(cli.CliError, match=match):
        cli.cmd_flap(fake, parse("vcable", "flap", "vc0", *argv))
    assert fake.writes == []


def test_flap_unplugged_or_unknown_cable(fake: FakeModuleConfigFs) -> None:
    fake.mkdir("c0")
    with pytest.raises(cli.CliError,
                       match=r"^cable c0 is unplugged: nothing to flap \(plug it in: tbverbs vcable plug c0\)$"):
        cli.cmd_flap(fake, parse("vcable", "flap", "c0"))
    with pytest.raises(cli.CliError, match="no such cable: nope"):
        cli.cmd_flap(fake, parse("vcable", "flap", "nope"))
    assert fake.writes == []


# ---------------------------------------------------------------------------------------------
# status


# objects_X hw counters and pinned memory of a device with resources=True
OBJECTS = {"qp": 2, "cq": 1, "mr": 1, "mw": 0, "pd": 1, "ah": 0, "srq": 0}
PINNED = 4 * 1024 * 1024
MAX_PINNED = 12562779750  # 11.7 GiB


def make_ibdev(sysfs: Path, name: str, ndev: str, counters: bool = True, mtu_file: bool = True,
               resources: bool = False) -> None:
    port = sysfs / "class" / "infiniband" / name / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (port / sub).mkdir(parents=True)
    (sysfs / "class" / "net" / ndev).mkdir(parents=True)
    (sysfs / "class" / "net" / ndev / "mtu").write_text("4200\n")
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    if mtu_file:  # Linux has none; kept here to test status without ibv_devinfo
        (port / "active_mtu").write_text("4096 (5)\n")
    (port / "rate").write_text("40 Gb/sec (2X EDR)\n")
    gids = ["fe80:0000:0000:0000:0211:22ff:fe33:4455", "fe80:0000:0000:0000:0211:22ff:fe33:4455",
            "0000:0000:0000:0000:0000:ffff:c0a8:0001", "0000:0000:0000:0000:0000:0000:0000:0000"]
    types = ["IB/RoCE v1", "RoCE v2", "RoCE v2", None]
    for i, (gid, gtype) in enumerate(zip(gids, types)):
        (port / "gids" / str(i)).write_text(gid + "\n")
        if gtype:  # absent entries: reading types/ndevs fails in real sysfs, absent here
            (port / "gid_attrs" / "types" / str(i)).write_text(gtype + "\n")
            (port / "gid_attrs" / "ndevs" / str(i)).write_text(ndev + "\n")
    if counters:
        (port / "hw_counters").mkdir()
        (port / "hw_counters" / "rx_frames").write_text("12\n")
        (port / "hw_counters" / "tx_frames").write_text("34\n")
    if resources:
        for res, n in OBJECTS.items():
            (port / "hw_counters" / f"objects_{res}").write_text(f"{n}\n")
        (port / "hw_counters" / "pinned_bytes").write_text(f"{PINNED}\n")
        (port / "hw_counters" / "pinned_bytes_limit").write_text(f"{MAX_PINNED}\n")
    other = sysfs / "class" / "infiniband" / "mlx5_0"
    other.mkdir(exist_ok=True)


def no_tool_env(tmp_path: Path, sysfs: Path) -> dict[str, str]:
    """status with no ibv_devinfo: neither in TBV_RDMA_PREFIX nor on PATH (the host may have one)."""
    (tmp_path / "empty").mkdir(exist_ok=True)
    return {"TBVERBS_SYSFS": str(sysfs), "TBV_RDMA_PREFIX": str(tmp_path / "empty"), "PATH": str(tmp_path / "empty")}


def test_status_all_devices(tmp_path: Path) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "tbv0")
    make_ibdev(tmp_path, "usb4_rdma1", "tbv1", counters=False)
    r = run_cli("status", env=no_tool_env(tmp_path, tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "mlx5_0" not in out
    assert out.index("usb4_rdma0\n") < out.index("usb4_rdma1\n")
    assert "port 1: state 4: ACTIVE, phys 5: LinkUp" in out
    assert "active_mtu 4096 (5), rate 40 Gb/sec (2X EDR)" in out
    assert "netdev tbv0 (mtu 4200)" in out and "netdev tbv1 (mtu 4200)" in out
    assert "gid 1: fe80:0000:0000:0000:0211:22ff:fe33:4455  RoCE v2  tbv0" in out
    assert "gid 2: 0000:0000:0000:0000:0000:ffff:c0a8:0001  RoCE v2" in out
    assert "gid 3:" not in out  # the all-zero GID is not shown
    assert "rx_frames 12" in out and "tx_frames 34" in out
    assert out.count("hw_counters:") == 1


def test_status_one_device_and_missing(tmp_path: Path) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "tbv0")
    make_ibdev(tmp_path, "usb4_rdma1", "tbv1")
    env = no_tool_env(tmp_path, tmp_path)
    r = run_cli("status", "usb4_rdma1", env=env)
    assert r.returncode == 0 and "usb4_rdma1" in r.stdout and "usb4_rdma0" not in r.stdout
    r = run_cli("status", "usb4_rdma7", env=env)
    assert r.returncode == 1 and "no such RDMA device: usb4_rdma7" in r.stderr


def test_status_no_devices(tmp_path: Path) -> None:
    r = run_cli("status", env={"TBVERBS_SYSFS": str(tmp_path)})
    assert r.returncode == 0 and "no usb4_rdma* devices" in r.stdout


def test_status_mtu_from_ibv_devinfo(tmp_path: Path) -> None:
    make_ibdev(tmp_path / "sys", "usb4_rdma0", "tbv0", mtu_file=False)
    tool = tmp_path / "prefix" / "bin" / "ibv_devinfo"
    tool.parent.mkdir(parents=True)
    tool.write_text('#!/bin/sh\n[ "$*" = "-d usb4_rdma0 -i 1" ] || exit 1\n'
                    'printf "hca_id:\\tusb4_rdma0\\n\\tport:\\t1\\n\\t\\tactive_mtu:\\t\\t2048 (4)\\n"\n')
    tool.chmod(0o755)
    env = {"TBVERBS_SYSFS": str(tmp_path / "sys"), "TBV_RDMA_PREFIX": str(tmp_path / "prefix")}
    r = run_cli("status", env=env)
    assert r.returncode == 0, r.stderr
    assert "active_mtu 2048 (4), rate" in r.stdout
    env["TBV_RDMA_PREFIX"], env["PATH"] = str(tmp_path / "none"), str(tmp_path / "none")
    r = run_cli("status", env=env)
    assert "active_mtu ? (no ibv_devinfo), rate" in r.stdout


# `ibv_devinfo -v -d usb4_rdma0` as rdma-core prints it (abridged): decimal and hex, and keys that
# start like the ones wanted (max_qp_wr, max_qp_init_rd_atom) with other values
DEVINFO_V = """hca_id:\tusb4_rdma0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t0.0.0
\tmax_mr_size:\t\t\t0x80000000
\tpage_size_cap:\t\t\t0xfffff000
\tmax_qp:\t\t\t\t4096
\tmax_qp_wr:\t\t\t16384
\tmax_sge:\t\t\t32
\tmax_cq:\t\t\t\t0x1000
\tmax_cqe:\t\t\t65536
\tmax_mr:\t\t\t\t65536
\tmax_pd:\t\t\t\t4096
\tmax_qp_rd_atom:\t\t\t16
\tmax_ee_rd_atom:\t\t\t0
\tmax_res_rd_atom:\t\t65536
\tmax_qp_init_rd_atom:\t\t99
\tmax_mw:\t\t\t\t65536
\tmax_ah:\t\t\t\t65536
\tmax_srq:\t\t\t1024
\tmax_srq_wr:\t\t\t16384
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
"""
LIMITS = {"max_qp": 4096, "max_cq": 4096, "max_mr": 65536, "max_mw": 65536, "max_pd": 4096, "max_ah": 65536,
          "max_srq": 1024, "max_mr_size": 0x80000000, "max_qp_rd_atom": 16}


def fake_ibv_devinfo(prefix: Path) -> None:
    """An ibv_devinfo that knows usb4_rdma0 only, as rdma-core's fails for another device."""
    tool = prefix / "bin" / "ibv_devinfo"
    tool.parent.mkdir(parents=True)
    tool.write_text(f"#!{sys.executable}\n"
                    "import sys\n"
                    "if sys.argv[1:] != ['-v', '-d', 'usb4_rdma0']:\n"
                    "    sys.exit(f\"IB device '{sys.argv[-1]}' wasn't found\")\n"
                    f"sys.stdout.write({DEVINFO_V!r})\n")
    tool.chmod(0o755)


@pytest.mark.parametrize("n,text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (PINNED, "4.0 MiB"),
                                    (MAX_PINNED, "11.7 GiB"), (2**31, "2.0 GiB"), (3 * 2**40, "3.0 TiB"),
                                    (2**60, "1024.0 PiB")])
def test_human_bytes(n: int, text: str) -> None:
    assert cli.human_bytes(n) == text


@pytest.mark.parametrize("text,value", [("16", 16), ("0x10", 16), ("0X1f", 31), ("0", 0), ("abc", None),
                                        ("0x", None), ("", None), ("1.5", None)])
def test_parse_number(text: str, value: int | None) -> None:
    assert cli.parse_number(text) == value


def test_status_resources_and_limits(tmp_path: Path) -> None:
    make_ibdev(tmp_path / "sys", "usb4_rdma0", "tbv0", resources=True)
    fake_ibv_devinfo(tmp_path / "prefix")
    env = {**no_tool_env(tmp_path, tmp_path / "sys"), "TBV_RDMA_PREFIX": str(tmp_path / "prefix")}
    r = run_cli("status", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == [
        "usb4_rdma0",
        ("  resources: qp 2/4096  cq 1/4096  mr 1/65536  mw 0/65536  pd 1/4096  ah 0/65536  srq 0/1024"
         "  pinned 4.0 MiB/11.7 GiB"),
        "  limits: max_mr_size 2.0 GiB, max_qp_rd_atom 16",
    ]
    assert lines[3].startswith("  port 1: state 4: ACTIVE")
    assert "      objects_qp 2" in lines and "      pinned_bytes 4194304" in lines  # the counters as they are
    assert r.stderr == ""


def test_device_limits_parses_decimal_and_hex(tmp_path: Path, monkeypatch) -> None:
    fake_ibv_devinfo(tmp_path / "prefix")
    monkeypatch.setenv("TBV_RDMA_PREFIX", str(tmp_path / "prefix"))
    assert cli.device_limits("usb4_rdma0") == (LIMITS, None)
    limits, why = cli.device_limits("usb4_rdma5")
    assert limits == {} and why == "ibv_devinfo -v -d usb4_rdma5 failed (exit 1: IB device 'usb4_rdma5' wasn't found)"


def test_status_without_ibv_devinfo(tmp_path: Path) -> None:
    make_ibdev(tmp_path / "sys", "usb4_rdma0", "tbv0", resources=True)
    r = run_cli("status", env=no_tool_env(tmp_path, tmp_path / "sys"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == [
        "usb4_rdma0",
        "  resources: qp 2  cq 1  mr 1  mw 0  pd 1  ah 0  srq 0  pinned 4.0 MiB/11.7 GiB",
        "  limits: unknown: no ibv_devinfo (install rdma-core or set TBV_RDMA_PREFIX)",
    ]
    assert r.stderr == "" and "Traceback" not in r.stdout


def test_status_ibv_devinfo_fails_for_the_device(tmp_path: Path) -> None:
    make_ibdev(tmp_path / "sys", "usb4_rdma0", "tbv0", resources=True)
    make_ibdev(tmp_path / "sys", "usb4_rdma1", "tbv1", resources=True)
    fake_ibv_devinfo(tmp_path / "prefix")
    env = {**no_tool_env(tmp_path, tmp_path / "sys"), "TBV_RDMA_PREFIX": str(tmp_path / "prefix")}
    r = run_cli("status", env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    dev1 = out[out.index("usb4_rdma1\n"):].splitlines()
    assert dev1[1] == "  resources: qp 2  cq 1  mr 1  mw 0  pd 1  ah 0  srq 0  pinned 4.0 MiB/11.7 GiB"
    assert dev1[2] == "  limits: unknown: ibv_devinfo -v -d usb4_rdma1 failed (exit 1: IB device 'usb4_rdma1' wasn't found)"
    assert "  resources: qp 2/4096  cq 1/4096" in out  # usb4_rdma0 still gets its limits
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("exc,why", [
    (subprocess.TimeoutExpired(["ibv_devinfo"], 20), "ibv_devinfo -v -d usb4_rdma0 timed out"),
    (PermissionError(errno.EACCES, "Permission denied"), "cannot run /x/ibv_devinfo: Permission denied (EACCES)"),
])
def test_status_ibv_devinfo_cannot_run(tmp_path: Path, monkeypatch, capsys, exc: Exception, why: str) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "tbv0", resources=True)
    monkeypatch.setenv("TBVERBS_SYSFS", str(tmp_path))
    monkeypatch.setattr(cli, "ibv_devinfo", lambda: "/x/ibv_devinfo")

    def run(*args, **kwargs):
        raise exc

    monkeypatch.setattr(cli.subprocess, "run", run)
    assert cli.main(["status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "  resources: qp 2  cq 1  mr 1  mw 0  pd 1  ah 0  srq 0  pinned 4.0 MiB/11.7 GiB"
    assert lines[2] == f"  limits: unknown: {why}"


def test_status_older_module_without_resource_counters(tmp_path: Path) -> None:
    make_ibdev(tmp_path / "sys", "usb4_rdma0", "tbv0")  # hw_counters, but no objects_X, pinned_bytes
    make_ibdev(tmp_path / "sys", "usb4_rdma1", "tbv1", counters=False)
    fake_ibv_devinfo(tmp_path / "prefix")
    env = {**no_tool_env(tmp_path, tmp_path / "sys"), "TBV_RDMA_PREFIX": str(tmp_path / "prefix")}
    r = run_cli("status", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "  resources: qp ?/4096  cq ?/4096  mr ?/65536  mw ?/65536  pd ?/4096  ah ?/65536  srq ?/1024"
    dev1 = lines[lines.index("usb4_rdma1"):]
    assert dev1[1] == "  resources: ? (no object counters)"
    assert dev1[2].startswith("  limits: unknown: ibv_devinfo -v -d usb4_rdma1 failed")


def test_status_device_level_counters_and_pinned_without_limit(tmp_path: Path) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "tbv0", counters=False)
    counters = tmp_path / "class" / "infiniband" / "usb4_rdma0" / "hw_counters"  # device-level stats
    counters.mkdir()
    (counters / "objects_qp").write_text("7\n")
    (counters / "pinned_bytes").write_text("512\n")
    r = run_cli("status", env=no_tool_env(tmp_path, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "  resources: qp 7  pinned 512 B"


def test_status_pinned_limit_from_counter(tmp_path: Path) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "tbv0")
    counters = tmp_path / "class" / "infiniband" / "usb4_rdma0" / "ports" / "1" / "hw_counters"
    (counters / "pinned_bytes").write_text("1536\n")
    (counters / "pinned_bytes_limit").write_text(f"{3 * 2**30}\n")
    r = run_cli("status", env=no_tool_env(tmp_path, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "  resources: pinned 1.5 KiB/3.0 GiB"


# ---------------------------------------------------------------------------------------------
# check: link health


def usb4_link(sysfs: Path, dev: str, speed: str, lanes: int) -> None:
    """Make `dev` a USB4 link: its device is a service (0-1.1) under an XDomain (0-1) as trained."""
    xd = sysfs / "devices" / "pci0000:00" / "0000:00:09.0" / "domain0" / "0-0" / "0-1"
    (xd / "0-1.1").mkdir(parents=True)
    for d in ("rx", "tx"):
        (xd / f"{d}_speed").write_text(f"{speed}\n")
        (xd / f"{d}_lanes").write_text(f"{lanes}\n")
    (sysfs / "class" / "infiniband" / dev / "device").symlink_to(xd / "0-1.1")


@pytest.mark.parametrize("speed,lanes,ok", [("20.0 Gb/s", 2, True), ("10.0 Gb/s", 1, False),
                                            ("20.0 Gb/s", 1, False), ("40.0 Gb/s", 2, True)])
def test_check_usb4_link(tmp_path: Path, speed: str, lanes: int, ok: bool) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "usb4_net0")
    usb4_link(tmp_path, "usb4_rdma0", speed, lanes)
    r = run_cli("check", env={"TBVERBS_SYSFS": str(tmp_path)})
    gbps = speed.split(".")[0]
    assert r.returncode == (0 if ok else 1), r.stdout + r.stderr
    if ok:
        assert r.stdout == f"usb4_rdma0: OK: link {lanes} x {gbps} Gb/s ({lanes * int(gbps)} Gb/s)\n"
    else:
        assert r.stdout.startswith(f"usb4_rdma0: DEGRADED: the cable trained at {lanes} x {gbps} Gb/s")
        assert "plug it in again" in r.stdout


def test_check_down_virtual_and_missing(tmp_path: Path) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "usb4_net0")  # a virtual cable: 40 Gb/s port rate
    make_ibdev(tmp_path, "usb4_rdma1", "usb4_net1")
    (tmp_path / "class" / "infiniband" / "usb4_rdma1" / "ports" / "1" / "state").write_text("1: DOWN\n")
    env = {"TBVERBS_SYSFS": str(tmp_path)}
    r = run_cli("check", env=env)
    assert r.returncode == 1
    assert "usb4_rdma0: OK: 40 Gb/s\n" in r.stdout
    assert "usb4_rdma1: DOWN: port state 1: DOWN" in r.stdout
    assert run_cli("check", "usb4_rdma0", env=env).returncode == 0
    r = run_cli("check", "usb4_rdma9", env=env)
    assert r.returncode == 1 and "no such RDMA device: usb4_rdma9" in r.stderr
    r = run_cli("check", env={"TBVERBS_SYSFS": str(tmp_path / "none")})
    assert r.returncode == 1 and "nothing is linked" in r.stdout


# ---- top ----

class FakeClock:
    """time for cli.cmd_top: sleep() moves the clock on and lets the test change the counters."""

    def __init__(self, on_sleep) -> None:  # noqa: ANN001
        self.now, self.on_sleep, self.sleeps = 100.0, on_sleep, 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.sleeps)


def top_tree(sysfs: Path, dev: str = "usb4_rdma0", ndev: str = "usb4_net0") -> Path:
    """A device with the counters top reads, all 0."""
    make_ibdev(sysfs, dev, ndev)
    counters = sysfs / "class" / "infiniband" / dev / "ports" / "1" / "hw_counters"
    for name in (*cli.TOP_COUNTERS, *(f"rail{n}_rdma_rx_packets" for n in range(4))):
        (counters / name).write_text("0\n")
    return counters


def test_top_once_shows_rdma_and_ip_per_second(tmp_path: Path, monkeypatch, capsys) -> None:
    counters = top_tree(tmp_path)
    (counters / "objects_qp").write_text("3\n")

    def traffic(_: int) -> None:
        # 2 s: 5 GB of RDMA frames out, 0.5 GB in, 25 MB of IP out; rails 0 and 1 share the rx
        for name, value in {"rdma_tx_bytes": 5_000_000_000, "rdma_rx_bytes": 500_000_000,
                            "rdma_tx_packets": 1_200_000, "retransmits": 4, "credit_waits": 10,
                            "rail0_rdma_rx_packets": 300, "rail1_rdma_rx_packets": 100,
                            "objects_qp": 5, "net_tx_bytes": 25_000_000}.items():
            (counters / name).write_text(f"{value}\n")

    clock = FakeClock(traffic)
    monkeypatch.setattr(cli, "time", clock)
    monkeypatch.setenv("TBVERBS_SYSFS", str(tmp_path))
    assert cli.main(["top", "--once", "--interval", "2"]) == 0
    out = capsys.readouterr().out
    assert clock.sleeps == 1
    assert "RDMA  tx   20.00 Gb/s  rx    2.00 Gb/s   packets/s tx 600000 rx 0" in out, out
    assert "IP    tx    0.10 Gb/s  rx    0.00 Gb/s" in out, out
    assert "resent 2  NAKs 0  credit waits 5  frames lost 0" in out, out
    assert "RDMA rx by rail: 0 75%  1 25%  2 0%  3 0%" in out, out
    assert "in use: QPs 5  MRs 0" in out, out
    assert "\033[H" not in out  # --once: no screen control


def test_top_json_and_counters_an_older_module_lacks(tmp_path: Path, monkeypatch, capsys) -> None:
    counters = top_tree(tmp_path)
    for name in ("rdma_tx_bytes", "rdma_rx_bytes", *(f"rail{n}_rdma_rx_packets" for n in range(4))):
        (counters / name).unlink()
    monkeypatch.setattr(cli, "time", FakeClock(lambda _: (counters / "rdma_tx_packets").write_text("50\n")))
    monkeypatch.setenv("TBVERBS_SYSFS", str(tmp_path))
    assert cli.main(["top", "--once", "--json"]) == 0
    sample = json.loads(capsys.readouterr().out)
    dev = sample["devices"]["usb4_rdma0"]
    assert sample["interval_s"] == 1.0
    assert dev["rdma_tx_gbps"] is None and dev["rail_rx_share"] is None
    assert dev["rdma_tx_packets_per_s"] == 50 and dev["ip_tx_gbps"] == 0
    assert cli.main(["top", "--once"]) == 0
    assert "RDMA  tx ? Gb/s  rx ? Gb/s" in capsys.readouterr().out


def test_top_refreshes_until_interrupted_and_checks_its_input(tmp_path: Path, monkeypatch, capsys) -> None:
    top_tree(tmp_path)
    monkeypatch.setenv("TBVERBS_SYSFS", str(tmp_path))

    def stop_after_three(n: int) -> None:
        if n > 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli, "time", FakeClock(stop_after_three))
    assert cli.main(["top"]) == 130
    assert capsys.readouterr().out.count("\033[H\033[J") == 3
    assert cli.main(["top", "--once", "--interval", "0"]) == 1
    assert "--interval 0: expected 0.1 to 60 seconds" in capsys.readouterr().err
    assert cli.main(["top", "usb4_rdma9"]) == 1
    # in another network namespace the kernel shows no hw_counters
    shutil.rmtree(tmp_path / "class" / "infiniband" / "usb4_rdma0" / "ports" / "1" / "hw_counters")
    assert cli.main(["top", "--once"]) == 1
    assert "only in the initial network namespace" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "class" / "infiniband")
    assert cli.main(["top", "--once"]) == 1
    assert "no usb4_rdma* devices" in capsys.readouterr().out


# ---- selftest ----

CALIBRATION_OK = """seed=0x1234abcd rails=1 split=off
rail=0 current=yes result=pass split=n/a peer=pass received=6 stray=0
""" + "".join(f"rail=0 frame={i} sent={n} pdf=1/2 got={n} total={n} result=pass\n"
              for i, n in enumerate((12, 255, 256, 257, 4095, 4096)))
CALIBRATION_CUT = CALIBRATION_OK + """rail=1 current=no result=fail split=n/a peer=fail received=8 stray=0
rail=1 frame=0 sent=12 pdf=1/2 got=12 total=12 result=pass
rail=1 frame=3 sent=257 pdf=1/2 got=256+1 total=257 result=fail
rail=1 frame=4 sent=4095 pdf=1/2 got=missing total=0 result=fail
"""


@pytest.mark.parametrize("report,ok", [(CALIBRATION_OK, True), (CALIBRATION_CUT, False)])
def test_selftest(tmp_path: Path, report: str, ok: bool) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "usb4_net0")
    (tmp_path / "class" / "infiniband" / "usb4_rdma0" / "calibration").write_text(report)
    counters = tmp_path / "class" / "infiniband" / "usb4_rdma0" / "ports" / "1" / "hw_counters"
    (counters / "calibration_failed_rails").write_text("0\n" if ok else "1\n")
    env = {"TBVERBS_SYSFS": str(tmp_path)}
    r = run_cli("selftest", "--json", env=env)
    assert r.returncode == (0 if ok else 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is ok
    dev = doc["devices"][0]
    assert dev["device"] == "usb4_rdma0" and dev["rails"] == 1 and dev["split"] == "off"
    assert dev["counters"] == {"calibration_failed_rails": 0 if ok else 1}
    assert [f["pieces"] for f in dev["rail"][0]["frames"]] == [[12], [255], [256], [257], [4095], [4096]]
    r = run_cli("selftest", env=env)
    assert r.returncode == (0 if ok else 1)
    assert "usb4_rdma0: 1 rail(s) in use, split packets not agreed" in r.stdout
    assert "sent 4096 bytes (PDFs 1/2): came as 4096 bytes  PASS" in r.stdout
    if not ok:
        assert dev["rail"][1]["current"] == "no" and dev["rail"][1]["frames"][2]["pieces"] == []
        assert "rail 1: FAIL (left out since)" in r.stdout
        assert "sent  257 bytes (PDFs 1/2): came as 256 + 1 bytes  FAIL" in r.stdout
        assert "sent 4095 bytes (PDFs 1/2): came as nothing  FAIL" in r.stdout


def test_selftest_without_devices_or_attribute(tmp_path: Path) -> None:
    r = run_cli("selftest", env={"TBVERBS_SYSFS": str(tmp_path / "none")})
    assert r.returncode == 1 and "no link is up" in r.stdout and "self-check" in r.stdout
    make_ibdev(tmp_path, "usb4_rdma0", "usb4_net0")
    r = run_cli("selftest", env={"TBVERBS_SYSFS": str(tmp_path)})
    assert r.returncode == 1 and "usb4_rdma0 has no calibration attribute" in r.stderr
