#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The stack frames of a built module's functions, and the deepest chains of them from the
# module's entry points: fails if a frame or a chain is larger than its limit.
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
# Frames that pass one by one can still add up along a call chain. So, for the entry points
# of unwind_deferred.ko (ENTRIES below: where the kernel calls in, with the context's limit),
# it also follows the module's direct calls (objdump -dr: a call's relocation names its
# target) and adds up each function's frame, its pushes and the return address, down the
# deepest chain. What it cannot see: indirect calls (declared in ENTRIES where the module
# makes them: the task work calls the registered callbacks), and the kernel's functions
# below the module's (a user page fault under the walk, the ring buffer under a probe):
# the limits leave them room.
#
# Prints the five largest frames of each module, each entry point's deepest chain, and one
# line "N passed, N failed" (one test per module, and one for the check's own self-test,
# which runs first); the exit status is non-zero if a frame or a chain is over its limit.
set -uo pipefail

limit=2048

# Entry points of unwind_deferred.ko: "function limit [indirect callee...]". The task work
# runs at return to user space on the task's 16 KiB stack, nearly empty there; its walk
# faults in user pages (the page-fault path, with a file's read, runs below it), so the
# module keeps to half. The probes' handlers and the request run in any context, NMI
# included (x86-64's NMI stack is 4 KiB, shared with the perf or ftrace code that called
# in): the module keeps to 1 KiB there.
ENTRIES='ud_task_work_fn 8192 ud_stack_callback
ud_rs_request 1024
ud_commit_pre 1024
ud_commit_entry 1024
ud_commit_return 1024
ud_export_write 1024'

# analyse MODE [ENTRIES]: reads a disassembly with relocations (objdump -dr) on stdin.
# MODE frames: prints "bytes function" per function with a frame, largest first. MODE
# chains: prints "bytes limit entry: f1 (bytes) -> f2 (bytes) ..." per entry point found,
# its deepest chain of direct calls (each function's frame, pushes and return address),
# and "cycle: f" for a call cycle (recursion: no deepest chain; the module has none).
analyse() {
	python3 -c '
import re, sys
mode, entries = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
frame, pushes, calls = {}, {}, {}
fn, pend = None, None
for line in sys.stdin:
    m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    if m:
        fn, pend = m.group(1), None
        frame[fn], pushes[fn], calls[fn] = 0, 0, set()
        continue
    if fn is None:
        continue
    r = re.match(r"^\s+[0-9a-f]+: R_X86_64_\w+\s+(\S+?)(?:[-+]0x[0-9a-f]+)?$", line)
    if r:  # the relocation of the instruction above: a call placeholder names its target
        if pend == "":
            calls[fn].add(r.group(1))
        pend = None
        continue
    if pend:  # a call objdump resolved itself, no relocation after it
        calls[fn].add(pend)
    pend = None
    m = re.search(r"\t(sub|add) +\$0x([0-9a-f]+),%rsp", line)
    if m:
        n = int(m.group(2), 16)
        if m.group(1) == "add":
            n = 2**64 - n if n >= 2**63 else 0  # add $-N,%rsp: a frame of N
        frame[fn] = max(frame[fn], n)
    elif re.search(r"\tpush ", line):
        pushes[fn] += 1
    else:
        # call (or jmp: a tail call) T <sym>: sym. T <sym+off>: a placeholder whose
        # relocation follows, or for a jmp a jump inside the function (no relocation).
        m = re.search(r"\t(call|jmp) +[0-9a-f]+ <([^>+]*)(\+0x[0-9a-f]+)?>", line)
        if m:
            pend = "" if m.group(3) or m.group(2) == fn else m.group(2)
if mode == "frames":
    for f, n in sorted(frame.items(), key=lambda kv: -kv[1]):
        if n:
            print(n, f)
    sys.exit(0)
own = lambda f: frame[f] + 8 * pushes[f] + 8
extra, memo, active = {}, {}, set()
todo = [e.split() for e in entries.splitlines() if e.strip()]
for e in todo:
    extra[e[0]] = set(e[2:])
def deepest(f):  # (bytes, [f, ...]) of the deepest chain from f
    if f in memo:
        return memo[f]
    if f in active:
        print("cycle:", f)
        return (0, [])
    active.add(f)
    best = (0, [])
    for c in sorted(calls[f] | extra.get(f, set())):
        if c in frame and c != f:
            best = max(best, deepest(c), key=lambda t: t[0])
        elif c == f:
            print("cycle:", f)
    active.discard(f)
    memo[f] = (own(f) + best[0], [f] + best[1])
    return memo[f]
for e in todo:
    if e[0] in frame:
        n, path = deepest(e[0])
        print(n, e[1], e[0] + ":", " -> ".join("%s (%d)" % (p, own(p)) for p in path))
    elif todo[0][0] in frame:  # unwind_deferred.ko without one of its entry points
        print("missing:", e[0])
' "$@"
}
frames() { analyse frames; }

