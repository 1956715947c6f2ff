"""vm.py's options for a second QEMU and for VMs run side by side, and the pair's VM options.

Host-only, no VM: what vng is asked to do (its command line), not whether it does it.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

import vm
from pair import Pair

SETTINGS = {"TBV_VENV": "/nonexistent/venv", "TBV_CACHE": "/nonexistent/cache", "KVER_612": "6.12.95+deb12-amd64"}


def test_vng_command_passes_qemu_name_and_each_qemu_option(tmp_path: Path) -> None:
    opts = vm.VmOptions(kernel="/boot/vmlinuz", qemu="/opt/q/qemu-system-x86_64", name="tbv-a",
                        qemu_opts=["-device", "usb4-nhi,id=nhi0"], log_dir=tmp_path)
    cmd = vm.vng_command(opts, SETTINGS, tmp_path / "run.sh")
    assert cmd[cmd.index("--qemu") + 1] == "/opt/q/qemu-system-x86_64"
    assert cmd[cmd.index("--name") + 1] == "tbv-a"
    assert [c for c in cmd if c.startswith("--qemu-opts")] == [
        "--qemu-opts=-accel", "--qemu-opts=tcg,thread=single", "--qemu-opts=-device", "--qemu-opts=usb4-nhi,id=nhi0"]
    assert cmd[-2] == "--exec"
    plain = vm.vng_command(vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path), SETTINGS, tmp_path / "run.sh")
    assert not any(c.startswith(("--qemu ", "--name")) or c == "--qemu" for c in plain), "the single-VM command changed"
    # every guest runs its vCPUs on one TCG thread (live-patched kernel text raced across threads)
    assert [c for c in plain if c.startswith("--qemu-opts")] == ["--qemu-opts=-accel", "--qemu-opts=tcg,thread=single"]


def test_every_guest_boots_without_legacy_ptys_and_with_the_caller_s_parameters_after(tmp_path: Path) -> None:
    cmd = vm.vng_command(vm.VmOptions(kernel="/boot/vmlinuz", append=["kasan_multi_shot"], log_dir=tmp_path),
                         SETTINGS, tmp_path / "run.sh")
    params = [cmd[i + 1] for i, c in enumerate(cmd) if c == "--append"]
    assert params == ["tsc=reliable", "pty.legacy_count=0", "kasan_multi_shot"], params


def test_vng_command_boots_another_root_read_write_without_the_host_caches(tmp_path: Path) -> None:
    settings = {**SETTINGS, "TBV_CACHE": str(tmp_path)}  # a cache that exists: the host's VM mounts it
    host = vm.vng_command(vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path), settings, tmp_path / "run.sh")
    assert "--root" not in host and "--rw" not in host
    assert host[host.index("--rodir") + 1] == str(tmp_path)
    opts = vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path, root="/srv/debian-root")
    cmd = vm.vng_command(opts, settings, tmp_path / "run.sh")
    assert cmd[cmd.index("--root") + 1] == "/srv/debian-root" and "--rw" in cmd
    assert "--rodir" not in cmd
    # virtme takes a plain --rwdir or --cwd as a path inside the root
    assert f"--rwdir={vm.REPO}={vm.REPO}" in cmd and "--cwd" not in cmd and "--rwdir" not in cmd
    assert host[host.index("--rwdir") + 1] == str(vm.REPO) and host[host.index("--cwd") + 1] == str(vm.REPO)
    problems = "\n".join(vm.preflight(vm.VmOptions(kernel=str(tmp_path), root=str(tmp_path)), SETTINGS))
    assert "has no /bin/sh" in problems
    problems = "\n".join(vm.preflight(vm.VmOptions(kernel=str(tmp_path), root="/a b"), SETTINGS))
    assert "'/a b' is not a plain word" in problems


def test_log_names_carry_the_tag(tmp_path: Path) -> None:
    a = vm.log_paths(vm.VmOptions(kernel="k", log_dir=tmp_path, tag="a"))
    b = vm.log_paths(vm.VmOptions(kernel="k", log_dir=tmp_path, tag="b"))
    assert a.console.name.endswith("-a-console.txt") and b.dmesg.name.endswith("-b-dmesg.txt")
    assert len({a.console, a.dmesg, a.script, a.output, b.console, b.dmesg, b.script, b.output}) == 8
    plain = vm.log_paths(vm.VmOptions(kernel="k", log_dir=tmp_path))
    assert re.fullmatch(r"\d{8}-\d{6}-\d+-console\.txt", plain.console.name)


def test_preflight_checks_the_qemu_binary_and_plain_words(tmp_path: Path) -> None:
    opts = vm.VmOptions(kernel=str(tmp_path), qemu=str(tmp_path / "missing-qemu"),
                        qemu_opts=["-device", "usb4-nhi,uid=1 2"], name="a;b")
    problems = "\n".join(vm.preflight(opts, SETTINGS))
    assert "missing-qemu is missing or not executable" in problems
    assert "'usb4-nhi,uid=1 2' is not a plain word" in problems
    assert "'a;b' is not a plain word" in problems


def test_emulator_qemu_is_tbv_qemu_else_the_cached_build() -> None:
    assert vm.emulator_qemu({**SETTINGS, "TBV_QEMU": "/x/qemu"}) == "/x/qemu"
    assert vm.emulator_qemu(SETTINGS) == "/nonexistent/cache/qemu-usb4/current/qemu-system-x86_64"


def test_pump_output_to_a_file_or_a_function(tmp_path: Path) -> None:
    for sink_kind in ("file", "function"):
        r, w = os.pipe()
        got: list[bytes] = []
        sink = tmp_path / "out.txt" if sink_kind == "file" else got.append
        with open(r, "rb") as src:
            t = threading.Thread(target=vm.pump_output, args=(src, sink))
            t.start()
            os.write(w, b"hello ")
            os.write(w, b"world\n")
            os.close(w)
            t.join(timeout=5)
        data = (tmp_path / "out.txt").read_bytes() if sink_kind == "file" else b"".join(got)
        assert data == b"hello world\n"


def test_pair_vm_options_are_vng_safe_and_distinct() -> None:
    pair = Pair(qemu="/opt/q/qemu-system-x86_64", kernel="/boot/vmlinuz", settings=SETTINGS)
    d = Path("/tmp/tbv2-abcd1234")
    a, b = pair.options("a", 0, d), pair.options("b", 1, d)
    assert (a.name, a.tag, b.name, b.tag) == ("tbv-a", "a", "tbv-b", "b")
    assert (a.cpus, a.memory) == (1, "2G")
    assert "modprobe.blacklist=thunderbolt,thunderbolt_net" in a.append
    for opts, end in ((a, 0), (b, 1)):
        assert all(vm.SHELL_SAFE_RE.fullmatch(o) for o in opts.qemu_opts), opts.qemu_opts
        joined = " ".join(opts.qemu_opts)
        assert f"path={d}/cable{end}.sock,reconnect=1" in joined
        assert f"path={d}/{opts.tag}-agent.sock,server=on,wait=off" in joined
        assert f"-qmp unix:{d}/{opts.tag}-qmp.sock,server=on,wait=off" in joined
        assert "virtserialport,bus=tbvser.0,name=tbv.agent,chardev=agent" in joined
    uid = re.compile(r"uid=(0x[0-9a-f]+)")
    assert uid.search(" ".join(a.qemu_opts)).group(1) != uid.search(" ".join(b.qemu_opts)).group(1)  # type: ignore[union-attr]


def test_icount_counts_instructions_on_the_single_tcg_thread_and_tells_the_guest(tmp_path: Path) -> None:
    opts = vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path, cpus=1, icount=2)
    cmd = vm.vng_command(opts, SETTINGS, tmp_path / "run.sh")
    assert [c for c in cmd if c.startswith("--qemu-opts")] == [
        "--qemu-opts=-accel", "--qemu-opts=tcg,thread=single", "--qemu-opts=-icount", "--qemu-opts=shift=2"]
    assert cmd[cmd.index("--cpus") + 1] == "1"
    assert "TBV_ICOUNT_SHIFT=2" in vm.guest_script(["true"], opts, SETTINGS, tmp_path / "dmesg.txt")
    plain = vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path)
    assert not any("icount" in c for c in vm.vng_command(plain, SETTINGS, tmp_path / "run.sh") if "qemu" in c)
    assert "TBV_ICOUNT_SHIFT" not in vm.guest_script(["true"], plain, SETTINGS, tmp_path / "dmesg.txt")


def test_a_guest_timeout_lists_the_blocked_tasks_on_stdout(tmp_path: Path) -> None:
    """CI keeps only a run's output, not the guest's dmesg: a hang must explain itself there."""
    script = vm.guest_script(["true"], vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path), SETTINGS,
                             tmp_path / "dmesg.txt")
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    listing = script[script.index('echo "vm: tasks in D state'):script.index("    rc=124")]
    # the same walk over /proc, matching sleeping tasks instead: one of ours is found by its command line
    sleeper = subprocess.Popen(["sleep", "321"])
    try:
        time.sleep(0.2)
        out = subprocess.run(["bash", "-c", listing.replace("'^State:.*D'", "'^State:.*S'")],
                             capture_output=True, text=True, timeout=60).stdout
    finally:
        sleeper.kill()
        sleeper.wait()
    assert f"-- {sleeper.pid} sleep 321 " in out, out


def test_the_run_deadline_shortens_the_limit_only_when_it_comes_first() -> None:
    assert vm.run_deadline(1800.0, None) == 1800.0
    assert vm.run_deadline(1800.0, "") == 1800.0
    # 1000 s to the deadline: the run ends DEADLINE_MARGIN_S before it
    assert vm.run_deadline(1800.0, "11000", now=10000.0) == 1000 - vm.DEADLINE_MARGIN_S
    assert vm.run_deadline(600.0, "11000", now=10000.0) == 600.0
    # past it: still long enough to boot and report, not a negative limit
    assert vm.run_deadline(1800.0, "9000", now=10000.0) == vm.MIN_RUN_S


def test_a_command_run_on_the_console_still_reaches_the_output(tmp_path: Path) -> None:
    """virtme-ng-init falls back to the console when udev has not made the virtio-serial links:
    from its fallback line on, the console is the command's output too."""
    console = (b"[ 1.0] virtme-ng-init: udev is done\n"
               b"[ 1.1] virtme-ng-init: starting script (console fallback)\n"
               b"tests/x.py::test_y PASSED\n"
               b"[ 9.0] tbverbs-vm: command exited 0\n")
    r, w = os.pipe()
    got: list[bytes] = []
    log = tmp_path / "console.txt"
    exited: list[int] = []
    with open(r, "rb") as src, open(log, "wb") as dst:
        t = threading.Thread(target=vm.pump_console, args=(src, dst, False, [], got.append, exited))
        t.start()
        os.write(w, console.replace(b"exited 0", b"exited 3"))
        os.close(w)
        t.join(timeout=5)
    # vng returns 255 for a command run on the console: its status is this line's
    assert exited == [3]
    console = console.replace(b"exited 0", b"exited 3")
    assert log.read_bytes() == console
    out = b"".join(got)
    assert out.startswith(b"vm: the guest runs the command on its console"), out
    assert out.endswith(b"tests/x.py::test_y PASSED\n[ 9.0] tbverbs-vm: command exited 3\n"), out
    assert b"udev is done" not in out
    # and a guest that had its ports: nothing from the console
    r, w = os.pipe()
    got.clear()
    with open(r, "rb") as src, open(log, "wb") as dst:
        t = threading.Thread(target=vm.pump_console, args=(src, dst, False, [], got.append))
        t.start()
        os.write(w, b"[ 1.1] virtme-ng-init: starting script\nkernel line\n")
        os.close(w)
        t.join(timeout=5)
    assert got == []


