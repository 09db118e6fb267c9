// SPDX-License-Identifier: GPL-2.0
//! The compact rows and the warm walk against the general path they replace.
//!
//! * Every row of real unwind information (libc, ld.so, libstdc++, python, perl, and
//!   programs built here) that has a compact form, and random rows: the compact step gives
//!   exactly what the general step gives, on random registers and stacks (readable,
//!   partly readable, unreadable, near the end of user space, with a window already
//!   holding other bytes).
//! * Walks on random stacks, through libc's unwind information and through damaged
//!   synthetic unwind information (expressions, signal frames): the walk, cold and warm,
//!   gives the frames, the stop reason and the frame counts of the reference walk (the
//!   general step on every frame, no cache).
//! * The row cache keeps rows without a compact form whole, and forgets them in turn.
//! * A row's words (the shared row table's form) give the row back, and words that are
//!   not a row's give none or a row that steps as its own full row does.
#![cfg(not(loom))]

mod cfi_common;

use std::path::Path;

use cfi_common::*;
use unwind_logic::cfi::compact::{step_compact, SLOTS};
use unwind_logic::cfi::eh_frame::parse_fde;
use unwind_logic::cfi::interp::row_for_pc;
use unwind_logic::cfi::memory::STACK_WINDOW_BYTES;
use unwind_logic::cfi::regs::*;
use unwind_logic::cfi::row::{CfaRule, Row, Rule};
use unwind_logic::cfi::step::step;
use unwind_logic::cfi::*;

const STACK: u64 = 0x7ffd_0000_0000;
const STACK_LEN: u64 = 0x1000;

/// A stack of random words (many of them plausible addresses) at `base`.
fn random_stack(rng: &mut Rng, base: u64, len: u64) -> SegMem {
    let mut words = Vec::new();
    for _ in 0..len / 8 {
        let w = match rng.below(4) {
            0 => base + rng.below(len),
            1 => 0x40_0000 + rng.below(0x10_0000),
            2 => rng.next(),
            _ => 0,
        };
        words.extend_from_slice(&w.to_le_bytes());
    }
    let mut m = SegMem::default();
    m.add(base, words);
    m
}

/// Random registers around a stack at `base` (`len` bytes), some unknown.
fn random_regs(rng: &mut Rng, base: u64, len: u64) -> Regs {
    let mut r = Regs::new();
    for reg in 0..17u16 {
        let v = match rng.below(8) {
            0 => rng.next(),
            1 => base + len - rng.below(64),
            2 => base + rng.below(len) + rng.below(8),
            3 => 0,
            _ => base + 8 * rng.below(len / 8),
        };
        if rng.below(12) != 0 {
            r.set(reg, v);
        }
    }
    r
}

/// A stack for [`compare`]: mostly an ordinary one, sometimes one that ends at the end of
/// user space. Returns it and its base.
fn some_stack(rng: &mut Rng) -> (SegMem, u64) {
    let base = if rng.below(8) == 0 {
        USER_END - STACK_LEN
    } else {
        STACK
    };
    (random_stack(rng, base, STACK_LEN), base)
}

/// Applies `row` (and its compact form `c`) to random registers on the stack `mem` at
/// `base`: the compact step must give what the general step gives. Returns how many
/// steps succeeded.
fn compare(
    row: &Row,
    c: &CompactRow,
    rng: &mut Rng,
    rounds: usize,
    stack: &mut (SegMem, u64),
) -> usize {
    // The words the table all CPUs share keeps give the row back.
    assert_eq!(
        CompactRow::from_words(c.to_words()),
        Some(*c),
        "words of {c:?}"
    );
    let mut ok = 0;
    for _ in 0..rounds {
        let (mem, base) = (&mut stack.0, stack.1);
        let regs = random_regs(rng, base, STACK_LEN);
        let want = step(row, &regs, mem);
        let mut reader = ReadAhead::new(&mut *mem, PAGE, USER_END, u64::MAX);
        let mut window = StackWindow::new();
        // Sometimes a window that already holds other bytes, aligned or not.
        if rng.below(2) == 0 {
            let mut b = [0u8; 8];
            let at = base + rng.below(STACK_LEN);
            let _ = window.read(&mut reader, at, &mut b);
        }
        let got = step_compact(c, &regs, &mut window, &mut reader);
        assert_eq!(got, want, "row {row:?}\ncompact {c:?}\nregs {regs:?}");
        // The same through the row the compact one stands for.
        assert_eq!(step(&c.to_row(), &regs, mem), want, "to_row of {c:?}");
        if want.is_ok() {
            ok += 1;
        }
    }
    ok
}

/// The FDE addresses of a file's `.eh_frame_hdr` table (datarel, sdata4 entries).
fn fde_addrs(elf: &ElfFile, mem: &mut FlatMem) -> Vec<u64> {
    let Some((hdr, _)) = elf.eh_frame_hdr else {
        return vec![];
    };
    let h = eh_frame_hdr::parse(mem, hdr, 0).unwrap();
    (0..h.fde_count)
        .map(|i| {
            let mut b = [0u8; 4];
            assert!(mem.read(h.table + 8 * i + 4, &mut b));
            hdr.wrapping_add(i32::from_le_bytes(b) as i64 as u64)
        })
        .collect()
}

#[derive(Default, Debug)]
struct Counts {
    rows: usize,
    compact: usize,
    steps_ok: usize,
    /// Compact rows whose CFA is read from the stack (gcc's DRAP rows).
    drap: usize,
}

