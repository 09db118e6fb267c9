// SPDX-License-Identifier: GPL-2.0
//! ELF headers: parsing real files (checked against `object`), hand-made headers for every
//! rejection, and the load bias checked against how the real loader mapped libc and ld.so
//! into this very test process (`dl_iterate_phdr`, and the address of `getpid`).
#![cfg(not(loom))]

mod cfi_common;

use std::ffi::{c_char, c_void, CStr};

use cfi_common::*;
use object::{Object, ObjectSegment, ObjectSymbol};
use unwind_logic::cfi::elf::{self, ElfError};

#[repr(C)]
struct DlPhdrInfo {
    addr: u64,
    name: *const c_char,
    phdr: *const c_void,
    phnum: u16,
}

extern "C" {
    fn dl_iterate_phdr(
        cb: extern "C" fn(*mut DlPhdrInfo, usize, *mut c_void) -> i32,
        data: *mut c_void,
    ) -> i32;
    fn getpid() -> i32;
}

extern "C" fn collect(info: *mut DlPhdrInfo, _size: usize, data: *mut c_void) -> i32 {
    // SAFETY: dl_iterate_phdr passes a valid info and our `data`.
    unsafe {
        let out = &mut *(data as *mut Vec<(u64, String)>);
        let name = CStr::from_ptr((*info).name).to_string_lossy().into_owned();
        out.push(((*info).addr, name));
    }
    0
}

fn loaded_objects() -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = Vec::new();
    // SAFETY: the callback only writes to `out`.
    unsafe { dl_iterate_phdr(collect, &mut out as *mut _ as *mut c_void) };
    out
}

struct Map {
    lo: u64,
    offset: u64,
    exec: bool,
    path: String,
}

fn self_maps() -> Vec<Map> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (lo, _) = f.first()?.split_once('-')?;
            Some(Map {
                lo: u64::from_str_radix(lo, 16).ok()?,
                offset: u64::from_str_radix(f.get(2)?, 16).ok()?,
                exec: f.get(1)?.contains('x'),
                path: f.get(5).map_or(String::new(), |p| p.to_string()),
            })
        })
        .collect()
}

fn headers(path: &str) -> Option<elf::ElfInfo> {
    let data = std::fs::read(path).ok()?;
    let head = &data[..data.len().min(4096)];
    let need = elf::headers_len(head).unwrap() as usize;
    Some(elf::parse(&data[..need.max(head.len())]).unwrap())
}

/// The bias computed from every mapping of libc and ld.so in this process equals the
/// loader's `dlpi_addr`; for libc, also `getpid`'s address minus its symbol value.
#[test]
fn bias_matches_the_loader() {
    let objs = loaded_objects();
    let maps = self_maps();
    let mut checked = 0;
    for wanted in ["libc.so.6", "ld-linux-x86-64.so.2"] {
        let Some((addr, name)) = objs.iter().find(|(_, n)| n.ends_with(wanted)) else {
            println!("note: {wanted} not loaded in the test process");
            continue;
        };
        let canon = std::fs::canonicalize(name).unwrap();
        let info = headers(canon.to_str().unwrap()).unwrap();
        let mut exec_maps = 0;
        for m in maps.iter().filter(|m| {
            m.path.starts_with('/') && std::fs::canonicalize(&m.path).ok().as_ref() == Some(&canon)
        }) {
            let bias = info.bias(m.lo, m.offset, m.exec, PAGE);
            if m.exec {
                exec_maps += 1;
                assert_eq!(bias, Some(*addr), "{wanted} at {:#x}", m.lo);
            } else if let Some(b) = bias {
                assert_eq!(b, *addr, "{wanted} at {:#x}", m.lo);
            }
            checked += 1;
        }
        assert_eq!(exec_maps, 1, "{wanted}");
        if wanted == "libc.so.6" {
            let data = std::fs::read(&canon).unwrap();
            let file = object::File::parse(&*data).unwrap();
            let sym = file
                .dynamic_symbols()
                .find(|s| s.name() == Ok("getpid"))
                .unwrap();
            let runtime = getpid as *const () as usize as u64;
            assert_eq!(runtime - sym.address(), *addr, "getpid");
        }
    }
    println!("{checked} mappings checked");
}