def test_the_guest_drops_a_pth_importing_certifi_only_on_the_host_s_overlaid_root(tmp_path: Path) -> None:
    """On the host's root (an overlay in the guest) the guest removes a site-packages .pth that
    imports certifi at every Python start; on another root (read-write, the real files) never."""
    host_root = vm.guest_script(["true"], vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path), SETTINGS,
                                tmp_path / "dmesg.txt")
    other_root = vm.guest_script(["true"], vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path,
                                                        root=str(tmp_path)), SETTINGS, tmp_path / "dmesg.txt")
    assert vm.PTH_IMPORTING_CERTIFI in host_root
    assert "import certifi" in vm.PTH_IMPORTING_CERTIFI and "rm -f" in vm.PTH_IMPORTING_CERTIFI
    assert "import certifi" not in other_root
    # and it runs before the command does
    assert host_root.index(vm.PTH_IMPORTING_CERTIFI) < host_root.index("timeout -k 10")


def test_stop_udev_stops_it_after_the_boot_and_before_the_command(tmp_path: Path) -> None:
    kept = vm.guest_script(["true"], vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path), SETTINGS,
                           tmp_path / "dmesg.txt")
    stopped = vm.guest_script(["true"], vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path, stop_udev=True),
                              SETTINGS, tmp_path / "dmesg.txt")
    assert "udevadm control --exit" not in kept
    assert stopped.index("udev_cpu_at_start=") < stopped.index("udevadm control --exit") \
        < stopped.index("timeout -k 10")