fn check_file(path: &Path, rng: &mut Rng, counts: &mut Counts) {
    let Some(elf) = ElfFile::load(path) else {
        return;
    };
    let mut mem = FlatMem::from_elf(&elf);
    let (mut rows, mut compact, mut realign_drap) = (0, 0, 0);
    let mut stack = some_stack(rng);
    for fde_addr in fde_addrs(&elf, &mut mem) {
        let fde = parse_fde(&mut mem, fde_addr).unwrap();
        let len = fde.pc_end - fde.pc_begin;
        let mut pcs = vec![fde.pc_begin, fde.pc_end - 1];
        for _ in 0..2 {
            pcs.push(fde.pc_begin + rng.below(len));
        }
        for pc in pcs {
            let Ok(row) = row_for_pc(&mut mem, &fde, pc) else {
                continue;
            };
            rows += 1;
            match CompactRow::from_row(&row) {
                Some(c) => {
                    compact += 1;
                    assert!(c.is_row());
                    if matches!(row.rules.cfa, CfaRule::Expression(_)) {
                        counts.drap += 1;
                        if path.ends_with("realign") {
                            realign_drap += 1;
                        }
                    }
                    if rng.below(64) == 0 {
                        stack = some_stack(rng);
                    }
                    counts.steps_ok += compare(&row, &c, rng, 1, &mut stack);
                }
                None => assert!(
                    row.signal
                        || !matches!(row.rules.cfa, CfaRule::RegOffset { .. })
                        || [RBX, RBP, RSP, R12, R13, R14, R15, RA]
                            .iter()
                            .any(|&r| !matches!(
                                row.rule(r),
                                Rule::Default | Rule::Undefined | Rule::SameValue | Rule::Offset(_)
                            ))
                        || [RBX, RBP, RSP, R12, R13, R14, R15, RA]
                            .iter()
                            .any(|&r| matches!(
                                row.rule(r),
                                Rule::Offset(n) if n % 8 != 0 || !(-1024..=1016).contains(&n)
                            )),
                    "{}: a row without compact form at {pc:#x}: {row:?}",
                    path.display()
                ),
            }
        }
    }
    println!(
        "{}: {rows} rows, {compact} compact ({:.2}%)",
        path.display(),
        100.0 * compact as f64 / rows.max(1) as f64
    );
    counts.rows += rows;
    counts.compact += compact;
    if path.ends_with("realign") {
        // gcc's stack-realigning functions (DRAP) have compact rows in their bodies.
        assert!(
            realign_drap > 0,
            "{}: no DRAP row is compact",
            path.display()
        );
    }
}

#[test]
fn compact_step_matches_step_on_real_rows() {
    let dir = temp_dir("compact");
    let mut files = built_programs(&dir);
    files.extend(system_files());
    let mut rng = Rng(0xc0_4ac7);
    let mut counts = Counts::default();
    for f in &files {
        check_file(f, &mut rng, &mut counts);
    }
    println!("{counts:?}");
    let _ = std::fs::remove_dir_all(&dir);
    if counts.rows > 0 {
        // Nearly every row of compiled code has a compact form.
        assert!(counts.compact * 100 >= counts.rows * 95, "{counts:?}");
        assert!(counts.steps_ok > 0);
    }
}

/// A random rule, mostly of the kinds a compact row holds.
fn random_rule(rng: &mut Rng, row: &mut Row) -> Rule {
    match rng.below(16) {
        0..=3 => Rule::Default,
        4 => Rule::Undefined,
        5 => Rule::SameValue,
        6..=11 => Rule::Offset(-8 * (1 + rng.below(12) as i32)),
        12 => Rule::Offset(match rng.below(4) {
            0 => rng.next() as i32,
            1 => -1024 - 8 * rng.below(4) as i32,
            2 => 1016 + 8 * rng.below(4) as i32,
            _ => 8 * rng.below(8) as i32 - 4,
        }),
        13 => Rule::ValOffset(8 * rng.below(8) as i32 - 32),
        14 => Rule::Register(rng.below(18) as u16),
        _ => Rule::Expression(row.add_expr(&random_breg(rng, false)).unwrap()),
    }
}

/// A random `DW_OP_breg<r> n` expression (and `DW_OP_deref` if `deref`), mostly of the
/// register gcc's DRAP rows use (`%rbp`) and of offsets a compact row holds, sometimes
/// with its offset written in more bytes than it needs, or with another operation after.
fn random_breg(rng: &mut Rng, deref: bool) -> Vec<u8> {
    let reg = [RBP, RBP, RBP, RSP, RBX, rng.below(32) as u16][rng.below(6) as usize];
    let offset: i64 = match rng.below(6) {
        0 => rng.next() as i64,
        1 => 4 - 8 * rng.below(4) as i64,
        2 => -1032 - 8 * rng.below(4) as i64,
        _ => 8 * rng.below(16) as i64 - 64,
    };
    let mut e = Asm::new().u8(0x70 + reg as u8).sleb(offset).0;
    if rng.below(8) == 0 {
        // The same number in one more byte: the last one continued, then its sign.
        let last = e.last_mut().unwrap();
        let sign = if *last & 0x40 != 0 { 0x7f } else { 0 };
        *last |= 0x80;
        e.push(sign);
    }
    if deref {
        e.push(0x06);
    }
    if rng.below(16) == 0 {
        // Not the form: an operation more.
        e.push(0x06);
    }
    e
}