# check NAME LIMIT: the disassembly on stdin; prints the largest frames, the entry points'
# deepest chains, and the verdict.
check() {
	local name=$1 lim=$2 listing all over chains long cycles
	listing=$(cat)
	all=$(echo "$listing" | frames)
	echo "$name: largest stack frames (bytes, function):"
	echo "$all" | head -5 | sed 's/^/  /'
	over=$(echo "$all" | awk -v l="$lim" '$1 > l')
	chains=$(echo "$listing" | analyse chains "$ENTRIES")
	if [ -n "$chains" ]; then
		echo "$name: deepest chains from the entry points (bytes, limit, entry: the chain):"
		echo "$chains" | grep -E -v '^(cycle|missing):' | cut -c1-400 | sed 's/^/  /'
	fi
	long=$(echo "$chains" | awk '$1 ~ /^[0-9]+$/ && $1 > $2')
	cycles=$(echo "$chains" | grep -E '^(cycle|missing):' | sort -u)
	if [ -n "$over" ] || [ -n "$long" ] || [ -n "$cycles" ]; then
		[ -z "$over" ] || { echo "$name: FAIL: frames over $lim bytes (build the value in place: see src/sys.rs zeroed_then):"; echo "$over" | sed 's/^/  /'; }
		[ -z "$long" ] || { echo "$name: FAIL: chains over their limit:"; echo "$long" | cut -c1-400 | sed 's/^/  /'; }
		[ -z "$cycles" ] || { echo "$name: FAIL: recursion (a chain without a bound), or an entry point not found (ENTRIES):"; echo "$cycles" | sed 's/^/  /'; }
		return 1
	fi
	echo "$name: ok: no frame over $lim bytes, no chain over its limit"
}

# The check itself: a listing with the 5,176-byte frame this check exists for must fail, one
# with a 1 KiB and a 128-byte frame (in both instruction forms) pass. Chains: a made-up task
# work (ud_task_work_fn, its declared callback ud_stack_callback) through a resolved call
# and a relocated one must add up to the expected bytes, pass at 2 KiB a frame and fail
# when they reach the limit, and a call cycle must fail. Prints what went wrong.
self_test() {
	listing() {
		printf '0000000000000000 <small>:\n   0:\tpush   %%rbp\n   1:\tsub    $0x400,%%rsp\n'
		printf '0000000000000010 <also_small>:\n  10:\tadd    $0xffffffffffffff80,%%rsp\n'
		[ "$1" = big ] && printf '0000000000000020 <big_init>:\n  20:\tsub    $0x1438,%%rsp\n'
		:
	}
	# task_work FRAME: ud_task_work_fn (FRAME) tail-calls walk (FRAME, one push) through a
	# relocation, walk calls leaf (16) directly and jumps inside itself, the callback
	# (FRAME) is declared, and with "cycle" calls the task work back through a relocation:
	# deepest FRAME + 8 + FRAME + 16 + 16 (the walk's side).
	task_work() {
		printf '0000000000000000 <ud_task_work_fn>:\n   0:\tsub    $0x%x,%%rsp\n' "$1"
		printf '   7:\tjmp    c <ud_task_work_fn+0xc>\n\t\t\t8: R_X86_64_PLT32\twalk-0x4\n'
		printf '0000000000000040 <walk>:\n  40:\tpush   %%rbx\n  41:\tsub    $0x%x,%%rsp\n' "$1"
		printf '  48:\tcall   80 <leaf>\n  4d:\tjmp    41 <walk+0x1>\n'
		printf '0000000000000080 <leaf>:\n  80:\tsub    $0x8,%%rsp\n'
		printf '00000000000000c0 <ud_stack_callback>:\n  c0:\tsub    $0x%x,%%rsp\n' "$1"
		[ "${2:-}" = cycle ] && printf '  c7:\tcall   cc <ud_stack_callback+0xc>\n\t\t\tc8: R_X86_64_PLT32\tud_task_work_fn-0x4\n'
		:
	}
	# (The made-up module has the task work's entry point only.)
	local bad=0 n ENTRIES=${ENTRIES%%$'\n'*}
	listing small | check small-listing 2048 >/dev/null || { echo "self-test: a 1 KiB frame failed"; bad=1; }
	listing big | check big-listing 2048 >/dev/null && { echo "self-test: a 5 KiB frame passed"; bad=1; }
	[ "$(listing small | frames | awk '$2 == "also_small" { print $1 }')" = 128 ] ||
		{ echo "self-test: add \$-128,%rsp not read as 128"; bad=1; }
	n=$(task_work 0x400 | analyse chains "$ENTRIES" | awk '$3 == "ud_task_work_fn:" { print $1 }')
	[ "$n" = $((0x400 + 8 + 0x400 + 16 + 16)) ] || { echo "self-test: the task work's chain is $n bytes"; bad=1; }
	task_work 0x800 | check two-kib-frames 2048 >/dev/null || { echo "self-test: a chain of 4 KiB failed"; bad=1; }
	task_work 0x1000 | check four-kib-frames 8192 >/dev/null && { echo "self-test: a chain of 8 KiB passed"; bad=1; }
	task_work 0x400 cycle | check cycle 2048 >/dev/null && { echo "self-test: a call cycle passed"; bad=1; }
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
	if objdump -dr --no-show-raw-insn "$ko" | check "$ko" "$limit"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
