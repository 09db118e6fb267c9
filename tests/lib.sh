# SPDX-License-Identifier: GPL-2.0
# Helpers for the .tc tests (sourced). The tests are ftracetest scripts in POSIX sh, run with
# the tracing directory as cwd under `sh -e`: by tests/run-guest.sh (the project's runner,
# which exports UD_RUNNER and the UD_* paths) or by the kernel's own
# tools/testing/selftests/ftrace/ftracetest, which needs only UD_REPO exported (the
# repository, built); the rest has defaults here.
: "${UD_KO:=$UD_REPO/unwind_deferred.ko}"
: "${UD_CLIENT_KO:=$UD_REPO/tests/client/unwind_test_client.ko}"
: "${UD_BIN:=$UD_REPO/tests/bin}"
: "${UD_OUT:=${TMPDIR:-/tmp}}" # ftracetest gives each test its own TMPDIR
: "${TRACING:=$(pwd)}"

fail() { echo "FAIL: $*" >&2; exit 1; }
# Unsupported: the project's runner reads exit status 4; ftracetest wants exit_unsupported.
skip() {
	echo "SKIP: $*" >&2
	if command -v exit_unsupported > /dev/null 2>&1; then exit_unsupported; fi
	exit 4
}
# read_into "A B ..." CMD...: run CMD and give the words of its output line to A, B, ...
# (bash's `read A B < <(CMD)`, but a failing CMD fails the test).
read_into() {
	local names out
	names=$1
	shift
	out=$("$@")
	read -r $names <<EOF
$out
EOF
}
# now: seconds since boot (POSIX sh has no $SECONDS).
now() { cut -d. -f1 /proc/uptime; }
# assert_eq ACTUAL EXPECTED WHAT
assert_eq() { [ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"; }

load_module() { grep -q '^unwind_deferred ' /proc/modules || insmod "$UD_KO" "$@"; }
unload_module() {
	grep -q '^unwind_test_client ' /proc/modules && rmmod unwind_test_client
	rmmod unwind_deferred
}
load_client() { load_module; grep -q '^unwind_test_client ' /proc/modules || insmod "$UD_CLIENT_KO" "$@"; }

# perf in the guest, with its files in the guest's /tmp. Its build-id cache: HOME is on the
# read-only 9p root, and without the cache perf script cannot unwind through the vDSO that
# perf record saw (it reads the vDSO's build-id from perf.data, looks for the saved image and
# gives up at that frame). perf.data (-o "$UD_PERF_TMP/..."): on 7.3 perf record cannot write
# it to the 9p share (it stops after the header), on 6.12 a perf.data on the share ends up
# with no build-ids at all, which only hid the first problem, and under --icount each of
# perf's writes there is a round trip to the host inside the benchmarks' instruction count.
UD_PERF_TMP=/tmp/ud-perf
perf_local() { mkdir -p "$UD_PERF_TMP/buildid" && perf --buildid-dir "$UD_PERF_TMP/buildid" "$@"; }

# qprof_snap NAME: under scripts/vm-test.sh --qprof, the host's plugin (tools/qprof) writes
# the guest's instruction counts so far, which become $UD_OUT/NAME (scripts/qprof-report.py
# compares two). The plugin writes its snapshot while the marking instruction runs, before
# the guest goes on. Does nothing without --qprof.
qprof_snap() {
	[ -n "${UD_QPROF:-}" ] || return 0
	local f
	"$UD_BIN/qprof-mark"
	for f in "$UD_OUT"/qprof.[0-9]*; do
		case $f in *.tmp) continue ;; esac
		[ -e "$f" ] && mv "$f" "$UD_OUT/$1" && return 0
	done
	fail "qprof: no snapshot for $1"
}

# The module's debugfs counters ("name: value" lines): the core's and the tracer's.
UD_DEBUGFS=/sys/kernel/debug/unwind_deferred
# ratio A B [DIGITS]: A / B rounded to DIGITS decimals (3), for the benches' comparisons (bc's
# scale truncates: 0.509 printed as .50 would read as a goal of 0.5 met).
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-3}" 'BEGIN { printf "%.*f", d, b ? a / b : 0 }'; }
counter() { awk -v k="$1" '$1 == k ":" { print $2 }' $UD_DEBUGFS/stats $UD_DEBUGFS/ftrace; }

# Every test starts with the module freshly loaded and no tracing instance.
# tests/run-guest.sh loads the module before each test and, after it, unloads it and removes
# the instances; under ftracetest, which does neither (its initialize_ftrace resets the top
# level only), the test does it here: a previous test may have left a parameter or an
# option changed, or, failing, an instance that the next one creates again.
grep -q '^debugfs ' /proc/mounts || mount -t debugfs nodev /sys/kernel/debug
if [ -z "${UD_RUNNER:-}" ]; then
	. "$UD_REPO/tests/anchors.sh"
	for d in instances/*/; do
		[ -d "$d" ] && ! is_suite_anchor "$d" && rmdir "$d"
	done
	if grep -q '^unwind_deferred ' /proc/modules; then unload_module; fi
fi
load_module
