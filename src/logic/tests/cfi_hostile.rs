// SPDX-License-Identifier: GPL-2.0
//! Hostile input: random and mutated `.eh_frame_hdr` tables, CIEs, FDEs, CFA programs,
//! expressions and stacks (a deterministic xorshift generator, so failures reproduce).
//! Whatever the bytes: no panic, bounded work (memory reads counted against the documented
//! bounds), no output address at or above `user_end`, the stack pointer strictly growing
//! except across signal frames; plus targeted cases that must end with a given stop reason.
#![cfg(not(loom))]

mod cfi_common;

use std::path::Path;

use cfi_common::*;
use unwind_logic::cfi::eh_frame::parse_fde;
use unwind_logic::cfi::eh_frame_hdr::{self, MAX_SEARCH_STEPS};
use unwind_logic::cfi::expr::eval;
use unwind_logic::cfi::interp::{row_for_pc, MAX_CFA_INSTRUCTIONS};
use unwind_logic::cfi::memory::MAX_LEB128_BYTES;
use unwind_logic::cfi::regs::{RA, RSP};
use unwind_logic::cfi::unwinder::compute_row;
use unwind_logic::cfi::*;

/// Reads per CFA instruction at most: the opcode, two LEB128 operands byte by byte, and an
/// expression (unwindowed memory).
const READS_PER_INSN: usize = 1 + 2 * MAX_LEB128_BYTES + 1;
/// Reads to parse an FDE and its CIE at most (heads, augmentation string and data, LEBs).
const PARSE_READS: usize = 200;

/// Walks with the unwinder one frame at a time and checks the invariants; also checks
/// `walk` gives the same frames. Returns the stop reason.
fn checked_walk(mem: &mut SegMem, source: &mut MapSource, regs: Regs, mode: Mode) -> Stop {
    const OUT: usize = 64;
    let params = WalkParams::new(mode, USER_END, PAGE);
    let mut cache = RowCache::new();
    let mut frames = vec![regs.get(RA).unwrap()];
    let stop;
    let stats;
    {
        let mut window = StackWindow::new();
        let mut recent = RecentAnswers::new();
        let mut u = Unwinder::new(
            &mut *mem,
            &mut *source,
            &mut cache,
            &mut window,
            &mut recent,
            regs,
            &params,
        );
        let mut sp = regs.get(RSP).unwrap();
        loop {
            if frames.len() == OUT {
                stop = Stop::Full;
                break;
            }
            match u.next_frame() {
                Ok(f) => {
                    assert!(f.ip != 0 && f.ip < USER_END, "{f:?}");
                    assert!(f.sp != 0 && f.sp < USER_END, "{f:?}");
                    assert!(f.signal || f.sp > sp, "{f:?} after sp {sp:#x}");
                    sp = f.sp;
                    frames.push(f.ip);
                }
                Err(s) => {
                    stop = s;
                    break;
                }
            }
        }
        stats = u.stats();
    }
    assert!(stats.bytes_read <= params.byte_budget);
    assert!(stats.signal_frames <= unwind_logic::cfi::unwinder::MAX_SIGNAL_FRAMES);
    let mut out = [0u64; OUT];
    // `walk_in` through a window that an earlier walk filled at the same addresses with
    // other bytes: nothing of them may be used.
    let mut window = StackWindow::new();
    let mut cache = RowCache::new();
    walk_in(
        &mut window,
        &mut RecentAnswers::new(),
        &mut Pattern,
        source,
        &mut cache,
        &regs,
        &params,
        &mut out,
    );
    let mut cache = RowCache::new();
    // (The answers of `source` the walk leaves, kept for the warm walk below: what a
    // module's walk of the same address space starts with.)
    let mut recent = RecentAnswers::new();
    let r = walk_in(
        &mut window,
        &mut recent,
        &mut *mem,
        &mut *source,
        &mut cache,
        &regs,
        &params,
        &mut out,
    );
    // (`walk` in Fp mode is the old walker, whose checks differ slightly from the
    // unwinder's frame-pointer steps.)
    if mode != Mode::Fp {
        assert_eq!(&out[..r.len], &frames[..], "{:?} vs {stop:?}", r.stop);
        assert_eq!(r.stop, stop);
    }
    // Again with the rows of that walk cached: the walk's fast path (its warm frames)
    // takes every frame it can, and must find what the frame-at-a-time walk found.
    let mut warm_out = [0u64; OUT];
    let warm = walk_in(
        &mut window,
        &mut recent,
        mem,
        source,
        &mut cache,
        &regs,
        &params,
        &mut warm_out,
    );
    assert_eq!(
        (&warm_out[..warm.len], warm.stop),
        (&out[..r.len], r.stop),
        "warm walk"
    );
    assert!(out[..r.len].iter().all(|&a| a != 0 && a < USER_END));
    stop
}

