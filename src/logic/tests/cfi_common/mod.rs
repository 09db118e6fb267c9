// SPDX-License-Identifier: GPL-2.0
//! Helpers shared by the `cfi_*` tests: memory images, ELF files, a CFI assembler, a
//! deterministic random generator, and compiling test programs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSection, ObjectSegment};
use unwind_logic::cfi::{
    Located, Lookup, Mode, ModuleInfo, ReadAhead, Regs, Stop, UnwindInfoSource, UnwindMemory,
    WalkParams,
};

pub const USER_END: u64 = 0x7fff_ffff_f000;
pub const PAGE: u64 = 4096;

/// Memory made of segments at fixed addresses; counts reads.
#[derive(Default, Clone)]
pub struct SegMem {
    pub segs: BTreeMap<u64, Vec<u8>>,
    pub calls: usize,
    pub bytes: usize,
}

impl SegMem {
    pub fn add(&mut self, addr: u64, data: Vec<u8>) {
        self.segs.insert(addr, data);
    }

    pub fn slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let (base, data) = self.segs.range(..=addr).next_back()?;
        let off = usize::try_from(addr - base).ok()?;
        data.get(off..off.checked_add(len)?)
    }

    pub fn write(&mut self, addr: u64, bytes: &[u8]) {
        let (base, data) = self
            .segs
            .range_mut(..=addr)
            .next_back()
            .expect("no segment");
        let off = (addr - base) as usize;
        data[off..off + bytes.len()].copy_from_slice(bytes);
    }
}

impl UnwindMemory for SegMem {
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        self.calls += 1;
        self.bytes += out.len();
        match self.slice(addr, out.len()) {
            Some(s) => {
                out.copy_from_slice(s);
                true
            }
            None => false,
        }
    }
}

/// An ELF file read with `object`.
pub struct ElfFile {
    pub path: PathBuf,
    pub data: Vec<u8>,
    pub eh_frame: (u64, Vec<u8>),
    pub eh_frame_hdr: Option<(u64, u64)>,
    pub text: u64,
    /// The size of `.text`.
    pub text_len: u64,
}

impl ElfFile {
    pub fn load(path: &Path) -> Option<ElfFile> {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) => {
                println!("note: skipping {}: {e}", path.display());
                return None;
            }
        };
        let file = object::File::parse(&*data).ok()?;
        let eh = file.section_by_name(".eh_frame")?;
        let eh_frame = (eh.address(), eh.data().ok()?.to_vec());
        let eh_frame_hdr = file
            .section_by_name(".eh_frame_hdr")
            .map(|s| (s.address(), s.size()));
        let (text, text_len) = file
            .section_by_name(".text")
            .map_or((0, 0), |s| (s.address(), s.size()));
        Some(ElfFile {
            path: path.to_owned(),
            data: data.clone(),
            eh_frame,
            eh_frame_hdr,
            text,
            text_len,
        })
    }

    /// The PT_LOAD segments at their link-time addresses (plus `bias`).
    pub fn memory(&self, bias: u64) -> SegMem {
        let file = object::File::parse(&*self.data).unwrap();
        let mut mem = SegMem::default();
        for seg in file.segments() {
            let mut bytes = seg.data().unwrap().to_vec();
            bytes.resize(seg.size() as usize, 0);
            mem.add(seg.address() + bias, bytes);
        }
        mem
    }
}

/// A source with fixed module ranges.
#[derive(Default)]
pub struct MapSource {
    /// (start, end, lookup)
    pub ranges: Vec<(u64, u64, Lookup)>,
    pub finds: usize,
}

impl MapSource {
    pub fn add(&mut self, start: u64, end: u64, lookup: Lookup) {
        self.ranges.push((start, end, lookup));
    }

    pub fn module(&mut self, start: u64, end: u64, info: ModuleInfo) {
        self.add(start, end, Lookup::Module(info));
    }
}

