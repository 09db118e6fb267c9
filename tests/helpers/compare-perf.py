#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""compare-perf.py TRACE PERF_SCRIPT COMM [--event NAME] [--min-match PCT] [--min-events N]

Compares, event by event, the user stacks the module recorded (TRACE: `cat trace` text
with the events of one system call (--event, as the trace prints it: sys_write),
user_unwind_cookie/user_unwind_stack and file_cache events)
with those `perf record --call-graph dwarf` recorded for the same events (PERF_SCRIPT:
`perf script --no-inline -F comm,tid,time,ip,sym,dso` output), for the tasks named COMM.

Events are paired by thread and timestamp (record both on one clock: trace_clock mono, perf -k mono). Frames compare as
(file path, file offset): perf prints a frame's address relative to its file, minus one
for return addresses (it looks the call up); the module records the file offset of the
address itself, and perf the exact address of a frame a signal interrupted. The vDSO has no
file: the module records the address (as anonymous memory), perf the offset in the vDSO,
so such frames compare by their offset in the page.

Prints one summary line ("paired N identical M (P%) depth module med/max perf med/max")
and the first differences; exits 1 if fewer than --min-events pairs or less than
--min-match percent of them are identical, and 2 if perf's side has nothing to compare
with: no sample of COMM, or none unwound past its first frame while the module's stacks
are deeper. perf 6.1's dwarf unwinding does that now and then to every event of one
process of one run (seen with gcc's cc1, tclsh, gzip and mawk, never reproduced on
demand): the caller runs the workload again rather than take perf's failure
for the module's (tests/ftrace/cfi-vs-perf.tc).

    compare-perf.py --self-test

checks the three exit statuses on made-up traces.
"""
import argparse
import re
import statistics
import sys

TASK = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>\d+\.\d+):\s+(?P<rest>.*)$")
FRAME = re.compile(r"^\s*=> 0x(?P<off>[0-9a-f]+) \[(?P<hash>[^\]]+)\]")


def read_trace(path, comm, event):
    """{pid: [(time, frames)]} of COMM's write events with a stack; frames as (path, off)."""
    events = {}  # pid -> [(time, cookie)]
    pending = {}  # pid -> time of an event waiting for its cookie
    stacks = {}  # cookie -> [(off, hash)]
    files = {}  # hash -> path
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            m = FRAME.match(line)
            if m and cur is not None:
                cur.append((int(m["off"], 16), m["hash"]))
                continue
            cur = None
            m = TASK.match(line)
            if not m:
                continue
            rest, pid = m["rest"], int(m["pid"])
            if rest.startswith("file_cache:"):
                h = re.search(r"hash=0x([0-9a-f]+) path=(\S+)", rest)
                if h:
                    files["%08x" % int(h[1], 16)] = h[2]
                continue
            if m["comm"] != comm:
                continue
            if rest.startswith(event + "("):
                pending[pid] = float(m["ts"])
            elif rest.startswith("user_unwind_cookie:"):
                if pid in pending:
                    cookie = rest.split("cookie=")[1].split()[0]
                    events.setdefault(pid, []).append((pending.pop(pid), cookie))
            elif rest.startswith("user_unwind_stack:"):
                cookie = rest.split("cookie=")[1].split()[0]
                cur = stacks.setdefault(cookie, [])
    out = {}
    for pid, evs in events.items():
        for ts, cookie in evs:
            if cookie not in stacks:
                continue
            frames = [(files.get(h, "[%s]" % h), off) for off, h in stacks[cookie]]
            out.setdefault(pid, []).append((ts, frames))
    return out


# glibc's __restore_rt on x86-64: mov $__NR_rt_sigreturn, %rax; syscall.
SIGRETURN = bytes.fromhex("48c7c00f0000000f05")


def is_sigreturn(dso, offset):
    try:
        with open(dso, "rb") as f:
            f.seek(offset)
            return f.read(len(SIGRETURN)) == SIGRETURN
    except OSError:
        return False


