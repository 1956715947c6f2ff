"""Host-side unit tests of cli/tbverbs against fake configfs and sysfs trees.

The vcable commands are driven in-process with a FakeModuleConfigFs that behaves like the module's
configfs (attributes appear on mkdir, writes are validated, plugging brings the link up); the
read-only commands also run as a subprocess with TBVERBS_CONFIGFS / TBVERBS_SYSFS pointing at a tree.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI_PATH = REPO / "cli" / "tbverbs"


def load_cli():
    loader = importlib.machinery.SourceFileLoader("tbverbs_cli", str(CLI_PATH))
    spec = importlib.util.spec_from_loader("tbverbs_cli", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


cli = load_cli()

DEFAULTS = {"rails": "1", "lanes": "2", "lane_gbps": "20", "ring_size": "256", "end1_proto_version": "0",
            "plugged": "0"}
VALID = {
    "rails": lambda v: 1 <= v <= 4,
    "lanes": lambda v: v in (1, 2),
    "lane_gbps": lambda v: v in (10, 20, 40),
    "ring_size": lambda v: 32 <= v <= 1024 and v & (v - 1) == 0,
    "end1_proto_version": lambda v: 0 <= v <= 65535,
    "plugged": lambda v: v in (0, 1),
}
# endN_faults as the module has them (tbv_vcable_fault.c): key -> largest value, in the kernel's order
FAULT_MAX = {"drop_ppm": 1000000, "burst": 1000, "dup_ppm": 1000000, "reorder_ppm": 1000000,
             "corrupt_ppm": 1000000, "stall": 1}
NO_FAULTS = "drop_ppm=0 burst=0 dup_ppm=0 reorder_ppm=0 corrupt_ppm=0 stall=0"
STAT_COUNTERS = ("tx_frames", "tx_bytes", "dropped_no_rx_buffer", "dropped_path_closed", "dropped_fault",
                 "duplicated", "reordered", "corrupted")


def kernel_faults_store(current: str, page: str) -> str:
    """tbv_vcable_faults_parse(): named keys updated, "clear" resets, EINVAL (nothing changed) otherwise."""
    f = {k: int(v) for k, v in (w.split("=") for w in current.split())}
    for tok in page.split():
        if tok == "clear":
            f = dict.fromkeys(FAULT_MAX, 0)
            continue
        key, sep, val = tok.partition("=")
        try:
            v = int(val, 0)
        except ValueError:
            v = -1
        if not sep or key not in FAULT_MAX or not 0 <= v <= FAULT_MAX[key]:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        f[key] = v
    return " ".join(f"{k}={f[k]}" for k in FAULT_MAX)


class FakeModuleConfigFs(cli.ConfigFs):
    """A plain directory tree that reacts like the module's configfs.

    link_up_after: how many reads of end1_ibdev happen before the link comes up after plugging
    (None: never).
    """

    def __init__(self, root: Path, link_up_after: int | None = 0):
        super().__init__(str(root))
        self.cables.mkdir(parents=True, exist_ok=True)
        self.link_up_after = link_up_after
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
            (d / f"end{i}_faults").write_text(NO_FAULTS + "\n")
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


def run_cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CLI_PATH), *argv], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


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
                 "--ring-size", "64", "--json")
    cli.cmd_add(fake, args)
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == "a"
    assert set(info["end0"]) == {"uuid", "ibdev", "netdev"}
    assert info["end0"]["ibdev"] == "usb4_rdma0" and info["end1"]["netdev"] == "tbv1"
    assert info["end0"]["uuid"] != info["end1"]["uuid"]
    assert fake.writes == [("a", "rails", "2"), ("a", "lanes", "1"), ("a", "lane_gbps", "40"),
                           ("a", "ring_size", "64"), ("a", "plugged", "1")]


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
    assert f"  end0_netdev: tbv0\n  end0_faults: {NO_FAULTS}\n  end1_uuid:" in r.stdout
    assert f"  end1_netdev: tbv1\n  end1_faults: {NO_FAULTS}\n  stats:" in r.stdout


def test_list_empty(fake: FakeModuleConfigFs) -> None:
    r = run_cli("vcable", "list", env={"TBVERBS_CONFIGFS": str(fake.root)})
    assert (r.returncode, r.stdout.strip()) == (0, "no virtual cables")


def test_module_not_loaded(tmp_path: Path) -> None:
    r = run_cli("vcable", "list", env={"TBVERBS_CONFIGFS": str(tmp_path)})
    assert r.returncode == 1
    assert "tbverbs/vcable does not exist: is the thunderbolt_ibverbs module loaded?" in r.stderr


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
    expect = {**dict.fromkeys(FAULT_MAX, 0), "drop_ppm": 50000, "dup_ppm": 20000, "reorder_ppm": 20000}
    assert faults(fake, "c0", 0) == faults(fake, "c0", 1) == expect
    out = capsys.readouterr().out  # the faults as they are now
    assert out.splitlines() == ["c0",
                                "  end0_faults: drop_ppm=50000 burst=0 dup_ppm=20000 reorder_ppm=20000 corrupt_ppm=0 stall=0",
                                "  end1_faults: drop_ppm=50000 burst=0 dup_ppm=20000 reorder_ppm=20000 corrupt_ppm=0 stall=0"]


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
    assert faults(fake, "c0", 1) == {**dict.fromkeys(FAULT_MAX, 0), "drop_ppm": 50000, "burst": 4, "dup_ppm": 10000}


def test_fault_clear(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--drop", "5", "--dup", "1", "--stall"))
    fake.writes.clear()
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--clear", "--reorder", "3"))
    # clear first, in the same write
    assert fake.writes == [("c0", "end0_faults", "clear reorder_ppm=30000"),
                           ("c0", "end1_faults", "clear reorder_ppm=30000")]
    assert faults(fake, "c0", 0) == {**dict.fromkeys(FAULT_MAX, 0), "reorder_ppm": 30000}
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
                                       "  end1_faults: drop_ppm=5000 burst=0 dup_ppm=0 reorder_ppm=0 corrupt_ppm=0 stall=0\n")
    cli.cmd_fault(fake, parse("vcable", "fault", "c0", "--end", "1", "--json"))
    assert json.loads(capsys.readouterr().out) == {
        "name": "c0", "end1": {**dict.fromkeys(FAULT_MAX, 0), "drop_ppm": 5000}}
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
    assert "  end0_faults: drop_ppm=50000 burst=2 dup_ppm=0 reorder_ppm=0 corrupt_ppm=0 stall=0" in lines
    assert f"  end1_faults: {NO_FAULTS}" in lines
    # each end's faults after its other attributes, before stats
    assert lines.index("  end1_netdev: ") + 1 == lines.index(f"  end1_faults: {NO_FAULTS}") == lines.index("  stats:") - 1
    for counter in ("dropped_fault 17", "duplicated 0", "reordered 0", "corrupted 0"):
        assert f"    end0_rail0_{counter}" in lines
    assert "    end1_rail0_dropped_fault 0" in lines

    cli.cmd_show(fake, parse("vcable", "show", "c0", "--json"))
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == "c0" and info["plugged"] == 0 and info["rails"] == 1
    assert info["end0"]["faults"] == {**dict.fromkeys(FAULT_MAX, 0), "drop_ppm": 50000, "burst": 2}
    assert info["end1"]["faults"] == dict.fromkeys(FAULT_MAX, 0)
    assert set(info["end0"]) == {"uuid", "ibdev", "netdev", "faults"}
    assert info["stats"]["end0_rail0_dropped_fault"] == 17 and info["stats"]["end1_rail0_corrupted"] == 0


def test_show_skips_write_only_attributes(fake: FakeModuleConfigFs, capsys) -> None:
    fake.mkdir("c0")
    inject = fake.path("c0") / "end0_inject"  # configfs: CONFIGFS_BIN_ATTR_WO, reading gives EACCES
    inject.write_bytes(b"")
    inject.chmod(0o200)
    cli.cmd_show(fake, parse("vcable", "show", "c0"))
    out = capsys.readouterr().out
    assert "inject" not in out and "end0_faults" in out
    cli.cmd_show(fake, parse("vcable", "show", "c0", "--json"))
    assert "end0_inject" not in json.loads(capsys.readouterr().out)


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


# ---------------------------------------------------------------------------------------------
# status


def make_ibdev(sysfs: Path, name: str, ndev: str, counters: bool = True, mtu_file: bool = True) -> None:
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
    other = sysfs / "class" / "infiniband" / "mlx5_0"
    other.mkdir(exist_ok=True)


def test_status_all_devices(tmp_path: Path) -> None:
    make_ibdev(tmp_path, "usb4_rdma0", "tbv0")
    make_ibdev(tmp_path, "usb4_rdma1", "tbv1", counters=False)
    r = run_cli("status", env={"TBVERBS_SYSFS": str(tmp_path)})
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
    env = {"TBVERBS_SYSFS": str(tmp_path)}
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