/// Real files: the summary matches `object`'s view of the program headers.
#[test]
fn parses_real_files() {
    for path in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/usr/bin/python3.11",
        "/usr/bin/perl",
    ] {
        let Ok(data) = std::fs::read(path) else {
            println!("note: skipping {path}");
            continue;
        };
        let info = elf::parse(&data[..4096.min(data.len())]).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let segs: Vec<_> = file.segments().collect();
        assert_eq!(info.loads().len(), segs.len(), "{path}");
        for (l, s) in info.loads().iter().zip(&segs) {
            assert_eq!(l.vaddr, s.address());
            assert_eq!((l.offset, l.filesz), s.file_range());
        }
        let hdr = ElfFile::load(path.as_ref()).unwrap().eh_frame_hdr.unwrap();
        assert_eq!(info.eh_frame_hdr, Some(hdr.0), "{path}");
        assert_eq!(info.eh_frame_hdr_len, hdr.1, "{path}");
        // Its executable segment, mapped at a made-up base, gives that base back.
        let text = (0..info.loads().len())
            .find(|&i| info.is_exec(i))
            .map(|i| info.loads()[i])
            .unwrap();
        let base = 0x7f00_0000_0000;
        let vma = base + (text.vaddr & !(PAGE - 1));
        assert_eq!(
            info.bias(vma, text.offset & !(PAGE - 1), true, PAGE),
            Some(base)
        );
    }
}

