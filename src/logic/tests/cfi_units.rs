// SPDX-License-Identifier: GPL-2.0
//! Unit tests of the CFI unwinder's pieces: the read-ahead reader, the pointer encodings
//! and `.eh_frame_hdr`, CIE/FDE parsing, every CFA instruction, every expression
//! operation, the step rules, the row cache, and the walk driver on synthetic stacks.
#![cfg(not(loom))]

mod cfi_common;

use cfi_common::*;
use unwind_logic::cfi::eh_frame::{parse_cie, parse_fde};
use unwind_logic::cfi::eh_frame_hdr;
use unwind_logic::cfi::expr::{eval, eval_breg, eval_machine, MAX_EXPR_OPS, MAX_EXPR_STACK};
use unwind_logic::cfi::interp::{row_for_pc, MAX_CFA_INSTRUCTIONS, REMEMBER_DEPTH};
use unwind_logic::cfi::memory::{ReadFailure, MAX_BYTES_PER_WALK, WINDOW_BYTES};
use unwind_logic::cfi::regs::*;
use unwind_logic::cfi::row::{CfaRule, ExprRef, Row, Rule, MAX_EXPR_LEN};
use unwind_logic::cfi::step::step;
use unwind_logic::cfi::unwinder::{compute_row, Method, MAX_SIGNAL_FRAMES};
use unwind_logic::cfi::*;

// ---------------------------------------------------------------------------------------
// Read-ahead

fn stack_mem() -> SegMem {
    let mut m = SegMem::default();
    m.add(0x10_0000, (0..3 * PAGE).map(|i| i as u8).collect());
    m
}

#[test]
fn read_ahead_windows() {
    let mut inner = stack_mem();
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut b = [0u8; 8];
    assert!(r.read(0x10_0010, &mut b));
    assert_eq!(b[0], 0x10);
    // The rest of the window: no new call.
    for off in (0x18..0x10 + WINDOW_BYTES as u64 - 8).step_by(8) {
        assert!(r.read(0x10_0000 + off, &mut b));
        assert_eq!(b[0], off as u8);
    }
    assert_eq!(r.read_calls(), 1);
    assert_eq!(r.bytes_read(), WINDOW_BYTES as u64);
    // Near the end of a page: the window stops at the page end.
    assert!(r.read(0x10_0ff8, &mut b));
    assert_eq!(r.bytes_read(), WINDOW_BYTES as u64 + 8);
    // A request crossing the page end: exactly the request.
    let mut c = [0u8; 16];
    assert!(r.read(0x10_1ffc, &mut c));
    assert_eq!(r.bytes_read(), WINDOW_BYTES as u64 + 8 + 16);
    // Larger than a window: straight through.
    let mut big = [0u8; WINDOW_BYTES + 1];
    assert!(r.read(0x10_0100, &mut big));
    assert_eq!(big[0], 0);
    assert_eq!(r.read_calls(), 4);
    // A probe is never cached nor read ahead.
    assert!(r.read_probe(0x10_0200, &mut b));
    assert!(r.read_probe(0x10_0200, &mut b));
    assert_eq!(r.read_calls(), 6);
    assert_eq!(r.last_failure(), ReadFailure::None);
}

#[test]
fn read_ahead_lru_keeps_four_streams() {
    let mut inner = stack_mem();
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut b = [0u8; 4];
    let bases = [0x10_0000u64, 0x10_0400, 0x10_0800, 0x10_0c00];
    for round in 0..5 {
        for (i, base) in bases.iter().enumerate() {
            assert!(r.read(base + round * 4, &mut b));
            assert_eq!(b[0], (base + round * 4) as u8, "{i}");
        }
    }
    assert_eq!(r.read_calls(), 4);
    // A fifth stream evicts the least recently used (the first).
    assert!(r.read(0x10_1000, &mut b));
    assert!(r.read(0x10_0400, &mut b));
    assert_eq!(r.read_calls(), 5);
    assert!(r.read(0x10_0000, &mut b));
    assert_eq!(r.read_calls(), 6);
}

#[test]
fn read_ahead_rejects_out_of_range_and_budget() {
    let mut inner = stack_mem();
    let end = 0x10_0000 + 3 * PAGE;
    let mut r = ReadAhead::new(&mut inner, PAGE, end, 100);
    let mut b = [0u8; 8];
    assert!(!r.read(0, &mut b));
    assert_eq!(r.last_failure(), ReadFailure::Range);
    assert!(!r.read(u64::MAX - 3, &mut b));
    assert_eq!(r.failure_error(), Error::Invalid(Invalid::Address));
    assert!(!r.read(end - 4, &mut b));
    assert!(r.read(end - 8, &mut b), "the last bytes below user_end");
    assert!(r.read(0x10_0000, &mut b));
    assert_eq!(r.bytes_read(), 8 + 64);
    // 28 bytes of budget left: the window shrinks to them, then nothing more.
    assert!(r.read(0x10_0800, &mut b));
    assert_eq!(r.bytes_read(), 100);
    assert!(r.read(0x10_0810, &mut b), "inside the shrunk window");
    assert!(!r.read(0x10_0900, &mut b));
    assert_eq!(r.last_failure(), ReadFailure::Budget);
    assert_eq!(r.failure_error(), Error::Budget);
    assert_eq!(r.read_calls(), 3);
    assert_eq!(MAX_BYTES_PER_WALK, 64 * 1024);
}

#[test]
fn read_ahead_retries_exactly_when_the_window_faults() {
    // Memory that ends 8 bytes into what the window would read.
    let mut inner = SegMem::default();
    inner.add(0x20_0000, vec![7; 16]);
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut b = [0u8; 8];
    assert!(r.read(0x20_0008, &mut b));
    assert_eq!(b, [7; 8]);
    assert_eq!(r.read_calls(), 2);
    assert!(!r.read(0x30_0000, &mut b));
    assert_eq!(r.last_failure(), ReadFailure::Fault);
    assert_eq!(r.failure_error(), Error::Fault);
    // Not a power of two: no read-ahead at all.
    let mut inner = stack_mem();
    let mut r = ReadAhead::new(&mut inner, 3000, USER_END, u64::MAX);
    assert!(r.read(0x10_0000, &mut b));
    assert_eq!(r.bytes_read(), 8);
}

// ---------------------------------------------------------------------------------------
// .eh_frame_hdr and pointer encodings

/// A header with the given eh_frame_ptr encoding and bytes, an FDE count and a table.
fn hdr_mem(enc: u8, ptr: &[u8], count_enc: u8, count: &[u8], table_enc: u8) -> SegMem {
    let mut m = SegMem::default();
    let bytes = Asm::new()
        .u8(1)
        .u8(enc)
        .u8(count_enc)
        .u8(table_enc)
        .bytes(ptr)
        .bytes(count)
        .bytes(&[0; 64])
        .0;
    m.add(0x1000, bytes);
    m
}

const HDR: u64 = 0x1000;

#[test]
fn hdr_pointer_encodings() {
    let cases: Vec<(u8, Vec<u8>, u64)> = vec![
        (0x00, Asm::new().u64(0xdead_beef).0, 0xdead_beef),
        (0x04, Asm::new().u64(0xdead_beef).0, 0xdead_beef),
        (0x0c, Asm::new().u64(0xdead_beef).0, 0xdead_beef),
        (0x02, Asm::new().u16(0xfff0).0, 0xfff0),
        (0x03, Asm::new().u32(0xffff_fff0).0, 0xffff_fff0),
        (0x0a, Asm::new().u16(0xfff0).0, (-16i64) as u64),
        (0x0b, Asm::new().u32(0xffff_fff0).0, (-16i64) as u64),
        (0x01, Asm::new().uleb(624485).0, 624485),
        (0x09, Asm::new().sleb(-123456).0, (-123456i64) as u64),
        // pcrel: relative to the field at HDR + 4.
        (0x1b, Asm::new().u32(0x100).0, HDR + 4 + 0x100),
        (0x1b, Asm::new().u32((-4i32) as u32).0, HDR),
        // datarel: relative to the start of .eh_frame_hdr.
        (0x3b, Asm::new().u32(0x100).0, HDR + 0x100),
        (0x31, Asm::new().uleb(0x80).0, HDR + 0x80),
    ];
    for (enc, ptr, want) in cases {
        let count = Asm::new().u32(0).0;
        let mut m = hdr_mem(enc, &ptr, 0x03, &count, 0x3b);
        let h = eh_frame_hdr::parse(&mut m, HDR, 0).unwrap_or_else(|e| panic!("{enc:#x}: {e:?}"));
        assert_eq!(h.eh_frame, want, "encoding {enc:#x}");
        assert_eq!(h.fde_count, 0);
        assert_eq!(h.table, HDR + 4 + ptr.len() as u64 + 4);
    }
    for enc in [
        0x80 | 0x1b,
        0x20 | 0x03,
        0x40 | 0x03,
        0x50 | 0x03,
        0x05,
        0x0f,
        0xff,
    ] {
        let mut m = hdr_mem(enc, &[0; 8], 0x03, &[0; 4], 0x3b);
        assert_eq!(
            eh_frame_hdr::parse(&mut m, HDR, 0),
            Err(Error::Unsupported(Unsupported::Encoding)),
            "{enc:#x}"
        );
    }
}

