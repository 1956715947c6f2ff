# What scripts/nix-eval.sh prints: flake.nix and nix/*.nix evaluated against a nixpkgs tree
# (docs/install.md, "What was verified"). `nixpkgs` is either
#   - a whole tree (lib/, pkgs/, nixos/): a minimal NixOS system with hardware.tbverbs.enable,
#     its system.build.toplevel's drvPath, and the module for linuxPackages and
#     linuxPackages_latest (callPackage and the overlay) and the tools, as drvPaths. A tree
#     older than nixpkgs 23.11 has no lib.fileset, which both packages use: there the system is
#     evaluated with placeholders for them (`placeholders` says so) and the packages are not;
#   - lib/ alone (as nix-community/nixpkgs.lib has it): nixpkgs' real lib under the packages
#     and the NixOS module, with a stand-in stdenv, kernel package set and declarations of
#     the NixOS options the module sets (real NixOS is not in such a tree). Where the Nix
#     evaluating is older than this lib asks for (lib/minfeatures.nix: 2.18 in 2026), lib.fileset
#     cannot run (builtins.readFileType): the packages' sources are then not evaluated.
# `notEvaluated` lists what was not; nix-eval.sh exits 3 when it is not empty.
# Nothing is built: drvPaths are computed (nix-eval.sh evaluates in read-only mode).
{ nixpkgs, repo ? ../., system ? "x86_64-linux" }:
let
  lib = import (nixpkgs + "/lib");
  whole = builtins.pathExists (nixpkgs + "/nixos/lib/eval-config.nix");
  hasFileset = lib ? fileset;
  # what this lib asks of the Nix evaluating it, where it says (lib/minfeatures.nix, 2025 on)
  missingNixFeatures = map (f: f.description)
    (if builtins.pathExists (nixpkgs + "/lib/minfeatures.nix")
     then (import (nixpkgs + "/lib/minfeatures.nix")).missing else [ ]);
  nixTooOld = missingNixFeatures != [ ];
  tooOld = "not evaluated: this lib asks for a newer Nix than ${builtins.nixVersion} ("
    + builtins.concatStringsSep "; " missingNixFeatures + ")";
  ours = builtins.filter (p: lib.hasPrefix "tbverbs" (p.name or ""));
  names = map (p: p.name);
  netName = "10-tbverbs-usb4-net";

  # ---- a whole tree
  pkgs = import nixpkgs { inherit system; config = { }; overlays = [ (import (repo + "/nix/overlay.nix")) ]; };
  placeholders = !hasFileset;
  nixos = extra: (import (nixpkgs + "/nixos/lib/eval-config.nix") {
    inherit system;
    modules = [
      (repo + "/nix/nixos-module.nix")
      {
        hardware.tbverbs.enable = true;
        boot.loader.grub.enable = false;
        fileSystems."/" = { device = "/dev/disk/by-label/nixos"; fsType = "ext4"; };
        system.stateVersion = lib.trivial.release;
      }
      ({ pkgs, ... }: lib.mkIf placeholders {
        hardware.tbverbs.package = pkgs.writeTextDir "share/tbverbs-tools-placeholder" "";
        hardware.tbverbs.modulePackage = pkgs.writeTextDir "share/tbverbs-module-placeholder" "";
      })
      extra
    ];
  }).config;
  moduleFor = set:
    let
      ks = pkgs.${set};
      m = ks.callPackage (repo + "/nix/module.nix") { };
    in {
      kernel = ks.kernel.version;
      name = m.name;
      broken = m.meta.broken;
      drvPath = m.drvPath;
      overlayDrvPathIsTheSame = ks.tbverbs.drvPath == m.drvPath;
    };
  wholeTree =
    if nixTooOld then throw "this nixpkgs asks for a newer Nix than ${builtins.nixVersion}: ${builtins.concatStringsSep "; " missingNixFeatures}" else
    let
      c = nixos { };
      withNetworkd = nixos { systemd.network.enable = true; };
    in {
      notEvaluated = lib.optional placeholders "packages (no lib.fileset)";
      inherit placeholders;
      nixos = {
        kernel = c.boot.kernelPackages.kernel.version;
        kernelModules = c.boot.kernelModules;
        extraModulePackages = names c.boot.extraModulePackages;
        systemPackages = names (ours c.environment.systemPackages);
        udevPackages = names (ours c.services.udev.packages);
        networkdNetwork = { inherit (c.systemd.network.networks.${netName}) matchConfig linkConfig; };
        networkdUnitWithNetworkdEnabled = withNetworkd.systemd.network.units."${netName}.network".text;
        networkmanagerUnmanaged = c.networking.networkmanager.unmanaged;
        dhcpcdDenyInterfaces = c.networking.dhcpcd.denyInterfaces;
        toplevelDrvPath = c.system.build.toplevel.drvPath;
      };
      packages =
        if placeholders then "not evaluated: this nixpkgs has no lib.fileset (nixpkgs 23.11 and later have)"
        else {
          linuxPackages = moduleFor "linuxPackages";
          linuxPackages_latest = moduleFor "linuxPackages_latest";
          tools = { inherit (pkgs.tbverbs-tools) name drvPath; };
        };
    };

  # ---- lib/ alone: real lib, stand-in derivations, kernel sets and NixOS option declarations
  fake = name: { type = "derivation"; inherit name; outPath = "/nix/store/00000000000000000000000000000000-${name}"; };
  mkDerivation = args: args // fake "${args.pname}-${args.version}";
  standInPkgs = {
    inherit lib;
    stdenv = { inherit mkDerivation; };
    stdenvNoCC = { inherit mkDerivation; };
    python3 = fake "python3";
    iproute2 = fake "iproute2";
    kmod = fake "kmod";
    util-linux = fake "util-linux";
    makeWrapper = fake "make-wrapper-hook";
  };
  kernelSet = version: modern:
    let
      scope = {
        inherit lib;
        stdenv = standInPkgs.stdenv;
        kernel = {
          inherit version;
          modDirVersion = version;
          dev = fake "linux-${version}-dev";
          makeFlags = [ "ARCH=x86_64" ];
          moduleBuildDependencies = [ ];
        };
      } // lib.optionalAttrs modern { kernelModuleMakeFlags = [ "ARCH=x86_64" "KBUILD_OUTPUT=standin" ]; };
    in scope // { callPackage = lib.callPackageWith scope; };
  sourceFiles = src: map (f: lib.removePrefix (toString repo + "/") (toString f))
    (lib.fileset.toList (lib.fileset.fromSource src));
  moduleStandIn = version: modern:
    let m = (kernelSet version modern).callPackage (repo + "/nix/module.nix") { };
    in { inherit (m) name makeFlags; broken = m.meta.broken; license = m.meta.license.spdxId; };
  declarations = { lib, ... }: with lib; {
    options = {
      boot.kernelPackages = mkOption { type = types.raw; default = kernelSet "6.12.95" true; };
      boot.extraModulePackages = mkOption { type = types.listOf types.package; default = [ ]; };
      boot.kernelModules = mkOption { type = types.listOf types.str; default = [ ]; };
      environment.systemPackages = mkOption { type = types.listOf types.package; default = [ ]; };
      services.udev.packages = mkOption { type = types.listOf types.path; default = [ ]; };
      systemd.network.networks = mkOption {
        default = { };
        type = types.attrsOf (types.submodule {
          options.matchConfig = mkOption { type = types.attrsOf types.str; default = { }; };
          options.linkConfig = mkOption { type = types.attrsOf (types.either types.bool types.str); default = { }; };
        });
      };
      networking.networkmanager.unmanaged = mkOption { type = types.listOf types.str; default = [ ]; };
      networking.dhcpcd.denyInterfaces = mkOption { type = types.nullOr (types.listOf types.str); default = null; };
    };
  };
  libOnly =
    let
      evaluated = lib.evalModules {
        modules = [
          (repo + "/nix/nixos-module.nix")
          declarations
          { _module.args.pkgs = standInPkgs // { callPackage = lib.callPackageWith standInPkgs; }; }
          { hardware.tbverbs.enable = true; }
        ];
      };
      c = evaluated.config;
      tools = c.hardware.tbverbs.package;
      module = c.hardware.tbverbs.modulePackage;
    in {
      notEvaluated = lib.optional nixTooOld "the packages' sources (lib.fileset)";
      nixos = {
        kernelModules = c.boot.kernelModules;
        extraModulePackages = names c.boot.extraModulePackages;
        systemPackages = names c.environment.systemPackages;
        udevPackages = names c.services.udev.packages;
        networkdNetwork = c.systemd.network.networks.${netName};
        networkmanagerUnmanaged = c.networking.networkmanager.unmanaged;
        dhcpcdDenyInterfaces = c.networking.dhcpcd.denyInterfaces;
      };
      module = {
        src = if nixTooOld then tooOld else { path = module.src.outPath; files = sourceFiles module.src; };
        "6.12.95" = moduleStandIn "6.12.95" true;
        "6.1.0-before-kernelModuleMakeFlags" = moduleStandIn "6.1.0" false;
        "5.15.0" = moduleStandIn "5.15.0" true;
      };
      tools = {
        inherit (tools) name postFixup;
        src = if nixTooOld then tooOld else { path = tools.src.outPath; files = sourceFiles tools.src; };
      };
    };
in
{
  nixpkgs = {
    version = lib.version;
    tree = if whole then "whole" else "lib only";
  };
} // (if whole then wholeTree else libOnly)