/// Memory where every byte is 0xa5 (a stack of made-up frames).
struct Pattern;

impl UnwindMemory for Pattern {
    fn read(&mut self, _addr: u64, out: &mut [u8]) -> bool {
        out.fill(0xa5);
        true
    }
}

fn random_regs(rng: &mut Rng, ip: u64, sp: u64) -> Regs {
    let mut v = [0u64; 17];
    for x in v.iter_mut() {
        *x = match rng.below(4) {
            0 => rng.next(),
            1 => sp + rng.below(0x1000),
            2 => ip + rng.below(0x100),
            _ => 0,
        };
    }
    v[RA as usize] = ip;
    v[RSP as usize] = sp;
    Regs::all_known(v)
}

#[test]
fn random_bytes_as_unwind_info() {
    let mut rng = Rng(0x5eed_0001);
    let base = 0x10_0000u64;
    for _ in 0..1000 {
        let mut mem = SegMem::default();
        mem.add(base, rng.bytes(4096));
        for _ in 0..20 {
            let hdr = base + rng.below(4096);
            mem.calls = 0;
            if let Ok(h) = eh_frame_hdr::parse(&mut mem, hdr, rng.below(8192)) {
                assert!(mem.calls <= 1 + 2 * MAX_LEB128_BYTES, "{}", mem.calls);
                for _ in 0..5 {
                    mem.calls = 0;
                    let _ = h.find_fde(&mut mem, rng.next());
                    assert!(mem.calls <= MAX_SEARCH_STEPS as usize + 2, "{}", mem.calls);
                }
            }
            let at = base + rng.below(4096);
            mem.calls = 0;
            if let Ok(fde) = parse_fde(&mut mem, at) {
                assert!(mem.calls <= PARSE_READS, "{}", mem.calls);
                for _ in 0..5 {
                    let pc = fde
                        .pc_begin
                        .wrapping_add(rng.below(fde.pc_end.wrapping_sub(fde.pc_begin).max(1)));
                    mem.calls = 0;
                    let _ = row_for_pc(&mut mem, &fde, pc);
                    assert!(mem.calls <= READS_PER_INSN * MAX_CFA_INSTRUCTIONS as usize);
                }
            }
        }
    }
}

