#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: build what is missing, boot the VM, load the module, record the bundled demo
# workload with `trace-cmd record -O userstacktrace_delay`, and turn the trace into a
# symbolized report and a flame graph with the ustack tool. Prints where they are.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
out=$REPO/out/demo
start=$SECONDS
"$REPO/scripts/setup.sh"
kdir=$("$REPO/scripts/kernel.sh" base)
make -s -C "$REPO" KDIR="$kdir" module
make -s -C "$REPO/tools/ustack/demo"
cargo build --release --locked -q -p ustack --manifest-path "$REPO/Cargo.toml"
rm -rf "$out"
mkdir -p "$out"

# In the guest: load the module, record sched_switch and the demo's getppid() calls with
# the deferred user stacks, for about three seconds of the demo.
cat >"$out/guest.sh" <<GUEST
set -e
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
insmod $REPO/unwind_deferred.ko
cd $out
trace-cmd record -q -O userstacktrace_delay -e sched:sched_switch \
	-e syscalls:sys_enter_getppid -o $out/trace.dat $REPO/tools/ustack/demo/demo 30000 >/dev/null
rmmod unwind_deferred
echo guest-done
GUEST
echo "demo: recording in the VM (TCG, about a minute)"
timeout --kill-after=10 600 vng --run "$kdir/arch/x86/boot/bzImage" --disable-kvm --user root \
	--cpus 2 --memory 1G --rwdir="$out" --exec "bash $out/guest.sh" </dev/null >"$out/vm.log" 2>&1 || true
grep -q guest-done "$out/vm.log" || { echo "demo: the VM run failed, see $out/vm.log"; tail -20 "$out/vm.log"; exit 1; }

ustack=$REPO/target/release/ustack
"$ustack" --stats --comm demo -f listing "$out/trace.dat" >"$out/report.txt" 2>"$out/stats.txt"
"$ustack" --comm demo -f folded "$out/trace.dat" >"$out/folded.txt" 2>/dev/null
"$ustack" --comm demo -f svg "$out/trace.dat" >"$out/flamegraph.svg" 2>/dev/null

# A flame graph of unsymbolized frames is no demo: fail, and say why.
stat() { awk -v k="$1" 'index($0, k) { print $NF; exit }' "$out/stats.txt"; }
symbolized=$(stat "output frames symbolized") unsymbolized=$(stat "output frames not symbolized")
if [ -z "$symbolized" ] || [ $((2 * ${unsymbolized:-0})) -gt $((symbolized + ${unsymbolized:-0})) ]; then
	echo "demo: FAILED: ${unsymbolized:-?} of $((${symbolized:-0} + ${unsymbolized:-0})) frames of the demo could not be symbolized"
	echo "  (files not found: $(stat "files not found"); the trace names the files the guest"
	echo "  mapped, which ustack reads on this host; see $out/stats.txt and $out/report.txt)"
	exit 1
fi

echo
echo "demo: hottest stacks of the demo program (folded, root first):"
sort -t' ' -k2 -nr "$out/folded.txt" | head -5 | cut -c1-160
echo
echo "demo: done in $((SECONDS - start)) s"
echo "  trace:        $out/trace.dat"
echo "  report:       $out/report.txt"
echo "  folded:       $out/folded.txt"
echo "  flame graph:  $out/flamegraph.svg"
echo "  tool counters: $out/stats.txt"