def test_no_udev_runs_vng_where_udevd_is_hidden_and_the_guest_says_so(tmp_path: Path) -> None:
    opts = vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path, udev=False)
    cmd = vm.vng_command(opts, SETTINGS, tmp_path / "run.sh")
    plain = vm.vng_command(vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path), SETTINGS, tmp_path / "run.sh")
    assert cmd[:cmd.index("-c") + 1] == ["unshare", "--mount", "--propagation", "private", "bash", "-c"]
    assert cmd[cmd.index("-c") + 1] == vm.HIDE_UDEVD and cmd[-len(plain):] == plain
    assert plain[0].endswith("/vng")
    script = vm.guest_script(["true"], opts, SETTINGS, tmp_path / "dmesg.txt")
    assert "booted without udev" in script and "renice" not in script
    # udev runs only where it could not be hidden: then it is stopped before the command
    assert script.index("pgrep -x systemd-udevd") < script.index("udevadm control --exit") < script.index("timeout -k 10")
    assert "--no-udev hides the host's udevd: not with --root" in vm.preflight(
        vm.VmOptions(kernel="/boot/vmlinuz", root=str(tmp_path), udev=False), SETTINGS)
    pair = Pair(qemu="/opt/q/qemu-system-x86_64", kernel="/boot/vmlinuz", settings=SETTINGS, udev=False)
    assert not pair.options("a", 0, Path("/tmp/tbv2-x")).udev
    assert Pair(qemu="/opt/q/qemu-system-x86_64", kernel="/boot/vmlinuz", settings=SETTINGS).options(
        "a", 0, Path("/tmp/tbv2-x")).udev


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root")
def test_hide_udevd_hides_udevd_alone_and_only_from_what_it_runs(tmp_path: Path) -> None:
    """What vng (and the QEMU serving the guest's root) would see: no systemd-udevd under either
    name, udevadm still there; the host's own view unchanged, and no mount or temp dir left."""
    udevd = [d for d in ("/usr/lib/systemd/systemd-udevd", "/lib/systemd/systemd-udevd") if os.path.lexists(d)]
    if not udevd:
        pytest.skip("this host has no systemd-udevd to hide")
    probe = ("for d in /usr/lib/systemd/systemd-udevd /lib/systemd/systemd-udevd; do [ -e $d ] && echo seen $d; done; "
             "command -v udevadm; ls /usr/lib/systemd | wc -l")
    r = subprocess.run(vm.without_udev(["bash", "-c", probe]), capture_output=True, text=True,
                       env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert not [ln for ln in lines if ln.startswith("seen")], r.stdout
    assert lines[0].endswith("udevadm"), r.stdout
    assert int(lines[1]) == len(list(Path("/usr/lib/systemd").iterdir())) - 1, r.stdout
    assert all(os.path.lexists(d) for d in udevd), "hidden from the host too"
    assert "tbv-no-udevd" not in Path("/proc/self/mounts").read_text()
    assert not list(tmp_path.iterdir()), "the whiteout's directory was left behind"
    # where the overlay cannot be mounted, the guest boots with udev (and stops it), never not at all
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "mount").write_text('#!/bin/sh\ncase "$*" in *overlay*) exit 32;; esac\nexec /bin/mount "$@"\n')
    (fake / "mount").chmod(0o755)
    r = subprocess.run(vm.without_udev(["bash", "-c", probe]), capture_output=True, text=True,
                       env=dict(os.environ, TMPDIR=str(tmp_path), PATH=f"{fake}:{os.environ['PATH']}"))
    assert r.returncode == 0 and "seen" in r.stdout, r.stdout + r.stderr
    assert "could not hide udevd from the guest" in r.stderr, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["bin"], "the whiteout's directory was left behind"


