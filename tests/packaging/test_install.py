"""Install both Debian packages as a user would, boot into the result, remove them again.

Runs ON THE HOST, as root (make test-deb-install, about 10 minutes warm). The packages go into a
clean Debian 12 root: debootstrap's minbase plus the test VM's kernel image and headers
(scripts/build-install-root.sh, cached), with a throwaway overlay on top for each run. Why not the
test VM's own root (the host's, with overlays): it already has everything the packages depend
on, so a missing dependency would go unnoticed, and a DKMS build inside the TCG guest takes many
minutes where the chroot builds natively in one. The VM then boots *on that root* with its own
kernel, udev and tools: the system the packages were installed into, rebooted.

In order, each test building on the previous one:
1. `apt install ./*.deb` pulls in DKMS, make, Python and iproute2, and DKMS builds and installs
   the module for every kernel that has headers there (the VM's 6.12 and, through dkms's
   recommended linux-headers-amd64, Debian 12's 6.1); the module resolves from its service alias
   (autoload);
2. booted on that root with an emulated USB4 host controller (usb4-nhi, no cable): udev loads
   DKMS's module for its Thunderbolt domain (tbverbs-dkms's rule), and a virtual cable plugged
   gives two devices whose netdevs have their derived IPv4 link-local and IPv6 link-local
   addresses and whose RDMA devices have the IPv4 RoCE v2 GIDs, with no other step
   (tbverbs-tools's rule);
3. `apt purge` removes everything the packages and DKMS put there;
4. `make dkms-install` from the tree (the same root, without the packages) builds it for every
   kernel again, and `make dkms-remove` removes it.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pkglib import REPO, VERSION, Debs

import kmsg
import vm
from vmlib import missing

MODALIAS = "tbsvc:ktbverbsp00000001v00000001r00000001"  # a peer's tbverbs service, as thunderbolt.ko names it
APT_ARCHIVES = "deb-test-apt"  # under TBV_CACHE: the root's downloaded packages, kept across runs
VM_TIMEOUT_S = 1200
NHI_UID = "0x7462760000000c01"  # the emulated host router's UUID seed (another than the two-VM suite's)


@dataclass
class Root:
    """The overlay root the packages are installed into, and what mounts it has."""

    path: Path
    kernels: list[str] = field(default_factory=list)  # kernels with headers, filled after the install
    mounts: list[Path] = field(default_factory=list)  # inside the root, unmounted last first

    def mount(self, *args: str, at: str) -> None:
        target = self.path / at.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", *args, str(target)], check=True)
        self.mounts.append(target)

    def enter(self) -> None:
        """What a chroot needs for apt, dpkg and DKMS: proc, sys, dev, the apt cache, DNS."""
        settings = vm.tbv_settings()
        archives = Path(settings["TBV_CACHE"]) / APT_ARCHIVES
        archives.mkdir(parents=True, exist_ok=True)
        self.mount("-t", "proc", "proc", at="/proc")
        self.mount("-t", "sysfs", "sysfs", at="/sys")
        self.mount("--bind", "/dev", at="/dev")
        self.mount("--bind", str(archives), at="/var/cache/apt/archives")
        shutil.copy("/etc/resolv.conf", self.path / "etc" / "resolv.conf")
        # `apt` deletes what it downloaded after an install; keep it for the next run
        (self.path / "etc" / "apt" / "apt.conf.d" / "90tbverbs-test-keep-debs").write_text(
            'Binary::apt::APT::Keep-Downloaded-Packages "true";\n')

    def leave(self) -> None:
        while self.mounts:
            subprocess.run(["umount", str(self.mounts.pop())], check=True)

    def run(self, *cmd: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8"}
        return subprocess.run(["chroot", str(self.path), *cmd], capture_output=True, text=True, env=env,
                              timeout=timeout)

    def check(self, *cmd: str, timeout: float = 900) -> str:
        r = self.run(*cmd, timeout=timeout)
        assert r.returncode == 0, f"in the root: {' '.join(cmd)} exited {r.returncode}\n{r.stdout[-6000:]}\n{r.stderr}"
        return r.stdout


def prerequisites() -> None:
    if os.geteuid() != 0:
        missing("the install test needs root (chroot, mounts)")
    for tool in ("debootstrap", "chroot", "mount"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed (make setup)")


@pytest.fixture(scope="module")
def root(debs: Debs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Root]:
    prerequisites()
    r = subprocess.run(["bash", str(REPO / "scripts" / "build-install-root.sh")], capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, f"scripts/build-install-root.sh failed:\n{r.stderr[-4000:]}"
    base = Path(r.stdout.strip().splitlines()[-1])
    work = tmp_path_factory.mktemp("install-root")
    for d in ("upper", "work", "merged"):
        (work / d).mkdir()
    merged = work / "merged"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={base},upperdir={work / 'upper'},workdir={work / 'work'}", str(merged)], check=True)
    root = Root(merged)
    try:
        debs_dir = merged / "tmp" / "debs"
        debs_dir.mkdir(parents=True)
        for deb in (debs.dkms, debs.tools):
            shutil.copy(deb, debs_dir)
        yield root
    finally:
        root.leave()
        subprocess.run(["umount", str(merged)], check=True)
        shutil.rmtree(work)


def kernels_with_headers(root: Root) -> list[str]:
    """The kernels whose headers are in the root: /lib/modules/*/build, an absolute symlink
    resolved inside the root (on the host it may point at nothing, or at the host's own)."""
    def has_headers(modules: Path) -> bool:
        build = modules / "build"
        if build.is_symlink():
            target = os.readlink(build)
            build = root.path / target.lstrip("/") if target.startswith("/") else modules / target
        return build.is_dir()
    return sorted(d.name for d in (root.path / "lib" / "modules").iterdir() if has_headers(d))


def dkms_installed_for(root: Root) -> list[str]:
    status = root.check("dkms", "status", "-m", "tbverbs")
    return sorted(re.findall(rf"^tbverbs/{re.escape(VERSION)}, ([^,]+), [^:]+: installed", status, re.M))


MODULES = ("thunderbolt_ibverbs", "tbverbs_vcable")  # the product module; the virtual cable's


def module_files(root: Root, name: str = MODULES[0]) -> list[Path]:
    return sorted((root.path / "lib" / "modules").glob(f"*/updates/dkms/{name}.ko*"))


