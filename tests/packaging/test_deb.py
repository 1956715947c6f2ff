"""The Debian packages as dpkg-buildpackage makes them from this tree (host only, no install):
what each holds, its dependencies and maintainer scripts, lintian's verdict, and that the DKMS
registration matches the module's build."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pkglib import REPO, VERSION, Debs

from clilib import load_cli

SRC = f"usr/src/tbverbs-{VERSION}"


def contents(deb: Path) -> dict[str, str]:
    """path -> mode string (e.g. -rwxr-xr-x) of every file and directory in the package."""
    out = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].removeprefix("./").rstrip("/"): line.split()[0] for line in out.splitlines()}


def field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True).stdout.strip()


def control_file(deb: Path, name: str, tmp_path: Path) -> str:
    d = tmp_path / deb.stem
    subprocess.run(["dpkg-deb", "-e", str(deb), str(d)], check=True)
    return (d / name).read_text()


def data_file(deb: Path, path: str, tmp_path: Path) -> Path:
    d = tmp_path / f"{deb.stem}-data"
    if not d.exists():
        subprocess.run(["dpkg-deb", "-x", str(deb), str(d)], check=True)
    return d / path


def module_sources() -> set[str]:
    """What the module's build reads, as git tracks it (scripts/copy-module-sources.sh's list):
    kernel/, proto/ and the compile tests in compat/, not a directory glob that a new
    subdirectory slips past (the packages once left compat/ out, and DKMS failed for every
    kernel)."""
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "kernel"], capture_output=True,
                         text=True, check=True).stdout.split()
    return {f for f in out if re.search(r"(\.[ch]|/Kbuild|/Makefile)$", f)
            and not f.endswith(".mod.c") and not f.endswith("/tbv_have.h")}


def test_both_packages_are_built_and_lintian_clean(debs: Debs) -> None:
    assert debs.dkms.is_file() and debs.tools.is_file()
    # errors, warnings, info and pedantic tags all count (scripts/build-deb.sh runs lintian -I)
    assert debs.lintian.strip() == "", debs.lintian


def test_the_dkms_package_holds_exactly_the_module_sources_and_dkms_conf(debs: Debs, tmp_path: Path) -> None:
    files = {p.removeprefix(SRC + "/") for p, mode in contents(debs.dkms).items()
             if p.startswith(SRC + "/") and not mode.startswith("d")}
    assert files == module_sources() | {"dkms.conf"}
    conf = data_file(debs.dkms, f"{SRC}/dkms.conf", tmp_path).read_text()
    assert f'PACKAGE_VERSION="{VERSION}"' in conf and "#MODULE_VERSION#" not in conf
    assert field(debs.dkms, "Version") == VERSION
    # dh_dkms: BUILD_EXCLUSIVE_CONFIG needs dkms 3.0.3-4 or later
    assert "dkms (>= 3.0.3-4~)" in field(debs.dkms, "Depends")
    postinst = control_file(debs.dkms, "postinst", tmp_path)
    assert "/usr/lib/dkms/common.postinst" in postinst and "DKMS_NAME=tbverbs" in postinst
    assert f"DKMS_VERSION={VERSION}" in postinst
    prerm = control_file(debs.dkms, "prerm", tmp_path)
    assert "dkms remove -m $DKMS_NAME -v $DKMS_VERSION --all" in prerm


def dkms_conf_vars(*names: str) -> dict[str, str]:
    """Variables of dkms/dkms.conf as dkms sees them: the file sourced by bash."""
    script = (f'kernel_source_dir=/KSRC dkms_tree=/DKMS; . "{REPO}/dkms/dkms.conf"; '
              + "; ".join(f'printf "%s=%s\\n" {n} "${{{n}}}"' for n in names))
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


@pytest.mark.parametrize("kver, builds", [
    ("5.10.0-30-amd64", False), ("6.0.12", False), ("6.1.0-56-amd64", True), ("6.12.95+deb12-amd64", True),
    ("6.12.117+deb13-amd64", True), ("7.3.4+deb13-amd64", True), ("6.9.1-arch1", True), ("16.0.0", True),
])
def test_dkms_builds_for_linux_6_1_and_later(kver: str, builds: bool) -> None:
    regex = dkms_conf_vars("BUILD_EXCLUSIVE_KERNEL")["BUILD_EXCLUSIVE_KERNEL"]
    r = subprocess.run(["bash", "-c", '[[ $1 =~ $2 ]]', "_", kver, regex])  # as dkms matches it
    assert (r.returncode == 0) == builds


def test_dkms_conf_builds_what_kbuild_makes() -> None:
    v = dkms_conf_vars("PACKAGE_NAME", "BUILT_MODULE_NAME[0]", "BUILT_MODULE_LOCATION[0]", "MAKE[0]",
                       "BUILT_MODULE_NAME[1]", "BUILT_MODULE_LOCATION[1]", "DEST_MODULE_LOCATION[1]",
                       "BUILD_EXCLUSIVE_CONFIG", "AUTOINSTALL")
    kbuild = (REPO / "kernel" / "Kbuild").read_text()
    # both modules Kbuild makes (the product module, the virtual cable's), the product one first
    obj_m = re.search(r"^obj-m := (.*)$", kbuild, re.M)
    assert obj_m and obj_m.group(1).split() == [f"{v['BUILT_MODULE_NAME[0]']}.o", f"{v['BUILT_MODULE_NAME[1]']}.o"]
    assert v["BUILT_MODULE_NAME[1]"] == "tbverbs_vcable"
    assert v["BUILT_MODULE_LOCATION[0]"] == v["BUILT_MODULE_LOCATION[1]"] == "kernel/"
    assert v["DEST_MODULE_LOCATION[1]"] == "/updates/dkms"
    assert v["MAKE[0]"] == "make -C /KSRC M=/DKMS/tbverbs/#MODULE_VERSION#/build/kernel modules"
    assert v["AUTOINSTALL"] == "yes"
    assert set(v["BUILD_EXCLUSIVE_CONFIG"].split()) >= {"CONFIG_USB4", "CONFIG_INFINIBAND"}


def test_the_dkms_package_loads_the_module_on_hosts_with_a_usb4_controller(debs: Debs, tmp_path: Path) -> None:
    rule = data_file(debs.dkms, "lib/udev/rules.d/70-tbverbs-load.rules", tmp_path).read_text()
    rules = [line for line in rule.splitlines() if line and not line.startswith("#")]
    assert rules == ['ACTION=="add", SUBSYSTEM=="thunderbolt", ENV{DEVTYPE}=="thunderbolt_domain", '
                     'RUN{builtin}+="kmod load thunderbolt_ibverbs"']


def test_the_tools_package_holds_the_cli_man_page_and_link_local_setup(debs: Debs, tmp_path: Path) -> None:
    files = contents(debs.tools)
    assert files["usr/bin/tbverbs"].startswith("-rwxr-xr-x")
    for path in ("usr/share/man/man8/tbverbs.8.gz", "lib/udev/rules.d/70-tbverbs-link-local.rules",
                 "lib/systemd/network/10-tbverbs-usb4-net.network"):
        assert path in files, sorted(files)
    depends = {d.strip().split()[0] for d in field(debs.tools, "Depends").split(",")}
    assert {"python3", "iproute2", "udev"} <= depends
    # "install, plug, check" ends with ibv_devices: apt installs recommends by default
    recommends = {d.strip().split()[0] for d in field(debs.tools, "Recommends").split(",")}
    assert {"ibverbs-providers", "ibverbs-utils"} <= recommends, recommends
    cli = data_file(debs.tools, "usr/bin/tbverbs", tmp_path)
    assert cli.read_text().splitlines()[0] == "#!/usr/bin/python3"
    r = subprocess.run([str(cli), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "link-local" in r.stdout
    rules = data_file(debs.tools, "lib/udev/rules.d/70-tbverbs-link-local.rules", tmp_path).read_text()
    run = re.findall(r'RUN\+="(\S+) link-local \$name"', rules)
    assert run == ["/usr/bin/tbverbs"]
    assert 'KERNEL=="usb4_net*"' in rules and 'ENV{NM_UNMANAGED}="1"' in rules


def test_the_man_page_covers_every_command() -> None:
    cli = load_cli()
    top = cli.parser()._subparsers._group_actions[0].choices  # argparse: the subcommands
    vcable = top["vcable"]._subparsers._group_actions[0].choices
    page = (REPO / "cli" / "tbverbs.8").read_text().replace("\\-", "-")
    for name in top:
        assert re.search(rf"\b{re.escape(name)}\b", page), f"tbverbs {name} is not in cli/tbverbs.8"
    for name in vcable:
        assert re.search(rf"\b{re.escape(name)}\b", page), f"tbverbs vcable {name} is not in cli/tbverbs.8"
    r = subprocess.run(["man", "--warnings", "-l", "-P", "cat", str(REPO / "cli" / "tbverbs.8")],
                       capture_output=True, text=True, env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_versions_agree() -> None:
    changelog = subprocess.run(["dpkg-parsechangelog", "-l", str(REPO / "debian" / "changelog"), "-SVersion"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert changelog == VERSION
