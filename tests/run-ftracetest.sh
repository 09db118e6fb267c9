#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs inside the VM: tests through the kernel's own ftracetest instead of the project's
# runner (tests/run-guest.sh), to show that they are ftracetest scripts.
#
#   UD_FTRACETEST=/path/to/tools/testing/selftests/ftrace/ftracetest run-ftracetest.sh TEST.tc|DIR...
#
# ftracetest runs each test as it runs its own: sourced by /bin/sh under `set -e`, in the
# tracing directory, after its initialize_ftrace. It knows nothing of the module: the tests
# load it themselves (tests/lib.sh), and only UD_REPO (and test sizes) are exported here, as
# a user would. It does not read the kernel log either, so this script does once at the
# end: a kernel problem fails the run.
#
# The output is ftracetest's (KTAP, as comments), then its results in the project's format (path,
# description, the reason of a skip from the test's log), which scripts/check.sh counts and
# checks against tests/allowed-skips; the last line is "N passed, N failed, N skipped".

set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
export UD_REPO=$REPO
ftracetest=${UD_FTRACETEST:?set UD_FTRACETEST to the kernel tree\'s ftracetest}
logs=${UD_OUT:-/tmp}/ftracetest-logs
unset UD_OUT # each test gets ftracetest's TMPDIR (tests/lib.sh)

mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
# The same kernel problems as tests/run-guest.sh's.
KERNEL_PROBLEM=$(sed -n "s/^KERNEL_PROBLEM='\(.*\)'$/\1/p" "$REPO/tests/run-guest.sh")
[ -n "$KERNEL_PROBLEM" ] || { echo "no KERNEL_PROBLEM in run-guest.sh"; echo "0 passed, 1 failed"; exit 1; }

echo "# kernel $(uname -r), $(nproc) CPUs; $ftracetest"
# The suite anchors (tests/anchors.sh) as in tests/run-guest.sh: ftracetest's
# initialize_ftrace before each test resets the top level only, and tests/lib.sh's cleanup
# spares them, so they stay for the whole run.
. "$REPO/tests/anchors.sh"
anchors=
if [ -z "${UD_ICOUNT:-}" ] && [ "${UD_ANCHORS:-1}" != 0 ]; then
	make_anchors /sys/kernel/tracing && anchors=$SUITE_ANCHORS
	echo "# anchors: ${anchors:-not made}"
fi
dmesg -c > /dev/null
rm -rf "$logs"
# ftracetest keeps the log of every test that did not pass (--keep: of every test).
sh "$ftracetest" -K --keep -l "$logs" "$@" > "$logs.out" 2>&1
status=$?
sed 's/^/# ftracetest: /' "$logs.out" # (its own ok/not ok lines are not the results below)

# Its KTAP lines are numbered in the order of the tests given, a directory's in the order
# of its own find_testcases (find DIR -name '*.tc' | sort).
tests=
for t in "$@"; do
	if [ -d "$t" ]; then tests="$tests $(find "$t" -name '*.tc' | sort)"; else tests="$tests $t"; fi
done
passed=0 failed=0 skipped=0 n=0
for t in $tests; do
	n=$((n + 1))
	name=${t#$REPO/tests/}
	desc=$(sed -n 's/^# description: *//p' "$t" | head -1)
	line=$(grep -E "^(not )?ok $n " "$logs.out" | head -1)
	log=$(ls "$logs"/$n-"$(basename "$t")"-log.* 2> /dev/null | head -1)
	case $line in
	"ok $n "*"# SKIP"*)
		reason=$(sed -n 's/^SKIP: //p' "$log" 2> /dev/null | tail -1)
		echo "ok $n $name - $desc # SKIP ${reason:-unsupported}"
		skipped=$((skipped + 1)) ;;
	"ok $n "*) echo "ok $n $name - $desc"; passed=$((passed + 1)) ;;
	*)
		echo "not ok $n $name - $desc"
		[ -n "$log" ] && tail -40 "$log" | sed 's/^/#   /'
		failed=$((failed + 1)) ;;
	esac
done
for a in $anchors; do # a test that removed one took the protection away from the rest
	[ -d /sys/kernel/tracing/instances/$a ] || echo "# anchors: $a was gone by the end of the run"
done
kmsg=$(dmesg -c)
if echo "$kmsg" | grep -Eq "$KERNEL_PROBLEM"; then
	echo "kernel log reports a problem:"
	echo "$kmsg" | grep -E -A 25 "$KERNEL_PROBLEM" | head -80
	failed=$((failed + 1))
fi
[ $status = 0 ] || [ $failed != 0 ] || { echo "ftracetest exited $status"; failed=1; }
echo "$passed passed, $failed failed, $skipped skipped"