def test_apt_installs_both_packages_and_dkms_builds_for_every_kernel(root: Root) -> None:
    root.enter()
    try:
        # the lists of the cached root age; the packages the install pulls in must be current
        root.check("apt-get", "update", "-qq")
        root.check("sh", "-c", "cd /tmp/debs && apt install -y ./*.deb", timeout=1800)
        root.kernels = kernels_with_headers(root)
        assert vm.tbv_settings()["KVER_612"] in root.kernels, root.kernels
        assert len(root.kernels) >= 2, f"dkms's recommended headers brought no second kernel: {root.kernels}"
        assert dkms_installed_for(root) == root.kernels
        for name in MODULES:
            assert [f.relative_to(root.path / "lib" / "modules").parts[0] for f in module_files(root, name)] \
                == root.kernels, name
        # loaded on a host with a USB4 controller (its Thunderbolt domain): see the next test
        rule = root.path / "lib" / "udev" / "rules.d" / "70-tbverbs-load.rules"
        assert 'RUN{builtin}+="kmod load thunderbolt_ibverbs"' in rule.read_text()
        for kver in root.kernels:
            # DKMS signs with its MOK key (the Secure Boot story in docs/install.md), and the
            # installed module answers for a peer's service: it autoloads when a cable brings one
            info = root.check("modinfo", "-k", kver, "thunderbolt_ibverbs")
            assert re.search(r"^signer:\s+DKMS module signing key$", info, re.M), info
            assert root.check("modprobe", "-S", kver, "-R", MODALIAS).split() == ["thunderbolt_ibverbs"]
            # the virtual cable's module: signed too, and modprobe loads the product module under it
            info = root.check("modinfo", "-k", kver, "tbverbs_vcable")
            assert re.search(r"^signer:\s+DKMS module signing key$", info, re.M), info
            loads = re.findall(r"^insmod \S+/updates/dkms/(\w+)\.ko",
                               root.check("modprobe", "-S", kver, "--show-depends", "tbverbs_vcable"), re.M)
            assert loads == ["thunderbolt_ibverbs", "tbverbs_vcable"], loads
        assert (root.path / "var" / "lib" / "dkms" / "mok.pub").is_file()
        assert "link-local" in root.check("tbverbs", "--help")
    finally:
        root.leave()