#[test]
fn compact_step_matches_step_on_random_rows() {
    let mut rng = Rng(0xc0_4ac8);
    let (mut compact, mut ok, mut drap) = (0, 0, 0);
    for _ in 0..20_000 {
        let mut row = Row::EMPTY;
        row.signal = rng.below(16) == 0;
        row.rules.cfa = match rng.below(16) {
            0 => CfaRule::Undefined,
            1 => CfaRule::RegOffset {
                reg: 17 + rng.below(3) as u16,
                offset: 8,
            },
            2 => CfaRule::Expression(row.add_expr(&[0x77, 16]).unwrap()),
            // gcc's DRAP rows: CFA = [%rbp - 16], say.
            4..=6 => CfaRule::Expression(row.add_expr(&random_breg(&mut rng, true)).unwrap()),
            3 => CfaRule::RegOffset {
                reg: rng.below(17) as u16,
                offset: rng.next() as i32,
            },
            _ => CfaRule::RegOffset {
                reg: [RSP, RSP, RSP, RBP, rng.below(17) as u16][rng.below(5) as usize],
                offset: 8 * rng.below(40) as i32 - 16,
            },
        };
        for reg in 0..17 {
            let rule = random_rule(&mut rng, &mut row);
            row.rules.regs[reg] = rule;
        }
        // The usual return address rule most of the time.
        if rng.below(4) != 0 {
            row.rules.regs[RA as usize] = Rule::Offset(-8);
        }
        // A DRAP row's callee-saved registers: saved at the CFA register's value plus n.
        if let (CfaRule::Expression(e), true) = (row.rules.cfa, rng.below(2) == 0) {
            let base = row.expr(e).first().copied().unwrap_or(0x76);
            for reg in [RBX, RBP, R12, R13, R14, R15, RSP, RA] {
                if rng.below(3) == 0 {
                    let n = -8 * rng.below(8) as i8;
                    let expr = row.add_expr(&[base, n as u8 & 0x7f]).unwrap();
                    row.rules.regs[reg as usize] = Rule::Expression(expr);
                }
            }
        }
        if let Some(c) = CompactRow::from_row(&row) {
            compact += 1;
            if matches!(row.rules.cfa, CfaRule::Expression(_)) {
                drap += 1;
            }
            let mut stack = some_stack(&mut rng);
            ok += compare(&row, &c, &mut rng, 4, &mut stack);
            // Its own compact form is itself.
            assert_eq!(CompactRow::from_row(&c.to_row()), Some(c));
        }
    }
    println!("{compact} compact rows ({drap} DRAP), {ok} steps without error");
    assert!(compact > 1000 && ok > 1000 && drap > 100);
}

/// Walks `regs` with `walk` (cold, then warm with the same cache) and with the reference:
/// the same frames, stop reason and frame counts.
fn walks_agree(
    mem: &mut SegMem,
    source: &mut MapSource,
    cache: &mut RowCache,
    regs: &Regs,
    mode: Mode,
) -> Stop {
    const OUT: usize = 48;
    let mut params = WalkParams::new(mode, USER_END, PAGE);
    // The reference reads other windows: no budget to run out differently.
    params.byte_budget = u64::MAX;
    let (want, want_stop, counts) = reference_walk(mem, source, regs, &params, OUT);
    for round in 0..2 {
        let mut out = [0u64; OUT];
        let r = walk(mem, source, cache, regs, &params, &mut out);
        let what = format!("{mode:?} round {round}: {:?} {:?}", r.stop, r.stats);
        assert_eq!(&out[..r.len], &want[..], "{what}, reference {want_stop:?}");
        assert_eq!(r.stop, want_stop, "{what}");
        assert_eq!(
            [r.stats.cfi_frames, r.stats.fp_frames, r.stats.signal_frames],
            counts,
            "{what}"
        );
    }
    want_stop
}

#[test]
fn walks_match_the_reference_on_libc() {
    let libc = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).expect("no libc.so.6");
    random_walks_agree(&libc, 0x150000, 0xc0_4ac9);
}

