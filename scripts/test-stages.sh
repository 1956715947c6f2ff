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
#
# TBV_DEADLINE (seconds since the epoch; make test sets it inside CI's 90 minutes): a stage
# still running then is stopped (its VM's guest, told the same deadline by tests/harness/vm.py,
# prints its hung tasks first) and the stages after it are not started, so the run always ends
# with its summary: each stage's result, minutes and pytest tally, then the lines that say why
# a stage failed (CI keeps only the end of the output).
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
	# rdma-core's suite, in a VM of its own: the second lane ends about when the first does
	"&vm-rdma-core:test-vm-rdma-core"
	"vm:test-vm-main"
	"join"
	# the two-VM suite on 7.3's thunderbolt.ko: 4 of CI's minutes it does not have (docs/ci.md)
	$([ "$full" = 1 ] && echo "kernels-vm2:test-vm2-7.3")
	"vm2:test-vm2"
	"suspend:test-vm2-suspend"
	"sanitizers-vm2:test-debug-ci-vm2"
)
# the two-VM suite on the other emulated NHIs (docs/emulator.md, "Profiles"); CI's is strix
[ "$full" = 1 ] && stages+=(
	"vm2-intel:test-vm2 NHI_PROFILE=intel"
	"vm2-amd:test-vm2 NHI_PROFILE=amd"
	"vm2-lenient:test-vm2 NHI_PROFILE=lenient"
	"vm2-sof-first:test-vm2 NHI_PROFILE=strix,sof=first"
	"vm2-sof-zero:test-vm2 NHI_PROFILE=strix,sof=zero"
	"vm2-no-replay:test-vm2 NHI_PROFILE=strix,replay-on-unmask=0"
)

beside() {
	case "${TBV_STAGES_BESIDE:-}" in
	1) return 0 ;;
	0) return 1 ;;
	esac
	bash scripts/debug-kernel-state.sh >/dev/null && ! [ -s build/kernels-cold ]
}

declare -A result minutes tally
run_start=$(date +%s)
deadline=${TBV_DEADLINE:-}
# a stage needs at least this much of the time left to be worth starting (the runner's own
# tests make it a few seconds)
min_stage_s=${TBV_STAGE_MIN_S:-120}
# (TBV_STAGE_LOGS: another directory, for the runner's own tests, which run inside make test)
logs=${TBV_STAGE_LOGS:-$here/build/stage-logs}

# run_stage NAME TARGETS...: run it (its output also kept in $logs/NAME.log), record its result,
# its minutes and pytest's tally in the results file.
run_stage() {
	local name=$1 start r left rc
	shift
	printf '\n==== make test: stage %s (make %s) ====\n' "$name" "$*" | tee "$logs/$name.log"
	start=$(date +%s)
	left=
	if [ -n "$deadline" ]; then
		left=$((deadline - start))
		if [ "$left" -lt "$min_stage_s" ]; then
			echo "make test: stage $name not started: ${left}s left before the deadline" |
				tee -a "$logs/$name.log"
			echo "$name NOT-RUN 0.0" >>"$results"
			return
		fi
	fi
	run_make "$name" "$left" "$@"
	rc=$(cat "$logs/$name.rc" 2>/dev/null || echo 1)
	case "$rc" in
	0) r=passed ;;
	124 | 137) r=$([ -n "$left" ] && echo DEADLINE || echo FAILED) ;;
	*) r=FAILED ;;
	esac
	echo "$name $r $(awk -v s="$(( $(date +%s) - start ))" 'BEGIN { printf "%.1f", s / 60 }')" \
		>>"$results"
}

# run_make NAME SECONDS TARGETS...: make TARGETS, its exit status into $logs/NAME.rc. Under
# timeout (SECONDS, if any), which puts the stage in a process group of its own: at the
# deadline TERM reaches every process of it (a VM then stops its guest), KILL a minute later.
# That group is not the terminal's, so ^C reaches it through stop_stages (the pid file).
run_make() {
	local name=$1 left=$2
	shift 2
	rm -f "$logs/$name.rc" "$logs/$name.pid"
	{
		if [ -n "$left" ]; then
			timeout -k 60 "$left" make --no-print-directory "$@" &
		else
			setsid make --no-print-directory "$@" &
		fi
		echo $! >"$logs/$name.pid"
		wait $!
		echo $? >"$logs/$name.rc"
	} 2>&1 | tee -a "$logs/$name.log"
	rm -f "$logs/$name.pid"
}

