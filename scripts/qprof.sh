#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Exact instruction profiles of the ftrace modes: runs scripts/qprof.tc in a VM under
# scripts/vm-test.sh --icount --qprof (every guest instruction counted by tools/qprof), then
# writes DIR/qprof-WORKLOAD-MODE.txt, the flat profile per event of each run (kernel
# symbols, and user space as [user]), and prints each one's total.
#
#   scripts/qprof.sh [--kernel KDIR] [--out DIR]     (UD_QPROF_RUNS, UD_QPROF_N: qprof.tc)
#
# For the instructions of one function one by one, on the same snapshots:
#   scripts/qprof-report.py DIR/kallsyms DIR/R.1 DIR/R.2 --minus DIR/R.0 DIR/R.1 \
#       --per N --annotate 'SYMBOL [module]'          (R: qprof-WORKLOAD-MODE)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
kdir= out=$REPO/out/qprof
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kdir=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "qprof: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$kdir" ] || kdir=$("$REPO/scripts/kernel.sh" base)
"$REPO/scripts/vm-test.sh" --icount --qprof --kernel "$kdir" --out "$out" --timeout 5400 \
	"$REPO/scripts/qprof.tc"
for n in "$out"/qprof-*.n; do
	r=${n%.n}
	python3 "$REPO/scripts/qprof-report.py" --per "$(cat "$n")" "$out/kallsyms" "$r.1" "$r.2" \
		--minus "$r.0" "$r.1" > "$r.txt"
	echo "qprof: ${r##*/qprof-}: $(tail -1 "$r.txt")"
done
