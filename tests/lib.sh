# SPDX-License-Identifier: GPL-2.0
# Helpers for the .tc tests (sourced). The runner exports UD_KO, UD_CLIENT_KO, UD_BIN,
# UD_OUT, TRACING, and runs each test with the tracing directory as cwd under `bash -e`.

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 4; }
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
# it to the 9p share (it stops after the header), and on 6.12 a perf.data on the share ends up
# with no build-ids at all, which only hid the first problem.
UD_PERF_TMP=/tmp/ud-perf
perf_local() { mkdir -p "$UD_PERF_TMP/buildid" && perf --buildid-dir "$UD_PERF_TMP/buildid" "$@"; }

# The module's debugfs counters ("name: value" lines): the core's and the tracer's.
UD_DEBUGFS=/sys/kernel/debug/unwind_deferred
counter() { awk -v k="$1" '$1 == k ":" { print $2 }' $UD_DEBUGFS/stats $UD_DEBUGFS/ftrace; }