# ^C, or a TERM to this script: stop the running stages (each in its own process group) and
# end here, without a summary.
stop_stages() {
	local f
	trap - INT TERM
	for f in "$logs"/*.pid; do
		[ -s "$f" ] && kill -TERM -- "-$(cat "$f")" 2>/dev/null
	done
	[ -n "$lane_pid" ] && kill "$lane_pid" 2>/dev/null
	echo "make test: stopped" >&2
	exit 130
}

# pytest's closing tallies in a stage's log, joined: "224 passed, 1 xfailed; 6 passed".
# (colour codes stripped first: a guest that ran pytest on its console had a tty)
plain() {
	sed -E 's/\x1b\[[0-9;]*m//g; s/\r$//' "$1"
}

stage_tally() {
	plain "$1" | grep -aoE '^=+ [0-9]+ (passed|failed|error|errors|skipped|xfailed|deselected).* in [0-9.]+s' |
		sed -E 's/^=+ //; s/ in [0-9.]+s.*//' | paste -sd';' | sed 's/;/; /g'
}

# Why a stage failed, briefly: pytest's FAILED/ERROR lines, a guest's timeout and its hung
# tasks' first stack lines, make's errors (at most $2 lines).
stage_digest() {
	plain "$1" |
		grep -aE '^(FAILED|ERROR) |^vm: |^-- [0-9]+ |^\[<0>\]|TIMEOUT|timed out|^make(\[[0-9]+\])?: \*\*\*|not started' |
		grep -avE '^vm: (booted|console|dmesg)' | cut -c1-200 | head -n "$2"
}

# Where a stage's time went, for the next run's planning, on one line: its guests' boot times
# and pytest's three slowest test phases (the stage's runs ask pytest for --durations), test
# names without their file (CI keeps only the end of the output: it must stay short).
stage_timing() {
	local boots slowest
	boots=$(plain "$1" | grep -aoE '^vm: booted in [0-9.]+s' | sed 's/^vm: booted in //' | paste -sd' ')
	slowest=$(plain "$1" | awk '/slowest [0-9]+ durations/ { n = 3; next }
		n > 0 && /^[0-9.]+s / { sub(/ +[^ ]*::/, " "); print; n-- }' | paste -sd',' |
		sed 's/,/, /g')
	[ -n "$boots$slowest" ] || return 0
	echo "${boots:+boots $boots}${boots:+${slowest:+; }}${slowest:+slowest $slowest}" | cut -c1-200
}

mkdir -p "$logs"
results=$logs/results
: >"$results"
lane=() lane_pid=
trap stop_stages INT TERM
use_lane=0
if beside; then use_lane=1; fi

start_lane() {
	[ "${#lane[@]}" -gt 0 ] || return 0
	echo "make test: stages ${lane[*]%%:*} run beside the next ones (output at the join)"
	(
		for stage in "${lane[@]}"; do
			read -r -a targets <<<"${stage#*:}"
			run_stage "${stage%%:*}" "${targets[@]}" >/dev/null 2>&1
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
	tally[$name]=$([ -s "$logs/$name.log" ] && stage_tally "$logs/$name.log")
done <"$results"

names=()
for stage in "${stages[@]}"; do
	[ "$stage" = join ] && continue
	stage=${stage#&}
	names+=("${stage%%:*}")
done
failed=0
for name in "${names[@]}"; do
	r=${result[$name]:-FAILED}
	[ "$r" = passed ] && continue
	[ "$failed" = 1 ] || printf '\n==== make test: why stages failed ====\n'
	failed=1
	echo "-- $name ($r):"
	[ -s "$logs/$name.log" ] && stage_digest "$logs/$name.log" 12
done
printf '\n==== make test: summary ====\n'
for name in "${names[@]}"; do
	printf '%-15s %-8s %6s min  %s\n' "$name" "${result[$name]:-FAILED}" "${minutes[$name]:-?}" \
		"${tally[$name]:-}"
done
if [ "$use_lane" = 1 ]; then
	echo "(sanitizers and kernels ran beside vm: the stages' minutes overlap)"
fi
printf '\n==== make test: where the time went ====\n'
for name in "${names[@]}"; do
	[ -s "$logs/$name.log" ] || continue
	timing=$(stage_timing "$logs/$name.log")
	[ -z "$timing" ] || printf '%-15s %s\n' "$name" "$timing"
done
took=$(awk -v s="$(( $(date +%s) - run_start ))" 'BEGIN { printf "%.1f", s / 60 }')
if [ "$failed" = 0 ]; then
	echo "make test: every stage passed ($took min)"
else
	echo "make test: FAILED (see the stages above; $took min)"
fi
exit "$failed"