/// The same on a program built with frame pointers, whose rows are mostly frame records
/// (the compact step's fast path for them).
#[test]
fn walks_match_the_reference_on_frame_pointer_code() {
    let dir = std::env::temp_dir().join(format!("unwind-logic-fp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = built_programs(&dir)
        .into_iter()
        .find(|p| p.ends_with("fns-fp"))
        .expect("fns-fp not built");
    let elf = ElfFile::load(&prog).unwrap();
    let (hdr, hdr_len) = elf.eh_frame_hdr.unwrap();
    let module = ModuleInfo {
        id: 1,
        bias: 0,
        eh_frame_hdr: hdr,
        eh_frame_hdr_len: hdr_len,
    };
    let mut mem = elf.memory(0);
    let records = (elf.text..elf.text + elf.text_len)
        .filter_map(|pc| unwind_logic::cfi::unwinder::compute_row(&mut mem, &module, pc).ok())
        .filter_map(|row| CompactRow::from_row(&row))
        .filter(|c| c.is_frame_record())
        .count();
    println!("{records} addresses with a frame-record row");
    assert!(
        records > 100,
        "the program has no frame-record rows: the test would test nothing"
    );
    random_walks_agree(&elf, elf.text_len, 0xf9_0123);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Random stacks over `elf`'s first `text_len` bytes of code: [`walks_agree`] each.
fn random_walks_agree(elf: &ElfFile, text_len: u64, seed: u64) {
    let libc = elf;
    let (hdr, hdr_len) = libc.eh_frame_hdr.unwrap();
    let mut mem = libc.memory(0);
    let text_lo = libc.text;
    let text_hi = text_lo + text_len;
    let mut source = MapSource::default();
    source.module(
        text_lo,
        text_hi,
        ModuleInfo {
            id: 1,
            bias: 0,
            eh_frame_hdr: hdr,
            eh_frame_hdr_len: hdr_len,
        },
    );
    source.add(STACK, STACK + 0x2000, Lookup::NoInfo);
    let mut rng = Rng(seed);
    let mut cache = RowCache::new();
    let mut stops = std::collections::BTreeMap::new();
    for _ in 0..1500 {
        // Stack words: return addresses into libc, pointers into the stack, noise.
        let mut words = Vec::new();
        for _ in 0..1024 {
            let w = match rng.below(3) {
                0 => text_lo + rng.below(text_hi - text_lo),
                1 => STACK + rng.below(0x2000),
                _ => rng.next(),
            };
            words.extend_from_slice(&w.to_le_bytes());
        }
        mem.add(STACK, words);
        let mut regs = random_regs(&mut rng, STACK, 0x2000);
        regs.set(RA, text_lo + rng.below(text_hi - text_lo));
        regs.set(RSP, STACK + 8 * rng.below(512));
        let mode = [Mode::Auto, Mode::Cfi][rng.below(2) as usize];
        let stop = walks_agree(&mut mem, &mut source, &mut cache, &regs, mode);
        *stops
            .entry(format!("{}/{}", stop.name(), stop.detail()))
            .or_insert(0) += 1;
    }
    println!("{stops:?}");
}

/// Damaged synthetic unwind information (expressions, signal frames, register rules):
/// rows with and without a compact form in one walk.
#[test]
fn walks_match_the_reference_on_damaged_info() {
    let programs: Vec<Vec<u8>> = vec![
        vec![0x41, 0x0e, 16, 0x86, 2, 0x41, 0x0e, 24, 0x83, 3],
        vec![0x41, 0x0a, 0x0e, 32, 0x8c, 2, 0x41, 0x0b, 0x41, 0x0c, 6, 16],
        vec![0x0f, 3, 0x76, 0x78, 0x06, 0x10, 6, 2, 0x76, 0x00],
        vec![
            0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
        ],
        vec![0x07, 16],
        vec![0x0e, 8, 0x16, 3, 2, 0x77, 0x10, 0x09, 12, 0],
        vec![
            0x0e, 64, 0x83, 7, 0x86, 6, 0x8c, 5, 0x8d, 4, 0x8e, 3, 0x8f, 2,
        ],
        vec![0x0c, 6, 16, 0x86, 2, 0x08, 3, 0x07, 12],
    ];
    let funcs: Vec<Func> = programs
        .iter()
        .enumerate()
        .map(|(i, p)| Func {
            begin: 0x40_0000 + i as u64 * 0x100,
            len: 0x80,
            insns: p.clone(),
        })
        .collect();
    let mut rng = Rng(0xc0_4aca);
    let mut stops = std::collections::BTreeMap::new();
    for round in 0..1500 {
        let aug = if round % 5 == 0 { "zRS" } else { "zR" };
        let mut img = build_image(0x10_0000, aug, &std_cie_insns(), &funcs);
        for _ in 0..rng.below(4) {
            let at = rng.below(img.bytes.len() as u64) as usize;
            img.bytes[at] = rng.next() as u8;
        }
        let mut mem = random_stack(&mut rng, STACK, 0x1000);
        // Return addresses into the functions.
        for _ in 0..128 {
            let at = STACK + 8 * rng.below(512);
            mem.write(at, &(0x40_0000 + rng.below(0x800)).to_le_bytes());
        }
        mem.add(img.base, img.bytes.clone());
        let mut source = MapSource::default();
        source.module(
            0x40_0000,
            0x40_0800,
            ModuleInfo {
                id: 1,
                bias: 0,
                eh_frame_hdr: img.hdr,
                eh_frame_hdr_len: img.hdr_len,
            },
        );
        source.add(0x50_0000, 0x50_1000, Lookup::NoInfo);
        let mut cache = RowCache::new();
        for _ in 0..4 {
            let mut regs = random_regs(&mut rng, STACK, 0x1000);
            regs.set(RA, 0x40_0000 + rng.below(0x800));
            regs.set(RSP, STACK + 8 * rng.below(500));
            let mode = [Mode::Auto, Mode::Cfi][rng.below(2) as usize];
            let stop = walks_agree(&mut mem, &mut source, &mut cache, &regs, mode);
            *stops
                .entry(format!("{}/{}", stop.name(), stop.detail()))
                .or_insert(0) += 1;
        }
    }
    println!("{stops:?}");
    assert!(stops.keys().any(|k| k.starts_with("end")));
}

#[test]
fn row_cache_keeps_full_rows_in_turn() {
    let mut c = RowCache::new();
    let mut full = Row::EMPTY;
    full.signal = true;
    full.rules.cfa = CfaRule::RegOffset {
        reg: RSP,
        offset: 8,
    };
    let mut compact = Row::EMPTY;
    compact.rules.cfa = CfaRule::RegOffset {
        reg: RBP,
        offset: 16,
    };
    compact.rules.regs[RA as usize] = Rule::Offset(-8);
    compact.rules.regs[RBP as usize] = Rule::Offset(-16);
    let entries = unwind_logic::cfi::cache::FULL_ROW_ENTRIES as u64;
    for pc in 0..entries {
        let mut r = full;
        r.rules.cfa = CfaRule::RegOffset {
            reg: RSP,
            offset: pc as i32,
        };
        c.insert(5, pc, &r);
        c.insert(6, pc, &compact);
    }
    let mut out = Row::EMPTY;
    for pc in 0..entries {
        assert!(c.lookup(5, pc).unwrap().is_full());
        assert!(c.lookup_full(5, pc, &mut out));
        assert_eq!(
            out.rules.cfa,
            CfaRule::RegOffset {
                reg: RSP,
                offset: pc as i32
            }
        );
        assert_eq!(c.get(5, pc).unwrap(), out);
        assert_eq!(c.lookup(6, pc), CompactRow::from_row(&compact));
        assert_eq!(c.get(6, pc), Some(compact));
    }
    // One more full row replaces the oldest; its compact entry still says "full".
    c.insert(5, 1000, &full);
    assert!(c.lookup(5, 0).unwrap().is_full());
    assert!(!c.lookup_full(5, 0, &mut out));
    assert_eq!(c.get(5, 0), None);
    assert!(c.lookup_full(5, 1000, &mut out));
    // Storing a full row again does not take a second entry.
    c.insert(5, 1000, &full);
    for pc in 1..entries {
        assert!(c.lookup_full(5, pc, &mut out), "{pc}");
    }
    c.clear();
    assert_eq!(c.lookup(6, 1), None);
    assert!(!c.lookup_full(5, 1000, &mut out));
}

#[test]
fn sizes() {
    type U<'a> = Unwinder<'a, SegMem, MapSource, RowCache>;
    println!(
        "sizes: Unwinder {} StackWindow {} (window {} bytes) ReadAhead {} CompactRow {} \
         Row {} RowCache {} Regs {}",
        std::mem::size_of::<U<'_>>(),
        std::mem::size_of::<StackWindow>(),
        STACK_WINDOW_BYTES,
        std::mem::size_of::<ReadAhead<&mut SegMem>>(),
        std::mem::size_of::<CompactRow>(),
        std::mem::size_of::<Row>(),
        std::mem::size_of::<RowCache>(),
        std::mem::size_of::<Regs>(),
    );
    assert!(std::mem::size_of::<CompactRow>() <= 24);
    assert!(std::mem::size_of::<U<'_>>() <= 1400);
    // One per CPU, from alloc_percpu(), which refuses more than 32 KiB.
    assert!(std::mem::size_of::<RowCache>() <= 32 * 1024);
    assert_eq!(SLOTS, 8);
}

/// A stack of `frames` frames of a function whose frames are `distance` bytes apart (CFA
/// = rsp + distance, RA at CFA - 8, %rbx at CFA - 16), on an entry function (RA
/// undefined): the memory, the source and the registers of the innermost frame.
fn deep_stack(distance: u64, frames: u64) -> (SegMem, MapSource, Regs) {
    const F: u64 = 0x40_0000;
    const E: u64 = 0x40_1000;
    let img = build_image(
        0x10_0000,
        "zR",
        &std_cie_insns(),
        &[
            Func {
                begin: F,
                len: 0x100,
                insns: Asm::new().u8(0x0e).uleb(distance).u8(0x83).uleb(2).0,
            },
            Func {
                begin: E,
                len: 0x100,
                insns: vec![0x07, 16],
            },
        ],
    );
    let base = STACK;
    let mut stack = vec![0u8; (distance * frames + 64) as usize];
    for k in 0..frames {
        let ra = if k + 1 < frames { F + 0x10 } else { E + 0x10 };
        let at = (k * distance + distance - 8) as usize;
        stack[at..at + 8].copy_from_slice(&ra.to_le_bytes());
        stack[at - 8..at].copy_from_slice(&(0xb0b0 + k).to_le_bytes());
    }
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    mem.add(base, stack);
    let mut source = MapSource::default();
    source.module(
        F,
        E + 0x100,
        ModuleInfo {
            id: 3,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        },
    );
    let mut v = [0u64; 17];
    v[RA as usize] = F + 5;
    v[RSP as usize] = base;
    (mem, source, Regs::all_known(v))
}

/// Deep stacks, their frames near or far apart: a warm walk of the kernel's 510 entries
/// fits the default byte budget, reads a window every few frames where frames are near,
/// and about what each frame needs where they are far apart.
#[test]
fn deep_stacks_fit_the_budget() {
    const ENTRIES: usize = 510;
    for distance in [48u64, 112, 300, 700, 1024, 4000] {
        let (mut mem, mut source, regs) = deep_stack(distance, ENTRIES as u64 + 10);
        let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
        let mut cache = RowCache::new();
        let mut out = vec![0u64; ENTRIES];
        let _ = walk(&mut mem, &mut source, &mut cache, &regs, &params, &mut out);
        let r = walk(&mut mem, &mut source, &mut cache, &regs, &params, &mut out);
        let frames = r.len as f64;
        let (calls, bytes) = (
            f64::from(r.stats.read_calls) / frames,
            r.stats.bytes_read as f64 / frames,
        );
        println!("{distance} bytes apart: {calls:.3} reads and {bytes:.1} bytes per frame");
        assert_eq!((r.len, r.stop), (ENTRIES, Stop::Full), "{distance}: {r:?}");
        assert_eq!(r.stats.cache_misses, 0);
        // Each saved %rbx is where the frame saved it.
        let mut c = RowCache::new();
        let mut window = StackWindow::new();
        let mut recent = RecentAnswers::new();
        let mut u = Unwinder::new(
            &mut mem,
            &mut source,
            &mut c,
            &mut window,
            &mut recent,
            regs,
            &params,
        );
        for k in 0..4 {
            u.next_frame().unwrap();
            assert_eq!(u.regs().get(RBX), Some(0xb0b0 + k));
        }
        if distance <= 128 {
            assert!(calls <= 0.5, "{distance}: {calls}");
        }
        if distance >= 512 {
            assert!(bytes <= 80.0, "{distance}: {bytes}");
        }
    }
}

/// The stack window: fills of a whole window while reads go up the stack, short ones after
/// a jump or once half the budget is spent; never past a page end (unless the request
/// crosses it), nor past user space or the budget; an exact retry when the fill faults;
/// every fill counted.
#[test]
fn stack_window_fills() {
    let mut inner = SegMem::default();
    inner.add(0x10_0000, (0..3 * PAGE).map(|i| (i / 8) as u8).collect());
    let window_len = STACK_WINDOW_BYTES as u64;
    let short = unwind_logic::cfi::memory::STACK_SHORT_FILL as u64;
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut w = StackWindow::new();
    let word = |a: u64| u64::from_le_bytes([((a - 0x10_0000) / 8) as u8; 8]);
    // The first fill: a whole window.
    assert_eq!(w.u64(&mut r, 0x10_0010), Ok(word(0x10_0010)));
    assert_eq!((r.read_calls(), r.bytes_read()), (1, window_len));
    for a in (0x10_0010..0x10_0010 + window_len - 8).step_by(8) {
        assert_eq!(w.u64(&mut r, a), Ok(word(a)));
    }
    assert_eq!(r.read_calls(), 1);
    // A range held: where it starts; the word at an offset.
    let at = w.offset_of(0x10_0020, 16).unwrap();
    assert_eq!(at, 0x10);
    assert_eq!(w.word(at + 8), word(0x10_0028));
    assert_eq!(w.offset_of(0x10_0010 + window_len - 4, 8), None);
    // Just past the window (in sequence): a whole window again.
    let next = 0x10_0010 + window_len + 16;
    assert_eq!(w.u64(&mut r, next), Ok(word(next)));
    assert_eq!((r.read_calls(), r.bytes_read()), (2, 2 * window_len));
    // Far past it: a short fill, cut at the page end.
    assert_eq!(w.u64(&mut r, 0x10_0fc0), Ok(word(0x10_0fc0)));
    assert_eq!(r.bytes_read(), 2 * window_len + short);
    assert_eq!(w.u64(&mut r, 0x10_0ff8), Ok(word(0x10_0ff8)));
    assert_eq!(r.bytes_read(), 2 * window_len + short);
    // A request that crosses a page end: exactly the request.
    let mut b = [0u8; 16];
    assert!(w.read(&mut r, 0x10_1ffc, &mut b));
    assert_eq!(r.bytes_read(), 2 * window_len + short + 16);
    // In sequence but at a page end: up to the page end.
    assert!(w.read(&mut r, 0x10_2f00, &mut b));
    assert!(w.read(&mut r, 0x10_2f08, &mut b));
    let calls = r.read_calls();
    assert!(w.read(&mut r, 0x10_2ff0, &mut b));
    assert_eq!(r.read_calls(), calls + 1);
    // Past the end of user space: refused, counted as nothing.
    assert_eq!(w.u64(&mut r, USER_END - 4), Err(Error::Fault));
    assert_eq!(r.failure_error(), Error::Invalid(Invalid::Address));
    assert_eq!(r.read_calls(), calls + 1);
    // A fill that faults (the memory ends 8 bytes on): retried for exactly the request.
    let mut inner = SegMem::default();
    inner.add(0x20_0000, vec![7; 16]);
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut w = StackWindow::new();
    assert_eq!(w.u64(&mut r, 0x20_0008), Ok(0x0707_0707_0707_0707));
    assert_eq!((r.read_calls(), r.bytes_read()), (2, window_len + 8));
    assert_eq!(w.u64(&mut r, 0x20_0010), Err(Error::Fault));
    assert_eq!(r.failure_error(), Error::Fault);
    // A budget: fills shrink to what is left, then fail; short once half is spent.
    let mut inner = SegMem::default();
    inner.add(0x10_0000, vec![1; 3 * PAGE as usize]);
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, 100);
    let mut w = StackWindow::new();
    assert!(w.u64(&mut r, 0x10_0000).is_ok());
    assert_eq!(r.bytes_read(), 100);
    assert_eq!(w.u64(&mut r, 0x10_0100), Err(Error::Fault));
    assert_eq!(r.failure_error(), Error::Budget);
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, 1000);
    let mut w = StackWindow::new();
    assert!(w.u64(&mut r, 0x10_0000).is_ok());
    assert!(w.u64(&mut r, 0x10_0000 + window_len).is_ok());
    assert_eq!(r.bytes_read(), window_len + short);
    // Not a power of two: no read-ahead at all.
    let mut r = ReadAhead::new(&mut inner, 3000, USER_END, u64::MAX);
    let mut w = StackWindow::new();
    assert!(w.u64(&mut r, 0x10_0000).is_ok());
    assert_eq!(r.bytes_read(), 8);
}

/// The stack's top: a fill that starts below it reads ahead no further (whole windows and
/// short ones), a request across it or above it is read as asked, and a walk that begins
/// without a top reads ahead as before.
#[test]
fn stack_window_stops_at_the_stack_top() {
    let mut inner = SegMem::default();
    inner.add(0x10_0000, (0..PAGE).map(|i| (i / 8) as u8).collect());
    let word = |a: u64| u64::from_le_bytes([((a - 0x10_0000) / 8) as u8; 8]);
    let top = 0x10_0000 + 0x128;
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut w = StackWindow::new();
    w.begin(top);
    // A whole window would be 512 bytes: cut at the top.
    assert_eq!(w.u64(&mut r, 0x10_0010), Ok(word(0x10_0010)));
    assert_eq!((r.read_calls(), r.bytes_read()), (1, 0x118));
    assert_eq!(w.offset_of(top - 8, 8), Some(0x110));
    assert_eq!(w.offset_of(top, 8), None);
    // A request across the top: read as asked (16 bytes), nothing more.
    let mut b = [0u8; 16];
    assert!(w.read(&mut r, top - 8, &mut b));
    assert_eq!((r.read_calls(), r.bytes_read()), (2, 0x118 + 16));
    // Above the top: the usual read-ahead (a short fill: far from the last window).
    let short = unwind_logic::cfi::memory::STACK_SHORT_FILL as u64;
    assert_eq!(w.u64(&mut r, 0x10_0f00), Ok(word(0x10_0f00)));
    assert_eq!(r.bytes_read(), 0x118 + 16 + short);
    // And in sequence from there: a whole window, cut at the page end.
    assert_eq!(
        w.u64(&mut r, 0x10_0f00 + short),
        Ok(word(0x10_0f00 + short))
    );
    assert_eq!(r.bytes_read(), 0x118 + 16 + 0x100);
    // A new walk without a top: a whole window.
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    w.begin(u64::MAX);
    assert_eq!(w.u64(&mut r, 0x10_0010), Ok(word(0x10_0010)));
    assert_eq!(r.bytes_read(), STACK_WINDOW_BYTES as u64);
}

/// The frame records a window holds: exactly those whose two words lie in what was read
/// (never the stale bytes past it, which an earlier, longer fill left), at an offset that
/// is a multiple of 8, and the words the window's reads give there.
#[test]
fn stack_window_records_held() {
    let mut inner = SegMem::default();
    inner.add(0x10_0000, (0..PAGE).map(|i| (i / 8) as u8).collect());
    let word = |a: u64| u64::from_le_bytes([((a - 0x10_0000) / 8) as u8; 8]);
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut w = StackWindow::new();
    // A whole window first, so that bytes past the next, shorter fill are stale, not zero.
    assert_eq!(w.hold(&mut r, 0x10_0d00, 16), Some(0));
    // The next in sequence, cut at the page end: 0x10_0f00..0x10_1000, 32 words.
    let base = 0x10_0f00;
    assert_eq!(w.hold(&mut r, base, 16), Some(0));
    assert_eq!(w.offset_of(base + 0xf8, 8), Some(0xf8));
    assert_eq!(w.offset_of(base + 0xf8, 16), None);
    let held = w.records();
    for a in (base..base + 0xf0 + 1).step_by(8) {
        assert_eq!(held.at(a), Some([word(a), word(a + 8)]), "{a:#x}");
    }
    // The last word alone, past the fill, unaligned, below the window: not held.
    for a in [
        base + 0xf8,
        base + 0x100,
        base + 0x1f0,
        base + 4,
        base + 0xef,
        base - 8,
        0,
    ] {
        assert_eq!(held.at(a), None, "{a:#x}");
    }
    // A window of one word holds no record; an empty one none.
    let mut inner = SegMem::default();
    inner.add(0x20_0000, vec![7; 8]);
    let mut r = ReadAhead::new(&mut inner, PAGE, USER_END, u64::MAX);
    let mut w = StackWindow::new();
    assert!(w.hold(&mut r, 0x20_0000, 8).is_some());
    assert_eq!(w.records().at(0x20_0000), None);
    w.clear();
    assert_eq!(w.records().at(0), None);
}

/// A frame-pointer row, the same row as a signal frame's (no compact form), and the first's
/// compact form: the rows of the hot-row tests.
fn frame_and_signal_rows() -> (Row, Row, CompactRow) {
    let mut compact = Row::EMPTY;
    compact.rules.cfa = CfaRule::RegOffset {
        reg: RBP,
        offset: 16,
    };
    compact.rules.regs[RA as usize] = Rule::Offset(-8);
    compact.rules.regs[RBP as usize] = Rule::Offset(-16);
    let mut signal = compact;
    signal.signal = true;
    let c = CompactRow::from_row(&compact).unwrap();
    (compact, signal, c)
}

/// A shared cache with `compact` at 0x100 and `signal` at 0x200 of module 1.
fn shared_with(compact: &Row, signal: &Row) -> RowCache {
    let mut shared = RowCache::new();
    shared.insert(1, 0x100, compact);
    shared.insert(1, 0x200, signal);
    shared
}

/// A task's hot rows: compact rows only, two places a row (a later PC whose places are
/// both taken replaces an earlier one), misses fall through to the shared cache and fill the hot
/// rows, and rows without a compact form stay in the shared cache alone.
#[test]
fn hot_rows_in_front_of_the_shared_cache() {
    let (compact, signal, c) = frame_and_signal_rows();

    let mut hot = HotRows::new();
    hot.insert(7, 0x10, CompactRow::FULL);
    hot.insert(7, 0x10, CompactRow::EMPTY);
    assert_eq!(hot.find(7, 0x10), None, "only rows are kept");
    // More PCs than slots: each is found right after it was kept, and at most HOT_ROWS
    // of them at the end.
    for pc in 0..(HOT_ROWS as u64 * 4) {
        hot.insert(7, pc, c);
        assert_eq!(hot.find(7, pc), Some(c));
        assert_eq!(hot.find(8, pc), None, "another module's row");
    }
    let kept = (0..(HOT_ROWS as u64 * 4))
        .filter(|&pc| hot.find(7, pc).is_some())
        .count();
    assert!(kept <= HOT_ROWS && kept > 0, "{kept}");

    // Two places a row: any two rows kept one after the other are both found (with one
    // place, two PCs of one entry evict each other: among 100 PCs some pairs do).
    for a in 0..100u64 {
        for b in (a + 1)..100 {
            let mut hot = HotRows::new();
            hot.insert(3, a * 16, c);
            if hot.find(3, b * 16).is_none() {
                hot.insert(3, b * 16, c);
            }
            assert_eq!(hot.find(3, a * 16), Some(c), "{a} then {b}");
            assert_eq!(hot.find(3, b * 16), Some(c), "{a} then {b}");
        }
    }

    let mut hot = HotRows::new();
    let mut shared = shared_with(&compact, &signal);
    let mut l = Layered {
        hot: &mut hot,
        shared: &mut shared,
    };
    assert_eq!(l.lookup(1, 0x100), Some(c), "from the shared cache");
    assert_eq!(l.lookup(1, 0x200), Some(CompactRow::FULL));
    let mut out = Row::EMPTY;
    assert!(l.lookup_full(1, 0x200, &mut out));
    assert!(out.signal);
    l.store(1, 0x300, &compact);
    l.store(1, 0x400, &signal);
    assert_eq!(hot.find(1, 0x100), Some(c), "a shared hit is kept hot");
    assert_eq!(
        hot.find(1, 0x300),
        Some(c),
        "a stored compact row is kept hot"
    );
    assert_eq!(hot.find(1, 0x200), None);
    assert_eq!(
        hot.find(1, 0x400),
        None,
        "a full row stays in the shared cache"
    );
    // Hot rows answer without the shared cache.
    let mut empty = RowCache::new();
    let mut l = Layered {
        hot: &mut hot,
        shared: &mut empty,
    };
    assert_eq!(l.lookup(1, 0x300), Some(c));
    assert_eq!(l.lookup(1, 0x400), None);
}

/// Words from anywhere (the shared row table's entries are words; a torn or foreign entry is
/// rejected by its sequence number, and this is the second line): `from_words` gives no row,
/// or a row that `from_row` makes of the rules it stands for (so it keeps the type's
/// invariants), whose words are the words given, and which steps exactly as the full row
/// it stands for.
#[test]
fn words_give_a_row_back_or_none() {
    let mut rng = Rng(0x5a_4ed0);
    assert_eq!(CompactRow::from_words(CompactRow::EMPTY.to_words()), None);
    assert_eq!(CompactRow::from_words(CompactRow::FULL.to_words()), None);
    assert_eq!(CompactRow::from_words([0; 3]), None);
    let mut accepted = 0;
    for i in 0..200_000u32 {
        // Random words, and a real row's words with a few bits flipped.
        let words = if i % 2 == 0 {
            [rng.next(), rng.next(), rng.next()]
        } else {
            let mut row = Row::EMPTY;
            let reg = [RSP, RBP, RBX][rng.below(3) as usize];
            let offset = 8 * rng.below(40) as i32;
            // A third of them DRAP rows: CFA = [reg + offset], registers saved at reg + n.
            let drap = rng.below(3) == 0;
            row.rules.cfa = if drap {
                let e = row
                    .add_expr(&[0x70 + reg as u8, offset as u8 & 0x7f, 0x06])
                    .unwrap();
                CfaRule::Expression(e)
            } else {
                CfaRule::RegOffset { reg, offset }
            };
            row.rules.regs[RA as usize] = Rule::Offset(-8);
            for saved in [RBX, RBP, R12, R13, R14, R15] {
                if rng.below(2) == 0 {
                    let n = -8 * (2 + rng.below(8) as i32);
                    row.rules.regs[saved as usize] = if drap && rng.below(2) == 0 {
                        let e = row.add_expr(&[0x70 + reg as u8, n as u8 & 0x7f]).unwrap();
                        Rule::Expression(e)
                    } else {
                        Rule::Offset(n)
                    };
                }
            }
            let mut w = CompactRow::from_row(&row).unwrap().to_words();
            let bit = rng.below(192);
            w[bit as usize / 64] ^= 1 << (bit % 64);
            w
        };
        let Some(c) = CompactRow::from_words(words) else {
            continue;
        };
        accepted += 1;
        assert_eq!(CompactRow::from_row(&c.to_row()), Some(c), "accepted {c:?}");
        assert_eq!(c.to_words(), words, "{c:?}");
        let mut stack = some_stack(&mut rng);
        compare(&c.to_row(), &c, &mut rng, 2, &mut stack);
    }
    println!("{accepted} of 200000 word triples are rows");
    assert!(accepted > 10_000, "{accepted}");
}

/// Hot rows built as the module builds them (zeroed in place, then `reset`: `HotRows::new()`
/// as a value went through the kernel stack, over 5 KiB) answer as new ones do: a row without
/// a compact form, found in the shared cache, is the mark. Zeroed bytes without `reset`
/// answer "no row" there: the mark is what `reset` adds.
#[test]
fn hot_rows_zeroed_then_reset_are_new() {
    let (compact, signal, c) = frame_and_signal_rows();
    for (how, reset) in [
        ("new", None),
        ("zeroed, reset", Some(true)),
        ("zeroed", Some(false)),
    ] {
        let mut hot: Box<HotRows> = match reset {
            None => Box::new(HotRows::new()),
            Some(reset) => {
                // SAFETY: all-zero bytes are a value of HotRows (its documentation).
                let mut h: Box<HotRows> = unsafe { Box::new_zeroed().assume_init() };
                if reset {
                    h.reset();
                }
                h
            }
        };
        let mut shared = shared_with(&compact, &signal);
        let mut l = Layered {
            hot: &mut hot,
            shared: &mut shared,
        };
        assert_eq!(l.lookup(1, 0x100), Some(c), "{how}");
        let full = l.lookup(1, 0x200);
        if reset == Some(false) {
            assert_ne!(
                full,
                Some(CompactRow::FULL),
                "{how}: the mark without reset"
            );
        } else {
            assert_eq!(full, Some(CompactRow::FULL), "{how}");
        }
        assert_eq!(hot.find(1, 0x100), Some(c), "{how}: kept hot");
        assert_eq!(hot.find(1, 0x300), None, "{how}");
    }
}