@pytest.mark.parametrize("stop_udev", [False, True])
@pytest.mark.parametrize("root", [False, True])
@pytest.mark.parametrize("icount", [None, 0])
@pytest.mark.parametrize("udev", [True, False])
def test_every_guest_script_is_valid_bash(tmp_path: Path, stop_udev: bool, root: bool, icount: int | None,
                                          udev: bool) -> None:
    """The guest runs the script with bash: a quoting slip in one option's lines must fail here,
    not as a whole suite's VM exiting with status 2 (stop 37, --stop-udev's first run)."""
    opts = vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path, stop_udev=stop_udev,
                        root=str(tmp_path) if root else None, icount=icount, udev=udev)
    script = tmp_path / "run.sh"
    script.write_text(vm.guest_script(["pytest", "-k", "a and 'b'"], opts, SETTINGS, tmp_path / "dmesg.txt"))
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_command_run_on_the_console_exits_with_its_own_status(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """vng returns 255 when the command ran on the console (no port for its status): run_vm
    takes the status the guest logged at its end, and only from a guest that finished."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    vng = venv / "bin" / "vng"
    # a stand-in for vng: the guest script's dmesg file written (a finished guest), the console
    # of a command run on it, and vng's own 255
    vng.write_text("#!/bin/bash\n"
                   'script=${@: -1}; script=${script#bash }\n'
                   'dmesg=$(sed -n "s/^dmesg >//p" "$script" | tr -d "\\047")\n'
                   '[ "$TBV_FAKE_FINISH" = 1 ] && : >"$dmesg"\n'
                   'echo "[ 1.1] virtme-ng-init: starting script (console fallback)" >&2\n'
                   'echo "[ 9.0] tbverbs-vm: command exited 0" >&2\n'
                   "exit 255\n")
    vng.chmod(0o755)
    settings = {**SETTINGS, "TBV_VENV": str(venv)}
    runs = {}
    for finish in ("1", "0"):
        monkeypatch.setenv("TBV_FAKE_FINISH", finish)
        opts = vm.VmOptions(kernel="/boot/vmlinuz", log_dir=tmp_path / f"logs{finish}", timeout=60)
        runs[finish] = vm.run_vm(["true"], opts, settings, output=tmp_path / f"out{finish}.txt")
    finished, died = runs["1"], runs["0"]
    assert (finished.finished, finished.returncode) == (True, 0)
    assert (died.finished, died.returncode) == (False, vm.EXIT_GUEST_DIED)


@pytest.mark.parametrize("profile", ["", "lenient", "intel", "amd", "strix"])
def test_the_nhi_profile_goes_on_every_usb4_nhi_device(profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """make test-vm2 NHI_PROFILE=x -> TBV_NHI_PROFILE=x -> profile=x on each usb4-nhi of both VMs
    (empty: the strictest, strix); an unknown profile stops the pair at once."""
    monkeypatch.setenv("TBV_NHI_PROFILE", profile)
    pair = Pair(qemu="/opt/q/qemu-system-x86_64", kernel="/boot/vmlinuz", settings=SETTINGS, cables=2)
    d = Path("/tmp/tbv2-abcd1234")
    for tag, end in (("a", 0), ("b", 1)):
        opts = pair.options(tag, end, d).qemu_opts
        devices = [opts[i + 1] for i, o in enumerate(opts) if o == "-device" and opts[i + 1].startswith("usb4-nhi,")]
        assert len(devices) == 2, opts
        for dev in devices:
            assert re.findall(r"profile=(\w+)", dev) == [profile or "strix"], dev
            assert all(vm.SHELL_SAFE_RE.fullmatch(o) for o in opts), opts
    monkeypatch.setenv("TBV_NHI_PROFILE", "strict")
    with pytest.raises(ValueError, match="'strict': not one of lenient, intel, amd, strix"):
        Pair(qemu="/opt/q/qemu-system-x86_64", kernel="/boot/vmlinuz", settings=SETTINGS)
    monkeypatch.setenv("TBV_NHI_PROFILE", "amd,rx-queue=1;reboot")
    with pytest.raises(ValueError, match="'rx-queue=1;reboot' is not a setting=value"):
        Pair(qemu="/opt/q/qemu-system-x86_64", kernel="/boot/vmlinuz", settings=SETTINGS)
    monkeypatch.delenv("TBV_NHI_PROFILE")
    assert Pair(qemu="/q", kernel="/k", settings=SETTINGS).nhi_profile == "strix"
    assert Pair(qemu="/q", kernel="/k", settings=SETTINGS, nhi_profile="amd").nhi_profile == "amd"
    # settings that override the profile's go along: "amd,msix-vectors=4"
    opts = Pair(qemu="/q", kernel="/k", settings=SETTINGS, nhi_profile="amd,msix-vectors=4").options("a", 0, d)
    assert any(o.endswith(",profile=amd,msix-vectors=4") for o in opts.qemu_opts), opts.qemu_opts
