#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Proves that the VM test harness fails when it must:
#   (a) a test during which the kernel warns (the test client's "warn") is reported
#       "not ok" by tests/run-guest.sh and makes scripts/vm-test.sh exit non-zero;
#   (b) a guest that hangs (a test sleeping forever) is killed at vm-test.sh's --timeout
#       and reported, with a non-zero exit;
#   (c) a guest whose kernel panics is reported as a crash, with the panic's own line from
#       the kernel's console (vm-test.sh passes vng --verbose), and a non-zero exit;
#   (d) the comparison with perf (tests/helpers/compare-perf.py) fails on different stacks
#       and too few events, and tells perf's own failure apart (made-up traces, no VM).
# The three deliberately failing tests are tests/selftest/*.selftest (not *.tc, so the normal
# suite never runs them).
#
#   scripts/harness-selftest.sh [--kernel KDIR]
#
# Prints one line per check and "N passed, N failed"; exits 0 only when every failure was
# detected.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
kdir=
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kdir=$2; shift 2 ;;
	*) echo "harness-selftest: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$kdir" ] || kdir=$("$REPO/scripts/kernel.sh" base)
out=$REPO/out/harness-selftest
mkdir -p "$out"
passed=0 failed=0

result() {	# result OK NAME DETAILS
	if [ "$1" = 1 ]; then
		echo "ok - $2"
		passed=$((passed + 1))
	else
		echo "not ok - $2: $3"
		failed=$((failed + 1))
	fi
}

# (a) A kernel warning fails the test and the run.
"$REPO/scripts/vm-test.sh" --kernel "$kdir" --out "$out/warn" --timeout 600 \
	"$REPO/tests/selftest/warn.selftest" > "$out/warn.log" 2>&1
rc=$?
ok=0
if [ $rc != 0 ] && grep -q '^not ok 1 selftest/warn.selftest' "$out/warn.log" &&
   grep -q 'kernel log reports a problem' "$out/warn.log" &&
   grep -q 'WARNING: .*\[unwind_test_client\]' "$out/warn.log"; then
	ok=1
fi
result $ok "a kernel WARNING fails the test (run-guest.sh: not ok) and vm-test.sh (exit $rc)" \
	"see $out/warn.log"

# (b) A hung guest is killed at the timeout and reported.
timeout=60
start=$SECONDS
"$REPO/scripts/vm-test.sh" --kernel "$kdir" --out "$out/hang" --timeout $timeout \
	"$REPO/tests/selftest/hang.selftest" > "$out/hang.log" 2>&1
rc=$?
elapsed=$((SECONDS - start))
ok=0
if [ $rc != 0 ] && grep -q 'did not finish within' "$out/hang.log" &&
   [ $elapsed -lt $((timeout + 60)) ]; then
	ok=1
fi
result $ok "a hung guest is killed after ${elapsed}s (--timeout $timeout) and vm-test.sh fails (exit $rc)" \
	"see $out/hang.log"

# (c) A panic ends the guest at once (oops=panic panic=-1): reported with its console line.
"$REPO/scripts/vm-test.sh" --kernel "$kdir" --out "$out/panic" --timeout 600 \
	"$REPO/tests/selftest/panic.selftest" > "$out/panic.log" 2>&1
rc=$?
ok=0
if [ $rc != 0 ] && grep -q 'without a summary line: crash or panic' "$out/panic.log" &&
   grep -q 'Kernel panic - not syncing: sysrq triggered crash' "$out/panic.log"; then
	ok=1
fi
result $ok "a kernel panic is reported as a crash with its console line, and vm-test.sh fails (exit $rc)" \
	"see $out/panic.log"

# (d) The comparison with perf: its outcomes on made-up traces.
python3 "$REPO/tests/helpers/compare-perf.py" --self-test > "$out/compare-perf.log" 2>&1
rc=$?
ok=0
[ $rc = 0 ] && ok=1 # (its exit status is 1 when any case is "not ok")
result $ok "compare-perf.py: the same stacks pass, different ones and too few events fail, perf's failure is told apart" \
	"$(grep -v '^ok' "$out/compare-perf.log" | head -5)"

echo "$passed passed, $failed failed"
[ $failed = 0 ]
