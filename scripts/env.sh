# Shared settings for the scripts, the Makefile and the test harness (sourced, not run).
# shellcheck shell=bash
KVER_612=${KVER_612:-6.12.95+deb12-amd64}
# The other kernels the module is built for (docs/kernels.md). Debian bookworm's 6.1 (image and
# headers installed on the host), and two trixie kernels whose headers live in a trixie chroot
# (scripts/kernel-chroot.sh): the release names and the exact package versions served.
KVER_61=${KVER_61:-6.1.0-56-amd64}
KPKG_61=${KPKG_61:-6.1.192-2}
KVER_612_TRIXIE=${KVER_612_TRIXIE:-6.12.117+deb13-amd64}
KPKG_612_TRIXIE=${KPKG_612_TRIXIE:-6.12.117-1}
KVER_73=${KVER_73:-7.3.4+deb13-amd64}
KPKG_73=${KPKG_73:-7.3.4-1~bpo13+1}
RDMA_CORE_VERSION=${RDMA_CORE_VERSION:-59.0}
VNG_VERSION=${VNG_VERSION:-1.42}
# The llama-cpp-python sdist whose vendored llama.cpp gives the RPC server and ggml's RPC backend
# with its RDMA transport (scripts/build-llama-rpc.sh, make test-llama).
LLAMA_CPP_PY_VERSION=${LLAMA_CPP_PY_VERSION:-0.3.36}
# Debian's QEMU source package that the emulated USB4 host interface is built into (scripts/build-qemu-usb4.sh).
QEMU_SRC_VERSION=${QEMU_SRC_VERSION:-1:7.2+dfsg-7+deb12u18}
# Heavy builds live outside the checkout so a fresh clone on the same machine reuses them.
# Not under /var/cache: virtme-ng hides that directory from the guest behind a tmpfs.
TBV_CACHE=${TBV_CACHE:-/var/lib/tbverbs}
TBV_VENV=${TBV_VENV:-$TBV_CACHE/venv}
TBV_RDMA_PREFIX=${TBV_RDMA_PREFIX:-$TBV_CACHE/rdma-core-$RDMA_CORE_VERSION}
export KVER_612 KVER_61 KPKG_61 KVER_612_TRIXIE KPKG_612_TRIXIE KVER_73 KPKG_73 RDMA_CORE_VERSION VNG_VERSION LLAMA_CPP_PY_VERSION QEMU_SRC_VERSION TBV_CACHE TBV_VENV TBV_RDMA_PREFIX
