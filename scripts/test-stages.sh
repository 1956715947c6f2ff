#!/usr/bin/env bash
# `make test` (and `make test-full`, TBV_FULL=1: CI's stages with what is kept out of CI's
# time budget): every stage runs, whatever failed before it, so one failure cannot hide
# another; a summary of all of them closes the run, and the exit status is 1 if any failed.
# A stage is a make target list; a stage whose prerequisites failed fails on its own terms.
#
# Two lanes: a stage marked "&" runs in a second lane, beside the stages after it up to
# "join", its output kept in build/stage-logs/ and printed at the join. Each lane boots one
# VM at a time: a guest runs on one TCG thread, so two one-VM stages share the machine's two
# cores instead of queueing for one (two-VM stages come after the join). The second lane is
# used only when the caches it needs are warm (the sanitizer kernel built, the other kernels'
# images extracted before this run): building a kernel beside a VM would starve the VM's
# timers. Otherwise, or with TBV_STAGES_BESIDE=0, its stages run in the main lane, in order;
# TBV_STAGES_BESIDE=1 forces the second lane.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
full=$([ "${TBV_FULL:-}" = 1 ] && echo 1 || echo 0)

# name:targets (in order; a later stage never depends on an earlier one succeeding)
stages=(
	"builds:modules checkpatch"
	"unit:unit"
	"fuzz:fuzz"
	"host:tools test-host"
	"&sanitizers:test-debug-ci-vm"
	"&kernels:$([ "$full" = 1 ] && echo "test-vm-6.1 test-vm-7.3" || echo test-kernels-ci-vm)"
	"vm:test-vm"
	"join"
	"kernels-vm2:$([ "$full" = 1 ] && echo test-vm2-7.3 || echo test-kernels-ci-vm2)"
	"vm2:test-vm2"
	"suspend:test-vm2-suspend"
	"sanitizers-vm2:test-debug-ci-vm2"
)

beside() {
	case "${TBV_STAGES_BESIDE:-}" in
	1) return 0 ;;
	0) return 1 ;;
	esac
	bash scripts/debug-kernel-state.sh >/dev/null && ! [ -s build/kernels-cold ]
}

declare -A result minutes
# (TBV_STAGE_LOGS: another directory, for the runner's own tests, which run inside make test)
logs=${TBV_STAGE_LOGS:-$here/build/stage-logs}

# run_stage NAME TARGETS...: run it, record its result and its minutes in the results file.
run_stage() {
	local name=$1 start r
	shift
	printf '\n==== make test: stage %s (make %s) ====\n' "$name" "$*"
	start=$(date +%s)
	if make --no-print-directory "$@"; then r=passed; else r=FAILED; fi
	echo "$name $r $(awk -v s="$(( $(date +%s) - start ))" 'BEGIN { printf "%.1f", s / 60 }')" \
		>>"$results"
}

mkdir -p "$logs"
results=$logs/results
: >"$results"
lane=() lane_pid=
use_lane=0
if beside; then use_lane=1; fi

start_lane() {
	[ "${#lane[@]}" -gt 0 ] || return 0
	echo "make test: stages ${lane[*]%%:*} run beside the next ones (output at the join)"
	(
		for stage in "${lane[@]}"; do
			read -r -a targets <<<"${stage#*:}"
			run_stage "${stage%%:*}" "${targets[@]}" >"$logs/${stage%%:*}.log" 2>&1
		done
	) &
	lane_pid=$!
}

join_lane() {
	[ "${#lane[@]}" -gt 0 ] || return 0
	[ -n "$lane_pid" ] || start_lane
	wait "$lane_pid"
	for stage in "${lane[@]}"; do
		printf '\n==== make test: stage %s, run beside the others: its output ====\n' "${stage%%:*}"
		cat "$logs/${stage%%:*}.log"
	done
	lane=() lane_pid=
}

for stage in "${stages[@]}"; do
	if [ "$stage" = join ]; then
		join_lane
		continue
	fi
	if [ "${stage:0:1}" = "&" ]; then
		stage=${stage:1}
		if [ "$use_lane" = 1 ]; then
			lane+=("$stage")
			continue
		fi
	elif [ -n "${lane[*]}" ] && [ -z "$lane_pid" ]; then
		start_lane
	fi
	read -r -a targets <<<"${stage#*:}"
	run_stage "${stage%%:*}" "${targets[@]}"
done
join_lane

while read -r name r m; do
	result[$name]=$r
	minutes[$name]=$m
done <"$results"

failed=0
printf '\n==== make test: summary ====\n'
for stage in "${stages[@]}"; do
	[ "$stage" = join ] && continue
	stage=${stage#&}
	name=${stage%%:*}
	r=${result[$name]:-FAILED}
	[ "$r" = passed ] || failed=1
	printf '%-15s %-7s %6s min\n' "$name" "$r" "${minutes[$name]:-?}"
done
if [ "$use_lane" = 1 ]; then
	echo "(sanitizers and kernels ran beside vm: the stages' minutes overlap)"
fi
if [ "$failed" = 0 ]; then
	echo "make test: every stage passed"
else
	echo "make test: FAILED (see the stages above)"
fi
exit "$failed"
