#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Names the unwind_deferred addresses in a perf report made in the VM (scripts/profile.tc).

  scripts/perf-resolve.py KALLSYMS REPORT [--sum]

perf 6.1 prints the module's samples as raw addresses or offsets from the module's base;
this maps them to the nearest preceding symbol of the module in the guest's /proc/kallsyms
(Rust names shortened to their last path segments). --sum adds up the self percentages per
symbol (one function is often split over several lines).
"""
import bisect
import re
import sys

MODULE = "[unwind_deferred]"


def load(kallsyms):
    syms = []
    for line in open(kallsyms):
        f = line.split()
        if len(f) >= 4 and f[3] == MODULE and f[1] in "tT":
            syms.append((int(f[0], 16), f[2]))
    syms.sort()
    return syms


def short(name):
    if not name.startswith("_R"):
        return name
    parts = re.findall(r"\d+([A-Za-z_][A-Za-z0-9_]*)", name)
    return "::".join(parts[-3:]) if parts else name


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    syms = load(sys.argv[1])
    if not syms:
        sys.exit("no %s symbols in %s" % (MODULE, sys.argv[1]))
    addrs = [a for a, _ in syms]
    base = addrs[0] & ~0xFFFFF

    def name(addr):
        i = bisect.bisect_right(addrs, addr) - 1
        return "M:" + (short(syms[i][1]) if i >= 0 else hex(addr))

    out = []
    for line in open(sys.argv[2]):
        line = re.sub(r"0xffffffffa[0-9a-f]{7}", lambda m: name(int(m.group(0), 16)), line)
        # Offsets from the module's base: kernel samples only ("[k]"); a user-space sample
        # ("[.]") of a binary without symbols is printed the same way.
        if "[k]" in line:
            line = re.sub(r"0x0000000000([0-9a-f]{6})", lambda m: name(base + int(m.group(1), 16)), line)
        out.append(line)
    if "--sum" not in sys.argv:
        sys.stdout.writelines(out)
        return
    total = {}
    for line in out:
        f = line.split()
        if len(f) >= 3 and f[0].endswith("%"):
            key = " ".join(f[2:])
            total[key] = total.get(key, 0.0) + float(f[0][:-1])
    for key, pct in sorted(total.items(), key=lambda kv: -kv[1]):
        print("%6.2f%%  %s" % (pct, key))


if __name__ == "__main__":
    main()
