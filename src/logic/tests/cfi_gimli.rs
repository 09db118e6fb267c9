// SPDX-License-Identifier: GPL-2.0
//! Differential test of the CFI parser and interpreter against gimli, on real ELF files (the
//! system's libc, ld.so, libstdc++, python, perl, and programs built here with gcc/g++), and
//! of the `.eh_frame_hdr` binary search against a linear scan.
//!
//! For every FDE: the FDE's range must match gimli's, and at addresses of every row (its
//! first and last byte, and a deterministic sample inside: every byte of rows up to
//! `EVERY_BYTE_ROW` bytes in the small test programs, a few per row elsewhere, to keep the
//! debug-mode test within seconds) the CFA rule and the rules of all 17 tracked registers
//! must equal gimli's.
#![cfg(not(loom))]

mod cfi_common;

use std::path::Path;

use cfi_common::*;
use gimli::{
    BaseAddresses, CfaRule as GCfa, CieOrFde, EhFrame, LittleEndian, RegisterRule as GRule,
    UnwindContext, UnwindSection, UnwindTable,
};
use unwind_logic::cfi::eh_frame::parse_fde;
use unwind_logic::cfi::eh_frame_hdr;
use unwind_logic::cfi::interp::row_for_pc;
use unwind_logic::cfi::row::{CfaRule, Row, Rule};
use unwind_logic::cfi::{Error, ReadAhead, UnwindMemory};

/// A CFA rule in a form both sides convert to.
#[derive(Debug, PartialEq, Clone)]
enum C {
    Reg(u16, i64),
    Expr(Vec<u8>),
}

/// A register rule in a form both sides convert to.
#[derive(Debug, PartialEq, Clone)]
enum R {
    Default,
    Undefined,
    Same,
    Off(i64),
    ValOff(i64),
    Reg(u16),
    Expr(Vec<u8>),
    ValExpr(Vec<u8>),
    Other,
}

#[derive(Debug, PartialEq, Clone)]
struct Cmp {
    cfa: C,
    regs: Vec<R>,
}

fn mine(row: &Row) -> Cmp {
    let cfa = match row.rules.cfa {
        CfaRule::Undefined => C::Reg(0, 0),
        CfaRule::RegOffset { reg, offset } => C::Reg(reg, offset.into()),
        CfaRule::Expression(e) => C::Expr(row.expr(e).to_vec()),
    };
    let regs = row
        .rules
        .regs
        .iter()
        .map(|r| match *r {
            Rule::Default => R::Default,
            Rule::Undefined => R::Undefined,
            Rule::SameValue => R::Same,
            Rule::Offset(n) => R::Off(n.into()),
            Rule::ValOffset(n) => R::ValOff(n.into()),
            Rule::Register(r) => R::Reg(r),
            Rule::Expression(e) => R::Expr(row.expr(e).to_vec()),
            Rule::ValExpression(e) => R::ValExpr(row.expr(e).to_vec()),
        })
        .collect();
    Cmp { cfa, regs }
}

type Slice<'a> = gimli::EndianSlice<'a, LittleEndian>;

fn theirs(row: &gimli::UnwindTableRow<usize>, eh: &EhFrame<Slice<'_>>) -> Cmp {
    let bytes = |e: &gimli::UnwindExpression<usize>| e.get(eh).unwrap().0.slice().to_vec();
    let cfa = match row.cfa() {
        GCfa::RegisterAndOffset { register, offset } => C::Reg(register.0, *offset),
        GCfa::Expression(e) => C::Expr(bytes(e)),
    };
    let regs = (0..17u16)
        .map(|r| match row.register(gimli::Register(r)) {
            None => R::Default,
            Some(GRule::Undefined) => R::Undefined,
            Some(GRule::SameValue) => R::Same,
            Some(GRule::Offset(n)) => R::Off(n),
            Some(GRule::ValOffset(n)) => R::ValOff(n),
            Some(GRule::Register(r)) => R::Reg(r.0),
            Some(GRule::Expression(e)) => R::Expr(bytes(&e)),
            Some(GRule::ValExpression(e)) => R::ValExpr(bytes(&e)),
            Some(_) => R::Other,
        })
        .collect();
    Cmp { cfa, regs }
}

/// Rows up to this many bytes are compared at every byte in the small test programs.
const EVERY_BYTE_ROW: u64 = 64;