/// A valid image with assorted instructions, then 1–8 random bytes changed: rows and walks
/// on random stacks.
#[test]
fn mutated_unwind_info_and_random_stacks() {
    let programs: Vec<Vec<u8>> = vec![
        vec![0x41, 0x0e, 16, 0x86, 2, 0x41, 0x0e, 24, 0x83, 3],
        vec![0x41, 0x0a, 0x0e, 32, 0x8c, 2, 0x41, 0x0b, 0x41, 0x0c, 6, 16],
        vec![0x0f, 3, 0x76, 0x78, 0x06, 0x10, 6, 2, 0x76, 0x00],
        vec![
            0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
        ],
        vec![0x07, 16],
        vec![0x0e, 8, 0x16, 3, 2, 0x77, 0x10, 0x09, 12, 0],
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
    let mut rng = Rng(0x5eed_0002);
    let stack = 0x7ffd_0000_0000u64;
    let mut stops = std::collections::BTreeMap::new();
    for round in 0..2000 {
        let aug = if round % 5 == 0 { "zRS" } else { "zR" };
        let mut img = build_image(0x10_0000, aug, &std_cie_insns(), &funcs);
        for _ in 0..rng.below(9) {
            let at = rng.below(img.bytes.len() as u64) as usize;
            img.bytes[at] = rng.next() as u8;
        }
        let mut mem = SegMem::default();
        mem.add(img.base, img.bytes.clone());
        // A stack of random words, many of them plausible return addresses and pointers.
        let mut words = Vec::new();
        for _ in 0..512 {
            let w = match rng.below(4) {
                0 => 0x40_0000 + rng.below(0x600),
                1 => stack + rng.below(0x1000),
                2 => rng.next(),
                _ => 0,
            };
            words.extend_from_slice(&w.to_le_bytes());
        }
        mem.add(stack, words);
        let mut source = MapSource::default();
        let info = ModuleInfo {
            id: 1,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        };
        source.module(0x40_0000, 0x40_0600, info);
        source.add(0x50_0000, 0x50_1000, Lookup::NoInfo);
        for _ in 0..4 {
            let pc = 0x40_0000 + rng.below(0x600);
            mem.calls = 0;
            let _ = compute_row(&mut mem, &info, pc);
            assert!(mem.calls <= 30 + PARSE_READS + READS_PER_INSN * MAX_CFA_INSTRUCTIONS as usize);
            let sp = stack + 8 * rng.below(256);
            let regs = random_regs(&mut rng, pc, sp);
            let mode = [Mode::Auto, Mode::Cfi, Mode::Fp][rng.below(3) as usize];
            let stop = checked_walk(&mut mem, &mut source, regs, mode);
            *stops
                .entry(format!("{}/{}", stop.name(), stop.detail()))
                .or_insert(0) += 1;
        }
    }
    println!("stop reasons: {stops:?}");
    assert!(
        stops.keys().any(|k| k.starts_with("end")),
        "some walks end normally"
    );
}

#[test]
fn random_expressions() {
    let mut rng = Rng(0x5eed_0003);
    let mut mem = SegMem::default();
    let base = 0x20_0000u64;
    let words: Vec<u8> = (0..512u64)
        .flat_map(|i| (base + 8 * (i * 7 % 512)).to_le_bytes())
        .collect();
    mem.add(base, words);
    let interesting = [
        0x06, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x19, 0x1a, 0x1c, 0x1e, 0x1f, 0x20, 0x21, 0x22,
        0x23, 0x24, 0x25, 0x26, 0x27, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x30, 0x3f, 0x77, 0x76,
        0x70, 0x92, 0x94, 0x96, 0x08, 0x10, 0x11,
    ];
    for _ in 0..50_000 {
        let len = rng.below(40) as usize;
        let code: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(3) == 0 {
                    rng.next() as u8
                } else {
                    interesting[rng.below(interesting.len() as u64) as usize]
                }
            })
            .collect();
        let sp = base + 8 * rng.below(512);
        let regs = random_regs(&mut rng, base, sp);
        mem.calls = 0;
        let init = (rng.below(2) == 0).then(|| base + 8 * rng.below(512));
        let _ = eval(&code, &regs, &mut mem, init);
        assert!(mem.calls <= len);
    }
}

/// A deref chain that points to itself ends (no branches: the expression runs straight
/// through); the CFA it computes does not grow, so the walk stops there. A branch is
/// refused.
#[test]
fn expression_deref_loop() {
    let stack = 0x7ffd_0000_0000u64;
    let sp = stack + 0x100;
    let mut derefs = Asm::new().u8(0x77).sleb(0);
    for _ in 0..20 {
        derefs = derefs.u8(0x06);
    }
    let cfa_expr = Asm::new()
        .u8(0x0f)
        .uleb(derefs.len() as u64)
        .bytes(&derefs.0)
        .0;
    let skip_loop = vec![0x0f, 3, 0x2f, 0xfd, 0xff];
    let img = build_image(
        0x10_0000,
        "zR",
        &std_cie_insns(),
        &[
            Func {
                begin: 0x40_0000,
                len: 0x10,
                insns: cfa_expr,
            },
            Func {
                begin: 0x40_0100,
                len: 0x10,
                insns: skip_loop,
            },
        ],
    );
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    mem.add(stack, vec![0; 0x1000]);
    mem.write(sp, &sp.to_le_bytes());
    mem.write(sp - 8, &0x40_0008u64.to_le_bytes());
    let mut source = MapSource::default();
    source.module(
        0x40_0000,
        0x40_0200,
        ModuleInfo {
            id: 1,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        },
    );
    let regs = random_regs(&mut Rng(1), 0x40_0004, sp);
    assert_eq!(
        checked_walk(&mut mem, &mut source, regs, Mode::Cfi),
        Stop::Invalid(Invalid::NotIncreasing)
    );
    let regs = random_regs(&mut Rng(1), 0x40_0104, sp);
    assert_eq!(
        checked_walk(&mut mem, &mut source, regs, Mode::Auto),
        Stop::Unsupported(Unsupported::ExpressionOp)
    );
}

