# NixOS: `hardware.tbverbs.enable = true;` adds thunderbolt_ibverbs built for
# boot.kernelPackages, loads it at boot, installs the tbverbs command, and gives every usb4_netN
# its link-local addresses: the tools' udev rule derives the IPv4 one from the two host UUIDs,
# the same way as on Debian, so a NixOS host and a Debian host agree on them; networkd,
# NetworkManager and dhcpcd are told to leave these links alone.
{ config, lib, pkgs, ... }:

let
  cfg = config.hardware.tbverbs;
in
{
  options.hardware.tbverbs = {
    enable = lib.mkEnableOption "RDMA over USB4/Thunderbolt host-to-host cables (thunderbolt_ibverbs and the tbverbs tools)";

    linkLocal = lib.mkOption {
      type = lib.types.bool;
      default = true;
      description = ''
        Give every usb4_netN an IPv4 link-local address derived from the two host UUIDs of its
        link (`tbverbs link-local`, run by udev) and bring it up, which gives it an IPv6
        link-local address: RoCE v2 IPv4 GIDs then exist with no further step.
      '';
    };

    package = lib.mkOption {
      type = lib.types.package;
      default = pkgs.callPackage ./tools.nix { };
      defaultText = lib.literalExpression "pkgs.callPackage ./nix/tools.nix { }";
      description = "The tbverbs tools (command, man page, udev rule).";
    };

    modulePackage = lib.mkOption {
      type = lib.types.package;
      default = config.boot.kernelPackages.callPackage ./module.nix { };
      defaultText = lib.literalExpression "config.boot.kernelPackages.callPackage ./nix/module.nix { }";
      description = "thunderbolt_ibverbs built for boot.kernelPackages.";
    };
  };

  config = lib.mkIf cfg.enable (lib.mkMerge [
    {
      boot.extraModulePackages = [ cfg.modulePackage ];
      boot.kernelModules = [ "thunderbolt_ibverbs" ];
      environment.systemPackages = [ cfg.package ];
    }
    (lib.mkIf cfg.linkLocal {
      services.udev.packages = [ cfg.package ];
      systemd.network.networks."10-tbverbs-usb4-net" = {
        matchConfig.Name = "usb4_net*";
        linkConfig.Unmanaged = true;
      };
      networking.networkmanager.unmanaged = [ "interface-name:usb4_net*" ];
      networking.dhcpcd.denyInterfaces = [ "usb4_net*" ];
    })
  ]);
}