def read_perf(path, comm):
    """{pid: [(time, frames)]} of COMM's samples; frames as (dso, offset)."""
    out = {}
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("\t", " ")) and cur is not None:
                m = re.match(r"^\s+([0-9a-f]+) (.*) \((.*)\)\s*$", line)
                if m and not m[3].startswith("[kernel"):
                    cur.append((m[3], int(m[1], 16), m[2]))
                continue
            m = re.match(r"^(?P<comm>.+?)\s+(?P<pid>\d+)\s+(?P<ts>\d+\.\d+):", line)
            cur = None
            if m and m["comm"].strip() == comm:
                cur = []
                out.setdefault(int(m["pid"]), []).append((float(m["ts"]), cur))
    # Return addresses: perf shows the call's address (one less). The first frame is exact,
    # and so is the frame a signal interrupted: the one after the signal trampoline, whose
    # "return address" is its first instruction (it has no symbol in Debian's libc).
    def exact(fr, i):
        return i == 0 or is_sigreturn(fr[i - 1][0], fr[i - 1][1] + 1)

    return {pid: [(ts, [(d, o + (not exact(fr, i))) for i, (d, o, _) in enumerate(fr)]) for ts, fr in evs]
            for pid, evs in out.items()}


def same_frame(ours, perf):
    if ours[0] == "[anon]" and perf[0] == "[vdso]":
        return ours[1] & 0xFFF == perf[1] & 0xFFF
    return ours == perf


# The last frame perf script prints when its unwinding ended early (its copy of the user
# stack, 16 KiB at most, ran out): "ffffffffffffffff [unknown] ([unknown])", one more here
# as a return address.
def is_cut_marker(frame):
    return frame[0] == "[unknown]" and frame[1] >= 0xFFFFFFFFFFFFFFFF


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("perf")
    ap.add_argument("comm")
    ap.add_argument("--event", default="sys_write")
    ap.add_argument("--min-match", type=float, default=95.0)
    ap.add_argument("--min-events", type=int, default=20)
    ap.add_argument("--tolerance", type=float, default=0.002, help="seconds")
    ap.add_argument("--perf-cut-ok", action="store_true",
                    help="a perf stack whose copy of the stack ran out (its [unknown] last frame) "
                         "matches a deeper stack of the module's that starts with its frames")
    a = ap.parse_args(argv)
    ours, theirs = read_trace(a.trace, a.comm, a.event), read_perf(a.perf, a.comm)
    paired = identical = cut = 0
    depth_ours, depth_perf, shown = [], [], 0
    for pid, samples in theirs.items():
        evs = ours.get(pid, [])
        # Both sides saw every event of the task, in order: pair them one to one. Otherwise
        # pair each sample with the event nearest in time (the two clocks are read a few
        # microseconds apart, sometimes more: an interrupt between the two handlers).
        if len(evs) == len(samples):
            pairs = [(ts, pframes, evs[i]) for i, (ts, pframes) in enumerate(samples)]
        else:
            pairs, j = [], 0
            for ts, pframes in samples:
                while j + 1 < len(evs) and abs(evs[j + 1][0] - ts) <= abs(evs[j][0] - ts):
                    j += 1
                if evs and abs(evs[j][0] - ts) <= a.tolerance:
                    pairs.append((ts, pframes, evs[j]))
        for ts, pframes, ev in pairs:
            oframes = ev[1]
            paired += 1
            depth_ours.append(len(oframes))
            depth_perf.append(len(pframes))
            if len(oframes) == len(pframes) and all(map(same_frame, oframes, pframes)):
                identical += 1
            elif (a.perf_cut_ok and pframes and is_cut_marker(pframes[-1]) and len(oframes) >= len(pframes)
                  and all(map(same_frame, oframes, pframes[:-1]))):
                identical += 1
                cut += 1
            elif shown < 3:  # (a vDSO frame shows as its address and its offset)
                shown += 1
                print("difference at %.6f (pid %d): module %d frames, perf %d" % (ts, pid, len(oframes), len(pframes)))
                for i in range(max(len(oframes), len(pframes))):
                    o = oframes[i] if i < len(oframes) else None
                    p = pframes[i] if i < len(pframes) else None
                    mark = "  " if o and p and same_frame(o, p) else "!="
                    fmt = lambda f: "-" if f is None else "%s+%#x" % (f[0].rsplit("/", 1)[-1], f[1])
                    print("   %2d %s %-40s %s" % (i, mark, fmt(o), fmt(p)))
    pct = 100.0 * identical / paired if paired else 0.0
    med = lambda v: int(statistics.median(v)) if v else 0
    print("%s: module events %d, perf samples %d, paired %d, identical %d (%.1f%%); depth module %d/%d, perf %d/%d (median/max)"
          % (a.comm, sum(map(len, ours.values())), sum(map(len, theirs.values())), paired, identical, pct,
             med(depth_ours), max(depth_ours, default=0), med(depth_perf), max(depth_perf, default=0))
          + ("; %d of them where perf's copy of the stack ran out, the module's deeper" % cut if a.perf_cut_ok else ""))
    # perf's failure, not the module's: nothing of perf's to compare with.
    if not theirs or (
            paired and max(depth_perf) <= 1 and statistics.median(depth_ours) > 1):
        print("PERF FAILED: perf unwound no sample of %s past its first frame (or has none)" % a.comm)
        return 2
    if paired < a.min_events:
        print("FAIL: only %d events paired (want %d)" % (paired, a.min_events))
        return 1
    if pct < a.min_match:
        print("FAIL: %.1f%% identical (want %.0f%%)" % (pct, a.min_match))
        return 1
    return 0


