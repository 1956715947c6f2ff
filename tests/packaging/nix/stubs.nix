# A stand-in for the parts of nixpkgs that tbverbs' Nix files use, for an evaluation with Nix
# alone: no nixpkgs tree can be had on this project's machines (tests/packaging/test_nix.py).
# Derivation builders return their arguments, so a check sees what the files ask for;
# mkIf and mkMerge are resolved by `resolve`, lists concatenated as the module system does.
# What this cannot show: that nixpkgs' real functions behave as stood in for here.
let
  lib = rec {
    genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
    fileContents = p:
      let s = builtins.readFile p; n = builtins.stringLength s;
      in if n > 0 && builtins.substring (n - 1) 1 s == "\n" then builtins.substring 0 (n - 1) s else s;
    fileset = {
      unions = paths: { _fileset = map toString paths; };
      toSource = { root, fileset }: { root = toString root; files = fileset._fileset; };
    };
    makeBinPath = ps: builtins.concatStringsSep ":" (map (p: "${p}/bin") ps);
    versionOlder = a: b: builtins.compareVersions a b < 0;
    licenses.gpl2Only = "GPL-2.0-only";
    platforms.linux = [ "x86_64-linux" "aarch64-linux" ];
    mkEnableOption = name: { _option = true; type = types.bool; default = false; description = "Whether to enable ${name}."; };
    mkOption = attrs: attrs // { _option = true; };
    types = { bool = "bool"; package = "package"; };
    literalExpression = text: { _type = "literalExpression"; inherit text; };
    mkIf = condition: content: { _type = "if"; inherit condition content; };
    mkMerge = contents: { _type = "merge"; inherit contents; };
  };

  mergeValues = a: b:
    if builtins.isList a && builtins.isList b then a ++ b
    else if builtins.isAttrs a && builtins.isAttrs b then merge a b
    else throw "conflicting definitions: ${builtins.toJSON a} and ${builtins.toJSON b}";
  merge = a: b: a // builtins.mapAttrs (n: v: if a ? ${n} then mergeValues a.${n} v else v) b;
  resolve = v:
    if builtins.isAttrs v && (v._type or "") == "if" then (if v.condition then resolve v.content else { })
    else if builtins.isAttrs v && (v._type or "") == "merge" then builtins.foldl' merge { } (map resolve v.contents)
    else if builtins.isAttrs v then builtins.mapAttrs (_: resolve) v
    else v;

  mkDerivation = args: args // { _derivation = true; };
  # nixpkgs' callPackage: the function's arguments from the scope, overridden by `args`
  callPackageWith = scope: f: args:
    let fn = import f; in fn (builtins.intersectAttrs (builtins.functionArgs fn) scope // args);

  kernelFor = version: {
    inherit version;
    modDirVersion = version;
    dev = "/nix/store/linux-${version}-dev";
    makeFlags = [ "ARCH=x86_64" "O=kernel-makeFlags" ];
    moduleBuildDependencies = [ "/nix/store/kmod" "/nix/store/libelf" ];
  };
  # a kernel package set; `modern`: with kernelModuleMakeFlags, as nixpkgs has had since 24.11
  kernelPackagesFor = version: modern:
    let
      scope = { inherit lib; stdenv = pkgs.stdenv; kernel = kernelFor version; }
        // (if modern then { kernelModuleMakeFlags = [ "ARCH=x86_64" "KBUILD_OUTPUT=module-makeFlags" ]; } else { });
    in scope // { callPackage = callPackageWith scope; };

  pkgs = rec {
    inherit lib;
    stdenv = { inherit mkDerivation; hostPlatform.system = "x86_64-linux"; };
    stdenvNoCC = { inherit mkDerivation; };
    python3 = "/nix/store/python3";
    iproute2 = "/nix/store/iproute2";
    kmod = "/nix/store/kmod";
    util-linux = "/nix/store/util-linux";
    makeWrapper = "/nix/store/makeWrapper";
    linuxPackages = kernelPackagesFor "6.12.95" true;
    callPackage = callPackageWith pkgs;
  };
in
{
  inherit lib pkgs resolve kernelPackagesFor;
  nixpkgs = {
    inherit lib;
    legacyPackages = { x86_64-linux = pkgs; aarch64-linux = pkgs; };
  };
}
