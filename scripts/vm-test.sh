#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the test kernel under virtme-ng (TCG: nested KVM does not work on these machines) and
# run the guest suite (tests/run-guest.sh) in it.
#
#   scripts/vm-test.sh --kernel KDIR [--timeout SECONDS] [--cpus N] [--out DIR] [--icount]
#                      [--qprof] [--ftracetest FTRACETEST] [TEST.tc ...]
#
# With --ftracetest the tests run through that ftracetest (the kernel tree's
# tools/testing/selftests/ftrace/ftracetest: tests/run-ftracetest.sh) instead of the
# project's runner.
#
# The guest sees the host's root filesystem read-only (so the repository, the module and the
# test programs) and OUT read-write. Its output comes back on stdout and into OUT/vm.log; the
# exit status is 0 only when the suite's closing line reports no failure. A guest that does
# not finish within the timeout is killed and reported, never waited on.
#
# While the VM runs, scripts/nmi-injector.py listens on the guest's QMP socket: a test asks
# for NMIs by creating $UD_OUT/nmi-request (a count) and waits for $UD_OUT/nmi-done.
#
# --icount runs QEMU with -icount: the guest's clock advances by one nanosecond per guest
# instruction (single-threaded TCG). Timings become instruction counts, the same on every
# run and every host: what benchmarks and profiles need (see Documentation/testing.rst).
#
# --qprof loads the QEMU plugin of tools/qprof, which counts every guest instruction run
# (exactly: not sampled); a test takes snapshots of the counts with qprof_snap (tests/lib.sh)
# and scripts/qprof-report.py turns two of them into a profile (Documentation/testing.rst).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
kdir= timeout=900 cpus=2 out=$REPO/out/vm memory=2G icount= qprof= runner=$REPO/tests/run-guest.sh
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kdir=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--memory) memory=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--icount) icount=1; shift ;;
	--qprof) qprof=1; shift ;;
	--ftracetest)
		[ -f "$2" ] || { echo "vm-test: no ftracetest at $2" >&2; exit 2; }
		UD_FTRACETEST=$(realpath "$2") runner=$REPO/tests/run-ftracetest.sh
		export UD_FTRACETEST # (reaches the guest with the other UD_* variables)
		shift 2 ;;
	--) shift; break ;;
	-*) echo "vm-test: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ -n "$kdir" ] || kdir=$("$REPO/scripts/kernel.sh" base)
image=$kdir/arch/x86/boot/bzImage
[ -e "$image" ] || { echo "vm-test: no kernel image at $image" >&2; exit 2; }

out=$(realpath -m "$out") # the guest needs an absolute path
rm -rf "$out"
mkdir -p "$out"
qmp=$out/qmp.sock
tests=()
for t in "$@"; do tests+=("$(realpath "$t")"); done

# The UD_* variables of the host (test sizes, verbosity) reach the guest's tests.
guest_env=$(env | grep -E '^UD_[A-Z_]+=[A-Za-z0-9_.,/*+-]*$' | grep -v '^UD_OUT=' | tr '\n' ' ')
[ -n "$icount" ] && guest_env+=" UD_ICOUNT=1" # tests may report instructions, not time
plugin=
if [ -n "$qprof" ]; then
	cargo build --quiet --release --manifest-path "$REPO/Cargo.toml" -p qprof ||
		{ echo "vm-test: cannot build tools/qprof" >&2; exit 2; }
	plugin="-plugin $REPO/target/release/libqprof.so,out=$out"
	guest_env+=" UD_QPROF=1"
fi

python3 "$REPO/scripts/nmi-injector.py" "$qmp" "$out" >"$out/nmi-injector.log" 2>&1 &
injector=$!

# QEMU has been seen (once in many runs, 6.12 under TCG) not to exit after the guest
# powered off: its threads idle in poll, the suite done, and the run then waited for the
# timeout. So once the console shows the power-off, QEMU has a grace period to exit
# (writing a qprof profile takes a few seconds), then it is asked to quit (SIGTERM: QEMU
# shuts down cleanly, plugins included). Its QMP socket's path names this run's QEMU (the
# processes above it, timeout, vng and virtme-run, carry it in their arguments too: the
# pattern takes the QEMU binary's alone).
# (Not over QMP: the NMI injector holds that socket, and a second client gets no greeting.)
exit_grace=120
(
	until grep -qs 'reboot: Power down' "$out/vm.log"; do sleep 5; done
	sleep "$exit_grace"
	if pkill -TERM -f -- "^[^ ]*qemu-system[^ ]* .*-qmp unix:$qmp,"; then
		echo "vm-test: QEMU had not exited ${exit_grace}s after the guest powered off: stopped" \
			>"$out/qemu-stopped"
	fi
) >/dev/null 2>&1 & # (its sleep, left behind when killed, must hold no pipe of ours)
exit_watch=$!
trap 'kill $injector $exit_watch 2>/dev/null' EXIT

# stdin from /dev/null: vng must not wait for a terminal (CI has none).
# --verbose sends the kernel's console into vm.log (without it vng sends it to /dev/null,
# and a guest that panics ends with no word of why); loglevel=5 (after vng's 7) keeps only
# warnings and worse: a crash's oops and panic lines, not the boot's chatter.
timeout --kill-after=15 "$timeout" \
	vng --run "$image" --disable-kvm --verbose --user root --cpus "$cpus" --memory "$memory" \
	--rwdir="$out" --qemu-opts="-qmp unix:$qmp,server=on,wait=off ${icount:+-icount shift=0,sleep=off} $plugin" \
	--append "panic_on_warn=0 oops=panic panic=-1 nmi_watchdog=0 loglevel=5" \
	--exec "$guest_env UD_OUT=$out $runner ${tests[*]} 2>&1 | tee $out/guest.tap" </dev/null 2>&1 | tee "$out/vm.log"
rc=${PIPESTATUS[0]}
kill "$exit_watch" 2>/dev/null
[ -s "$out/qemu-stopped" ] && cat "$out/qemu-stopped"

summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/vm.log" | tail -1)
# The guest also writes its lines into OUT/guest.tap (on the shared directory): on the debug
# kernel, vng has been seen to return after a whole suite without having printed any of
# them. Then the file is the result.
if [ -z "$summary" ] && [ -s "$out/guest.tap" ]; then
	echo "vm-test: the console gave no summary; the guest's own copy, $out/guest.tap:"
	tee -a "$out/vm.log" < "$out/guest.tap"
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/guest.tap" | tail -1)
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
	echo "vm-test: the guest did not finish within ${timeout}s: killed (hung guest)"
	echo "0 passed, 1 failed"
	exit 1
fi
if [ -z "$summary" ]; then
	echo "vm-test: the guest ended (status $rc) without a summary line: crash or panic"
	grep -E 'Kernel panic|BUG:|Oops|WARNING:' "$out/vm.log" | head -5
	echo "0 passed, 1 failed"
	exit 1
fi
failed=$(echo "$summary" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
[ "$failed" = 0 ]
