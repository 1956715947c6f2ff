#!/usr/bin/env bash
# The demo, run inside the test VM (make demo): load the module, plug a virtual USB4
# cable with two rails between two simulated hosts, show the two RDMA devices with
# their RoCE GIDs, ping across the cable between two network namespaces, then run
# unmodified perftest (ib_write_bw, ib_send_lat) across it with rdma_rxe beside it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/env.sh"
tbverbs() { "$TBV_VENV/bin/python" "$repo/cli/tbverbs" "$@"; }
step() { printf '\n==> %s\n' "$*"; }

step "loading thunderbolt_ibverbs next to thunderbolt, ib_core and ib_uverbs, and the virtual cable's module"
# ib_uverbs gives user space its /dev/infiniband/uverbsN; udev would load it on a full system.
# tbverbs_vcable (the virtual cable, a test backend) uses thunderbolt_ibverbs: loaded after it.
modprobe -a thunderbolt ib_core ib_uverbs configfs
insmod "$repo/kernel/thunderbolt_ibverbs.ko"
insmod "$repo/kernel/tbverbs_vcable.ko"

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

# ---- RDMA across the cable with unmodified perftest, and rdma_rxe beside it ----
export PATH=$TBV_RDMA_PREFIX/bin:$PATH LD_LIBRARY_PATH=$TBV_RDMA_PREFIX/lib
gid_of() {  # RoCE v2 GID index of an IPv4 address on a device
	local dev=$1 ip=$2 hex
	hex=$(printf '%02x%02x:%02x%02x' ${ip//./ })
	for g in /sys/class/infiniband/$dev/ports/1/gids/*; do
		if [[ $(cat "$g") == *"ffff:$hex" ]] &&
		   [[ $(cat /sys/class/infiniband/$dev/ports/1/gid_attrs/types/${g##*/} 2>/dev/null) == "RoCE v2" ]]; then
			echo "${g##*/}"; return
		fi
	done
	return 1
}
in_ns() { local ns=$1; shift; if [[ $ns == - ]]; then "$@"; else ip netns exec "$ns" "$@"; fi; }
# perftest_pair NS_SERVER NS_CLIENT DEV_S GID_S DEV_C GID_C SERVER_IP TOOL ARGS...: client output
# Both at SCHED_IDLE: on the demo's one vCPU a polling tool then only fills idle time and never
# delays the kernel's work for the transfer (docs/performance.md, "Method").
perftest_pair() {
	local nss=$1 nsc=$2 devs=$3 gids=$4 devc=$5 gidc=$6 ip=$7 tool=$8; shift 8
	in_ns "$nss" chrt --idle 0 "$tool" -d "$devs" -x "$gids" "$@" >/dev/null 2>&1 &
	local srv=$! out="" i
	for i in $(seq 50); do
		sleep 0.3
		out=$(in_ns "$nsc" chrt --idle 0 "$tool" -d "$devc" -x "$gidc" "$@" "$ip" 2>&1) && break
	done
	wait "$srv" || true
	echo "$out"
}
bw_of() { awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ {print $4; exit}'; }   # BW average MB/s
lat_of() { awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ {print $5; exit}'; }  # t_typical usec

step "RDMA over the cable: ib_write_bw and ib_send_lat (host0 -> host1)"
g0=$(gid_of usb4_rdma0 10.44.0.1); g1=$(gid_of usb4_rdma1 10.44.0.2)
bw_u=$(perftest_pair host1 host0 usb4_rdma1 "$g1" usb4_rdma0 "$g0" 10.44.0.2 ib_write_bw -s 65536 -n 200 -F | bw_of)
# latency event-driven (-e): two polling processes on one vCPU would take turns at the tick
lat_u=$(perftest_pair host1 host0 usb4_rdma1 "$g1" usb4_rdma0 "$g0" 10.44.0.2 ib_send_lat -e -s 2 -n 200 -F | lat_of)

step "the same on rdma_rxe in this VM (a software RoCE device on a dummy netdev, loopback)"
modprobe rdma_rxe
ip link add tbvdemo0 type dummy
# MTU 9000: RoCE MTU 4096, as rxe would have over thunderbolt_net (1500 cuts 1024-byte packets)
ip link set tbvdemo0 mtu 9000
ip addr add 10.45.0.1/24 dev tbvdemo0
ip link set tbvdemo0 up
rdma link add rxe0 type rxe netdev tbvdemo0
sleep 1
gr=$(gid_of rxe0 10.45.0.1)
bw_r=$(perftest_pair - - rxe0 "$gr" rxe0 "$gr" 127.0.0.1 ib_write_bw -s 65536 -n 200 -F | bw_of)
lat_r=$(perftest_pair - - rxe0 "$gr" rxe0 "$gr" 127.0.0.1 ib_send_lat -e -s 2 -n 200 -F | lat_of)
rdma link delete rxe0
ip link delete tbvdemo0

step "results (one vCPU under QEMU -icount: a guest usec is 1000 instructions; compare the columns)"
printf '%-32s %14s %14s\n' "" "usb4_rdma (cable)" "rdma_rxe (local)"
printf '%-32s %14s %14s\n' "ib_write_bw 64 KiB, MB/s" "${bw_u:-failed}" "${bw_r:-failed}"
printf '%-32s %14s %14s\n' "ib_send_lat -e 2 B, typical usec" "${lat_u:-failed}" "${lat_r:-failed}"
tbverbs status usb4_rdma0 | grep -E 'rdma_|retransmits|naks' || true
[[ -n $bw_u && -n $lat_u ]] || { echo "demo: perftest over the cable failed" >&2; exit 1; }

step "unplugging the cable and unloading the modules"
ip netns del host0
ip netns del host1
tbverbs vcable del demo
rmmod tbverbs_vcable thunderbolt_ibverbs
# after ours: rdma_rxe's exit unregisters every device of its driver id, which ours share
modprobe -r rdma_rxe
echo
echo "demo finished: two usb4_rdma devices came up with RoCE v2 GIDs; ping and perftest crossed the virtual cable"
