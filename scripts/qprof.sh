#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Exact instruction profiles of the ftrace modes: runs scripts/qprof.tc in a VM under
# scripts/vm-test.sh --icount --qprof (every guest instruction counted by tools/qprof), then
# writes DIR/qprof-WORKLOAD-MODE.txt, the flat profile per event of each run (kernel
# symbols, and user space as [user]), and prints each one's total.
#
#   scripts/qprof.sh [--kernel KDIR] [--out DIR]     (UD_QPROF_RUNS, UD_QPROF_N: qprof.tc)
#   scripts/qprof.sh --ab A.ko,B.ko [--kernel KDIR] [--out DIR]
#
# --ab compares two builds of the module on the same long-lived processes, loading them in
# turn (scripts/qprof-ab.tc): the fair A/B of a change, since a new process's address-space
# layout alone moves a CFI stack's cost by several percent. It prints the total per event of
# each of the six runs (A B A B A B), and the module's own share, and writes their profiles.
# The totals move by a few percent from run to run with what else the guest did meanwhile
# (udev, 9p, page reclaim); the module's share moves by well under one.
#
# For the instructions of one function one by one, on the same snapshots:
#   scripts/qprof-report.py DIR/kallsyms DIR/R.1 DIR/R.2 --minus DIR/R.0 DIR/R.1 \
#       --per N --annotate 'SYMBOL [module]'          (R: qprof-WORKLOAD-MODE)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
kdir= out=$REPO/out/qprof ab= test=$REPO/scripts/qprof.tc
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kdir=$2; shift 2 ;;
	--ab)
		ab=$(realpath "${2%%,*}"),$(realpath "${2#*,}") test=$REPO/scripts/qprof-ab.tc
		shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "qprof: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$kdir" ] || kdir=$("$REPO/scripts/kernel.sh" base)
UD_QPROF_AB=$ab "$REPO/scripts/vm-test.sh" --icount --qprof --kernel "$kdir" --out "$out" \
	--timeout 5400 "$test"
for n in "$out"/qprof-*.n "$out"/ab/qprof-ab-*.n; do
	[ -e "$n" ] || continue
	r=${n%.n}
	syms=$out/kallsyms
	[ -e "$r.kallsyms" ] && syms=$r.kallsyms
	python3 "$REPO/scripts/qprof-report.py" --per "$(cat "$n")" "$syms" "$r.1" "$r.2" \
		--minus "$r.0" "$r.1" > "$r.txt"
	echo "qprof: ${r##*/qprof-}: $(tail -1 "$r.txt")"
done
