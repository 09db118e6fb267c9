#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Flat instruction profile of a guest between two snapshots of the qprof plugin.

  qprof-report.py KALLSYMS BEFORE AFTER [--minus BEFORE2 AFTER2] [--per N] [--top K]
                  [--annotate SYMBOL ...]

KALLSYMS is the guest's /proc/kallsyms (read as root, module symbols included); BEFORE and
AFTER are snapshots written by tools/qprof (lines "ADDRESS COUNT"). Prints, per kernel
symbol, the instructions run between the two snapshots (divided by N with --per: per
event), the user-space total as [user], and the sum. --minus subtracts what ran between
two other snapshots: a run of the same program with fewer events, so that what does not
depend on the number of events (the start and the end of a process) cancels out.
--annotate prints the instructions of SYMBOL one by one (offset, count per N).
"""
import argparse
import bisect
import collections
import sys

KERNEL_START = 0xFFFF800000000000


def load_symbols(path):
    syms = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            # Text symbols only (data symbols would split functions).
            if len(parts) < 3 or parts[1] not in "tTwW":
                continue
            addr = int(parts[0], 16)
            if addr == 0:
                continue
            name = parts[2] + (" " + parts[3] if len(parts) > 3 else "")
            syms.append((addr, name))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def load_counts(path):
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            addr, count = line.split()
            counts[int(addr, 16)] += int(count)
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kallsyms")
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--minus", nargs=2, metavar=("BEFORE2", "AFTER2"))
    ap.add_argument("--per", type=float, default=1.0, help="divide every count (events)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--annotate", action="append", default=[])
    args = ap.parse_args()

    addrs, names = load_symbols(args.kallsyms)
    before, after = load_counts(args.before), load_counts(args.after)
    delta = collections.Counter({a: c - before.get(a, 0) for a, c in after.items()})
    if args.minus:
        before2, after2 = load_counts(args.minus[0]), load_counts(args.minus[1])
        for a, c in after2.items():
            delta[a] -= c - before2.get(a, 0)
    per_sym = collections.Counter()
    per_insn = collections.defaultdict(collections.Counter)
    total = 0
    for addr, n in delta.items():
        if n == 0:
            continue
        total += n
        if addr < KERNEL_START:
            sym = "[user]"
        else:
            i = bisect.bisect_right(addrs, addr) - 1
            sym = names[i] if i >= 0 else "[unknown]"
            if sym in args.annotate:
                per_insn[sym][addr - addrs[i]] += n
        per_sym[sym] += n
    per = args.per
    print(f"{'instructions':>14} {'share':>6}  symbol   (per {per:g})")
    # (With --minus a symbol may come out slightly negative: the two runs differ by noise.)
    for sym, n in sorted(per_sym.items(), key=lambda kv: -abs(kv[1]))[: args.top]:
        print(f"{n / per:14.1f} {100.0 * n / total:5.1f}%  {sym}")
    module = sum(n for sym, n in per_sym.items() if sym.endswith("[unwind_deferred]"))
    print(f"{total / per:14.1f} 100.0%  (total; kernel {(total - per_sym['[user]']) / per:.1f};"
          f" module {module / per:.1f})")
    for sym in args.annotate:
        print(f"\n{sym}: offset, instructions (per {per:g})")
        for off, n in sorted(per_insn[sym].items()):
            print(f"  +0x{off:x} {n / per:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
