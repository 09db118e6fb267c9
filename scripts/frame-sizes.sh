#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The stack frames of a built module's functions: fails if any is larger than the limit.
#
#   scripts/frame-sizes.sh [--limit BYTES] MODULE.ko...
#   scripts/frame-sizes.sh --self-test
#
# rustc has no -Wframe-larger-than (the kernel's CONFIG_FRAME_WARN covers the C shims only),
# and a Rust value built with a constructor and then moved into a box goes through the stack
# first: `init!(StackCache { hot: HotRows::new(), .. })` once gave the task work a 5,176-byte
# frame, which with a larger table double-faulted the guest. So this reads the frames from the
# machine code: the largest `sub $N,%rsp` (or `add $-N,%rsp`) of each function in objdump's
# disassembly. The default limit is x86-64's CONFIG_FRAME_WARN (2048).
#
# Prints the five largest frames of each module and one line "N passed, N failed" (one test
# per module, and one for the check's own self-test, which runs first); the exit status is
# non-zero if a frame is over the limit.
set -uo pipefail

limit=2048

# frames LIMIT: reads a disassembly on stdin; prints "bytes function" per function with a
# frame, largest first.
frames() {
	python3 -c '
import re, sys
frame, fn = {}, None
for line in sys.stdin:
    m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    if m:
        fn = m.group(1)
        continue
    m = re.search(r"\t(sub|add) +\$0x([0-9a-f]+),%rsp", line)
    if m and fn:
        n = int(m.group(2), 16)
        if m.group(1) == "add":
            n = 2**64 - n if n >= 2**63 else 0  # add $-N,%rsp: a frame of N
        frame[fn] = max(frame.get(fn, 0), n)
for fn, n in sorted(frame.items(), key=lambda kv: -kv[1]):
    print(n, fn)
'
}

# check NAME LIMIT: the disassembly on stdin; prints the largest frames and the verdict.
check() {
	local name=$1 lim=$2 all over
	all=$(frames)
	echo "$name: largest stack frames (bytes, function):"
	echo "$all" | head -5 | sed 's/^/  /'
	over=$(echo "$all" | awk -v l="$lim" '$1 > l')
	if [ -n "$over" ]; then
		echo "$name: FAIL: frames over $lim bytes (build the value in place: see src/sys.rs zeroed_then):"
		echo "$over" | sed 's/^/  /'
		return 1
	fi
	echo "$name: ok: no frame over $lim bytes"
}

# The check itself: a listing with the 5,176-byte frame this check exists for must fail, one
# with a 1 KiB and a 128-byte frame (in both instruction forms) pass. Prints what went wrong.
self_test() {
	listing() {
		printf '0000000000000000 <small>:\n   0:\tpush   %%rbp\n   1:\tsub    $0x400,%%rsp\n'
		printf '0000000000000010 <also_small>:\n  10:\tadd    $0xffffffffffffff80,%%rsp\n'
		[ "$1" = big ] && printf '0000000000000020 <big_init>:\n  20:\tsub    $0x1438,%%rsp\n'
		:
	}
	local bad=0
	listing small | check small-listing 2048 >/dev/null || { echo "self-test: a 1 KiB frame failed"; bad=1; }
	listing big | check big-listing 2048 >/dev/null && { echo "self-test: a 5 KiB frame passed"; bad=1; }
	[ "$(listing small | frames | awk '$2 == "also_small" { print $1 }')" = 128 ] ||
		{ echo "self-test: add \$-128,%rsp not read as 128"; bad=1; }
	return $bad
}

passed=0 failed=0
if self_test; then
	echo "frame-sizes self-test: ok"
	passed=1
else
	failed=1
fi
if [ "${1:-}" = --self-test ]; then
	echo "$passed passed, $failed failed"
	exit $failed
fi

if [ "${1:-}" = --limit ]; then
	limit=$2
	shift 2
fi
[ $# -gt 0 ] || { echo "usage: $0 [--limit BYTES] MODULE.ko... | --self-test" >&2; exit 2; }
for ko in "$@"; do
	if objdump -d --no-show-raw-insn "$ko" | check "$ko" "$limit"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