#[derive(Default, Debug)]
struct Summary {
    files: usize,
    fdes: usize,
    rows: usize,
    addresses: usize,
    gimli_errors: usize,
    both_err: usize,
    max_insns: usize,
    max_depth: usize,
    cfa_exprs: usize,
    reg_exprs: usize,
    signal_fdes: usize,
    hdr_lookups: usize,
}

struct Fde {
    addr: u64,
    begin: u64,
    end: u64,
}

fn check_file(path: &Path, dense: bool, sum: &mut Summary) -> Option<()> {
    let elf = ElfFile::load(path)?;
    let mut mem = FlatMem::from_elf(&elf);
    let (eh_addr, eh_data) = (&elf.eh_frame.0, &elf.eh_frame.1);
    let eh = EhFrame::new(eh_data, LittleEndian);
    let mut bases = BaseAddresses::default()
        .set_eh_frame(*eh_addr)
        .set_text(elf.text);
    if let Some((h, _)) = elf.eh_frame_hdr {
        bases = bases.set_eh_frame_hdr(h);
    }
    let mut ctx: UnwindContext<usize> = UnwindContext::new();
    let mut entries = eh.entries(&bases);
    let mut fdes = Vec::new();
    let mut file_fdes = 0;
    let mut file_addrs = 0;
    let mut seed = Rng(0x1234_5678 ^ eh_data.len() as u64);
    while let Some(entry) = entries.next().unwrap() {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let fde = partial.parse(EhFrame::cie_from_offset).unwrap();
        let fde_addr = eh_addr + fde.offset() as u64;
        file_fdes += 1;
        fdes.push(Fde {
            addr: fde_addr,
            begin: fde.initial_address(),
            end: fde.end_address(),
        });
        if fde.cie().is_signal_trampoline() {
            sum.signal_fdes += 1;
        }
        let my_fde = parse_fde(&mut mem, fde_addr)
            .unwrap_or_else(|e| panic!("{}: FDE at {fde_addr:#x}: {e:?}", path.display()));
        assert_eq!(my_fde.pc_begin, fde.initial_address());
        assert_eq!(my_fde.pc_end, fde.end_address());
        assert_eq!(my_fde.cie.signal, fde.cie().is_signal_trampoline());
        // Program statistics: instruction count and remember_state depth.
        let mut n = 0;
        let mut depth = 0usize;
        for insns in [
            fde.cie().instructions(&eh, &bases),
            fde.instructions(&eh, &bases),
        ] {
            let mut insns = insns;
            while let Ok(Some(i)) = insns.next() {
                n += 1;
                match i {
                    gimli::CallFrameInstruction::RememberState => {
                        depth += 1;
                        sum.max_depth = sum.max_depth.max(depth);
                    }
                    gimli::CallFrameInstruction::RestoreState => depth = depth.saturating_sub(1),
                    gimli::CallFrameInstruction::DefCfaExpression { .. } => sum.cfa_exprs += 1,
                    gimli::CallFrameInstruction::Expression { .. }
                    | gimli::CallFrameInstruction::ValExpression { .. } => sum.reg_exprs += 1,
                    _ => {}
                }
            }
        }
        sum.max_insns = sum.max_insns.max(n);
        // The rows.
        let rows = (|| {
            let mut table = UnwindTable::new(&eh, &bases, &mut ctx, &fde)?;
            let mut rows = Vec::new();
            while let Some(row) = table.next_row()? {
                rows.push((row.start_address(), row.end_address(), theirs(row, &eh)));
            }
            Ok::<_, gimli::Error>(rows)
        })();
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                sum.gimli_errors += 1;
                let last = fde.end_address().saturating_sub(1);
                let my = row_for_pc(&mut mem, &my_fde, last);
                println!(
                    "{}: gimli fails on FDE {fde_addr:#x} ({e:?}); mine at its end: {:?}",
                    path.display(),
                    my.as_ref().map(|_| "ok").map_err(|e| *e)
                );
                if my.is_err() {
                    sum.both_err += 1;
                }
                continue;
            }
        };
        for (start, end, want) in rows {
            if start >= end {
                continue;
            }
            sum.rows += 1;
            let len = end - start;
            let mut addrs = vec![start, end - 1];
            if dense && len <= EVERY_BYTE_ROW {
                addrs.extend(start..end);
            } else {
                addrs.push(start + len / 2);
                addrs.push(start + seed.below(len));
            }
            for pc in addrs {
                let got = row_for_pc(&mut mem, &my_fde, pc).unwrap_or_else(|e| {
                    panic!("{}: FDE {fde_addr:#x} pc {pc:#x}: {e:?}", path.display())
                });
                let got = mine(&got);
                assert_eq!(
                    got,
                    want,
                    "{}: FDE {fde_addr:#x} pc {pc:#x}",
                    path.display()
                );
                file_addrs += 1;
            }
        }
    }
    sum.files += 1;
    sum.fdes += file_fdes;
    sum.addresses += file_addrs;
    check_hdr(&elf, &fdes, sum);
    println!(
        "{}: {file_fdes} FDEs, {file_addrs} addresses compared",
        path.display()
    );
    Some(())
}

