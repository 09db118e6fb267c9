# SPDX-License-Identifier: GPL-2.0
# Snapshots a program stopped at a system call, in the format of the host CFI tests
# (src/logic/tests/cfi_e2e.rs): its registers and stack from the stack pointer to the end
# of the stack mapping ("stack"), its /proc/<pid>/maps ("maps"), its vDSO ("vdso") and no
# symbols ("info"). The stop is at the system call's entry, as the kernel sees it.
#
#   SNAP_DIR=/tmp/snap-py SNAP_SYSCALL=write SNAP_SKIP=3 \
#       gdb -q -batch -x scripts/snapshot.gdb.py --args /usr/bin/python3 script.py
#
# SNAP_SKIP: catchpoint stops to pass first (gdb stops at each entry and each return).
# Then, with the warm-walk benchmark under callgrind:
#
#   UNWIND_SNAPSHOT=/tmp/snap-py valgrind --tool=callgrind \
#       --toggle-collect='*bench_warm_walks*' <cfi_e2e test binary> --ignored \
#       --nocapture bench_snapshot_walk
import os
import struct

import gdb

out = os.environ["SNAP_DIR"]
skip = int(os.environ.get("SNAP_SKIP", "0"))
syscall = os.environ.get("SNAP_SYSCALL", "write")
os.makedirs(out, exist_ok=True)
gdb.execute("set pagination off")
gdb.execute("catch syscall " + syscall)
gdb.execute("run")
for _ in range(skip):
    gdb.execute("continue")
inferior = gdb.selected_inferior()
# DWARF register order (0-15), then the IP: the order the tests read.
names = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
         "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"]
regs = [int(gdb.parse_and_eval("$" + n)) & (2**64 - 1) for n in names]
maps = open(f"/proc/{inferior.pid}/maps").read()
with open(os.path.join(out, "maps"), "w") as f:
    f.write(maps)
sp = regs[7]
stack_end = 0
vdso = None
for line in maps.splitlines():
    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
    if lo <= sp < hi:
        stack_end = hi
    if line.endswith("[vdso]"):
        vdso = (lo, hi)
if not stack_end:
    raise gdb.GdbError("the stack pointer is in no mapping")
with open(os.path.join(out, "stack"), "wb") as f:
    f.write(struct.pack("<17Q", *regs))
    f.write(struct.pack("<Q", sp))
    f.write(bytes(inferior.read_memory(sp, stack_end - sp)))
if vdso:
    with open(os.path.join(out, "vdso"), "wb") as f:
        f.write(struct.pack("<Q", vdso[0]))
        f.write(bytes(inferior.read_memory(vdso[0], vdso[1] - vdso[0])))
open(os.path.join(out, "info"), "w").close()
gdb.execute("bt 64")
gdb.execute("kill")