/// Program headers away from the file's head (BOLT's and patchelf's rewrites): the head
/// alone is `Truncated`, `program_headers` says where the table is, and `parse_split` of
/// the head and the table read there gives what `parse` gives for the original file. On
/// real files moved so, and on rustc's BOLT-rewritten `librustc_driver` where there is one.
#[test]
fn program_headers_apart() {
    for path in ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/python3.11"] {
        let Ok(data) = std::fs::read(path) else {
            println!("note: skipping {path}");
            continue;
        };
        let want = elf::parse(&data[..4096]).unwrap();
        let (phoff, len) = elf::program_headers(&data).unwrap();
        let (phoff, len) = (phoff as usize, len as usize);
        // As patchelf does: a copy of the table at the (8-aligned) end, e_phoff pointing
        // at it, the old one overwritten.
        let mut moved = data.clone();
        moved.resize(moved.len().next_multiple_of(8), 0);
        let at = moved.len();
        moved.extend_from_slice(&data[phoff..phoff + len]);
        moved[phoff..phoff + len].fill(0xa5);
        moved[32..40].copy_from_slice(&(at as u64).to_le_bytes());
        let head = &moved[..4096];
        assert_eq!(elf::parse(head), Err(ElfError::Truncated), "{path}");
        assert_eq!(elf::program_headers(head), Ok((at as u64, len as u64)));
        assert_eq!(
            elf::parse_split(head, &moved[at..at + len]),
            Ok(want),
            "{path}"
        );
        assert_eq!(elf::parse(&moved), Ok(want), "{path}");
        // The table must be whole.
        assert_eq!(
            elf::parse_split(head, &moved[at..at + len - 1]),
            Err(ElfError::Truncated)
        );
        let mut longer = moved[at..].to_vec();
        longer.extend_from_slice(&[0; 56]);
        assert_eq!(elf::parse_split(head, &longer), Err(ElfError::Truncated));
    }
    // rustc's librustc_driver (rustup's toolchains), rewritten by BOLT: its program
    // headers are 80 MiB in.
    let home = std::env::var("HOME").unwrap_or_default();
    let drivers: Vec<_> = std::fs::read_dir(format!("{home}/.rustup/toolchains"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|t| {
            std::fs::read_dir(t.path().join("lib"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("librustc_driver-"))
        })
        .collect();
    for path in drivers.iter().take(1) {
        let data = std::fs::read(path).unwrap();
        let (phoff, len) = elf::program_headers(&data[..4096]).unwrap();
        let (phoff, len) = (phoff as usize, len as usize);
        println!("{}: program headers at {phoff:#x}", path.display());
        let info = elf::parse_split(&data[..4096], &data[phoff..phoff + len]).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let segs: Vec<_> = file.segments().collect();
        assert_eq!(info.loads().len(), segs.len());
        for (l, s) in info.loads().iter().zip(&segs) {
            assert_eq!(
                (l.vaddr, l.offset, l.filesz),
                (s.address(), s.file_range().0, s.file_range().1)
            );
        }
        let hdr = ElfFile::load(path).unwrap().eh_frame_hdr.unwrap();
        assert_eq!(info.eh_frame_hdr, Some(hdr.0));
    }
    if drivers.is_empty() {
        println!("note: no librustc_driver under {home}/.rustup/toolchains");
    }
}

/// A hand-made ELF header with the given program headers (type, flags, offset, vaddr,
/// filesz, memsz).
fn make_elf(phdrs: &[(u32, u32, u64, u64, u64, u64)]) -> Vec<u8> {
    let mut a = Asm::new()
        .bytes(b"\x7fELF")
        .u8(2)
        .u8(1)
        .u8(1)
        .bytes(&[0; 9])
        .u16(3) // ET_DYN
        .u16(62)
        .u32(1)
        .u64(0) // entry
        .u64(64) // phoff
        .u64(0) // shoff
        .u32(0)
        .u16(64)
        .u16(56)
        .u16(phdrs.len() as u16)
        .u16(64)
        .u16(0)
        .u16(0);
    for &(t, f, off, vaddr, filesz, memsz) in phdrs {
        a = a
            .u32(t)
            .u32(f)
            .u64(off)
            .u64(vaddr)
            .u64(vaddr)
            .u64(filesz)
            .u64(memsz)
            .u64(0x1000);
    }
    a.0
}

#[test]
fn rejects_bad_headers() {
    let good = make_elf(&[(1, 5, 0, 0, 0x1000, 0x1000)]);
    assert!(elf::parse(&good).is_ok());
    assert_eq!(elf::headers_len(&good[..64]), Ok(64 + 56));
    assert_eq!(elf::parse(&good[..64 + 55]), Err(ElfError::Truncated));
    assert_eq!(elf::parse(&good[..10]), Err(ElfError::Truncated));
    assert_eq!(elf::parse(&[]), Err(ElfError::Truncated));
    let mut bad = good.clone();
    bad[1] = b'X';
    assert_eq!(elf::parse(&bad), Err(ElfError::NotElf));
    let mut bad = good.clone();
    bad[4] = 1; // ELFCLASS32
    assert_eq!(elf::parse(&bad), Err(ElfError::Class));
    let mut bad = good.clone();
    bad[5] = 2; // big-endian
    assert_eq!(elf::parse(&bad), Err(ElfError::Class));
    let mut bad = good.clone();
    bad[18] = 3; // EM_386
    assert_eq!(elf::parse(&bad), Err(ElfError::Machine));
    let mut bad = good.clone();
    bad[16] = 1; // ET_REL
    assert_eq!(elf::parse(&bad), Err(ElfError::Type));
    let mut bad = good.clone();
    bad[54] = 32; // phentsize
    assert_eq!(elf::parse(&bad), Err(ElfError::ProgramHeaders));
    let mut bad = good.clone();
    bad[56] = 0xff;
    bad[57] = 0xff; // PN_XNUM
    assert_eq!(elf::parse(&bad), Err(ElfError::ProgramHeaders));
    let mut bad = good.clone();
    bad[32..40].copy_from_slice(&u64::MAX.to_le_bytes()); // phoff overflows
    assert_eq!(elf::parse(&bad), Err(ElfError::Truncated));
    assert_eq!(elf::headers_len(&bad), Err(ElfError::ProgramHeaders));
    let many: Vec<_> = (0..17)
        .map(|i| (1, 4, i * 0x1000, i * 0x1000, 0x10, 0x10))
        .collect();
    assert_eq!(elf::parse(&make_elf(&many)), Err(ElfError::TooManyLoads));
    let ok: Vec<_> = (0..16)
        .map(|i| (1, 4, i * 0x1000, i * 0x1000, 0x10, 0x10))
        .collect();
    assert_eq!(elf::parse(&make_elf(&ok)).unwrap().loads().len(), 16);
}

#[test]
fn bias_edge_cases() {
    // The classic layout of the test program: r (0), r-x (0x1000), r (0x2000), and the RW
    // segment at file offset 0x2dd0 (vaddr 0x3dd0) sharing the r segment's file page.
    let info = elf::parse(&make_elf(&[
        (1, 4, 0, 0, 0x998, 0x998),
        (1, 5, 0x1000, 0x1000, 0x901, 0x901),
        (1, 4, 0x2000, 0x2000, 0x374, 0x374),
        (1, 6, 0x2dd0, 0x3dd0, 0x2c0, 0x388),
        (0x6474_e550, 4, 0x20f0, 0x20f0, 0x7c, 0x7c),
    ]))
    .unwrap();
    let b = 0x5555_0000_0000u64;
    assert_eq!(info.eh_frame_hdr, Some(0x20f0));
    assert_eq!(info.bias(b, 0, false, PAGE), Some(b));
    assert_eq!(info.bias(b + 0x1000, 0x1000, true, PAGE), Some(b));
    // The shared page, read-only: the r segment's or the RELRO's? Ambiguous.
    assert_eq!(info.bias(b + 0x2000, 0x2000, false, PAGE), None);
    assert_eq!(info.bias(b + 0x3000, 0x2000, false, PAGE), None);
    // Not executable code at offset 0x1000: no such segment.
    assert_eq!(info.bias(b + 0x1000, 0x1000, false, PAGE), None);
    assert_eq!(info.bias(b, 0, true, PAGE), None);
    // Past the end of the file's segments, or a bad page size.
    assert_eq!(info.bias(b, 0x9000, false, PAGE), None);
    assert_eq!(info.bias(b, 0, false, 3000), None);
    assert_eq!(info.bias(b, 0, false, 0), None);
    // A split mapping in the middle of a segment (mprotect): offset inside the segment.
    let big = elf::parse(&make_elf(&[(1, 5, 0, 0x40_0000, 0x5000, 0x5000)])).unwrap();
    assert_eq!(big.bias(0x40_3000, 0x3000, true, PAGE), Some(0));
    // A 2 MiB p_align segment whose file offset is not 2 MiB aligned: the page is the unit.
    let aligned = elf::parse(&make_elf(&[
        (1, 4, 0, 0, 0x800, 0x800),
        (1, 5, 0x1000, 0x20_1000, 0x3000, 0x3000),
    ]))
    .unwrap();
    assert_eq!(aligned.bias(b + 0x20_1000, 0x1000, true, PAGE), Some(b));
    // Old layout: text and data share a page; each mapping starts at its segment's page.
    let old = elf::parse(&make_elf(&[
        (1, 5, 0, 0, 0x1234, 0x1234),
        (1, 6, 0x1238, 0x20_1238, 0x100, 0x200),
    ]))
    .unwrap();
    assert_eq!(old.bias(b, 0, true, PAGE), Some(b));
    assert_eq!(old.bias(b + 0x20_1000, 0x1000, false, PAGE), Some(b));
    // Without PT_GNU_EH_FRAME: no module.
    assert_eq!(old.module(1, b), None);
    assert_eq!(info.module(1, b).unwrap().eh_frame_hdr, 0x20f0);
}

/// Random bytes and random mutations of a valid header never panic; whatever parses
/// yields a bias or None without panicking.
#[test]
fn hostile_headers() {
    let mut rng = Rng(0xe1f);
    let base = make_elf(&[
        (1, 4, 0, 0, 0x998, 0x998),
        (1, 5, 0x1000, 0x1000, 0x901, 0x901),
        (0x6474_e550, 4, 0x20f0, 0x20f0, 0x7c, 0x7c),
    ]);
    for i in 0..20_000 {
        let bytes = if i % 2 == 0 {
            let mut b = base.clone();
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(b.len() as u64) as usize;
                b[at] = rng.next() as u8;
            }
            b.truncate(rng.below(b.len() as u64 + 1) as usize);
            b
        } else {
            let n = rng.below(400) as usize;
            rng.bytes(n)
        };
        let _ = elf::headers_len(&bytes);
        if let Ok(info) = elf::parse(&bytes) {
            for _ in 0..4 {
                let _ = info.bias(rng.next(), rng.next(), rng.next() & 1 == 0, PAGE);
                let _ = info.bias(rng.next(), rng.next(), true, rng.next());
            }
        }
    }
}