impl UnwindInfoSource for MapSource {
    fn find(&mut self, pc: u64) -> Located {
        self.finds += 1;
        self.ranges
            .iter()
            .find(|(s, e, _)| *s <= pc && pc < *e)
            .map_or(
                Located::at(pc, Lookup::Unmapped),
                |&(start, end, lookup)| Located { start, end, lookup },
            )
    }
}

/// xorshift64*: deterministic pseudo-random numbers.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A per-test temporary directory (removed and re-created).
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("unwind-logic-{}-{}", name, std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `src` (C, or C++ if `cxx`) into `dir/name` with `flags`; `None` (with a note) if
/// the compiler is missing or fails.
pub fn compile(dir: &Path, name: &str, src: &str, cxx: bool, flags: &[&str]) -> Option<PathBuf> {
    let ext = if cxx { "cpp" } else { "c" };
    let src_path = dir.join(format!("{name}.{ext}"));
    std::fs::write(&src_path, src).unwrap();
    let out = dir.join(name);
    let compiler = if cxx { "g++" } else { "cc" };
    let status = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src_path)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => {
            println!("note: {compiler} failed for {name}: {s}");
            None
        }
        Err(e) => {
            println!("note: no {compiler} ({e}): skipping {name}");
            None
        }
    }
}

/// A little-endian byte assembler for hand-made CFI, hdr tables and expressions.
#[derive(Default, Clone)]
pub struct Asm(pub Vec<u8>);