/// A stack whose frames return into each other in a cycle (each frame's saved RA is the
/// next, the last one's the first): the stack pointer stops growing, the walk ends Invalid.
#[test]
fn cyclic_stack() {
    let img = build_image(
        0x10_0000,
        "zR",
        &std_cie_insns(),
        &[Func {
            begin: 0x40_0000,
            len: 0x100,
            insns: vec![],
        }],
    );
    let stack = 0x7ffd_0000_0000u64;
    let mut mem = SegMem::default();
    mem.add(img.base, img.bytes.clone());
    mem.add(stack, vec![0; 0x100]);
    let mut source = MapSource::default();
    source.module(
        0x40_0000,
        0x40_0100,
        ModuleInfo {
            id: 1,
            bias: 0,
            eh_frame_hdr: img.hdr,
            eh_frame_hdr_len: img.hdr_len,
        },
    );
    // CFA = rsp + 8 each frame; RA at CFA - 8 = rsp: the RA must be at rsp, and the next
    // frame's rsp is 8 higher: it grows, and runs off the end of the stack, or ends.
    for i in 0..32u64 {
        mem.write(stack + 8 * i, &(0x40_0010 + i).to_le_bytes());
    }
    let regs = random_regs(&mut Rng(2), 0x40_0000, stack);
    assert_eq!(
        checked_walk(&mut mem, &mut source, regs, Mode::Cfi),
        Stop::Fault
    );
    // Frame pointers that point back (rbp chain cycle): Auto, no unwind info at all.
    let mut source = MapSource::default();
    source.add(0x40_0000, 0x40_0100, Lookup::NoInfo);
    let mut regs = random_regs(&mut Rng(3), 0x40_0000, stack);
    regs.set(unwind_logic::cfi::regs::RBP, stack + 0x40);
    mem.write(stack + 0x40, &(stack + 0x60).to_le_bytes());
    mem.write(stack + 0x48, &0x40_0020u64.to_le_bytes());
    mem.write(stack + 0x60, &(stack + 0x40).to_le_bytes());
    mem.write(stack + 0x68, &0x40_0030u64.to_le_bytes());
    assert_eq!(
        checked_walk(&mut mem, &mut source, regs, Mode::Auto),
        Stop::Invalid(Invalid::FramePointer)
    );
    assert_eq!(
        checked_walk(&mut mem, &mut source, regs, Mode::Fp),
        Stop::Invalid(Invalid::FramePointer)
    );
}

/// Real unwind information (libc's), hostile stacks: random registers and stack words.
#[test]
fn real_unwind_info_random_stacks() {
    let Some(libc) = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")) else {
        return;
    };
    let (hdr, hdr_len) = libc.eh_frame_hdr.unwrap();
    let mut mem = libc.memory(0);
    let text_lo = libc.text;
    let text_hi = text_lo + 0x150000;
    let stack = 0x7ffd_0000_0000u64;
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
    source.add(stack, stack + 0x2000, Lookup::NoInfo);
    let mut rng = Rng(0x5eed_0004);
    let mut stops = std::collections::BTreeMap::new();
    let mut frames = 0;
    for _ in 0..1500 {
        let mut words = Vec::new();
        for _ in 0..1024 {
            let w = match rng.below(3) {
                0 => text_lo + rng.below(text_hi - text_lo),
                1 => stack + rng.below(0x2000),
                _ => rng.next(),
            };
            words.extend_from_slice(&w.to_le_bytes());
        }
        mem.add(stack, words);
        let ip = text_lo + rng.below(text_hi - text_lo);
        let sp = stack + 8 * rng.below(512);
        let regs = random_regs(&mut rng, ip, sp);
        let mode = if rng.below(2) == 0 {
            Mode::Auto
        } else {
            Mode::Cfi
        };
        let stop = checked_walk(&mut mem, &mut source, regs, mode);
        *stops
            .entry(format!("{}/{}", stop.name(), stop.detail()))
            .or_insert(0) += 1;
        frames += 1;
    }
    println!("{frames} walks: {stops:?}");
}