def self_test():
    """The three outcomes of main() on made-up traces: 0 (the same stacks), 1 (different
    stacks, too few events paired), 2 (perf's stacks empty or one frame deep)."""
    import os
    import tempfile

    libc = "/nonexistent/libc.so.6"

    def trace(n, offsets):  # n write events of pid 7, each with the stack of OFFSETS
        lines = ["  prog-7 [000] ..... 1.000000: file_cache: hash=0xabcd path=%s" % libc]
        for i in range(n):
            t = 2 + i
            lines.append("  prog-7 [000] ..... %d.000001: sys_write(fd: 2)" % t)
            lines.append("  prog-7 [000] ..... %d.000002: user_unwind_cookie: cookie=%d" % (t, i))
            lines.append("  prog-7 [000] ..... %d.000100: user_unwind_stack: cookie=%d nr=%d" % (t, i, len(offsets)))
            lines += [" => 0x%016x [0000abcd]" % off for off in offsets]
        return "\n".join(lines) + "\n"

    CUT = None  # perf's marker of an unwinding cut short

    def perf(n, offsets):  # perf script's: each return address one less, the first exact
        lines = []
        for i in range(n):
            lines.append("prog     7  %d.000001: " % (2 + i))
            lines += ["\t%16x sym (%s)" % (off - (j > 0), libc) if off is not CUT
                      else "\tffffffffffffffff [unknown] ([unknown])" for j, off in enumerate(offsets)]
            lines.append("")
        return "\n".join(lines) + "\n"

    stack = [0xf8350, 0x80fc5, 0x1234]
    cases = [  # (name, trace, perf, expected exit status)
        ("the same stacks", trace(10, stack), perf(10, stack), 0),
        ("a frame differs", trace(10, stack), perf(10, [0xf8350, 0x80fc5, 0x1238]), 1),
        ("perf's stacks shorter", trace(10, stack), perf(10, stack[:2]), 1),
        ("too few events paired", trace(2, stack), perf(2, stack), 1),
        ("perf one frame deep", trace(10, stack), perf(10, stack[:1]), 2),
        ("no perf sample", trace(10, stack), "", 2),
        ("both one frame deep", trace(10, stack[:1]), perf(10, stack[:1]), 0),
        ("perf's copy ran out, --perf-cut-ok", trace(10, stack), perf(10, stack[:2] + [CUT]), 0, ["--perf-cut-ok"]),
        ("perf's copy ran out", trace(10, stack), perf(10, stack[:2] + [CUT]), 1),
        ("perf's copy ran out, a frame differs", trace(10, stack),
         perf(10, [0xf8350, 0x80fc9, CUT]), 1, ["--perf-cut-ok"]),
        ("perf's copy ran out, the module no deeper", trace(10, stack[:1]), perf(10, stack[:2] + [CUT]), 1,
         ["--perf-cut-ok"]),
    ]
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for name, t, p, want, *opts in cases:
            tp, pp = os.path.join(d, "trace"), os.path.join(d, "perf")
            open(tp, "w").write(t)
            open(pp, "w").write(p)
            with open(os.devnull, "w") as null:
                stdout, sys.stdout = sys.stdout, null
                try:
                    got = main([tp, pp, "prog", "--min-events", "5"] + (opts[0] if opts else []))
                finally:
                    sys.stdout = stdout
            print("%s - %s: exit %d" % ("ok" if got == want else "not ok", name, got))
            bad += got != want
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