#[test]
fn hdr_header_checks() {
    let ptr = Asm::new().u32(0).0;
    let count = Asm::new().u32(3).0;
    let mut m = hdr_mem(0x1b, &ptr, 0x03, &count, 0x3b);
    assert!(eh_frame_hdr::parse(&mut m, HDR, 0).is_ok());
    // The table must fit the section: 12 + 3 * 8 bytes.
    assert!(eh_frame_hdr::parse(&mut m, HDR, 36).is_ok());
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 35),
        Err(Error::Invalid(Invalid::Malformed))
    );
    m.write(HDR, &[2]);
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 0),
        Err(Error::Unsupported(Unsupported::HdrVersion))
    );
    for table_enc in [0x1b, 0x03, 0xff, 0x3c] {
        let mut m = hdr_mem(0x1b, &ptr, 0x03, &count, table_enc);
        assert_eq!(
            eh_frame_hdr::parse(&mut m, HDR, 0),
            Err(Error::Unsupported(Unsupported::TableEncoding))
        );
    }
    let mut m = hdr_mem(0x1b, &ptr, 0xff, &count, 0x3b);
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 0),
        Err(Error::Unsupported(Unsupported::TableEncoding))
    );
    let big = Asm::new().u32((1 << 24) + 1).0;
    let mut m = hdr_mem(0x1b, &ptr, 0x03, &big, 0x3b);
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 0),
        Err(Error::Unsupported(Unsupported::FdeCount))
    );
    // LEB128 of more than 64 bits.
    let long = Asm::new().bytes(&[0x80; 10]).u8(0).0;
    let mut m = hdr_mem(0x01, &long, 0x03, &count, 0x3b);
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 0),
        Err(Error::Invalid(Invalid::Malformed))
    );
    let over = Asm::new().bytes(&[0xff; 9]).u8(0x02).0;
    let mut m = hdr_mem(0x01, &over, 0x03, &count, 0x3b);
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 0),
        Err(Error::Invalid(Invalid::Malformed))
    );
    let max = Asm::new().bytes(&[0xff; 9]).u8(0x01).0;
    let mut m = hdr_mem(0x01, &max, 0x03, &count, 0x3b);
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 0).unwrap().eh_frame,
        u64::MAX
    );
    let min = Asm::new().bytes(&[0x80; 9]).u8(0x7f).0;
    let mut m = hdr_mem(0x09, &min, 0x03, &count, 0x3b);
    assert_eq!(
        eh_frame_hdr::parse(&mut m, HDR, 0).unwrap().eh_frame,
        1 << 63
    );
    // Truncated.
    let mut m = SegMem::default();
    m.add(HDR, vec![1, 0x1b, 0x03, 0x3b, 0]);
    assert_eq!(eh_frame_hdr::parse(&mut m, HDR, 0), Err(Error::Fault));
}

fn funcs(n: u64) -> Vec<Func> {
    (0..n)
        .map(|i| Func {
            begin: 0x40_0000 + i * 0x100,
            len: 0x80,
            insns: vec![],
        })
        .collect()
}

#[test]
fn hdr_search_finds_every_function_in_log_probes() {
    for n in [1u64, 2, 7, 8, 9, 100, 1000, 5000] {
        let img = build_image(0x10_0000, "zR", &std_cie_insns(), &funcs(n));
        let mut mem = SegMem::default();
        mem.add(img.base, img.bytes.clone());
        let h = eh_frame_hdr::parse(&mut mem, img.hdr, img.hdr_len).unwrap();
        assert_eq!(h.fde_count, n);
        assert_eq!(h.eh_frame, img.base);
        let log = 64 - n.leading_zeros() as usize;
        for i in (0..n).step_by(((n / 50) as usize).max(1)) {
            for (pc, covered) in [(0, true), (0x7f, true), (0x80, false), (0xff, false)] {
                let pc = 0x40_0000 + i * 0x100 + pc;
                mem.calls = 0;
                let fde = h.find_fde(&mut mem, pc).unwrap();
                assert_eq!(fde, img.fdes[i as usize]);
                assert!(mem.calls <= log + 2, "{} probes for {n}", mem.calls);
                let module = ModuleInfo {
                    id: 1,
                    bias: 0,
                    eh_frame_hdr: img.hdr,
                    eh_frame_hdr_len: img.hdr_len,
                };
                let r = compute_row(&mut mem, &module, pc);
                assert_eq!(r.is_ok(), covered, "{pc:#x}: {r:?}");
                if !covered {
                    assert_eq!(r, Err(Error::NotFound));
                }
            }
        }
        assert_eq!(h.find_fde(&mut mem, 0x3f_ffff), Err(Error::NotFound));
        assert_eq!(
            h.find_fde(&mut mem, u64::MAX),
            Ok(*img.fdes.last().unwrap())
        );
    }
}

// ---------------------------------------------------------------------------------------
// CIE and FDE parsing

