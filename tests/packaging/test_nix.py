"""The Nix files (flake.nix, nix/*.nix) with Debian's Nix 2.8 alone (host only): every file
parses, and the flake, the module derivation, the tools derivation, the overlay and the NixOS
module evaluate against a stand-in for nixpkgs (nix/stubs.nix) to what they should ask for.

Not shown here (no nixpkgs tree can be had on these machines): that nixpkgs' real lib, kernel
package sets and NixOS's module system accept them, and that the module builds (docs/install.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pkglib import REPO, VERSION

from vmlib import missing

CHECK = REPO / "tests" / "packaging" / "nix" / "check.nix"


def nix_instantiate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("nix-instantiate") is None:
        missing("nix-instantiate is not installed (Debian: nix-bin; make setup)")
    env = {**os.environ, "NIX_STATE_DIR": str(tmp_path / "nix-state"), "NIX_LOG_DIR": str(tmp_path / "nix-log")}
    # --readonly-mode: nothing is written to a Nix store
    return subprocess.run(["nix-instantiate", "--option", "build-users-group", "", "--readonly-mode", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def nix_files() -> list[Path]:
    return sorted(p for p in REPO.rglob("*.nix") if not p.relative_to(REPO).parts[0] in ("build", ".git"))


def test_the_nix_files_are_where_they_should_be() -> None:
    names = {p.relative_to(REPO).as_posix() for p in nix_files()}
    assert {"flake.nix", "nix/module.nix", "nix/tools.nix", "nix/overlay.nix", "nix/nixos-module.nix"} <= names


@pytest.mark.parametrize("path", nix_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_nix_file_parses(path: Path, tmp_path: Path) -> None:
    r = nix_instantiate(tmp_path, "--parse", str(path))
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    r = nix_instantiate(tmp_path_factory.mktemp("nix"), "--eval", "--strict", "--json", str(CHECK))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_flake_outputs(evaluated: dict) -> None:
    assert {"packages", "overlays", "nixosModules"} <= set(evaluated["outputs"])
    assert evaluated["systems"] == ["aarch64-linux", "x86_64-linux"]
    assert set(evaluated["packages"]) == {"default", "tbverbs-module", "tbverbs-tools"}
    assert evaluated["defaultIsTools"] == "tbverbs-tools"


def test_the_module_is_built_with_kbuild_against_the_kernel_of_its_package_set(evaluated: dict) -> None:
    m = evaluated["module"]
    assert (m["pname"], m["version"]) == ("tbverbs", f"{VERSION}-6.12.95")
    # the kernel's module build dependencies and make flags (kernelModuleMakeFlags where nixpkgs
    # has them, kernel.makeFlags before), then Kbuild on kernel/
    assert m["nativeBuildInputs"] == ["/nix/store/kmod", "/nix/store/libelf"]
    assert m["makeFlags"] == ["ARCH=x86_64", "KBUILD_OUTPUT=module-makeFlags", "-C",
                              "/nix/store/linux-6.12.95-dev/lib/modules/6.12.95/build", "M=$(PWD)/kernel"]
    assert evaluated["moduleOldNixpkgs"][:2] == ["ARCH=x86_64", "O=kernel-makeFlags"]
    assert m["buildFlags"] == ["modules"]
    for name in ("thunderbolt_ibverbs", "tbverbs_vcable"):
        assert f"install -D -m 644 kernel/{name}.ko" in m["installPhase"]
        assert f"$out/lib/modules/6.12.95/extra/{name}.ko" in m["installPhase"]
    assert m["src"] == {"root": str(REPO), "files": [str(REPO / "kernel")]}
    assert evaluated["moduleBroken"] == {"5.15.0": True, "6.1.0": False, "6.12.95": False}


def test_the_tools_install_the_cli_and_a_udev_rule_pointing_at_it(evaluated: dict) -> None:
    t = evaluated["tools"]
    assert (t["pname"], t["version"]) == ("tbverbs-tools", VERSION)
    assert t["src"]["files"] == [str(REPO / "cli"), str(REPO / "packaging")]
    for line in ("install -D -m 755 cli/tbverbs $out/bin/tbverbs",
                 "install -D -m 644 packaging/70-tbverbs-link-local.rules $out/lib/udev/rules.d/70-tbverbs-link-local.rules",
                 "--replace-fail /usr/bin/tbverbs $out/bin/tbverbs"):
        assert line in t["installPhase"]
    # what --replace-fail replaces is really in the rule
    assert 'RUN+="/usr/bin/tbverbs link-local $name"' in (REPO / "packaging" / "70-tbverbs-link-local.rules").read_text()
    assert "/nix/store/iproute2/bin" in t["postFixup"]


def test_the_nixos_module_adds_loads_installs_and_addresses(evaluated: dict) -> None:
    n = evaluated["nixos"]
    assert n["options"] == {"enable": "bool", "linkLocal": "bool", "package": "package", "modulePackage": "package"}
    assert n["optionDefaults"] == {"enable": False, "linkLocal": True, "package": "tbverbs-tools",
                                   "modulePackage": {"pname": "tbverbs", "version": f"{VERSION}-6.12.95"}}
    on = n["enabled"]
    assert on["boot"] == {"extraModulePackages": ["MODULE"], "kernelModules": ["thunderbolt_ibverbs"]}
    assert on["environment"] == {"systemPackages": ["TOOLS"]}
    assert on["services"] == {"udev": {"packages": ["TOOLS"]}}
    assert on["systemd"]["network"]["networks"]["10-tbverbs-usb4-net"] == {
        "matchConfig": {"Name": "usb4_net*"}, "linkConfig": {"Unmanaged": True}}
    assert on["networking"] == {"networkmanager": {"unmanaged": ["interface-name:usb4_net*"]},
                                "dhcpcd": {"denyInterfaces": ["usb4_net*"]}}
    assert n["disabled"] == {}
    assert set(n["withoutLinkLocal"]) == {"boot", "environment"}


def test_the_overlay_puts_the_module_in_every_kernel_package_set(evaluated: dict) -> None:
    assert evaluated["overlay"] == {"tools": "tbverbs-tools",
                                    "kernelSetModule": {"pname": "tbverbs", "version": f"{VERSION}-6.12.95"}}
