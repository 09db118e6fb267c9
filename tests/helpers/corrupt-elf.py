#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""corrupt-elf.py IN OUT MODE: copy the ELF file IN to OUT (executable) with its unwind
information damaged, as a hostile or broken program could have it:

  hdr-table   the .eh_frame_hdr search table overwritten with pseudo-random bytes
  eh-frame    the .eh_frame CIEs and FDEs overwritten with pseudo-random bytes
  fde-count   .eh_frame_hdr's FDE count set to 0x7fffffff (a table far beyond the file)
  cie-loop    every FDE's CIE pointer aimed at the FDE itself
"""
import os
import random
import struct
import sys


def sections(data):
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = data[strtab + h[0]:data.index(b"\0", strtab + h[0])].decode()
        out[name] = (h[4], h[5])  # file offset, size
    return out


def main():
    src, dst, mode = sys.argv[1:4]
    data = bytearray(open(src, "rb").read())
    secs = sections(data)
    rng = random.Random(1)
    hdr_off, hdr_size = secs[".eh_frame_hdr"]
    frame_off, frame_size = secs[".eh_frame"]
    if mode == "hdr-table":
        for i in range(hdr_off + 12, hdr_off + hdr_size):
            data[i] = rng.randrange(256)
    elif mode == "eh-frame":
        for i in range(frame_off, frame_off + frame_size):
            data[i] = rng.randrange(256)
    elif mode == "fde-count":
        struct.pack_into("<I", data, hdr_off + 8, 0x7FFFFFFF)
    elif mode == "cie-loop":
        off = frame_off
        while off + 8 <= frame_off + frame_size:
            length, = struct.unpack_from("<I", data, off)
            if length == 0 or length == 0xFFFFFFFF:
                break
            cie_id, = struct.unpack_from("<I", data, off + 4)
            if cie_id != 0:  # an FDE: its CIE pointer is relative to the field itself
                struct.pack_into("<I", data, off + 4, 4)
            off += 4 + length
    else:
        sys.exit("unknown mode " + mode)
    with open(dst, "wb") as f:
        f.write(data)
    os.chmod(dst, 0o755)


if __name__ == "__main__":
    main()
