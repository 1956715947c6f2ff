#!/usr/bin/env bash
# The demo, run inside the test VM (make demo): load the module, plug a virtual USB4
# cable with two rails between two simulated hosts, show the two RDMA devices with
# their RoCE GIDs, and ping across the cable between two network namespaces.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/env.sh"
tbverbs() { "$TBV_VENV/bin/python" "$repo/cli/tbverbs" "$@"; }
step() { printf '\n==> %s\n' "$*"; }

step "loading thunderbolt_ibverbs next to thunderbolt, ib_core and ib_uverbs"
# ib_uverbs gives user space its /dev/infiniband/uverbsN; udev would load it on a full system.
modprobe -a thunderbolt ib_core ib_uverbs configfs
insmod "$repo/kernel/thunderbolt_ibverbs.ko"

step "plugging a virtual cable (2 rails, 2 lanes x 20 Gb/s)"
tbverbs vcable add --name demo --rails 2

step "the two simulated hosts, one netdev each, in their own network namespace"
ip netns add host0
ip netns add host1
ip link set usb4_net0 netns host0
ip link set usb4_net1 netns host1
ip -n host0 addr add 10.44.0.1/24 dev usb4_net0
ip -n host1 addr add 10.44.0.2/24 dev usb4_net1
ip -n host0 addr add fd44::1/64 dev usb4_net0 nodad
ip -n host1 addr add fd44::2/64 dev usb4_net1 nodad
ip -n host0 link set usb4_net0 up
ip -n host1 link set usb4_net1 up
sleep 1

step "RDMA devices, as libibverbs and the CLI see them"
PATH=$TBV_RDMA_PREFIX/bin:$PATH LD_LIBRARY_PATH=$TBV_RDMA_PREFIX/lib ibv_devices
tbverbs status

step "ping across the cable: IPv4 and IPv6"
ip netns exec host0 ping -c 3 -W 2 10.44.0.2
ip netns exec host0 ping -6 -c 3 -W 2 fd44::2

step "link counters after the pings"
tbverbs status usb4_rdma0 | grep -E 'tx_frames|rx_frames|net_' || true

step "unplugging the cable and unloading the module"
ip netns del host0
ip netns del host1
tbverbs vcable del demo
rmmod thunderbolt_ibverbs
echo
echo "demo finished: two usb4_rdma devices came up with RoCE v2 GIDs and ping crossed the virtual cable"