/// An entry: length, then `body`.
fn entry(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

const CIE_AT: u64 = 0x50_0000;

/// Memory with a CIE at CIE_AT and an FDE right after it (pc_begin 0x40_0000 pcrel sdata4
/// if `pcrel`, else absptr; range 0x100). Returns (memory, FDE address).
fn cie_fde(cie_body: &[u8], fde_aug: &[u8], pcrel: bool) -> (SegMem, u64) {
    let cie = entry(cie_body);
    let fde_at = CIE_AT + cie.len() as u64;
    let mut body = Asm::new().u32((fde_at + 4 - CIE_AT) as u32);
    if pcrel {
        body = body
            .u32((0x40_0000u64.wrapping_sub(fde_at + 8)) as u32)
            .u32(0x100);
    } else {
        body = body.u64(0x40_0000).u64(0x100);
    }
    body = body.bytes(fde_aug).u8(0); // a nop instruction
    let mut bytes = cie;
    bytes.extend(entry(&body.0));
    let mut m = SegMem::default();
    m.add(CIE_AT, bytes);
    (m, fde_at)
}

fn cie_body(version: u8, aug: &str, ra: u64, aug_data: &[u8]) -> Vec<u8> {
    let mut a = Asm::new().u32(0).u8(version).bytes(aug.as_bytes()).u8(0);
    if version == 4 {
        a = a.u8(8).u8(0);
    }
    a = a.uleb(1).sleb(-8);
    a = if version == 1 {
        a.u8(ra as u8)
    } else {
        a.uleb(ra)
    };
    if aug.starts_with('z') {
        a = a.uleb(aug_data.len() as u64).bytes(aug_data);
    }
    a.bytes(&std_cie_insns()).0
}

/// A CIE and its FDE are read a few dozen bytes at a time (the parser's cursor reads
/// ahead), not with a read of the memory per byte or number; and an entry that claims more
/// bytes than are readable still parses where it needs only the readable ones (a read ahead
/// that fails falls back to the exact read).
#[test]
fn entries_are_read_ahead_and_a_read_ahead_never_turns_a_good_read_into_a_fault() {
    let data = Asm::new().u8(0x9b).u32(0x1234).u8(0x1b).u8(0x1b).0;
    let cie = cie_body(1, "zPLRS", 16, &data);
    let (mut m, fde) = cie_fde(&cie, &Asm::new().uleb(4).u32(0).0, true);
    let whole = parse_fde(&mut m, fde).unwrap();
    // Each entry's length, the FDE's CIE pointer, the CIE, its augmentation data and the
    // FDE's fields: a read each, where a read per byte or number made 22 reads here.
    assert!(m.calls <= 8, "{} reads to parse a CIE and an FDE", m.calls);
    // The same FDE claiming 200 bytes more than the memory holds: the cursor's read ahead
    // over its fields fails (it would pass the end of the memory), the exact reads do not.
    let (mut m, fde) = cie_fde(&cie, &Asm::new().uleb(4).u32(0).0, true);
    let len = u32::from_le_bytes(m.slice(fde, 4).unwrap().try_into().unwrap());
    m.write(fde, &(len + 200).to_le_bytes());
    let short = parse_fde(&mut m, fde).unwrap();
    assert_eq!(
        (short.pc_begin, short.pc_end),
        (whole.pc_begin, whole.pc_end)
    );
    assert_eq!(short.instructions, whole.instructions);
    assert_eq!(short.end, whole.end + 200);
    assert_eq!(short.cie, whole.cie);
}

#[test]
fn cie_versions_and_augmentations() {
    for version in [1, 3, 4] {
        let (mut m, fde) = cie_fde(&cie_body(version, "zR", 16, &[0x1b]), &[0], true);
        let f = parse_fde(&mut m, fde).unwrap();
        assert_eq!((f.pc_begin, f.pc_end), (0x40_0000, 0x40_0100));
        assert_eq!(f.cie.version, version);
        assert_eq!(
            (f.cie.code_align, f.cie.data_align, f.cie.ra_reg),
            (1, -8, 16)
        );
        assert!(f.covers(0x40_0000) && f.covers(0x40_00ff) && !f.covers(0x40_0100));
        assert!(!f.cie.signal);
    }
    // No augmentation: absptr addresses, no augmentation data.
    let (mut m, fde) = cie_fde(&cie_body(1, "", 16, &[]), &[], false);
    let f = parse_fde(&mut m, fde).unwrap();
    assert_eq!((f.pc_begin, f.pc_end), (0x40_0000, 0x40_0100));
    assert!(!f.cie.has_augmentation_data);
    // Personality (indirect pcrel sdata4), LSDA, FDE encoding, signal frame.
    let data = Asm::new().u8(0x9b).u32(0x1234).u8(0x1b).u8(0x1b).0;
    let (mut m, fde) = cie_fde(
        &cie_body(1, "zPLRS", 16, &data),
        &Asm::new().uleb(4).u32(0).0,
        true,
    );
    let f = parse_fde(&mut m, fde).unwrap();
    assert!(f.cie.signal);
    assert_eq!(f.cie.fde_encoding, 0x1b);
    assert_eq!((f.pc_begin, f.pc_end), (0x40_0000, 0x40_0100));
    // An unknown letter after R: skipped with the augmentation data.
    let (mut m, fde) = cie_fde(&cie_body(1, "zRX", 16, &[0x1b, 9, 9]), &[0], true);
    assert_eq!(parse_fde(&mut m, fde).unwrap().pc_begin, 0x40_0000);
    // Before R: the FDE encoding's position is unknown.
    let (mut m, fde) = cie_fde(&cie_body(1, "zXR", 16, &[9, 0x1b]), &[0], true);
    assert_eq!(
        parse_fde(&mut m, fde),
        Err(Error::Unsupported(Unsupported::Augmentation))
    );
    // Without z, or too long.
    for aug in ["eh", "R", "zRSPLBGXY"] {
        let (mut m, fde) = cie_fde(&cie_body(1, aug, 16, &[0x1b]), &[0], true);
        assert_eq!(
            parse_fde(&mut m, fde),
            Err(Error::Unsupported(Unsupported::Augmentation)),
            "{aug}"
        );
    }
    // Versions and the return address column.
    for version in [0, 2, 5] {
        let (mut m, fde) = cie_fde(&cie_body(version, "zR", 16, &[0x1b]), &[0], true);
        assert_eq!(
            parse_fde(&mut m, fde),
            Err(Error::Unsupported(Unsupported::CieVersion))
        );
    }
    let mut v4 = cie_body(4, "zR", 16, &[0x1b]);
    v4[8] = 4; // address size 4
    let (mut m, fde) = cie_fde(&v4, &[0], true);
    assert_eq!(
        parse_fde(&mut m, fde),
        Err(Error::Unsupported(Unsupported::CieVersion))
    );
    let (mut m, fde) = cie_fde(&cie_body(3, "zR", 15, &[0x1b]), &[0], true);
    assert_eq!(
        parse_fde(&mut m, fde),
        Err(Error::Unsupported(Unsupported::ReturnAddressRegister))
    );
    // An FDE encoding that cannot be read.
    let (mut m, fde) = cie_fde(&cie_body(1, "zR", 16, &[0x9b]), &[0], true);
    assert_eq!(
        parse_fde(&mut m, fde),
        Err(Error::Unsupported(Unsupported::Encoding))
    );
    let (mut m, fde) = cie_fde(&cie_body(1, "zR", 16, &[0x3b]), &[0], true);
    assert_eq!(
        parse_fde(&mut m, fde),
        Err(Error::Unsupported(Unsupported::Encoding))
    );
    // Augmentation data longer than the entry.
    let mut long = cie_body(1, "zR", 16, &[0x1b]);
    long[11] = 0x7f; // the augmentation data length
    let (mut m, fde) = cie_fde(&long, &[0], true);
    assert_eq!(
        parse_fde(&mut m, fde),
        Err(Error::Invalid(Invalid::Malformed))
    );
}

#[test]
fn entry_lengths_and_ids() {
    let (mut m, fde) = cie_fde(&cie_body(1, "zR", 16, &[0x1b]), &[0], true);
    assert!(parse_cie(&mut m, CIE_AT).is_ok());
    // An FDE is not a CIE, a CIE is not an FDE.
    assert_eq!(
        parse_cie(&mut m, fde),
        Err(Error::Invalid(Invalid::Malformed))
    );
    assert_eq!(
        parse_fde(&mut m, CIE_AT),
        Err(Error::Invalid(Invalid::Malformed))
    );
    // A CIE pointer to the FDE itself.
    let mut self_ptr = m.clone();
    self_ptr.write(fde + 4, &4u32.to_le_bytes());
    assert_eq!(
        parse_fde(&mut self_ptr, fde),
        Err(Error::Invalid(Invalid::Malformed))
    );
    // A CIE pointer before address 0.
    let mut under = m.clone();
    under.write(fde + 4, &u32::MAX.to_le_bytes());
    assert_eq!(
        parse_fde(&mut under, fde),
        Err(Error::Invalid(Invalid::Malformed))
    );
    // The terminator.
    let mut zero = m.clone();
    zero.write(fde, &0u32.to_le_bytes());
    assert_eq!(
        parse_fde(&mut zero, fde),
        Err(Error::Invalid(Invalid::Malformed))
    );
    // A length past the end of memory: parsing reads only the head, the instructions fault.
    let mut long = m.clone();
    long.write(fde, &0x1000u32.to_le_bytes());
    let f = parse_fde(&mut long, fde).unwrap();
    assert_eq!(row_for_pc(&mut long, &f, 0x40_0000), Err(Error::Fault));
    // 64-bit lengths: fine when small, rejected when huge.
    let cie = entry(&cie_body(1, "zR", 16, &[0x1b]));
    let fde_at = CIE_AT + cie.len() as u64;
    let body = Asm::new()
        .u32((fde_at + 12 - CIE_AT) as u32)
        .u32((0x40_0000u64.wrapping_sub(fde_at + 16)) as u32)
        .u32(0x100)
        .u8(0)
        .u8(0)
        .0;
    let mut bytes = cie.clone();
    bytes.extend(
        Asm::new()
            .u32(u32::MAX)
            .u64(body.len() as u64)
            .bytes(&body)
            .0,
    );
    let mut m64 = SegMem::default();
    m64.add(CIE_AT, bytes.clone());
    let f = parse_fde(&mut m64, fde_at).unwrap();
    assert_eq!(f.pc_begin, 0x40_0000);
    for huge in [u64::MAX, 1 << 40, (1 << 20) + 1] {
        let mut b = bytes.clone();
        let at = cie.len() + 4;
        b[at..at + 8].copy_from_slice(&huge.to_le_bytes());
        let mut m = SegMem::default();
        m.add(CIE_AT, b);
        assert_eq!(
            parse_fde(&mut m, fde_at),
            Err(Error::Invalid(Invalid::Malformed))
        );
    }
    // pc_begin + pc_range overflows.
    let mut over = SegMem::default();
    let cie = entry(&cie_body(1, "", 16, &[]));
    let fde_at = CIE_AT + cie.len() as u64;
    let mut b = cie;
    b.extend(entry(
        &Asm::new()
            .u32((fde_at + 4 - CIE_AT) as u32)
            .u64(u64::MAX - 1)
            .u64(2)
            .0,
    ));
    over.add(CIE_AT, b);
    assert_eq!(
        parse_fde(&mut over, fde_at),
        Err(Error::Invalid(Invalid::Malformed))
    );
}

// ---------------------------------------------------------------------------------------
// CFA instructions

const FN: u64 = 0x40_0000;

/// The row at `FN + off` of a function with these CIE and FDE instructions.
fn row_at(cie: &[u8], insns: &[u8], off: u64) -> Result<Row, Error> {
    row_with(cie, insns, off, "zR")
}

fn row_with(cie: &[u8], insns: &[u8], off: u64, aug: &str) -> Result<Row, Error> {
    let img = build_image(
        0x10_0000,
        aug,
        cie,
        &[Func {
            begin: FN,
            len: 0x1000,
            insns: insns.to_vec(),
        }],
    );
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    let fde = parse_fde(&mut mem, img.fdes[0])?;
    row_for_pc(&mut mem, &fde, FN + off)
}

fn std_row(insns: &[u8], off: u64) -> Row {
    row_at(&std_cie_insns(), insns, off).unwrap()
}

fn cfa(reg: u16, offset: i32) -> CfaRule {
    CfaRule::RegOffset { reg, offset }
}

#[test]
fn cie_rules_and_advances() {
    let r = std_row(&[], 0);
    assert_eq!(r.rules.cfa, cfa(RSP, 8));
    assert_eq!(r.rule(RA), Rule::Offset(-8));
    assert_eq!(r.rule(RBX), Rule::Default);
    assert!(!r.signal);
    // advance_loc 1; def_cfa_offset 16; advance_loc1 3; def_cfa_offset 24;
    // advance_loc2 0x100; def_cfa_offset 32; advance_loc4 0x200; def_cfa_offset 40
    let p = Asm::new()
        .u8(0x41)
        .u8(0x0e)
        .uleb(16)
        .u8(0x02)
        .u8(3)
        .u8(0x0e)
        .uleb(24)
        .u8(0x03)
        .u16(0x100)
        .u8(0x0e)
        .uleb(32)
        .u8(0x04)
        .u32(0x200)
        .u8(0x0e)
        .uleb(40)
        .0;
    for (off, want) in [
        (0, 8),
        (1, 16),
        (3, 16),
        (4, 24),
        (0x103, 24),
        (0x104, 32),
        (0x303, 32),
        (0x304, 40),
        (0xfff, 40),
    ] {
        assert_eq!(std_row(&p, off).rules.cfa, cfa(RSP, want), "at +{off:#x}");
    }
    // A PC outside the FDE.
    assert_eq!(row_at(&std_cie_insns(), &p, 0x1000), Err(Error::NotFound));
}

#[test]
fn code_alignment_factor_scales_advances() {
    // A CIE with caf 4 (hand-made: build_image uses caf 1).
    let cie = entry(
        &Asm::new()
            .u32(0)
            .u8(1)
            .bytes(b"zR\0")
            .uleb(4)
            .sleb(-8)
            .u8(16)
            .uleb(1)
            .u8(0x1b)
            .bytes(&std_cie_insns())
            .0,
    );
    let fde_at = CIE_AT + cie.len() as u64;
    let body = Asm::new()
        .u32((fde_at + 4 - CIE_AT) as u32)
        .u32((FN.wrapping_sub(fde_at + 8)) as u32)
        .u32(0x100)
        .uleb(0)
        .u8(0x42) // advance 2 * 4
        .u8(0x0e)
        .uleb(16)
        .0;
    let mut b = cie;
    b.extend(entry(&body));
    let mut m = SegMem::default();
    m.add(CIE_AT, b);
    let f = parse_fde(&mut m, fde_at).unwrap();
    assert_eq!(
        row_for_pc(&mut m, &f, FN + 7).unwrap().rules.cfa,
        cfa(RSP, 8)
    );
    assert_eq!(
        row_for_pc(&mut m, &f, FN + 8).unwrap().rules.cfa,
        cfa(RSP, 16)
    );
}

#[test]
fn set_loc() {
    // set_loc uses the FDE encoding (pcrel sdata4: relative to the operand). The FDE's
    // instructions start at a known address: compute it.
    let img = build_image(0x10_0000, "zR", &std_cie_insns(), &funcs(1));
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    let insns_at = parse_fde(&mut mem, img.fdes[0]).unwrap().instructions;
    let operand = insns_at + 1;
    let target = FN + 0x10;
    let p = Asm::new()
        .u8(0x01)
        .u32(target.wrapping_sub(operand) as u32)
        .u8(0x0e)
        .uleb(48)
        .0;
    assert_eq!(std_row(&p, 0xf).rules.cfa, cfa(RSP, 8));
    assert_eq!(std_row(&p, 0x10).rules.cfa, cfa(RSP, 48));
    // Backwards: malformed.
    let back = Asm::new()
        .u8(0x41)
        .u8(0x01)
        .u32(FN.wrapping_sub(operand + 1) as u32)
        .0;
    assert_eq!(
        row_at(&std_cie_insns(), &back, 5),
        Err(Error::Invalid(Invalid::Malformed))
    );
}

#[test]
fn cfa_definitions() {
    // def_cfa rbp+16
    assert_eq!(std_row(&[0x0c, 6, 16], 0).rules.cfa, cfa(RBP, 16));
    // def_cfa_sf rbp, -2 * -8 = 16
    assert_eq!(
        std_row(&Asm::new().u8(0x12).uleb(6).sleb(-2).0, 0)
            .rules
            .cfa,
        cfa(RBP, 16)
    );
    // def_cfa_register r10 keeps the offset.
    assert_eq!(std_row(&[0x0d, 10], 0).rules.cfa, cfa(R10, 8));
    // def_cfa_offset_sf -3 * -8 = 24
    assert_eq!(
        std_row(&Asm::new().u8(0x13).sleb(-3).0, 0).rules.cfa,
        cfa(RSP, 24)
    );
    // def_cfa_expression (breg6 -8; deref): gcc's DRAP.
    let r = std_row(&[0x0f, 3, 0x76, 0x78, 0x06], 0);
    let CfaRule::Expression(e) = r.rules.cfa else {
        panic!()
    };
    assert_eq!(r.expr(e), &[0x76, 0x78, 0x06]);
    // def_cfa_register / def_cfa_offset after an expression: malformed (as gimli).
    for p in [
        &[0x0f, 1, 0x30, 0x0d, 6][..],
        &[0x0f, 1, 0x30, 0x0e, 8][..],
        &[0x0f, 1, 0x30, 0x13, 1][..],
    ] {
        assert_eq!(
            row_at(&std_cie_insns(), p, 0),
            Err(Error::Invalid(Invalid::Malformed))
        );
    }
    // No CFA rule at all.
    assert_eq!(
        row_at(&[0x80 | 16, 1], &[], 0),
        Err(Error::Invalid(Invalid::Malformed))
    );
    // def_cfa_offset without a CFA: register 0 (gimli's default rule).
    assert_eq!(row_at(&[0x0e, 8], &[], 0).unwrap().rules.cfa, cfa(RAX, 8));
    // An untracked CFA register, an offset that does not fit 32 bits.
    assert_eq!(
        row_at(&std_cie_insns(), &[0x0c, 17, 8], 0),
        Err(Error::Unsupported(Unsupported::Register))
    );
    assert_eq!(
        row_at(
            &std_cie_insns(),
            &Asm::new().u8(0x0c).uleb(7).uleb(1 << 31).0,
            0
        ),
        Err(Error::Unsupported(Unsupported::Offset))
    );
    // Register numbers above 16 bits: malformed.
    assert_eq!(
        row_at(
            &std_cie_insns(),
            &Asm::new().u8(0x0c).uleb(1 << 16).uleb(8).0,
            0
        ),
        Err(Error::Invalid(Invalid::Malformed))
    );
}

#[test]
fn register_rules() {
    let cases: Vec<(Vec<u8>, u16, Rule)> = vec![
        (vec![0x83, 2], RBX, Rule::Offset(-16)),
        (
            Asm::new().u8(0x05).uleb(12).uleb(3).0,
            R12,
            Rule::Offset(-24),
        ),
        (
            Asm::new().u8(0x11).uleb(13).sleb(-4).0,
            R13,
            Rule::Offset(32),
        ),
        (
            Asm::new().u8(0x14).uleb(14).uleb(2).0,
            R14,
            Rule::ValOffset(-16),
        ),
        (
            Asm::new().u8(0x15).uleb(15).sleb(1).0,
            R15,
            Rule::ValOffset(-8),
        ),
        (Asm::new().u8(0x2f).uleb(3).uleb(2).0, RBX, Rule::Offset(16)),
        (Asm::new().u8(0x07).uleb(6).0, RBP, Rule::Undefined),
        (Asm::new().u8(0x08).uleb(6).0, RBP, Rule::SameValue),
        (
            Asm::new().u8(0x09).uleb(3).uleb(0).0,
            RBX,
            Rule::Register(RAX),
        ),
        (Asm::new().u8(0x07).uleb(16).0, RA, Rule::Undefined),
    ];
    for (p, reg, want) in cases {
        assert_eq!(std_row(&p, 0).rule(reg), want, "{p:x?}");
    }
    // expression / val_expression keep their bytes.
    let r = std_row(&[0x10, 6, 2, 0x76, 0x00, 0x16, 3, 2, 0x77, 0x10], 0);
    let Rule::Expression(e) = r.rule(RBP) else {
        panic!()
    };
    assert_eq!(r.expr(e), &[0x76, 0x00]);
    let Rule::ValExpression(e) = r.rule(RBX) else {
        panic!()
    };
    assert_eq!(r.expr(e), &[0x77, 0x10]);
    // The same expression twice is stored once.
    let r = std_row(&[0x10, 6, 2, 0x76, 0x00, 0x10, 3, 2, 0x76, 0x00], 0);
    assert_eq!(r.rule(RBP), r.rule(RBX));
    // An expression too long for a row; but fine for an untracked register (skipped).
    let long = Asm::new()
        .u8(0x10)
        .uleb(3)
        .uleb(MAX_EXPR_LEN as u64 + 1)
        .bytes(&[0x96; 33])
        .0;
    assert_eq!(
        row_at(&std_cie_insns(), &long, 0),
        Err(Error::Unsupported(Unsupported::ExpressionLength))
    );
    let long = Asm::new()
        .u8(0x10)
        .uleb(40)
        .uleb(200)
        .bytes(&[0x96; 200])
        .u8(0x83)
        .uleb(2)
        .0;
    assert_eq!(std_row(&long, 0).rule(RBX), Rule::Offset(-16));
    // Too many distinct expressions for a row.
    let mut many = Asm::new();
    for i in 0..8u8 {
        many = many.u8(0x10).uleb(3).uleb(32).bytes(&[0x30 + i; 32]);
    }
    assert_eq!(
        row_at(&std_cie_insns(), &many.0, 0),
        Err(Error::Unsupported(Unsupported::ExpressionPool))
    );
    // Rules of untracked registers (xmm0 = 17, 100) are parsed and ignored.
    let r = std_row(
        &Asm::new()
            .u8(0x05)
            .uleb(17)
            .uleb(2)
            .u8(0x07)
            .uleb(100)
            .u8(0x83)
            .uleb(2)
            .0,
        0,
    );
    assert_eq!(r.rule(RBX), Rule::Offset(-16));
    // A return address in an untracked register.
    assert_eq!(
        row_at(
            &std_cie_insns(),
            &Asm::new().u8(0x09).uleb(16).uleb(17).0,
            0
        ),
        Err(Error::Unsupported(Unsupported::Register))
    );
    // An offset that does not fit 32 bits.
    assert_eq!(
        row_at(&std_cie_insns(), &Asm::new().u8(0x83).uleb(1 << 30).0, 0),
        Err(Error::Unsupported(Unsupported::Offset))
    );
}

#[test]
fn restore_and_remember() {
    // CIE: rbx at cfa-16. FDE: rbx at cfa-24, advance, restore rbx, advance, restore_extended
    // after another change.
    let cie = Asm::new().bytes(&std_cie_insns()).u8(0x83).uleb(2).0;
    let p = Asm::new()
        .u8(0x83)
        .uleb(3)
        .u8(0x41)
        .u8(0xc3)
        .u8(0x41)
        .u8(0x83)
        .uleb(4)
        .u8(0x41)
        .u8(0x06)
        .uleb(3)
        .u8(0x41)
        .u8(0xc6) // restore rbp: no CIE rule
        .0;
    let at = |off| row_at(&cie, &p, off).unwrap().rule(RBX);
    assert_eq!(at(0), Rule::Offset(-24));
    assert_eq!(at(1), Rule::Offset(-16));
    assert_eq!(at(2), Rule::Offset(-32));
    assert_eq!(at(3), Rule::Offset(-16));
    assert_eq!(row_at(&cie, &p, 4).unwrap().rule(RBP), Rule::Default);
    // restore in a CIE: malformed.
    assert_eq!(
        row_at(&[0x0c, 7, 8, 0xc3], &[], 0),
        Err(Error::Invalid(Invalid::Malformed))
    );
    // remember_state / restore_state bring back the CFA and the rules.
    let p = Asm::new()
        .u8(0x0e)
        .uleb(16)
        .u8(0x86)
        .uleb(2)
        .u8(0x41)
        .u8(0x0a) // remember
        .u8(0x0e)
        .uleb(8)
        .u8(0xc6)
        .u8(0x41)
        .u8(0x0b) // restore
        .0;
    let r = std_row(&p, 1);
    assert_eq!((r.rules.cfa, r.rule(RBP)), (cfa(RSP, 8), Rule::Default));
    let r = std_row(&p, 2);
    assert_eq!(
        (r.rules.cfa, r.rule(RBP)),
        (cfa(RSP, 16), Rule::Offset(-16))
    );
    // Nested up to REMEMBER_DEPTH.
    let ok = [vec![0x0a; REMEMBER_DEPTH], vec![0x0b; REMEMBER_DEPTH]].concat();
    assert!(row_at(&std_cie_insns(), &ok, 0).is_ok());
    let deep = vec![0x0a; REMEMBER_DEPTH + 1];
    assert_eq!(
        row_at(&std_cie_insns(), &deep, 0),
        Err(Error::Unsupported(Unsupported::RememberDepth))
    );
    assert_eq!(
        row_at(&std_cie_insns(), &[0x0b], 0),
        Err(Error::Invalid(Invalid::Malformed))
    );
}

#[test]
fn other_instructions_and_bounds() {
    // nop, GNU_args_size.
    let r = std_row(&Asm::new().u8(0).u8(0x2e).uleb(300).u8(0).0, 0);
    assert_eq!(r.rules.cfa, cfa(RSP, 8));
    // Not handled: MIPS_advance_loc8, hi_user, an unassigned opcode.
    for op in [0x1d, 0x3f, 0x17, 0x2d] {
        assert_eq!(
            row_at(&std_cie_insns(), &[op, 0, 0, 0, 0, 0, 0, 0, 0], 0),
            Err(Error::Unsupported(Unsupported::Instruction)),
            "{op:#x}"
        );
    }
    // Instruction count bound (CIE + FDE).
    // (The CIE has 2 instructions, and padding adds up to 7 nops.)
    let ok = vec![0u8; MAX_CFA_INSTRUCTIONS as usize - 2 - 7];
    assert!(row_at(&std_cie_insns(), &ok, 0).is_ok());
    let too_many = vec![0u8; MAX_CFA_INSTRUCTIONS as usize];
    assert_eq!(
        row_at(&std_cie_insns(), &too_many, 0),
        Err(Error::Unsupported(Unsupported::TooManyInstructions))
    );
    // A remember_state / restore_state loop is bounded the same way.
    let pairs: Vec<u8> = [0x0a, 0x0b].repeat(MAX_CFA_INSTRUCTIONS as usize);
    assert_eq!(
        row_at(&std_cie_insns(), &pairs, 0),
        Err(Error::Unsupported(Unsupported::TooManyInstructions))
    );
    // Advances that overflow the address: malformed.
    let over = Asm::new().u8(0x04).u32(u32::MAX).u8(0x04).u32(u32::MAX).0;
    assert!(
        row_at(&std_cie_insns(), &over, 0).is_ok(),
        "past the PC: never computed"
    );
    // Truncated instruction.
    assert_eq!(
        row_at(&std_cie_insns(), &[0x0c, 7], 0).map(|_| ()),
        Err(Error::Invalid(Invalid::Malformed)).or(Ok(()))
    );
}

#[test]
fn advance_loc_overflow_is_malformed() {
    // An FDE at the top of the address space whose advance wraps: hand-made, absptr.
    let cie = entry(&cie_body(1, "", 16, &[]));
    let fde_at = CIE_AT + cie.len() as u64;
    let begin = u64::MAX - 0x100;
    let body = Asm::new()
        .u32((fde_at + 4 - CIE_AT) as u32)
        .u64(begin)
        .u64(0xff)
        .u8(0x04)
        .u32(0x200) // to begin + 0x200: overflows
        .u8(0x0e)
        .uleb(16)
        .0;
    let mut b = cie;
    b.extend(entry(&body));
    let mut m = SegMem::default();
    m.add(CIE_AT, b);
    let f = parse_fde(&mut m, fde_at).unwrap();
    assert_eq!(
        row_for_pc(&mut m, &f, begin + 0x10),
        Err(Error::Invalid(Invalid::Malformed))
    );
}

#[test]
fn signal_augmentation_marks_the_row() {
    let r = row_with(&std_cie_insns(), &[], 0, "zRS").unwrap();
    assert!(r.signal);
}

// ---------------------------------------------------------------------------------------
// Expressions

fn regs_with(pairs: &[(u16, u64)]) -> Regs {
    let mut r = Regs::new();
    for &(reg, v) in pairs {
        r.set(reg, v);
    }
    r
}

fn ev(code: &[u8]) -> Result<u64, Error> {
    let regs = regs_with(&[(RSP, 0x1000), (RBP, 0x2000), (RA, 0x40_1234)]);
    let mut mem = SegMem::default();
    mem.add(0x3000, (0..64u8).collect());
    eval(code, &regs, &mut mem, None)
}

#[test]
fn expression_constants_and_registers() {
    assert_eq!(ev(&[0x30]), Ok(0));
    assert_eq!(ev(&[0x4f]), Ok(31));
    assert_eq!(ev(&[0x08, 0xff]), Ok(255));
    assert_eq!(ev(&[0x09, 0xff]), Ok(u64::MAX));
    assert_eq!(ev(&[0x0a, 0xfe, 0xff]), Ok(0xfffe));
    assert_eq!(ev(&[0x0b, 0xfe, 0xff]), Ok((-2i64) as u64));
    assert_eq!(ev(&[0x0c, 0xfe, 0xff, 0xff, 0xff]), Ok(0xffff_fffe));
    assert_eq!(ev(&[0x0d, 0xfe, 0xff, 0xff, 0xff]), Ok((-2i64) as u64));
    assert_eq!(ev(&Asm::new().u8(0x0e).u64(1 << 40).0), Ok(1 << 40));
    assert_eq!(ev(&Asm::new().u8(0x0f).u64(u64::MAX).0), Ok(u64::MAX));
    assert_eq!(ev(&Asm::new().u8(0x10).uleb(1 << 40).0), Ok(1 << 40));
    assert_eq!(ev(&Asm::new().u8(0x11).sleb(-5).0), Ok((-5i64) as u64));
    assert_eq!(ev(&Asm::new().u8(0x77).sleb(-8).0), Ok(0x1000 - 8));
    assert_eq!(ev(&Asm::new().u8(0x76).sleb(16).0), Ok(0x2010));
    assert_eq!(ev(&Asm::new().u8(0x92).uleb(7).sleb(8).0), Ok(0x1008));
    assert_eq!(
        ev(&Asm::new().u8(0x70).sleb(0).0),
        Err(Error::Invalid(Invalid::UnknownRegister))
    );
    assert_eq!(
        ev(&Asm::new().u8(0x71 + 16).sleb(0).0),
        Err(Error::Unsupported(Unsupported::Register))
    );
    assert_eq!(
        ev(&Asm::new().u8(0x92).uleb(1000).sleb(0).0),
        Err(Error::Unsupported(Unsupported::Register))
    );
    assert_eq!(ev(&[0x96, 0x31]), Ok(1));
    // Truncated operands.
    assert_eq!(ev(&[0x0e, 1, 2]), Err(Error::Invalid(Invalid::Malformed)));
    assert_eq!(ev(&[0x10, 0x80]), Err(Error::Invalid(Invalid::Malformed)));
}

/// `eval` answers the short forms (`bregN off`, `bregN off; deref`) without the stack
/// machine: for them and for anything near them (other opcodes, overlong, unterminated or
/// overflowing offsets, trailing bytes, unknown registers, unreadable memory, with and
/// without an initial value) its value or error and its reads are the machine's.
#[test]
fn short_expressions_evaluate_as_the_machine_does() {
    let mut rng = Rng(0x5eed_b4e9);
    let mut short = [0usize; 2];
    for _ in 0..200_000 {
        let mut code = vec![match rng.below(8) {
            0 => rng.next() as u8,
            1 => 0x92, // bregx: not a short form
            _ => 0x70 + rng.below(32) as u8,
        }];
        match rng.below(6) {
            // Overlong (non-minimal) encodings of small numbers, up to past ten bytes.
            0 => {
                let n = rng.below(12) as usize;
                code.extend(std::iter::repeat(0x80 | rng.below(128) as u8).take(n));
                code.push(rng.below(128) as u8);
            }
            // Unterminated.
            1 => code.extend(std::iter::repeat(0xff).take(rng.below(12) as usize)),
            // Any bytes.
            2 => code.extend((0..rng.below(4)).map(|_| rng.next() as u8)),
            // A number of any size, small ones most.
            _ => {
                let bits = rng.below(64) as u32;
                let v = (rng.next() >> (63 - bits)) as i64;
                code = Asm(code).sleb(if rng.below(2) == 0 { v } else { -v }).0;
            }
        }
        match rng.below(4) {
            0 | 1 => code.push(0x06),
            2 => {}
            _ => code.extend((0..1 + rng.below(3)).map(|_| rng.next() as u8)),
        }
        let mut regs = Regs::new();
        for reg in 0..REG_COUNT as u16 {
            if rng.below(4) != 0 {
                regs.set(reg, 0x7fff_0000 + 8 * rng.below(64));
            }
        }
        let initial = (rng.below(2) == 0).then(|| rng.next());
        let mem = || {
            let mut m = SegMem::default();
            m.add(0x7fff_0000, (0..512u64).map(|i| (i * 37) as u8).collect());
            m
        };
        let (mut m1, mut m2) = (mem(), mem());
        let fast = eval_breg(&code, &regs, &mut m1);
        let machine = eval_machine(&code, &regs, &mut m2, initial);
        if let Some(v) = fast {
            assert_eq!(v, machine, "{code:02x?}");
            assert_eq!((m1.calls, m1.bytes), (m2.calls, m2.bytes), "{code:02x?}");
            short[usize::from(code.last() == Some(&0x06))] += 1;
        }
        let mut m3 = mem();
        assert_eq!(eval(&code, &regs, &mut m3, initial), machine, "{code:02x?}");
    }
    // Both short forms were taken often, with and without a readable address.
    assert!(short.iter().all(|&n| n > 20_000), "{short:?}");
}

#[test]
fn expression_stack_operations() {
    assert_eq!(ev(&[0x31, 0x12, 0x22]), Ok(2)); // dup plus
    assert_eq!(ev(&[0x31, 0x32, 0x13]), Ok(1)); // drop
    assert_eq!(ev(&[0x31, 0x32, 0x14]), Ok(1)); // over
    assert_eq!(ev(&[0x31, 0x32, 0x33, 0x15, 2]), Ok(1)); // pick 2
    assert_eq!(
        ev(&[0x31, 0x32, 0x15, 2]),
        Err(Error::Invalid(Invalid::Expression))
    );
    assert_eq!(ev(&[0x31, 0x32, 0x16]), Ok(1)); // swap
    assert_eq!(ev(&[0x31, 0x32, 0x16, 0x13]), Ok(2));
    // rot: (1 2 3 -- 3 1 2)
    assert_eq!(ev(&[0x31, 0x32, 0x33, 0x17]), Ok(2));
    assert_eq!(ev(&[0x31, 0x32, 0x33, 0x17, 0x13]), Ok(1));
    assert_eq!(ev(&[0x31, 0x32, 0x33, 0x17, 0x13, 0x13]), Ok(3));
    // Underflow, empty, overflow.
    assert_eq!(ev(&[]), Err(Error::Invalid(Invalid::Expression)));
    assert_eq!(ev(&[0x22]), Err(Error::Invalid(Invalid::Expression)));
    assert_eq!(ev(&[0x13]), Err(Error::Invalid(Invalid::Expression)));
    assert_eq!(ev(&[0x31, 0x17]), Err(Error::Invalid(Invalid::Expression)));
    assert_eq!(ev(&[0x30; MAX_EXPR_STACK]), Ok(0));
    assert_eq!(
        ev(&[0x30; MAX_EXPR_STACK + 1]),
        Err(Error::Unsupported(Unsupported::ExpressionStack))
    );
    let ops: Vec<u8> = [0x30, 0x13].repeat(MAX_EXPR_OPS / 2 + 1);
    assert_eq!(
        ev(&ops),
        Err(Error::Unsupported(Unsupported::ExpressionOps))
    );
    // Not handled: branches, DW_OP_addr, regN, piece, call_frame_cfa, div, mod.
    for op in [0x2f, 0x28, 0x03, 0x50, 0x93, 0x9c, 0x1b, 0x1d, 0x00, 0xff] {
        assert_eq!(
            ev(&[0x31, 0x31, op, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::Unsupported(Unsupported::ExpressionOp)),
            "{op:#x}"
        );
    }
    // The initial value (the CFA for register rules).
    let mut mem = SegMem::default();
    assert_eq!(eval(&[0x23, 8], &Regs::new(), &mut mem, Some(100)), Ok(108));
}

#[test]
fn expression_arithmetic() {
    let bin =
        |a: u64, b: u64, op: u8| ev(&Asm::new().u8(0x0e).u64(a).u8(0x0e).u64(b).u8(op).0).unwrap();
    let m1 = u64::MAX;
    assert_eq!(bin(6, 3, 0x1a), 2); // and
    assert_eq!(bin(6, 3, 0x21), 7); // or
    assert_eq!(bin(6, 3, 0x27), 5); // xor
    assert_eq!(bin(6, 3, 0x22), 9); // plus
    assert_eq!(bin(m1, 2, 0x22), 1); // wraps
    assert_eq!(bin(3, 6, 0x1c), (-3i64) as u64); // minus
    assert_eq!(bin(1 << 63, 4, 0x1e), 0); // mul wraps
    assert_eq!(bin(1, 3, 0x24), 8); // shl
    assert_eq!(bin(1, 64, 0x24), 0);
    assert_eq!(bin(1, m1, 0x24), 0);
    assert_eq!(bin(16, 2, 0x25), 4); // shr
    assert_eq!(bin(16, 100, 0x25), 0);
    assert_eq!(bin(m1 - 15, 2, 0x26), (-4i64) as u64); // shra
    assert_eq!(bin(m1 - 15, 200, 0x26), m1);
    assert_eq!(bin(16, 200, 0x26), 0);
    // Signed comparisons.
    assert_eq!(bin(m1, 1, 0x2d), 1); // -1 < 1
    assert_eq!(bin(m1, 1, 0x2b), 0);
    assert_eq!(bin(2, 2, 0x29), 1);
    assert_eq!(bin(2, 2, 0x2e), 0);
    assert_eq!(bin(2, 2, 0x2a), 1);
    assert_eq!(bin(2, 2, 0x2c), 1);
    assert_eq!(bin(3, 2, 0x2c), 0);
    let un = |a: u64, op: u8| ev(&Asm::new().u8(0x0e).u64(a).u8(op).0).unwrap();
    assert_eq!(un(5, 0x1f), (-5i64) as u64); // neg
    assert_eq!(un(1 << 63, 0x1f), 1 << 63);
    assert_eq!(un(0, 0x20), m1); // not
    assert_eq!(un((-7i64) as u64, 0x19), 7); // abs
    assert_eq!(un(1 << 63, 0x19), 1 << 63);
    assert_eq!(ev(&Asm::new().u8(0x31).u8(0x23).uleb(u64::MAX).0), Ok(0)); // plus_uconst wraps
}

#[test]
fn expression_deref() {
    // [0x3000] = bytes 0..8
    assert_eq!(
        ev(&Asm::new().u8(0x10).uleb(0x3000).u8(0x06).0),
        Ok(0x0706_0504_0302_0100)
    );
    assert_eq!(
        ev(&Asm::new().u8(0x10).uleb(0x3001).u8(0x94).u8(2).0),
        Ok(0x0201)
    );
    assert_eq!(
        ev(&Asm::new().u8(0x10).uleb(0x3001).u8(0x94).u8(9).0),
        Err(Error::Invalid(Invalid::Malformed))
    );
    assert_eq!(
        ev(&Asm::new().u8(0x10).uleb(0x3001).u8(0x94).u8(0).0),
        Err(Error::Invalid(Invalid::Malformed))
    );
    assert_eq!(
        ev(&Asm::new().u8(0x10).uleb(0x9000).u8(0x06).0),
        Err(Error::Fault)
    );
    assert_eq!(ev(&[0x06]), Err(Error::Invalid(Invalid::Expression)));
}

#[test]
fn plt_expression() {
    // binutils .plt: CFA = rsp + 8 + ((rip & 15) >= 11) << 3
    let plt = [0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
    let mut mem = SegMem::default();
    for (low, extra) in [(0, 0), (10, 0), (11, 8), (15, 8)] {
        let regs = regs_with(&[(RSP, 0x1000), (RA, 0x40_1020 + low)]);
        assert_eq!(
            eval(&plt, &regs, &mut mem, None),
            Ok(0x1008 + extra),
            "{low}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Steps

fn all_regs(ip: u64, sp: u64) -> Regs {
    let mut v = [0u64; 17];
    for (i, x) in v.iter_mut().enumerate() {
        *x = 0x1111 * (i as u64 + 1);
    }
    v[RSP as usize] = sp;
    v[RA as usize] = ip;
    Regs::all_known(v)
}

#[test]
fn step_applies_rules() {
    // CFA = rsp + 32, RA at -8, rbx at -16, rbp = rsp + 0 (val_offset -32), r12 in rax,
    // r13 same value, r14 undefined, rax at -24 (ignored: caller-saved).
    let p = Asm::new()
        .u8(0x0e)
        .uleb(32)
        .u8(0x83)
        .uleb(2)
        .u8(0x14)
        .uleb(6)
        .uleb(4)
        .u8(0x09)
        .uleb(12)
        .uleb(0)
        .u8(0x08)
        .uleb(13)
        .u8(0x07)
        .uleb(14)
        .u8(0x80)
        .uleb(3)
        .0;
    let row = std_row(&p, 0);
    let sp = 0x7000_0000u64;
    let mut mem = SegMem::default();
    mem.add(sp, vec![0; 64]);
    mem.write(sp + 24, &0x40_5555u64.to_le_bytes());
    mem.write(sp + 16, &0xbbbbu64.to_le_bytes());
    mem.write(sp + 8, &0xaaaau64.to_le_bytes());
    let regs = all_regs(0x40_0000, sp);
    let c = step(&row, &regs, &mut mem).unwrap().unwrap();
    assert_eq!(c.cfa, sp + 32);
    let r = c.regs;
    assert_eq!(r.get(RA), Some(0x40_5555));
    assert_eq!(r.get(RSP), Some(sp + 32));
    assert_eq!(r.get(RBX), Some(0xbbbb));
    assert_eq!(r.get(RBP), Some(sp));
    assert_eq!(r.get(R12), regs.get(RAX));
    assert_eq!(r.get(R13), regs.get(R13));
    assert_eq!(r.get(R14), None);
    assert_eq!(
        r.get(R15),
        regs.get(R15),
        "callee-saved without a rule: same value"
    );
    for reg in [RAX, RDX, RCX, RSI, RDI, R8, R9, R10, R11] {
        assert_eq!(r.get(reg), None, "caller-saved: unknown ({reg})");
    }
    // Undefined return address: the end.
    let end = std_row(&[0x07, 16], 0);
    assert_eq!(step(&end, &regs, &mut mem), Ok(None));
    // The CFA needs an unknown register.
    let mut partial = regs;
    partial.forget(RBP);
    assert_eq!(
        step(&std_row(&[0x0c, 6, 16], 0), &partial, &mut mem),
        Err(Error::Invalid(Invalid::UnknownRegister))
    );
    // A rule for a callee-saved register from an unknown register: just unknown.
    let mut partial = regs;
    partial.forget(RAX);
    let c = step(&row, &partial, &mut mem).unwrap().unwrap();
    assert_eq!(c.regs.get(R12), None);
    // Unreadable stack.
    let far = all_regs(0x40_0000, 0x9000_0000);
    assert_eq!(step(&row, &far, &mut mem), Err(Error::Fault));
}

#[test]
fn step_drap_frame() {
    // gcc -mstackrealign: CFA = [rbp - 8], rbp = [rbp], RA at CFA - 8.
    let p = [0x10, 6, 2, 0x76, 0x00, 0x0f, 3, 0x76, 0x78, 0x06];
    let row = std_row(&p, 0);
    let sp = 0x7000_0000u64;
    let rbp = sp + 0x40;
    let cfa = sp + 0x100;
    let mut mem = SegMem::default();
    mem.add(sp, vec![0; 0x200]);
    mem.write(rbp - 8, &cfa.to_le_bytes());
    mem.write(rbp, &0x1234_5678u64.to_le_bytes());
    mem.write(cfa - 8, &0x40_9999u64.to_le_bytes());
    let mut regs = all_regs(0x40_0000, sp);
    regs.set(RBP, rbp);
    let c = step(&row, &regs, &mut mem).unwrap().unwrap();
    assert_eq!(c.cfa, cfa);
    assert_eq!(c.regs.get(RBP), Some(0x1234_5678));
    assert_eq!(c.regs.get(RA), Some(0x40_9999));
    assert_eq!(c.regs.get(RSP), Some(cfa));
}

/// glibc's `__restore_rt`: CFA = [rsp + 160], every register at rsp + its sigcontext
/// offset. Returns (the CIE "zRS" row, the sigcontext offsets).
fn restore_rt_insns() -> Vec<u8> {
    // struct ucontext at rsp; uc_mcontext.gregs at +40: r8..r15, rdi, rsi, rbp, rbx, rdx,
    // rax, rcx, rsp, rip.
    let order = [
        R8, R9, R10, R11, R12, R13, R14, R15, RDI, RSI, RBP, RBX, RDX, RAX, RCX, RSP, RA,
    ];
    let mut a = Asm::new().u8(0x0f).uleb(4).u8(0x77).sleb(160).u8(0x06);
    for (i, reg) in order.iter().enumerate() {
        let off = 40 + 8 * i as i64;
        let e = Asm::new().u8(0x77).sleb(off).0;
        a = a
            .u8(0x10)
            .uleb(u64::from(*reg))
            .uleb(e.len() as u64)
            .bytes(&e);
    }
    a.0
}

fn restore_rt_offset(reg: u16) -> u64 {
    let order = [
        R8, R9, R10, R11, R12, R13, R14, R15, RDI, RSI, RBP, RBX, RDX, RAX, RCX, RSP, RA,
    ];
    40 + 8 * order.iter().position(|&r| r == reg).unwrap() as u64
}

#[test]
fn step_signal_frame_restores_everything() {
    let row = row_with(&[], &restore_rt_insns(), 0, "zRS").unwrap();
    assert!(row.signal);
    let sp = 0x7000_0000u64;
    let mut mem = SegMem::default();
    mem.add(sp, vec![0; 0x400]);
    for reg in 0..17u16 {
        mem.write(
            sp + restore_rt_offset(reg),
            &(0x5000 + u64::from(reg)).to_le_bytes(),
        );
    }
    mem.write(sp + 160, &0x5007u64.to_le_bytes());
    let regs = all_regs(0x40_0000, sp);
    let c = step(&row, &regs, &mut mem).unwrap().unwrap();
    assert_eq!(c.cfa, 0x5007);
    for reg in 0..17u16 {
        assert_eq!(c.regs.get(reg), Some(0x5000 + u64::from(reg)), "{reg}");
    }
    // The same rules without S: caller-saved registers are not restored.
    let row = row_with(&[], &restore_rt_insns(), 0, "zR").unwrap();
    let c = step(&row, &regs, &mut mem).unwrap().unwrap();
    assert_eq!(c.regs.get(RAX), None);
    assert_eq!(c.regs.get(RBX), Some(0x5000 + u64::from(RBX)));
}

// ---------------------------------------------------------------------------------------
// Row cache

#[test]
fn row_cache_two_way_lru() {
    let mut c = RowCache::new();
    let mut row = Row::EMPTY;
    row.rules.cfa = cfa(RSP, 8);
    assert!(c.get(1, 0x10).is_none());
    c.insert(1, 0x10, &row);
    assert_eq!(c.get(1, 0x10), Some(row));
    assert!(c.get(2, 0x10).is_none());
    assert!(c.get(1, 0x11).is_none());
    // Fill: with 64 entries in sets of 2, 1000 keys evict; the most recent 2 of any set
    // stay. Insert many, then re-check the last inserted.
    for pc in 0..1000u64 {
        let mut r = row;
        r.rules.cfa = cfa(RSP, pc as i32);
        c.insert(7, pc, &r);
        assert_eq!(c.get(7, pc).map(|r| r.rules.cfa), Some(cfa(RSP, pc as i32)));
    }
    let hits = (0..1000u64).filter(|&pc| c.get(7, pc).is_some()).count();
    assert!(hits <= ROW_CACHE_ENTRIES);
    assert!(hits >= ROW_CACHE_ENTRIES / 2, "{hits}");
    // Two keys used alternately stay, whatever set they share.
    let mut c = RowCache::new();
    for round in 0..3 {
        for pc in [0x100u64, 0x200, 0x300] {
            if c.get(3, pc).is_none() {
                assert_eq!(round, 0, "{pc:#x} evicted");
                c.insert(3, pc, &row);
            }
        }
    }
    c.clear();
    assert!(c.get(3, 0x100).is_none());
}

#[test]
fn row_cache_zeroed_is_empty_and_sizes() {
    // SAFETY: the documented guarantee under test: all-zero bytes are a valid cache.
    let mut zeroed: Box<RowCache> = unsafe { Box::new(std::mem::zeroed()) };
    assert!(zeroed.get(0, 0).is_none());
    // SAFETY: as above, all-zero bytes are a valid (empty) row.
    let row: Row = unsafe { std::mem::zeroed() };
    assert_eq!(row, Row::EMPTY);
    println!(
        "sizes: Row {} RowCache {} Regs {}",
        std::mem::size_of::<Row>(),
        std::mem::size_of::<RowCache>(),
        std::mem::size_of::<Regs>()
    );
    assert!(std::mem::size_of::<Row>() <= 300);
    // (One per CPU: alloc_percpu() refuses more than 32 KiB; cfi_compact's `sizes` checks.)
    assert!(std::mem::size_of::<ElfInfo>() <= 450);
}

#[test]
fn row_expr_refs_are_checked() {
    let mut row = Row::EMPTY;
    let e = row.add_expr(&[1, 2, 3]).unwrap();
    assert_eq!(row.expr(e), &[1, 2, 3]);
    assert_eq!(
        row.expr(ExprRef {
            offset: 2,
            len: 200
        }),
        &[] as &[u8]
    );
    assert_eq!(
        row.add_expr(&[2, 3]).unwrap(),
        ExprRef { offset: 1, len: 2 }
    );
    assert_eq!(
        row.add_expr(&[0; 33]),
        Err(Error::Unsupported(Unsupported::ExpressionLength))
    );
}

// ---------------------------------------------------------------------------------------
// Walks on synthetic stacks

/// A synthetic process: functions A (leaf, CFA rsp+16 after a push at +1), B (CFA rsp+32),
/// C (the entry point: RA undefined), all at 0x40_0000 with an image at 0x10_0000, a stack
/// at STACK, and an anonymous "JIT" region without unwind info at 0x60_0000.
struct Proc {
    mem: SegMem,
    source: MapSource,
}

const STACK: u64 = 0x7ffd_0000_0000;
const A: u64 = 0x40_0000;
const B: u64 = 0x40_1000;
const C: u64 = 0x40_2000;
const D: u64 = 0x40_3000; // signal trampoline
const JIT: u64 = 0x60_0000;

fn proc_() -> Proc {
    let img = build_image(
        0x10_0000,
        "zR",
        &std_cie_insns(),
        &[
            Func {
                begin: A,
                len: 0x100,
                insns: vec![0x41, 0x0e, 16, 0x86, 2],
            },
            Func {
                begin: B,
                len: 0x100,
                insns: vec![0x0e, 32, 0x83, 2],
            },
            Func {
                begin: C,
                len: 0x100,
                insns: vec![0x07, 16],
            },
        ],
    );
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    mem.add(STACK, vec![0; 0x2000]);
    let mut source = MapSource::default();
    source.module(
        0x40_0000,
        0x40_3000,
        ModuleInfo {
            id: 9,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        },
    );
    source.add(JIT, JIT + 0x1000, Lookup::NoInfo);
    Proc { mem, source }
}

fn put(mem: &mut SegMem, addr: u64, v: u64) {
    mem.write(addr, &v.to_le_bytes());
}

fn run(p: &mut Proc, regs: Regs, mode: Mode, n: usize) -> (Vec<u64>, WalkResult) {
    let mut cache = RowCache::new();
    let mut out = vec![0; n];
    let params = WalkParams::new(mode, USER_END, PAGE);
    let r = walk(
        &mut p.mem,
        &mut p.source,
        &mut cache,
        &regs,
        &params,
        &mut out,
    );
    (out[..r.len].to_vec(), r)
}

/// A at +5 (after its push) ← B ← C (entry).
fn chain(p: &mut Proc) -> Regs {
    let sp = STACK + 0x100;
    // A's frame: [sp] = saved rbp, [sp + 8] = RA into B.
    put(&mut p.mem, sp, 0xfeed);
    put(&mut p.mem, sp + 8, B + 0x10);
    // B's frame: CFA = (sp + 16) + 32; RA at CFA - 8, rbx at CFA - 16.
    let b_cfa = sp + 16 + 32;
    put(&mut p.mem, b_cfa - 8, C + 0x20);
    put(&mut p.mem, b_cfa - 16, 0xb0b);
    all_regs(A + 5, sp)
}

#[test]
fn cfi_walk_to_the_entry_point() {
    let mut p = proc_();
    let regs = chain(&mut p);
    let (ips, r) = run(&mut p, regs, Mode::Cfi, 16);
    assert_eq!(ips, vec![A + 5, B + 0x10, C + 0x20]);
    assert_eq!(r.stop, Stop::End);
    assert_eq!(r.stats.cfi_frames, 2);
    assert_eq!(r.stats.cache_misses, 3);
    // Full.
    let (ips, r) = run(&mut p, regs, Mode::Cfi, 2);
    assert_eq!((ips.len(), r.stop), (2, Stop::Full));
    let (ips, r) = run(&mut p, regs, Mode::Cfi, 0);
    assert_eq!((ips.len(), r.stop), (0, Stop::Full));
    // A return address of zero ends the stack.
    put(&mut p.mem, STACK + 0x100 + 48 + 8, 0);
    put(&mut p.mem, STACK + 0x100 + 8, 0);
    let (ips, r) = run(&mut p, regs, Mode::Cfi, 16);
    assert_eq!((ips, r.stop), (vec![A + 5], Stop::End));
}

#[test]
fn walk_stops_where_it_must() {
    let mut p = proc_();
    let regs = chain(&mut p);
    // IP out of range.
    let mut bad = regs;
    bad.set(RA, USER_END);
    assert_eq!(
        run(&mut p, bad, Mode::Cfi, 8).1.stop,
        Stop::Invalid(Invalid::Address)
    );
    bad.set(RA, 0);
    assert_eq!(
        run(&mut p, bad, Mode::Auto, 8).1.stop,
        Stop::Invalid(Invalid::Address)
    );
    let mut unknown = regs;
    unknown.forget(RSP);
    assert_eq!(
        run(&mut p, unknown, Mode::Cfi, 8).1.stop,
        Stop::Invalid(Invalid::UnknownRegister)
    );
    // A return address in no mapping.
    put(&mut p.mem, STACK + 0x108, 0x50_0000);
    let (ips, r) = run(&mut p, regs, Mode::Cfi, 8);
    assert_eq!((ips.len(), r.stop), (2, Stop::Invalid(Invalid::Unmapped)));
    // A return address at or past user_end: not written.
    put(&mut p.mem, STACK + 0x108, USER_END + 5);
    let (ips, r) = run(&mut p, regs, Mode::Cfi, 8);
    assert_eq!((ips.len(), r.stop), (1, Stop::Invalid(Invalid::Address)));
    // A PC without unwind info: Cfi stops, Auto takes the frame pointer.
    put(&mut p.mem, STACK + 0x108, JIT + 0x10);
    let (ips, r) = run(&mut p, regs, Mode::Cfi, 8);
    assert_eq!((ips.len(), r.stop), (2, Stop::NoUnwindInfo));
    // The stack runs out.
    let mut off = regs;
    off.set(RSP, STACK + 0x2000 - 8);
    let (_, r) = run(&mut p, off, Mode::Cfi, 8);
    assert_eq!(r.stop, Stop::Fault);
    // A byte budget too small.
    let mut cache = RowCache::new();
    let mut out = [0u64; 8];
    let mut params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
    params.byte_budget = 40;
    let r = walk(
        &mut p.mem,
        &mut p.source,
        &mut cache,
        &chain(&mut proc_()),
        &params,
        &mut out,
    );
    assert_eq!(r.stop, Stop::Budget);
    assert!(r.stats.bytes_read <= 40);
    // An address below the stack pointer: the CFA does not grow.
    let mut p = proc_();
    let regs = chain(&mut p);
    let mut r2 = regs;
    r2.set(RA, B + 0x10);
    // B's CFA is rsp + 32: make B's saved RA point back into B with the same frame.
    let sp = STACK + 0x400;
    r2.set(RSP, sp);
    put(&mut p.mem, sp + 24, B + 0x10);
    // Cyclic: B's caller is B again with rsp = CFA = sp + 32 > sp: increasing, so it walks
    // until the stack runs out or the output is full, never looping.
    let (ips, r) = run(&mut p, r2, Mode::Cfi, 8);
    assert!(ips.len() <= 8, "{r:?}");
}

#[test]
fn cyclic_stack_is_not_increasing() {
    // A function whose CFA is rsp - 8 (hostile CFI): the stack pointer would go down.
    let img = build_image(
        0x10_0000,
        "zR",
        &std_cie_insns(),
        &[Func {
            begin: A,
            len: 0x100,
            insns: Asm::new().u8(0x13).sleb(1).0,
        }],
    );
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    mem.add(STACK, vec![0; 0x1000]);
    let sp = STACK + 0x800;
    put(&mut mem, sp - 16, A + 0x10);
    let mut p = Proc {
        mem,
        source: MapSource::default(),
    };
    p.source.module(
        A,
        A + 0x100,
        ModuleInfo {
            id: 1,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        },
    );
    let (ips, r) = run(&mut p, all_regs(A, sp), Mode::Cfi, 8);
    assert_eq!(
        (ips.len(), r.stop),
        (1, Stop::Invalid(Invalid::NotIncreasing))
    );
    // A stack that returns to the same frame forever: CFA = rsp + 0 via [rsp] = rsp.
    let img = build_image(
        0x10_0000,
        "zR",
        &[0x0c, 7, 0, 0x80 | 16, 0],
        &[Func {
            begin: A,
            len: 0x100,
            insns: vec![],
        }],
    );
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    mem.add(STACK, vec![0; 0x1000]);
    put(&mut mem, sp, A + 0x11);
    let mut p = Proc {
        mem,
        source: MapSource::default(),
    };
    p.source.module(
        A,
        A + 0x100,
        ModuleInfo {
            id: 1,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        },
    );
    let (ips, r) = run(&mut p, all_regs(A, sp), Mode::Auto, 8);
    assert_eq!(
        (ips.len(), r.stop),
        (1, Stop::Invalid(Invalid::NotIncreasing))
    );
}

#[test]
fn auto_mixes_cfi_and_frame_pointers() {
    // A (CFI) ← JIT code (frame pointers: rbp chain) ← B (CFI) ← C.
    let mut p = proc_();
    let sp = STACK + 0x100;
    // A after its push: [sp] = saved rbp (the JIT frame's rbp), [sp + 8] = RA into JIT.
    let jit_rbp = STACK + 0x200;
    put(&mut p.mem, sp, jit_rbp);
    put(&mut p.mem, sp + 8, JIT + 0x10);
    // The JIT frame record: [rbp] = caller's rbp, [rbp + 8] = RA into B.
    put(&mut p.mem, jit_rbp, 0x7777);
    put(&mut p.mem, jit_rbp + 8, B + 0x10);
    // B: rsp = jit_rbp + 16, CFA = rsp + 32.
    let b_cfa = jit_rbp + 16 + 32;
    put(&mut p.mem, b_cfa - 8, C + 0x20);
    let regs = all_regs(A + 5, sp);
    let (ips, r) = run(&mut p, regs, Mode::Auto, 16);
    assert_eq!(ips, vec![A + 5, JIT + 0x10, B + 0x10, C + 0x20]);
    assert_eq!(r.stop, Stop::End);
    assert_eq!((r.stats.cfi_frames, r.stats.fp_frames), (2, 1));
    // B's rbx was not saved by B and the FP step lost it: B's rule for rbx reads it (no
    // error), and rbp is the JIT's saved one.
    let mut cache = RowCache::new();
    let params = WalkParams::new(Mode::Auto, USER_END, PAGE);
    let mut window = unwind_logic::cfi::StackWindow::new();
    let mut recent = RecentAnswers::new();
    let mut u = Unwinder::new(
        &mut p.mem,
        &mut p.source,
        &mut cache,
        &mut window,
        &mut recent,
        regs,
        &params,
    );
    assert_eq!(u.next_frame().unwrap().method, Method::Cfi);
    let f = u.next_frame().unwrap();
    assert_eq!((f.method, f.ip, f.sp), (Method::Fp, B + 0x10, jit_rbp + 16));
    assert_eq!(u.regs().get(RBP), Some(0x7777));
    assert_eq!(u.regs().get(RBX), None);
    assert_eq!(u.next_frame().unwrap().ip, C + 0x20);
    assert_eq!(u.next_frame(), Err(Stop::End));
    assert_eq!(u.next_frame(), Err(Stop::End));
    // Frame pointer misaligned or below the stack pointer.
    put(&mut p.mem, sp, jit_rbp + 4);
    assert_eq!(
        run(&mut p, regs, Mode::Auto, 16).1.stop,
        Stop::Invalid(Invalid::FramePointer)
    );
    put(&mut p.mem, sp, STACK + 8);
    assert_eq!(
        run(&mut p, regs, Mode::Auto, 16).1.stop,
        Stop::Invalid(Invalid::FramePointer)
    );
    put(&mut p.mem, sp, 0);
    let (ips, r) = run(&mut p, regs, Mode::Auto, 16);
    assert_eq!((ips.len(), r.stop), (2, Stop::End));
}

#[test]
fn fp_mode_is_the_old_walker() {
    let mut p = proc_();
    let sp = STACK + 0x100;
    let fp1 = sp + 0x40;
    let fp2 = fp1 + 0x30;
    put(&mut p.mem, fp1, fp2);
    put(&mut p.mem, fp1 + 8, 0x40_1111);
    put(&mut p.mem, fp2, 0);
    put(&mut p.mem, fp2 + 8, 0x40_2222);
    let mut regs = all_regs(0x40_0000, sp);
    regs.set(RBP, fp1);
    let (ips, r) = run(&mut p, regs, Mode::Fp, 16);
    assert_eq!(ips, vec![0x40_0000, 0x40_1111, 0x40_2222]);
    assert_eq!(r.stop, Stop::End);
    assert_eq!(r.stats.fp_frames, 2);
    assert_eq!(r.stats.read_calls, 1, "one window holds both records");
    let (_, r) = run(&mut p, regs, Mode::Fp, 2);
    assert_eq!(r.stop, Stop::Full);
    regs.set(RBP, fp1 + 1);
    assert_eq!(
        run(&mut p, regs, Mode::Fp, 16).1.stop,
        Stop::Invalid(Invalid::FramePointer)
    );
    regs.set(RBP, STACK + 0x4000);
    assert_eq!(run(&mut p, regs, Mode::Fp, 16).1.stop, Stop::Fault);
}

#[test]
fn signal_frames_are_bounded() {
    // A trampoline D whose signal frame restores rip = D + 1 (exact: the same FDE again)
    // and rsp = [rsp + 8]: an endless chain of signal frames.
    let tramp = Asm::new()
        .u8(0x0f)
        .uleb(3)
        .u8(0x77)
        .sleb(8)
        .u8(0x06) // CFA = [rsp + 8]
        .u8(0x10)
        .uleb(16)
        .uleb(2)
        .u8(0x77)
        .sleb(0) // rip at rsp + 0
        .u8(0x10)
        .uleb(7)
        .uleb(2)
        .u8(0x77)
        .sleb(8) // rsp at rsp + 8
        .0;
    let img = build_image(
        0x10_0000,
        "zRS",
        &std_cie_insns(),
        &[Func {
            begin: D,
            len: 0x10,
            insns: tramp,
        }],
    );
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    mem.add(STACK, vec![0; 0x1000]);
    let sp = STACK + 0x800;
    put(&mut mem, sp, D + 1);
    put(&mut mem, sp + 8, sp);
    let mut p = Proc {
        mem,
        source: MapSource::default(),
    };
    p.source.module(
        D,
        D + 0x10,
        ModuleInfo {
            id: 1,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        },
    );
    let (ips, r) = run(&mut p, all_regs(D + 1, sp), Mode::Cfi, 64);
    assert_eq!(r.stop, Stop::Invalid(Invalid::SignalFrames));
    assert_eq!(ips.len(), 1 + MAX_SIGNAL_FRAMES as usize);
    assert!(
        ips.iter().all(|&ip| ip == D + 1),
        "exact IPs after signal frames"
    );
}

#[test]
fn stop_indices_are_distinct() {
    let mut names = std::collections::HashSet::new();
    for i in 0..Stop::COUNT {
        let s = Stop::from_index(i).unwrap();
        assert_eq!(s.index(), i);
        assert!(names.insert(format!("{}/{}", s.name(), s.detail())));
    }
    assert_eq!(Stop::from_index(Stop::COUNT), None);
    assert_eq!(Stop::COUNT, 5 + Invalid::ALL.len() + Unsupported::ALL.len());
    for (i, k) in Invalid::ALL.iter().enumerate() {
        assert_eq!(k.index(), i);
    }
    for (i, k) in Unsupported::ALL.iter().enumerate() {
        assert_eq!(k.index(), i);
    }
}
