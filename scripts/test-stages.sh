#!/usr/bin/env bash
# `make test` (and `make test-full`, TBV_FULL=1: CI's stages with what is kept out of CI's
# time budget): every stage runs, whatever failed before it, so one failure cannot hide
# another; a summary of all of them closes the run, and the exit status is 1 if any failed.
# A stage is a make target list; a stage whose prerequisites failed fails on its own terms.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

# name: make targets (in order; a later stage never depends on an earlier one succeeding)
stages=(
	"builds:modules checkpatch"
	"unit:unit"
	"fuzz:fuzz"
	"host:tools test-host"
	"vm:test-vm"
	"kernels:$([ "${TBV_FULL:-}" = 1 ] && echo "test-vm-6.1 test-vm-7.3 test-vm2-7.3" || echo test-kernels-ci)"
	"vm2:test-vm2"
	"suspend:test-vm2-suspend"
	"sanitizers:test-debug-ci"
)

names=() results=() minutes=()
failed=0
for stage in "${stages[@]}"; do
	name=${stage%%:*}
	read -r -a targets <<<"${stage#*:}"
	printf '\n==== make test: stage %s (make %s) ====\n' "$name" "${targets[*]}"
	start=$(date +%s)
	if make --no-print-directory "${targets[@]}"; then
		result=passed
	else
		result=FAILED
		failed=1
	fi
	names+=("$name")
	results+=("$result")
	minutes+=("$(awk -v s="$(( $(date +%s) - start ))" 'BEGIN { printf "%.1f", s / 60 }')")
done

printf '\n==== make test: summary ====\n'
for i in "${!names[@]}"; do
	printf '%-12s %-7s %6s min\n' "${names[$i]}" "${results[$i]}" "${minutes[$i]}"
done
if [ "$failed" = 0 ]; then
	echo "make test: every stage passed"
else
	echo "make test: FAILED (see the stages above)"
fi
exit "$failed"
