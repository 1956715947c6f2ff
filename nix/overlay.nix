# tbverbs-tools, and `tbverbs` (the module) in every kernel package set, built against that
# set's kernel as nixpkgs' own out-of-tree modules are: linuxPackages.tbverbs,
# linuxPackages_6_12.tbverbs, linuxPackages_latest.tbverbs, ...
final: prev: {
  tbverbs-tools = final.callPackage ./tools.nix { };
  linuxPackagesExtensions = (prev.linuxPackagesExtensions or [ ]) ++ [
    (kfinal: _kprev: { tbverbs = kfinal.callPackage ./module.nix { }; })
  ];
}
