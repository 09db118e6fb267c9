#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check` (base kernel) and `make check-debug` (debug kernel): every test, with the time
# of each phase. Installs what is missing and builds the kernel when it is not cached.
# `make soak` and `make soak-debug` add --full.
#
#   scripts/check.sh base|debug [--full]
#
# The VM phases run on each kernel series of KERNEL (6.12 and 7.3 by default, 6.12 for the
# debug kernel; KERNEL=7.3 for one), the ftracetest run on the first series only
# (UD_FTRACETEST_ALL=1: on each), the benchmarks on 6.12 only.
#
# The VM suite runs every test; the stress tests scale with UD_* sizes. By default they are
# sized for a check of a few minutes under TCG (half an hour on the debug kernel); --full
# (`make soak`: about half an hour; `make soak-debug`: hours) uses the sizes the issues ask for: 10^5 short-lived tasks, 200 load/unload cycles (100
# plain + 100 with NMIs), 5000 NMIs.
#
# The last line is "check: N passed, N failed" over all phases (host tests, harness
# self-test, VM suite); the exit status is non-zero if anything failed. A skipped test
# counts as failed unless tests/allowed-skips allows its reason.
set -uo pipefail

flavour=${1:-base}
guest_timeout=5400
if [ "${2:-}" = --full ]; then
	# On the debug kernel (KASAN, lockdep) under TCG, 10^5 tasks take longer than 20 minutes
	# and the whole suite several hours.
	test_timeout=1200 guest_timeout=14400
	[ "$flavour" = debug ] && test_timeout=5400 guest_timeout=28800
	export UD_MANY_TASKS=${UD_MANY_TASKS:-100000} UD_RELOAD_CYCLES=${UD_RELOAD_CYCLES:-100}
	export UD_NMIS=${UD_NMIS:-5000} UD_TEST_TIMEOUT=${UD_TEST_TIMEOUT:-$test_timeout}
	export UD_PERF_EVENTS=${UD_PERF_EVENTS:-150}
	suffix=-full
else
	# The debug kernel (KASAN, lockdep, kmemleak) runs several times slower under TCG: the
	# reload cycles with NMIs took more than their 300 s, cfi-vs-perf more than its 1800 s,
	# and the whole suite about 85 minutes.
	if [ "$flavour" = debug ]; then
		export UD_TIMEOUT_SCALE=${UD_TIMEOUT_SCALE:-4}
		guest_timeout=14400
	fi
	export UD_MANY_TASKS=${UD_MANY_TASKS:-10000} UD_RELOAD_CYCLES=${UD_RELOAD_CYCLES:-10}
	export UD_NMIS=${UD_NMIS:-2000} UD_BENCH_N=${UD_BENCH_N:-200000}
	export UD_BENCH_EVENTS=${UD_BENCH_EVENTS:-2000}
	suffix=
fi
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
# Kernel series: both supported ones, 6.12 first, unless KERNEL names one (make check
# KERNEL=7.3). The debug flavour defaults to 6.12 alone: its suite takes over an hour a
# series under TCG (make check-debug KERNEL="6.12 7.3" runs both).
default_kernels="6.12 7.3"
[ "$flavour" = debug ] && default_kernels=6.12
kernels=${KERNEL:-$default_kernels}
first=${kernels%% *} # the series that also gets the ftracetest run and the full perf comparisons
out=$REPO/out/check-$flavour$suffix
mkdir -p "$out"
passed=0 failed=0 timings=() failed_phases=()

phase() { # phase NAME COMMAND...: runs, times and logs one phase; returns its status
	local name=$1 start=$SECONDS rc
	shift
	echo "=== $name"
	"$@" 2>&1 | tee "$out/$name.log"
	rc=${PIPESTATUS[0]}
	timings+=("$(printf '%-18s %4ds  %s' "$name" $((SECONDS - start)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")")")
	[ "$rc" = 0 ] || failed_phases+=("$name")
	return "$rc"
}

