# Shared settings for the scripts, the Makefile and the test harness (sourced, not run).
# shellcheck shell=bash
KVER_612=${KVER_612:-6.12.95+deb12-amd64}
RDMA_CORE_VERSION=${RDMA_CORE_VERSION:-59.0}
VNG_VERSION=${VNG_VERSION:-1.42}
# Debian's QEMU source package that the emulated USB4 host interface is built into (scripts/build-qemu-usb4.sh).
QEMU_SRC_VERSION=${QEMU_SRC_VERSION:-1:7.2+dfsg-7+deb12u18}
# Heavy builds live outside the checkout so a fresh clone on the same machine reuses them.
# Not under /var/cache: virtme-ng hides that directory from the guest behind a tmpfs.
TBV_CACHE=${TBV_CACHE:-/var/lib/tbverbs}
TBV_VENV=${TBV_VENV:-$TBV_CACHE/venv}
TBV_RDMA_PREFIX=${TBV_RDMA_PREFIX:-$TBV_CACHE/rdma-core-$RDMA_CORE_VERSION}
export KVER_612 RDMA_CORE_VERSION VNG_VERSION QEMU_SRC_VERSION TBV_CACHE TBV_VENV TBV_RDMA_PREFIX
