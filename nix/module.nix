# The thunderbolt_ibverbs kernel module (and tbverbs_vcable, the virtual cable's) for one
# kernel. Call it from that kernel's package set (`linuxPackages.callPackage ./module.nix { }`,
# or the overlay's linuxPackages.tbverbs), which supplies `kernel` and, in current nixpkgs,
# `kernelModuleMakeFlags`.
{ lib, stdenv, kernel, kernelModuleMakeFlags ? kernel.makeFlags }:

stdenv.mkDerivation {
  pname = "tbverbs";
  version = "${lib.fileContents ../VERSION}-${kernel.version}";

  # only what the module is built from: a change elsewhere in the tree does not rebuild it
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [ ../kernel ];
  };

  nativeBuildInputs = kernel.moduleBuildDependencies;
  hardeningDisable = [ "pic" ];

  # Kbuild on kernel/ (kernel/Makefile adds W=1, for development only)
  makeFlags = kernelModuleMakeFlags ++ [
    "-C"
    "${kernel.dev}/lib/modules/${kernel.modDirVersion}/build"
    "M=$(PWD)/kernel"
  ];
  buildFlags = [ "modules" ];

  # the product module, and the virtual cable's (a test backend on top of it; nothing loads it
  # by itself: `modprobe tbverbs_vcable`, or `tbverbs vcable`, does)
  installPhase = ''
    runHook preInstall
    install -D -m 644 kernel/thunderbolt_ibverbs.ko \
      $out/lib/modules/${kernel.modDirVersion}/extra/thunderbolt_ibverbs.ko
    install -D -m 644 kernel/tbverbs_vcable.ko \
      $out/lib/modules/${kernel.modDirVersion}/extra/tbverbs_vcable.ko
    runHook postInstall
  '';

  meta = {
    description = "RDMA (InfiniBand verbs, RoCE v2) over USB4/Thunderbolt host-to-host cables";
    license = lib.licenses.gpl2Only;
    platforms = lib.platforms.linux;
    # Linux 6.1 and later (dkms/dkms.conf says the same)
    broken = lib.versionOlder kernel.version "6.1";
  };
}