impl Asm {
    pub fn new() -> Self {
        Self(Vec::new())
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn bytes(mut self, v: &[u8]) -> Self {
        self.0.extend_from_slice(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn uleb(mut self, mut v: u64) -> Self {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return self;
            }
            self.0.push(b | 0x80);
        }
    }
    pub fn sleb(mut self, mut v: i64) -> Self {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
            if done {
                self.0.push(b);
                return self;
            }
            self.0.push(b | 0x80);
        }
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// The standard x86-64 CIE initial instructions: CFA = rsp + 8, RA at CFA - 8.
pub fn std_cie_insns() -> Vec<u8> {
    Asm::new()
        .u8(0x0c)
        .uleb(7)
        .uleb(8) // def_cfa rsp+8
        .u8(0x80 | 16)
        .uleb(1) // offset r16 at cfa-8
        .0
}

/// A hand-made `.eh_frame` + `.eh_frame_hdr` image.
pub struct CfiImage {
    /// Where the image is placed.
    pub base: u64,
    pub bytes: Vec<u8>,
    pub hdr: u64,
    pub hdr_len: u64,
    /// FDE addresses, in order of creation.
    pub fdes: Vec<u64>,
}

/// One function for [`build_image`]: `[begin, begin + len)` with its FDE instructions.
pub struct Func {
    pub begin: u64,
    pub len: u64,
    pub insns: Vec<u8>,
}

/// Builds a CIE (version 1, augmentation `aug` ("zR" or "zRS"), caf 1, daf -8, RA 16, FDE
/// encoding pcrel|sdata4) with `cie_insns`, one FDE per function, and a sorted hdr table.
pub fn build_image(base: u64, aug: &str, cie_insns: &[u8], funcs: &[Func]) -> CfiImage {
    let mut eh = Vec::new();
    // CIE
    let mut body = Asm::new()
        .u32(0)
        .u8(1)
        .bytes(aug.as_bytes())
        .u8(0)
        .uleb(1)
        .sleb(-8)
        .u8(16);
    if aug.starts_with('z') {
        body = body.uleb(1).u8(0x1b);
    }
    body = body.bytes(cie_insns);
    while (body.len() + 4) & 7 != 0 {
        body = body.u8(0);
    }
    eh.extend_from_slice(&(body.len() as u32).to_le_bytes());
    eh.extend_from_slice(&body.0);
    let eh_frame_addr = base;
    let mut fdes = Vec::new();
    for f in funcs {
        let fde_addr = eh_frame_addr + eh.len() as u64;
        let cie_ptr_field = fde_addr + 4;
        let begin_field = fde_addr + 8;
        let mut body = Asm::new()
            .u32((cie_ptr_field - eh_frame_addr) as u32)
            .u32(f.begin.wrapping_sub(begin_field) as u32)
            .u32(f.len as u32);
        if aug.starts_with('z') {
            body = body.uleb(0);
        }
        body = body.bytes(&f.insns);
        while (body.len() + 4) & 7 != 0 {
            body = body.u8(0);
        }
        eh.extend_from_slice(&(body.len() as u32).to_le_bytes());
        eh.extend_from_slice(&body.0);
        fdes.push(fde_addr);
    }
    eh.extend_from_slice(&[0, 0, 0, 0]);
    while eh.len() & 7 != 0 {
        eh.push(0);
    }
    // hdr
    let hdr = base + eh.len() as u64;
    let mut sorted: Vec<(u64, u64)> = funcs
        .iter()
        .map(|f| f.begin)
        .zip(fdes.iter().copied())
        .collect();
    sorted.sort();
    let mut h = Asm::new()
        .u8(1)
        .u8(0x1b)
        .u8(0x03)
        .u8(0x3b)
        .u32((eh_frame_addr.wrapping_sub(hdr + 4)) as u32)
        .u32(sorted.len() as u32);
    for (b, f) in &sorted {
        h = h
            .u32(b.wrapping_sub(hdr) as u32)
            .u32(f.wrapping_sub(hdr) as u32);
    }
    let hdr_len = h.len() as u64;
    eh.extend_from_slice(&h.0);
    CfiImage {
        base,
        bytes: eh,
        hdr,
        hdr_len,
        fdes,
    }
}

/// Memory that is one flat byte array at `base` (the PT_LOAD span of a file): fast.
pub struct FlatMem {
    pub base: u64,
    pub data: Vec<u8>,
}

impl FlatMem {
    pub fn from_elf(elf: &ElfFile) -> FlatMem {
        let file = object::File::parse(&*elf.data).unwrap();
        let segs: Vec<_> = file.segments().collect();
        let lo = segs.iter().map(|s| s.address()).min().unwrap();
        let hi = segs.iter().map(|s| s.address() + s.size()).max().unwrap();
        let mut data = vec![0u8; (hi - lo) as usize];
        for s in &segs {
            let d = s.data().unwrap();
            let at = (s.address() - lo) as usize;
            data[at..at + d.len()].copy_from_slice(d);
        }
        FlatMem { base: lo, data }
    }
}

impl UnwindMemory for FlatMem {
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        let Some(off) = addr.checked_sub(self.base) else {
            return false;
        };
        let off = off as usize;
        match self.data.get(off..off.wrapping_add(out.len())) {
            Some(s) if off.checked_add(out.len()).is_some() => {
                out.copy_from_slice(s);
                true
            }
            _ => false,
        }
    }
}

/// The test programs of the differential tests, built into `dir`: frameless functions
/// (`-O2 -fomit-frame-pointer`), the same with frame pointers (rows of frame records), a
/// stack-realigning one (`-mstackrealign`: DRAP) and a C++ `std::sort`; those the host
/// cannot build are left out.
pub fn built_programs(dir: &Path) -> Vec<PathBuf> {
    [
        compile(dir, "fns", FNS_C, false, &["-O2", "-fomit-frame-pointer"]),
        compile(
            dir,
            "fns-fp",
            FNS_C,
            false,
            &["-O2", "-fno-omit-frame-pointer"],
        ),
        compile(dir, "realign", REALIGN_C, false, &["-O2", "-mstackrealign"]),
        compile(dir, "sort", SORT_CPP, true, &["-O2"]),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The host's libraries and interpreters the differential tests read.
pub fn system_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/usr/bin/python3.11",
        "/usr/bin/perl",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    // More files to compare, colon-separated: an ELF file a user's stacks go through.
    if let Some(more) = std::env::var_os("UD_CFI_FILES") {
        files.extend(std::env::split_paths(&more).filter(|p| !p.as_os_str().is_empty()));
    }
    files
}

pub const FNS_C: &str = r#"
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
__attribute__((noinline)) int sum_vla(int n) {
    int v[n];
    for (int i = 0; i < n; i++) v[i] = i * i;
    int s = 0;
    for (int i = 0; i < n; i++) s += v[i] ^ i;
    return s;
}
__attribute__((noinline)) int use_alloca(int n) {
    char *p = __builtin_alloca(n);
    memset(p, n, n);
    int s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    return s + sum_vla(n / 2 + 1);
}
static int cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}
__attribute__((noinline)) int sorter(int n) {
    int *a = malloc(n * sizeof *a);
    for (int i = 0; i < n; i++) a[i] = (i * 7919) % n;
    qsort(a, n, sizeof *a, cmp);
    int r = a[n / 2];
    free(a);
    return r;
}
__attribute__((noinline)) long many_regs(long a, long b, long c, long d) {
    long x[8];
    for (int i = 0; i < 8; i++) x[i] = a * i + b;
    if (c > d) return x[c & 7] + many_regs(a - 1, b, c - 1, d);
    return x[d & 7];
}
int main(int argc, char **argv) {
    int n = argc + 40;
    printf("%d %d %ld\n", use_alloca(n), sorter(n), many_regs(n, 2, 9, 3));
    return 0;
}
"#;

pub const REALIGN_C: &str = r#"
#include <stdio.h>
#include <string.h>
__attribute__((noinline)) void fill(void *p, int n) { memset(p, n, 64); }
__attribute__((noinline)) int realigned(int n) {
    char buf[64] __attribute__((aligned(64)));
    fill(buf, n);
    int vla[n];
    for (int i = 0; i < n; i++) vla[i] = buf[i & 63];
    int s = 0;
    for (int i = 0; i < n; i++) s += vla[i];
    return s;
}
int main(int argc, char **argv) {
    printf("%d\n", realigned(argc + 10));
    return 0;
}
"#;

pub const SORT_CPP: &str = r#"
#include <algorithm>
#include <vector>
#include <cstdio>
int main(int argc, char **) {
    std::vector<int> v;
    for (int i = 0; i < 1000 + argc; i++) v.push_back((i * 7919) % 1003);
    std::sort(v.begin(), v.end(), [](int a, int b) {
        return (a % 17) < (b % 17) || ((a % 17) == (b % 17) && a < b);
    });
    std::printf("%d\n", v[500]);
}
"#;

/// The walk as the unwinder did it before rows had a compact form, as the reference the
/// differential tests compare [`unwind_logic::cfi::walk`] with: for every frame the row is
/// computed (no cache), applied by the general [`unwind_logic::cfi::step::step`] through a
/// plain [`ReadAhead`], and the caller checked as the driver checks it. Returns the
/// entries, the stop reason and the counts of CFI, frame-pointer and signal frames.
pub fn reference_walk<M: UnwindMemory, S: UnwindInfoSource>(
    mem: &mut M,
    source: &mut S,
    regs: &Regs,
    params: &WalkParams,
    max: usize,
) -> (Vec<u64>, Stop, [u32; 3]) {
    use unwind_logic::cfi::regs::{RA, RBP, RSP};
    use unwind_logic::cfi::step::step;
    use unwind_logic::cfi::unwinder::{compute_row, MAX_SIGNAL_FRAMES};
    use unwind_logic::cfi::{Error, Invalid};
    let mut reader = ReadAhead::new(mem, params.page_size, params.user_end, params.byte_budget);
    let mut counts = [0u32; 3];
    let user_end = params.user_end;
    let (Some(ip0), Some(_)) = (regs.get(RA), regs.get(RSP)) else {
        return (vec![], Stop::Invalid(Invalid::UnknownRegister), counts);
    };
    if ip0 == 0 || ip0 >= user_end || user_end < 4096 {
        return (vec![], Stop::Invalid(Invalid::Address), counts);
    }
    if max == 0 {
        return (vec![], Stop::Full, counts);
    }
    let mut out = vec![ip0];
    let mut regs = *regs;
    let mut exact = true;
    let stop_of = |reader: &ReadAhead<&mut M>, e: Error| match e {
        Error::Fault => match reader.failure_error() {
            Error::Budget => Stop::Budget,
            Error::Invalid(k) => Stop::Invalid(k),
            _ => Stop::Fault,
        },
        Error::Budget => Stop::Budget,
        Error::NotFound => Stop::NoUnwindInfo,
        Error::Invalid(k) => Stop::Invalid(k),
        Error::Unsupported(k) => Stop::Unsupported(k),
    };
    let stop = loop {
        if out.len() >= max {
            break Stop::Full;
        }
        let (Some(ip), Some(sp)) = (regs.get(RA), regs.get(RSP)) else {
            break Stop::Invalid(Invalid::UnknownRegister);
        };
        let pc = if exact { ip } else { ip.wrapping_sub(1) };
        // (caller registers, frame pointer?, signal?)
        let fp_step =
            |reader: &mut ReadAhead<&mut M>, regs: &Regs| -> Result<Option<Regs>, Error> {
                let rbp = regs
                    .get(RBP)
                    .ok_or(Error::Invalid(Invalid::UnknownRegister))?;
                if rbp == 0 {
                    return Ok(None);
                }
                if rbp & 7 != 0 || rbp < sp {
                    return Err(Error::Invalid(Invalid::FramePointer));
                }
                let caller_sp = match rbp.checked_add(16) {
                    Some(end) if end <= user_end => end,
                    _ => return Err(Error::Invalid(Invalid::Address)),
                };
                let mut rec = [0u8; 16];
                if !reader.read(rbp, &mut rec) {
                    return Err(Error::Fault);
                }
                let next = u64::from_le_bytes(rec[..8].try_into().unwrap());
                let ret = u64::from_le_bytes(rec[8..].try_into().unwrap());
                if ret == 0 {
                    return Ok(None);
                }
                let mut r = Regs::new();
                r.set(RA, ret);
                r.set(RSP, caller_sp);
                r.set(RBP, next);
                Ok(Some(r))
            };
        let cfi = |reader: &mut ReadAhead<&mut M>,
                   source: &mut S|
         -> Result<Option<(Regs, bool)>, Error> {
            let module = match source.find(pc).lookup {
                Lookup::Unmapped => return Err(Error::Invalid(Invalid::Unmapped)),
                Lookup::NoInfo => return Err(Error::NotFound),
                Lookup::Module(m) => m,
            };
            let row = compute_row(reader, &module, pc)?;
            Ok(step(&row, &regs, reader)?.map(|c| (c.regs, row.signal)))
        };
        let stepped = match params.mode {
            Mode::Fp => fp_step(&mut reader, &regs).map(|r| r.map(|r| (r, 1, false))),
            Mode::Auto | Mode::Cfi => match cfi(&mut reader, source) {
                Err(Error::NotFound) if params.mode == Mode::Auto => {
                    fp_step(&mut reader, &regs).map(|r| r.map(|r| (r, 1, false)))
                }
                r => r.map(|c| c.map(|(r, s)| (r, 0, s))),
            },
        };
        let (caller, method, signal) = match stepped {
            Ok(Some(c)) => c,
            Ok(None) => break Stop::End,
            Err(e) => break stop_of(&reader, e),
        };
        let (Some(new_ip), Some(new_sp)) = (caller.get(RA), caller.get(RSP)) else {
            break Stop::Invalid(Invalid::UnknownRegister);
        };
        if new_ip == 0 {
            break Stop::End;
        }
        if new_ip >= user_end || new_sp == 0 || new_sp >= user_end {
            break Stop::Invalid(Invalid::Address);
        }
        if signal {
            counts[2] += 1;
            if counts[2] > MAX_SIGNAL_FRAMES {
                break Stop::Invalid(Invalid::SignalFrames);
            }
        } else if new_sp <= sp {
            break Stop::Invalid(Invalid::NotIncreasing);
        }
        counts[method] += 1;
        regs = caller;
        exact = signal;
        out.push(new_ip);
    };
    (out, stop, counts)
}