# Adds the counts of a phase's log: cargo's "test result" lines, or our "N passed, N failed".
count() {
	local p f
	p=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' "$out/$1.log" |
		awk '{p += $4; f += $6} END {print p + 0, f + 0}')
	if [ "$p" = "0 0" ]; then
		p=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/$1.log" | tail -1 | awk '{print $1, $3}')
	fi
	[ -n "$p" ] || p="0 1" # a phase that reported nothing counts as a failure
	passed=$((passed + ${p% *}))
	failed=$((failed + ${p#* }))
}

# Skips in a phase's log that tests/allowed-skips does not allow count as failures.
check_skips() {
	local line path reason bad=0
	while IFS= read -r line; do
		path=$(echo "$line" | sed -E 's/^ok [0-9]+ ([^ ]+) - .*/\1/')
		reason=${line##*# SKIP }
		if ! grep -v '^#' "$REPO/tests/allowed-skips" | awk -F'\t' -v p="$path" -v r="$reason" \
			'$1 == p && r ~ $2 { found = 1 } END { exit !found }'; then
			echo "check: $path skipped ($reason), which tests/allowed-skips does not allow"
			bad=$((bad + 1))
		fi
	done < <(grep -E '^ok [0-9]+ .* # SKIP ' "$out/$1.log")
	failed=$((failed + bad))
	[ $bad = 0 ]
}

# What failed, in a few lines, for a reader who sees only the end of the output (CI keeps
# its tail): each failed phase's failed tests and their messages (a test's FAIL line, and
# the summary of a comparison with perf), from the phase's log; the logs have the rest.
failures() {
	local name lines
	for name in "${failed_phases[@]}"; do
		echo "--- $name ($out/$name.log)"
		lines=$(grep -E '^not ok |FAIL|panicked|^error|kernel log reports|: module events [0-9]+, perf' \
			"$out/$name.log" | grep -E -v 'selftest/warn|BENCH: [^ ]+: module events')
		# (None of those: a phase that is not a test run, such as a build; its last lines.)
		[ -n "$lines" ] || lines=$(tail -3 "$out/$name.log")
		echo "$lines" | cut -c1-160 | head -12
	done
}

finish() {
	echo "=== times"
	printf '%s\n' "${timings[@]}"
	[ ${#failed_phases[@]} = 0 ] || { echo "=== failures"; failures; }
	echo "check: $passed passed, $failed failed"
	[ "$failed" = 0 ] && [ "$1" = 0 ]
	exit $?
}

phase setup "$REPO/scripts/setup.sh" || { failed=$((failed + 1)); finish 1; }

status=0
# The Rust sources as rustfmt writes them (one test: it prints the files it would change).
format_check() {
	if cargo fmt --all -- --check; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; return 1; fi
}
phase format format_check || status=1
count format
phase host-tests cargo test --workspace --locked || status=1
count host-tests
# The mutants of `make mutants` must still apply to the tree: a check that costs no VM.
phase mutant-patches "$REPO/scripts/mutants.sh" --apply-check || status=1
count mutant-patches
phase loom env RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
	cargo test -p unwind-logic --release --locked --test loom || status=1
count loom

# The VM phases, once per kernel series: 6.12 first. Phase logs of other series than 6.12
# carry its name (vm-suite-7.3.log, ...).
for series in $kernels; do
	export KERNEL=$series
	sfx=
	[ "$series" = 6.12 ] || sfx=-$series
	phase kernel$sfx "$REPO/scripts/kernel.sh" "$flavour" "$series" || { failed=$((failed + 1)); finish 1; }
	kdir=$(tail -1 "$out/kernel$sfx.log")
	unset UD_PERF
	# On a kernel with its own deferred unwinder, tests run its perf beside the module
	# (tests/ftrace/perf-defer.tc): Debian's perf 6.1 does not know --call-graph fp,defer.
	if [ "$series" != 6.12 ]; then
		phase perf$sfx "$REPO/scripts/perf.sh" "$series" || { failed=$((failed + 1)); finish 1; }
		export UD_PERF=$(tail -1 "$out/perf$sfx.log")
	fi
	# One tree, built for one kernel at a time: clean what the previous series built.
	make -s -C "$REPO" KDIR="$kdir" clean-kbuild >/dev/null 2>&1
	phase build$sfx make -C "$REPO" KDIR="$kdir" all || { failed=$((failed + 1)); finish 1; }
	# No function of the modules with a stack frame over 2 KiB (rustc has no
	# -Wframe-larger-than): read from the machine code of this series' build.
	phase frame-sizes$sfx "$REPO/scripts/frame-sizes.sh" "$REPO/unwind_deferred.ko" \
		"$REPO"/tests/client/*.ko || status=1
	count frame-sizes$sfx
	if [ "$series" = 6.12 ] && [ -x "$REPO/scripts/harness-selftest.sh" ]; then
		phase harness-selftest "$REPO/scripts/harness-selftest.sh" --kernel "$kdir" || status=1
		count harness-selftest
	fi
	# The perf comparisons (cfi-vs-perf.tc, 40 events a workload by default) are most of a
	# VM suite's time (1,060 of 1,904 s on 6.12 in one run): after the first series, whose
	# difference is the kernel and not the comparison, 10 a workload, as the ftracetest run
	# of 7.3 had them and passed (make soak keeps its own size everywhere).
	[ "$series" = "$first" ] || export UD_PERF_EVENTS=${UD_PERF_EVENTS:-10}
	echo "sizes: $(env | grep -E '^UD_' | sort | tr '\n' ' ')"
	# (The suite excludes the benchmarks by name: vng passes the guest's command in the
	# kernel command line, which a list of every test's path would overflow.)
	phase vm-suite$sfx env UD_EXCLUDE='bench-*.tc' "$REPO/scripts/vm-test.sh" --kernel "$kdir" \
		--timeout $guest_timeout --out "$out/vm$sfx" || status=1
	count vm-suite$sfx
	check_skips vm-suite$sfx || status=1
	# The same tests are ftracetest scripts: the directory tests/ftrace once more, through
	# the kernel tree's own ftracetest, with fewer perf events. Once, on the first series
	# (6.12): what it shows is that they run under ftracetest, which does not depend on the
	# series, and it costs about 10 minutes under TCG (a CI run of both series with it on
	# each did not finish within CI's 90 minutes). UD_FTRACETEST_ALL=1 runs it on every series.
	if [ "$series" = "$first" ] || [ "${UD_FTRACETEST_ALL:-0}" = 1 ]; then
		ksrc=$("$REPO/scripts/kernel.sh" source "$series" 2>/dev/null | tail -1)
		phase ftracetest$sfx env UD_PERF_EVENTS=10 "$REPO/scripts/vm-test.sh" --kernel "$kdir" \
			--timeout $guest_timeout --ftracetest "$ksrc/tools/testing/selftests/ftrace/ftracetest" \
			--out "$out/ftracetest$sfx" "$REPO/tests/ftrace" || status=1
		count ftracetest$sfx
		check_skips ftracetest$sfx || status=1
	fi
	# The benchmarks run in a VM of their own under -icount, where time is counted in guest
	# instructions: their numbers are then the same on every run and every host. They measure
	# the module's cost against perf's, which does not depend on the series: 6.12 only.
	if [ "$series" = 6.12 ]; then
		mapfile -t benches < <(find tests/bench -name '*.tc' | sort)
		phase bench "$REPO/scripts/vm-test.sh" --icount --kernel "$kdir" --timeout $guest_timeout \
			--out "$out/bench" "${benches[@]}" || status=1
		count bench
		check_skips bench || status=1
	fi
done
finish $status
