#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""kernel-bytes.py N ADDR...: for each kernel virtual ADDR (hex), print "ADDR HEX" with the
N bytes there, read from /proc/kcore (CONFIG_PROC_KCORE) without any module's help."""
import struct
import sys

n = int(sys.argv[1])
with open("/proc/kcore", "rb") as f:
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
    for arg in sys.argv[2:]:
        addr = int(arg, 16)
        for vaddr, memsz, offset in loads:
            if vaddr <= addr < vaddr + memsz:
                f.seek(offset + addr - vaddr)
                print(arg, f.read(n).hex())
                break
        else:
            sys.exit(f"{arg}: not in /proc/kcore")