// Property-based fuzzing (proptest): the same properties on inputs proptest generates and
// shrinks, from a new seed on every run (PROPTEST_CASES sets how many; a failure prints
// the smallest input it found and is kept in proptest-regressions/).
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: std::env::var("PROPTEST_CASES")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(512),
            // A failing input is kept beside this file (cfi_hostile.regressions) and tried
            // first from then on: commit it with the fix.
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::WithSource("regressions"),
            )),
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        /// Arbitrary bytes as a search table, an FDE and its CIE, and CFA programs: no
        /// panic, and the reads stay within the documented bounds.
        #[test]
        fn any_bytes_as_unwind_tables(
            bytes in prop::collection::vec(any::<u8>(), 1..2048),
            hdr_at in 0u64..2048,
            hdr_len in 0u64..4096,
            fde_at in 0u64..2048,
            pcs in prop::collection::vec(any::<u64>(), 1..6),
        ) {
            let base = 0x10_0000u64;
            let mut mem = SegMem::default();
            mem.add(base, bytes);
            mem.calls = 0;
            if let Ok(h) = eh_frame_hdr::parse(&mut mem, base + hdr_at, hdr_len) {
                prop_assert!(mem.calls <= 1 + 2 * MAX_LEB128_BYTES);
                for &pc in &pcs {
                    mem.calls = 0;
                    let _ = h.find_fde(&mut mem, pc);
                    prop_assert!(mem.calls <= MAX_SEARCH_STEPS as usize + 2);
                }
            }
            mem.calls = 0;
            if let Ok(fde) = parse_fde(&mut mem, base + fde_at) {
                prop_assert!(mem.calls <= PARSE_READS);
                for &pc in &pcs {
                    let span = fde.pc_end.wrapping_sub(fde.pc_begin).max(1);
                    mem.calls = 0;
                    let _ = row_for_pc(&mut mem, &fde, fde.pc_begin.wrapping_add(pc % span));
                    prop_assert!(mem.calls <= READS_PER_INSN * MAX_CFA_INSTRUCTIONS as usize);
                }
            }
        }

        /// Arbitrary CFA programs in well-formed CIEs and FDEs, walked over arbitrary
        /// stacks in every mode: every invariant of `checked_walk` (bounded work, no
        /// address at or above user_end, the stack pointer growing) holds.
        #[test]
        fn any_cfa_programs_and_stacks(
            programs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..48), 1..5),
            signal in any::<bool>(),
            stack_words in prop::collection::vec(any::<u64>(), 64..256),
            seed in any::<u64>(),
        ) {
            let funcs: Vec<Func> = programs
                .iter()
                .enumerate()
                .map(|(i, p)| Func { begin: 0x40_0000 + i as u64 * 0x100, len: 0x80, insns: p.clone() })
                .collect();
            let img = build_image(0x10_0000, if signal { "zRS" } else { "zR" }, &std_cie_insns(), &funcs);
            let stack = 0x7ffd_0000_0000u64;
            let mut rng = Rng(seed | 1);
            // Stack words: as generated, but many of them made plausible (return addresses
            // into the functions, pointers into the stack), or the walks end at once.
            let words: Vec<u8> = stack_words
                .iter()
                .flat_map(|&w| {
                    let w = match w % 4 {
                        0 => 0x40_0000 + (w >> 2) % (funcs.len() as u64 * 0x100),
                        1 => stack + (w >> 2) % 0x800,
                        _ => w,
                    };
                    w.to_le_bytes()
                })
                .collect();
            let mut mem = SegMem::default();
            mem.add(img.base, img.bytes.clone());
            mem.add(stack, words);
            let mut source = MapSource::default();
            let info = ModuleInfo { id: 1, bias: 0, eh_frame_hdr: img.hdr, eh_frame_hdr_len: img.hdr_len };
            source.module(0x40_0000, 0x40_0000 + funcs.len() as u64 * 0x100, info);
            for mode in [Mode::Auto, Mode::Cfi, Mode::Fp] {
                let pc = 0x40_0000 + rng.below(funcs.len() as u64 * 0x100);
                let sp = stack + 8 * rng.below(64);
                let regs = random_regs(&mut rng, pc, sp);
                let _ = checked_walk(&mut mem, &mut source, regs, mode);
            }
        }

        /// Arbitrary DWARF expressions: no panic, at most one read per byte.
        #[test]
        fn any_expressions(code in prop::collection::vec(any::<u8>(), 0..64), seed in any::<u64>()) {
            let base = 0x20_0000u64;
            let mut mem = SegMem::default();
            mem.add(base, (0..512u64).flat_map(|i| (base + 8 * (i * 7 % 512)).to_le_bytes()).collect());
            let mut rng = Rng(seed | 1);
            let sp = base + 8 * rng.below(512);
            let regs = random_regs(&mut rng, base, sp);
            mem.calls = 0;
            let _ = eval(&code, &regs, &mut mem, Some(base));
            prop_assert!(mem.calls <= code.len());
        }
    }
}