def test_booted_on_it_a_plugged_cable_has_ipv4_gids_with_no_other_step(root: Root) -> None:
    if not root.kernels:
        pytest.fail("the packages were not installed (the previous test failed)")
    settings = vm.tbv_settings()
    kernel = root.path / "boot" / f"vmlinuz-{settings['KVER_612']}"  # the root's own kernel
    # a USB4 host controller for thunderbolt.ko, so that the module loads as on a USB4 machine
    opts = vm.VmOptions(kernel=str(kernel), memory="2G", timeout=VM_TIMEOUT_S, root=str(root.path), tag="pkg",
                        qemu=vm.emulator_qemu(settings), qemu_opts=["-device", f"usb4-nhi,uid={NHI_UID}"])
    problems = vm.preflight(opts, settings)
    if problems:
        missing("; ".join(problems))
    logs = vm.log_paths(opts)
    result = vm.run_vm(["/usr/bin/python3", str(REPO / "tests" / "packaging" / "guest_install_check.py")],
                       opts, settings, output=logs.output, logs=logs)
    out = logs.output.read_text(errors="replace") if logs.output.exists() else ""
    assert result.finished and result.returncode == 0, (
        f"guest exit {result.returncode} (console {result.console}):\n{out[-6000:]}")
    # from the command on: before it, virtme's init warns of what a minimal root lacks
    # ("WARNING: failed to run: systemd-tmpfiles"), which is no kernel bug
    dmesg = result.dmesg.read_text(errors="replace").splitlines()
    started = next(i for i, line in enumerate(dmesg) if vm.START_MARK in line)
    bad = kmsg.find_bad(dmesg[started:])
    assert not bad, "kernel log:\n" + "\n".join(bad)
    report = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[len("RESULT "):])
    assert report["kernel"] == settings["KVER_612"]
    assert "/updates/dkms/" in report["module"]
    assert report["autoloaded_for"] == ["domain0"]
    a, b = report["ends"]
    ip_a, ip_b = (ipaddress.IPv4Interface(e["predicted"]["address"]) for e in (a, b))
    # the two hosts of the cable: one /30, two addresses, each the other's peer
    assert ip_a.network == ip_b.network and ip_a.network.subnet_of(ipaddress.IPv4Network("169.254.0.0/16"))
    assert ip_a.ip != ip_b.ip
    assert a["predicted"]["peer"] == str(ip_b.ip) and b["predicted"]["peer"] == str(ip_a.ip)
    for end, ip in ((a, ip_a), (b, ip_b)):
        assert str(ip) in end["ipv4"]
        assert end["ipv6_link_local"] and all(x.startswith("fe80::") for x in end["ipv6_link_local"])
        assert [ipaddress.IPv6Address(g).ipv4_mapped for g in end["ipv4_gids"]] == [ip.ip]


def test_purge_removes_what_the_packages_and_dkms_put_there(root: Root) -> None:
    if not root.kernels:
        pytest.fail("the packages were not installed (the first test failed)")
    root.enter()
    try:
        files = [f for f in root.check("dpkg", "-L", "tbverbs-dkms", "tbverbs-tools").splitlines()
                 if (root.path / f.lstrip("/")).is_file()]
        assert any(f.endswith("/dkms.conf") for f in files) and "/usr/bin/tbverbs" in files
        root.check("apt", "purge", "-y", "tbverbs-dkms", "tbverbs-tools")
        for pkg in ("tbverbs-dkms", "tbverbs-tools"):
            assert root.run("dpkg", "-s", pkg).returncode != 0, f"{pkg} is still installed"
        assert [f for f in files if (root.path / f.lstrip("/")).exists()] == []
        assert dkms_installed_for(root) == [] and "tbverbs" not in root.check("dkms", "status")
        assert not (root.path / "var" / "lib" / "dkms" / "tbverbs").exists()
        assert module_files(root) == [] and module_files(root, MODULES[1]) == []
        for kver in root.kernels:
            assert root.run("modprobe", "-S", kver, "-R", MODALIAS).stdout.strip() == ""
    finally:
        root.leave()


def test_make_dkms_install_from_the_tree_builds_for_every_kernel_and_removes(root: Root) -> None:
    if not root.kernels:
        pytest.fail("the packages were not installed (the first test failed)")
    root.enter()
    try:
        root.mount("--bind", "-o", "ro", str(REPO), at=str(REPO))
        root.check("make", "-s", "-C", str(REPO), "dkms-install", timeout=1800)
        assert dkms_installed_for(root) == root.kernels
        for name in MODULES:
            assert len(module_files(root, name)) == len(root.kernels), name
        assert (root.path / "usr" / "src" / f"tbverbs-{VERSION}" / "dkms.conf").is_file()
        rule = root.path / "etc" / "udev" / "rules.d" / "70-tbverbs-load.rules"
        assert rule.read_text() == (REPO / "packaging" / "70-tbverbs-load.rules").read_text()
        root.check("make", "-s", "-C", str(REPO), "dkms-remove")
        assert dkms_installed_for(root) == [] and module_files(root) == [] and module_files(root, MODULES[1]) == []
        assert not (root.path / "usr" / "src" / f"tbverbs-{VERSION}").exists() and not rule.exists()
    finally:
        root.leave()
