# The tbverbs command with its man page, and the udev rule and networkd file that give every
# usb4_netN its link-local addresses (packaging/; the same files as the Debian package's).
{ lib, stdenvNoCC, python3, iproute2, kmod, util-linux, makeWrapper }:

stdenvNoCC.mkDerivation {
  pname = "tbverbs-tools";
  version = lib.fileContents ../VERSION;

  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [ ../cli ../packaging ];
  };

  nativeBuildInputs = [ makeWrapper ];
  buildInputs = [ python3 ]; # patchShebangs: `#!/usr/bin/env python3` becomes this python
  dontBuild = true;

  installPhase = ''
    runHook preInstall
    install -D -m 755 cli/tbverbs $out/bin/tbverbs
    install -D -m 644 cli/tbverbs.8 $out/share/man/man8/tbverbs.8
    install -D -m 644 packaging/70-tbverbs-link-local.rules $out/lib/udev/rules.d/70-tbverbs-link-local.rules
    substituteInPlace $out/lib/udev/rules.d/70-tbverbs-link-local.rules \
      --replace-fail /usr/bin/tbverbs $out/bin/tbverbs
    install -D -m 644 packaging/10-tbverbs-usb4-net.network \
      $out/lib/systemd/network/10-tbverbs-usb4-net.network
    runHook postInstall
  '';

  # ip for link-local; modprobe and mount for the virtual cables' configfs
  postFixup = ''
    wrapProgram $out/bin/tbverbs --prefix PATH : ${lib.makeBinPath [ iproute2 kmod util-linux ]}
  '';

  meta = {
    description = "Tools for RDMA over USB4/Thunderbolt cables: link checks, status, link-local addresses";
    license = lib.licenses.gpl2Only;
    platforms = lib.platforms.linux;
    mainProgram = "tbverbs";
  };
}
