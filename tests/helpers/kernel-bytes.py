#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Reads kernel text from /proc/kcore (CONFIG_PROC_KCORE), without any module's help.

  kernel-bytes.py N ADDR...       for each kernel virtual ADDR (hex): "ADDR HEX", its N bytes
  kernel-bytes.py --target ADDR   where the instruction at ADDR branches to: "jmp 0x..." or
                                  "call 0x..." for a rel32 jmp or call, else "other HEX"
"""
import struct
import sys


def open_kcore():
    f = open("/proc/kcore", "rb")
    ehdr = f.read(64)
    if ehdr[:4] != b"\x7fELF":
        sys.exit("/proc/kcore is not an ELF core")
    (phoff,) = struct.unpack_from("<Q", ehdr, 32)
    phentsize, phnum = struct.unpack_from("<HH", ehdr, 54)
    f.seek(phoff)
    phdrs = f.read(phentsize * phnum)
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, _, p_memsz, _ = struct.unpack_from("<IIQQQQQQ", phdrs, i * phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_memsz, p_offset))
    return f, loads


def read(f, loads, addr, n):
    for vaddr, memsz, offset in loads:
        if vaddr <= addr < vaddr + memsz:
            f.seek(offset + addr - vaddr)
            return f.read(n)
    sys.exit(f"{addr:#x}: not in /proc/kcore")


f, loads = open_kcore()
if sys.argv[1] == "--target":
    addr = int(sys.argv[2], 16)
    insn = read(f, loads, addr, 5)
    kinds = {0xE9: "jmp", 0xE8: "call"}
    if insn[0] in kinds:
        (rel,) = struct.unpack_from("<i", insn, 1)
        print(kinds[insn[0]], hex((addr + 5 + rel) & (2**64 - 1)))
    else:
        print("other", insn.hex())
else:
    n = int(sys.argv[1])
    for arg in sys.argv[2:]:
        print(arg, read(f, loads, int(arg, 16), n).hex())
