#!/usr/bin/env bash
# Fuzz each target for FUZZ_SECONDS in a scratch corpus under OUT (seeded from the committed
# corpus and a fresh run of make_seeds), one summary line per target. Any crash, leak,
# sanitizer report or violated invariant fails the run, with the report and the input.
#
#   run.sh OUT TARGET...        (from tests/fuzz; the Makefile's `run` calls it)
set -uo pipefail

out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
seconds=${FUZZ_SECONDS:-20}
max_len=${FUZZ_MAX_LEN:-4200}

# Seeds from the encoders as they are now; a committed corpus that differs is stale.
rm -rf "$out/seeds"
"$out/make_seeds" "$out/seeds" || exit 1
if ! diff -rq "$here/corpus" "$out/seeds" >/dev/null; then
	echo "fuzz: note: tests/fuzz/corpus differs from make_seeds' output (format changed?):" \
		"run 'make -C tests/fuzz seeds' and commit"
fi

# fuzz_one TARGET: fuzz it, print its summary (and its report if it failed); exit status 1 if it failed.
fuzz_one() {
	local t=$1 corpus=$out/corpus/$1 log=$out/$1.log rc execs rate done_line cov ft corp stats start
	mkdir -p "$corpus"
	for d in "$here/corpus/$t" "$out/seeds/$t"; do
		[ -d "$d" ] && cp -r "$d/." "$corpus/"
	done
	# inputs that once found a bug (tests/fuzz/regressions/TARGET-*) run first, every time
	for f in "$here/regressions/$t"-*; do
		[ -e "$f" ] && cp "$f" "$corpus/"
	done
	"$out/$t" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" "$corpus" >"$log" 2>&1
	rc=$?

	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	done_line=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -n 1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
	corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$done_line")
	stats="${execs:-?} execs (${rate:-?}/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}"
	if [ "$rc" = 0 ]; then
		echo "fuzz: $t: ok: $stats in ${seconds}s"
		return 0
	fi
	echo "fuzz: $t: FAILED (exit $rc) after $stats; log $log"
	# The report, from its first line to libFuzzer's SUMMARY, without libFuzzer's own frames.
	start=$(grep -m 1 -n -E 'invariant violated|runtime error|ERROR: ' "$log" | cut -d: -f1)
	sed -n "${start:-1},/^SUMMARY: /p" "$log" | head -n 60 |
		grep -v -E ' in (fuzzer::|__sanitizer_print_stack_trace|__libc_start|_start |__pthread_kill|raise |abort )|libc\.so|rudimentary signal|Combine libFuzzer' |
		sed -E 's/ \(BuildId: [0-9a-f]+\)//'
	sed -n 's/.*Test unit written to /    input: /p' "$log"
	return 1
}

# One target per core at a time (nothing else runs during this stage): the same seconds of
# fuzzing each, in half the wall time on two cores. Summaries print in the targets' order.
jobs=${FUZZ_JOBS:-$(nproc)}
rm -rf "$out/results"
mkdir -p "$out/artifacts" "$out/results"
running=0
for t in "$@"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	( fuzz_one "$t" >"$out/results/$t.txt" 2>&1; echo $? >"$out/results/$t.rc" ) &
	running=$((running + 1))
done
wait
failed=0
for t in "$@"; do
	cat "$out/results/$t.txt"
	[ "$(cat "$out/results/$t.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit $failed
