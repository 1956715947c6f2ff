# tbverbs for Nix and NixOS (docs/install.md):
#   packages.<system>.tbverbs-tools    the tbverbs command, its man page, udev rule, networkd file
#   packages.<system>.tbverbs-module   thunderbolt_ibverbs for nixpkgs' default kernel
#   overlays.default                   tbverbs-tools, and `tbverbs` in every kernel package set
#                                      (linuxPackages.tbverbs, linuxPackages_latest.tbverbs, ...)
#   nixosModules.default               hardware.tbverbs.enable
{
  description = "RDMA (InfiniBand verbs, RoCE v2) over USB4/Thunderbolt host-to-host cables";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      overlays.default = import ./nix/overlay.nix;

      packages = forAllSystems (pkgs: {
        tbverbs-tools = pkgs.callPackage ./nix/tools.nix { };
        # another kernel: <its kernel package set>.callPackage ./nix/module.nix { }
        tbverbs-module = pkgs.linuxPackages.callPackage ./nix/module.nix { };
        default = self.packages.${pkgs.stdenv.hostPlatform.system}.tbverbs-tools;
      });

      nixosModules.default = import ./nix/nixos-module.nix;
      nixosModules.tbverbs = self.nixosModules.default;
    };
}
