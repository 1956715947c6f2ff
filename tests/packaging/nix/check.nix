# Evaluates flake.nix, nix/*.nix against the stand-in (stubs.nix) and returns what they produce,
# for tests/packaging/test_nix.py to check: nix-instantiate --eval --strict --json check.nix
let
  s = import ./stubs.nix;
  repo = ../../..;
  flake = import (repo + "/flake.nix");
  out = flake.outputs { self = out; nixpkgs = s.nixpkgs; };
  drv = d: { inherit (d) pname version; src = d.src; } // builtins.removeAttrs d [ "meta" "_derivation" "src" ];
  moduleFor = version: modern: (s.kernelPackagesFor version modern).callPackage (repo + "/nix/module.nix") { };
  nixos = config:
    let m = out.nixosModules.default { inherit config; lib = s.lib; pkgs = s.pkgs; };
    in { config = s.resolve m.config; options = m.options.hardware.tbverbs; };
  base = { boot.kernelPackages = s.kernelPackagesFor "6.12.95" true; };
  given = enable: linkLocal: base // {
    hardware.tbverbs = { inherit enable linkLocal; package = "TOOLS"; modulePackage = "MODULE"; };
  };
  enabled = nixos (given true true);
  overlaid = let final = s.pkgs // fixed; fixed = out.overlays.default final s.pkgs; in fixed;
  kernelSet = s.kernelPackagesFor "6.12.95" true;
  extended = builtins.foldl' (set: ext: set // ext set set) kernelSet overlaid.linuxPackagesExtensions;
in
{
  outputs = builtins.attrNames out;
  systems = builtins.attrNames out.packages;
  packages = builtins.attrNames out.packages.x86_64-linux;
  defaultIsTools = out.packages.x86_64-linux.default.pname;
  module = drv out.packages.x86_64-linux.tbverbs-module;
  moduleBroken = {
    "6.12.95" = (moduleFor "6.12.95" true).meta.broken;
    "6.1.0" = (moduleFor "6.1.0" true).meta.broken;
    "5.15.0" = (moduleFor "5.15.0" true).meta.broken;
  };
  moduleOldNixpkgs = (moduleFor "6.1.0" false).makeFlags;
  tools = drv out.packages.x86_64-linux.tbverbs-tools;
  nixos = {
    enabled = enabled.config;
    disabled = (nixos (given false true)).config;
    withoutLinkLocal = (nixos (given true false)).config;
    options = builtins.mapAttrs (_: o: o.type) enabled.options;
    optionDefaults = {
      enable = enabled.options.enable.default;
      linkLocal = enabled.options.linkLocal.default;
      package = enabled.options.package.default.pname;
      modulePackage = { inherit (enabled.options.modulePackage.default) pname version; };
    };
  };
  overlay = {
    tools = overlaid.tbverbs-tools.pname;
    kernelSetModule = { inherit (extended.tbverbs) pname version; };
  };
}
