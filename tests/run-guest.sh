#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs inside the VM: the ftracetest-style suite runner.
#
#   run-guest.sh [TEST.tc ...]      (default: every tests/**/*.tc whose file name is not
#                                    UD_EXCLUDE, a find -name pattern, e.g. UD_EXCLUDE='bench-*.tc')
#
# Each test is an ftracetest script (POSIX sh) with "# description:" and optional
# "# requires:" headers in ftracetest's forms (tracefs files relative to the tracing
# directory, "NAME:program", "NAME:tracer", "PATTERN:README"; never a file of the module:
# ftracetest checks them before the test loads it), and an optional "# timeout: SECONDS"
# (default 300). The runner loads the module before each test, runs the
# test with the tracing directory as cwd and a timeout, then resets tracing, unloads the
# modules and reads dmesg: any kernel warning, BUG, oops, lockdep, KASAN or kmemleak report
# that appeared during the test fails it. Output is KTAP; the last line is
# "N passed, N failed, N skipped".
#
# Test exit codes (as ftracetest): 0 pass, 1 fail, 4 unsupported (SKIP).

set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
export UD_REPO=$REPO
export UD_KO=${UD_KO:-$REPO/unwind_deferred.ko}
export UD_CLIENT_KO=${UD_CLIENT_KO:-$REPO/tests/client/unwind_test_client.ko}
export UD_BIN=${UD_BIN:-$REPO/tests/bin}
export UD_OUT=${UD_OUT:-/tmp}
export UD_RUNNER=1 # tests/lib.sh: the runner loads and unloads the module around each test
TEST_TIMEOUT=300 # per test; a "# timeout: N" header or UD_TEST_TIMEOUT overrides it, and
		 # UD_TIMEOUT_SCALE multiplies it (slow kernels: the debug one)

mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
TRACING=/sys/kernel/tracing
export TRACING

# The tests are the arguments, or every test (paths have no blanks: the repository's).
[ $# -gt 0 ] || set -- $(find "$REPO/tests" -name '*.tc' ! -name "${UD_EXCLUDE:-/}" | sort)

# A kernel problem anywhere in the log fails the test during which it appeared.
KERNEL_PROBLEM='WARNING:|BUG:|Oops|CFI failure|general protection|Call Trace:|INFO: task .* blocked|possible circular locking|inconsistent lock state|KASAN|kmemleak: [0-9]+ new suspected|UBSAN|RCU detected stall|soft lockup|hard LOCKUP|list_add corruption|list_del corruption'

# Anchors for the whole suite (tests/anchors.sh). Not under -icount (the benchmarks and
# qprof: two more probes a system call and a context switch would move their figures), nor
# with UD_ANCHORS=0.
. "$REPO/tests/anchors.sh"

reset_tracing() {
	echo 0 > $TRACING/tracing_on
	echo nop > $TRACING/current_tracer
	echo 0 > $TRACING/events/enable
	echo > $TRACING/set_event_pid 2>/dev/null
	for d in $TRACING/instances/*/; do
		is_suite_anchor "$d" && continue
		[ -d "$d" ] && rmdir "$d" 2>/dev/null
	done
	echo 0 > $TRACING/options/userstacktrace 2>/dev/null
	[ -e $TRACING/options/userstacktrace_delay ] && echo 0 > $TRACING/options/userstacktrace_delay
	echo > $TRACING/trace
	echo 1 > $TRACING/tracing_on
}

unload_all() {
	local m ok=0
	for m in unwind_test_client unwind_deferred; do
		if grep -q "^$m " /proc/modules; then
			rmmod "$m" || ok=1
		fi
	done
	return $ok
}

check_requires() {
	local req
	for req in $(sed -n 's/^# requires: *//p' "$1"); do
		case $req in
		*:program) command -v "${req%:program}" >/dev/null || { echo "program ${req%:program}"; return 1; } ;;
		*:tracer) grep -qw "${req%:tracer}" $TRACING/available_tracers || { echo "tracer ${req%:tracer}"; return 1; } ;;
		*:README) grep -Fq "${req%:README}" $TRACING/README || { echo "README ${req%:README}"; return 1; } ;;
		*) [ -e "$TRACING/$req" ] || { echo "$req"; return 1; } ;;
		esac
	done
	return 0
}

echo "KTAP version 1"
echo "1..$#"
echo "# kernel $(uname -r), $(nproc) CPUs"
if [ -z "${UD_ICOUNT:-}" ] && [ "${UD_ANCHORS:-1}" != 0 ]; then
	make_anchors $TRACING && echo "# anchors: $SUITE_ANCHORS" || echo "# anchors: not made"
fi
passed=0 failed=0 skipped=0 n=0
dmesg -c >/dev/null
for t in "$@"; do
	n=$((n + 1))
	name=${t#$REPO/tests/}
	desc=$(sed -n 's/^# description: *//p' "$t" | head -1)
	log=$(mktemp)
	start=$(date +%s.%N)
	status=0
	if [ ! -e "$UD_KO" ]; then
		echo "module $UD_KO not built" >"$log"
		status=1
	elif ! grep -q '^unwind_deferred ' /proc/modules && ! insmod "$UD_KO" >"$log" 2>&1; then
		status=1
	elif missing=$(check_requires "$t"); then
		limit=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "$t" | head -1)
		limit=$((${UD_TEST_TIMEOUT:-${limit:-$TEST_TIMEOUT}} * ${UD_TIMEOUT_SCALE:-1}))
		(cd $TRACING && timeout -k 5 "$limit" sh -e "$t") >>"$log" 2>&1
		status=$?
		[ $status = 124 ] && echo "timed out after ${limit}s" >>"$log"
	else
		echo "requires $missing" >>"$log"
		status=4
	fi
	reset_tracing >>"$log" 2>&1
	if ! unload_all >>"$log" 2>&1; then
		echo "module unload failed" >>"$log"
		[ $status = 4 ] || status=1
	fi
	# kmemleak (debug kernel): scan now so a leak shows up in this test's dmesg.
	if [ -w /sys/kernel/debug/kmemleak ]; then
		echo scan > /sys/kernel/debug/kmemleak
		if grep -q unreferenced /sys/kernel/debug/kmemleak; then
			echo "kmemleak:" >>"$log"
			head -60 /sys/kernel/debug/kmemleak >>"$log"
			echo clear > /sys/kernel/debug/kmemleak
			status=1
		fi
	fi
	kmsg=$(dmesg -c)
	if echo "$kmsg" | grep -Eq "$KERNEL_PROBLEM"; then
		echo "kernel log reports a problem:" >>"$log"
		echo "$kmsg" | grep -E -A 25 "$KERNEL_PROBLEM" | head -80 >>"$log"
		echo "kernel log reports a problem (above)" >>"$log"
		status=1
	fi
	secs=$(echo "$(date +%s.%N) - $start" | bc)
	case $status in
	0) echo "ok $n $name - $desc # time=${secs%???????}s"; passed=$((passed + 1)) ;;
	4) echo "ok $n $name - $desc # SKIP $(tail -1 "$log" | sed 's/^SKIP: //')"; skipped=$((skipped + 1)) ;;
	*) echo "not ok $n $name - $desc # exit=$status"; failed=$((failed + 1))
	   sed 's/^/#   /' "$log" | tail -60 ;;
	esac
	[ -n "${UD_VERBOSE:-}" ] && [ "$status" != 1 ] && sed 's/^/#   /' "$log"
	# Measurements a test wants reported (lines starting with "BENCH:").
	grep '^BENCH:' "$log" | sed 's/^/# /'
	rm -f "$log"
done
echo "$passed passed, $failed failed, $skipped skipped"