/// The binary search of `.eh_frame_hdr` finds the FDE a linear scan finds: at the first and
/// last byte of every FDE and just after it (often a gap).
fn check_hdr(elf: &ElfFile, fdes: &[Fde], sum: &mut Summary) {
    let Some((hdr_addr, hdr_len)) = elf.eh_frame_hdr else {
        println!("note: {}: no .eh_frame_hdr", elf.path.display());
        return;
    };
    let mut flat = FlatMem::from_elf(elf);
    let hdr = eh_frame_hdr::parse(&mut flat, hdr_addr, hdr_len).unwrap();
    assert_eq!(hdr.eh_frame, elf.eh_frame.0);
    let live: Vec<&Fde> = fdes.iter().filter(|f| f.begin < f.end).collect();
    assert_eq!(hdr.fde_count as usize, live.len(), "{}", elf.path.display());
    let linear = |pc: u64| -> Option<u64> {
        live.iter()
            .filter(|f| f.begin <= pc && pc < f.end)
            .map(|f| f.addr)
            .next()
    };
    let mut reads = 0usize;
    for f in &live {
        for pc in [f.begin, f.end - 1, f.end] {
            let mut counted = ReadAhead::new(&mut flat, PAGE, u64::MAX, u64::MAX);
            let found = match hdr.find_fde(&mut counted, pc) {
                Ok(addr) => {
                    let fde = parse_fde(&mut counted, addr).unwrap();
                    fde.covers(pc).then_some(addr)
                }
                Err(Error::NotFound) => None,
                Err(e) => panic!("{}: lookup {pc:#x}: {e:?}", elf.path.display()),
            };
            reads = reads.max(counted.read_calls() as usize);
            assert_eq!(found, linear(pc), "{}: pc {pc:#x}", elf.path.display());
            sum.hdr_lookups += 1;
        }
    }
    // log2(n) probes, the tail, the FDE and the CIE.
    let bound = 64 - (hdr.fde_count.max(1)).leading_zeros() as usize + 4;
    assert!(reads <= bound, "{} reads for {} FDEs", reads, hdr.fde_count);
}

#[test]
fn rows_match_gimli_on_real_files() {
    let mut sum = Summary::default();
    let dir = temp_dir("gimli");
    let built = built_programs(&dir);
    let before = sum.cfa_exprs;
    for p in &built {
        check_file(p, true, &mut sum);
    }
    if built.iter().any(|p| p.ends_with("realign")) {
        // gcc's DRAP: DW_CFA_def_cfa_expression (breg6 -8; deref).
        assert!(
            sum.cfa_exprs > before,
            "the realigned program has no CFA expression"
        );
    }
    for p in system_files() {
        check_file(&p, false, &mut sum);
    }
    println!("summary: {sum:?}");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(sum.files > 0);
    assert_eq!(
        sum.gimli_errors, sum.both_err,
        "gimli failed where this unwinder did not"
    );
    assert!(
        sum.max_insns as u32 <= unwind_logic::cfi::interp::MAX_CFA_INSTRUCTIONS,
        "a real FDE needs {} instructions",
        sum.max_insns
    );
    assert!(sum.max_depth <= unwind_logic::cfi::interp::REMEMBER_DEPTH);
}

#[allow(dead_code)]
fn _memory_is_object_safe(m: &mut dyn UnwindMemory) {
    let _ = m.read(0, &mut []);
}
