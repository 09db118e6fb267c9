// SPDX-License-Identifier: GPL-2.0
//! The compact row: the form nearly every row of compiled code has, in 24 bytes, for the
//! row cache and the fast step of a warm walk.
//!
//! A row is compact when it is not a signal frame's, its CFA is a tracked register `r`
//! plus an offset, or the word there (`DW_OP_breg<r> k; DW_OP_deref`), and each register a
//! normal frame passes on to its caller (the callee-saved `%rbx`, `%rbp`, `%r12`–`%r15`,
//! plus `%rsp` and the return address: the eight *slots*) has no rule, `undefined`,
//! `same_value`, `offset(n)`, or the expression rule `DW_OP_breg<r> n` (saved at `r + n`,
//! the same `r`), with `n` a multiple of 8 in `-1024..=1016`. The rules of the other
//! registers do not matter: a normal frame does not restore them ([`super::step`]).
//! Anything else (other expressions, `register`, `val_offset`, signal frames) keeps the
//! full [`Row`] and the general [`super::step`].
//!
//! The two expression forms are those of gcc's stack-realigning functions (DRAP: a
//! function with over-aligned locals and arguments on the stack, or built with
//! `-mstackrealign`): the CFA is `[%rbp - 16]` and the callee-saved registers are saved
//! at `%rbp`-relative places, an unknown distance from the CFA. Such a frame through the
//! general step cost about 2,100 instructions (qprof, the `qsort` workload), the
//! expression machine's and a full row's copy most of it.
//!
//! Applying a compact row gives exactly what [`super::step::step`] gives for the row it
//! came from (the differential tests check it), but reads the stack through a
//! [`StackWindow`] and updates the registers in place, without building a copy of them.

use super::expr::{encode_breg, parse_breg, BREG_EXPR_MAX};
use super::memory::{ReadAhead, StackReads, StackWindow, UnwindMemory};
use super::regs::{Regs, NORMAL_FRAME_MASK, R12, R13, R14, R15, RA, RBP, RBX, REG_COUNT, RSP};
use super::row::{CfaRule, Row, Rule, ROW_EXPR_BYTES};
use super::step::Caller;
use super::{Error, Invalid};

/// Registers a compact row has a rule for.
pub const SLOTS: usize = 8;
/// The register of each slot, in register order (the order [`super::step::step`] reads
/// them in, so that the first failing read is the same).
pub const SLOT_REGS: [u16; SLOTS] = [RBX, RBP, RSP, R12, R13, R14, R15, RA];
const RBP_SLOT: usize = 1;
const RSP_SLOT: usize = 2;
const RA_SLOT: usize = 7;

// Flags of a compact row.
/// The return address has no rule or is undefined: the end of the stack.
const F_ENDS: u8 = 1;
/// The return address is `same_value`: the caller's IP is this frame's.
const F_RA_SAME: u8 = 2;
/// `%rsp` has no rule: the caller's is the CFA.
const F_SP_CFA: u8 = 4;
/// `%rsp` is `same_value`.
const F_SP_SAME: u8 = 8;
/// The row of a frame-pointer frame, the most common one of compiled code: CFA = `%rbp` +
/// 16, the caller's `%rbp` at CFA − 16 and the return address at CFA − 8 (a frame record),
/// nothing else saved or forgotten, and the caller's `%rsp` the CFA.
const F_RECORD: u8 = 16;
/// The CFA is the word at `cfa_reg + cfa_offset`, not their sum (gcc's DRAP rows:
/// `DW_OP_breg<r> k; DW_OP_deref`). The step reads it from the stack.
const F_CFA_DEREF: u8 = 32;

const TAG_EMPTY: u8 = 0;
const TAG_ROW: u8 = 1;
const TAG_FULL: u8 = 2;

/// The registers of the slots in `slots` (bit `i` for slot `i`), as a register mask (bit
/// `n` for register `n`): slot 0 is register 3, slots 1–2 registers 6–7, slots 3–7
/// registers 12–16.
#[inline]
const fn slot_regs(slots: u8) -> u32 {
    let s = slots as u32;
    ((s & 1) << RBX) | ((s & 6) << (RBP - 1)) | ((s & 0xf8) << (R12 - 3))
}

const _: () = {
    // slot_regs agrees with SLOT_REGS.
    let mut slot = 0;
    while slot < SLOTS {
        assert!(slot_regs(1 << slot) == 1 << SLOT_REGS[slot]);
        slot += 1;
    }
};

/// A row in compact form, or the mark of a row that has none ([`CompactRow::FULL`]).
///
/// All-zero bytes are [`CompactRow::EMPTY`] (no row: the row cache's empty entry).
///
/// # Invariants
///
/// For a row (`tag == TAG_ROW`): `cfa_reg < REG_COUNT`; `saved` and `forget` are
/// disjoint; `at_reg` is part of `saved`; `set` is the registers of `saved`, plus `%rsp`
/// if `F_SP_CFA`; `lo` and `span` describe the lowest and the highest offsets of the
/// `saved` slots (`span == 0` if none, if they span more than 255 words, or if they are
/// not all from a CFA known without a read: `at_reg` or `F_CFA_DEREF`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactRow {
    cfa_offset: i32,
    /// The registers the step sets (bit `n` for register `n`): the saved slots', and
    /// `%rsp` if it is the CFA.
    set: u32,
    tag: u8,
    cfa_reg: u8,
    /// The slots saved on the stack (bit `i` for slot `i`).
    saved: u8,
    /// The slots whose caller's value is unknown (`undefined`; the return address at the
    /// end of the stack).
    forget: u8,
    /// `F_*`.
    flags: u8,
    /// The lowest offset of a saved slot, in words.
    lo: i8,
    /// Words from `lo` to the highest offset of a saved slot, that one included.
    span: u8,
    /// The saved slots whose offset is from the value of `cfa_reg`, not from the CFA
    /// (gcc's DRAP rows: `DW_OP_breg<r> n`).
    at_reg: u8,
    /// The offset of each saved slot from the CFA (or `cfa_reg`, see `at_reg`), in 8-byte
    /// words.
    offsets: [i8; SLOTS],
}

impl CompactRow {
    /// No row.
    pub const EMPTY: CompactRow = CompactRow {
        cfa_offset: 0,
        set: 0,
        tag: TAG_EMPTY,
        cfa_reg: 0,
        saved: 0,
        forget: 0,
        flags: 0,
        lo: 0,
        span: 0,
        at_reg: 0,
        offsets: [0; SLOTS],
    };

    /// The mark of a row without a compact form (the row cache keeps such rows whole).
    pub const FULL: CompactRow = CompactRow {
        tag: TAG_FULL,
        ..Self::EMPTY
    };

    /// The compact form of `row`, if it has one.
    pub fn from_row(row: &Row) -> Option<CompactRow> {
        if row.signal {
            return None;
        }
        let (reg, offset, deref) = match row.rules.cfa {
            CfaRule::RegOffset { reg, offset } => (reg, offset, false),
            CfaRule::Expression(e) => match parse_breg(row.expr(e))? {
                (reg, offset, true) => (u16::from(reg), i32::try_from(offset).ok()?, true),
                _ => return None,
            },
            CfaRule::Undefined => return None,
        };
        let cfa_reg = u8::try_from(reg)
            .ok()
            .filter(|&r| usize::from(r) < REG_COUNT)?;
        let mut c = CompactRow {
            cfa_offset: offset,
            tag: TAG_ROW,
            cfa_reg,
            flags: if deref { F_CFA_DEREF } else { 0 },
            ..Self::EMPTY
        };
        let mut lo = i32::MAX;
        let mut hi = i32::MIN;
        for (slot, &reg) in SLOT_REGS.iter().enumerate() {
            let bit = 1u8 << slot;
            match (reg, row.rule(reg)) {
                (RSP, Rule::Default) => c.flags |= F_SP_CFA,
                (RSP, Rule::SameValue) => c.flags |= F_SP_SAME,
                (RA, Rule::SameValue) => c.flags |= F_RA_SAME,
                (RA, Rule::Default | Rule::Undefined) => {
                    c.flags |= F_ENDS;
                    c.forget |= bit;
                }
                (_, Rule::Default | Rule::SameValue) => {}
                (_, Rule::Undefined) => c.forget |= bit,
                (_, Rule::Offset(n)) => {
                    if n % 8 != 0 {
                        return None;
                    }
                    let words = i8::try_from(n / 8).ok()?;
                    *c.offsets.get_mut(slot)? = words;
                    c.saved |= bit;
                    lo = lo.min(i32::from(words));
                    hi = hi.max(i32::from(words));
                }
                // Saved at the CFA register plus n: with the register of the CFA only,
                // whose value the step needs anyway (so that an unknown one fails the CFA
                // first, as in the general step).
                (_, Rule::Expression(e)) => {
                    let (base, n, false) = parse_breg(row.expr(e))? else {
                        return None;
                    };
                    if base != cfa_reg || n % 8 != 0 {
                        return None;
                    }
                    *c.offsets.get_mut(slot)? = i8::try_from(n / 8).ok()?;
                    c.saved |= bit;
                    c.at_reg |= bit;
                }
                _ => return None,
            }
        }
        c.set = slot_regs(c.saved);
        if c.flags & F_SP_CFA != 0 {
            c.set |= 1 << RSP;
        }
        if lo <= hi && c.at_reg == 0 && !deref {
            // Both are i8: no overflow; a span over 255 words is not prefetched.
            c.lo = lo as i8;
            c.span = u8::try_from(hi - lo + 1).unwrap_or(0);
        }
        let record_slots = (1 << RBP_SLOT) | (1 << RA_SLOT);
        if c.cfa_reg == RBP as u8
            && c.cfa_offset == 16
            && c.saved == record_slots
            && c.at_reg == 0
            && c.forget == 0
            && c.flags == F_SP_CFA
            && c.offsets.get(RBP_SLOT) == Some(&-2)
            && c.offsets.get(RA_SLOT) == Some(&-1)
        {
            c.flags |= F_RECORD;
        }
        // INVARIANT: cfa_reg < REG_COUNT; a slot is saved, forgotten or neither; set, lo
        // and span as documented.
        Some(c)
    }

    /// The row as three words, for the row table all CPUs share
    /// ([`super::shared_rows::SharedRows`]), which keeps rows in atomics.
    pub fn to_words(&self) -> [u64; 3] {
        let c = self.cfa_offset.to_le_bytes();
        let s = self.set.to_le_bytes();
        let o = self.offsets.map(|w| w as u8);
        [
            u64::from_le_bytes([c[0], c[1], c[2], c[3], s[0], s[1], s[2], s[3]]),
            u64::from_le_bytes([
                self.tag,
                self.cfa_reg,
                self.saved,
                self.forget,
                self.flags,
                self.lo as u8,
                self.span,
                self.at_reg,
            ]),
            u64::from_le_bytes(o),
        ]
    }

    /// The row whose [`CompactRow::to_words`] are `words`, if there is one: words no row
    /// gives (an empty entry's, the marks', most bytes) are `None`, never a row that
    /// breaks the type's invariants.
    pub fn from_words(words: [u64; 3]) -> Option<CompactRow> {
        let [c0, c1, c2, c3, s0, s1, s2, s3] = words[0].to_le_bytes();
        let [tag, cfa_reg, saved, forget, flags, lo, span, at_reg] = words[1].to_le_bytes();
        let c = CompactRow {
            cfa_offset: i32::from_le_bytes([c0, c1, c2, c3]),
            set: u32::from_le_bytes([s0, s1, s2, s3]),
            tag,
            cfa_reg,
            saved,
            forget,
            flags,
            lo: lo as i8,
            span,
            at_reg,
            offsets: words[2].to_le_bytes().map(|b| b as i8),
        };
        // What from_row makes of the rules the row stands for, field by field (the tests
        // check that from_row(to_row()) gives back every row accepted here): through
        // to_row and from_row the check cost about 320 instructions, and a walk of a large
        // program makes it several times an event.
        (c.tag == TAG_ROW && usize::from(c.cfa_reg) < REG_COUNT && c.derived_fields_agree())
            .then_some(c)
    }

    /// Whether the fields of a row (`cfa_reg` checked) agree as [`CompactRow::from_row`]
    /// sets them: every slot at most one of saved or forgotten; the stack pointer's slot,
    /// with no rule (`F_SP_CFA`) or `same_value` (`F_SP_SAME`), neither; the return
    /// address's `same_value` (`F_RA_SAME`) neither, and forgotten exactly when the stack
    /// ends (`F_ENDS`); no other flag but `F_RECORD`, set exactly for a frame record, and
    /// `F_CFA_DEREF`; the slots saved at the CFA register's value among the saved ones; the
    /// offsets of slots not saved zero; `set`, `lo` and `span` from the saved slots.
    fn derived_fields_agree(&self) -> bool {
        const RSP_BIT: u8 = 1 << RSP_SLOT;
        const RA_BIT: u8 = 1 << RA_SLOT;
        let f = self.flags;
        let has = |bits: u8, flag: u8| u8::from(bits & flag != 0);
        // The stack pointer's rule is one of: no rule, same_value, undefined, an offset;
        // the return address's one of: same_value, none or undefined (the end), an offset.
        let sp_rules = has(f, F_SP_CFA)
            + has(f, F_SP_SAME)
            + has(self.forget, RSP_BIT)
            + has(self.saved, RSP_BIT);
        let ra_rules = has(f, F_RA_SAME) + has(f, F_ENDS) + has(self.saved, RA_BIT);
        let slots_ok = self.saved & self.forget == 0
            && self.at_reg & !self.saved == 0
            && f & !(F_ENDS | F_RA_SAME | F_SP_CFA | F_SP_SAME | F_RECORD | F_CFA_DEREF) == 0
            && sp_rules == 1
            && ra_rules == 1
            && (f & F_ENDS != 0) == (self.forget & RA_BIT != 0);
        if !slots_ok {
            return false;
        }
        let mut set = slot_regs(self.saved);
        if f & F_SP_CFA != 0 {
            set |= 1 << RSP;
        }
        let (mut lo, mut hi) = (i32::MAX, i32::MIN);
        for (slot, &words) in self.offsets.iter().enumerate() {
            if self.saved & (1 << slot) != 0 {
                lo = lo.min(i32::from(words));
                hi = hi.max(i32::from(words));
            } else if words != 0 {
                return false;
            }
        }
        let (lo, span) = if lo <= hi && self.at_reg == 0 && f & F_CFA_DEREF == 0 {
            // Both are i8: no overflow.
            (lo as i8, u8::try_from(hi - lo + 1).unwrap_or(0))
        } else {
            (0, 0)
        };
        let record = self.cfa_reg == RBP as u8
            && self.cfa_offset == 16
            && self.saved == (1 << RBP_SLOT) | RA_BIT
            && self.at_reg == 0
            && self.forget == 0
            && f & !F_RECORD == F_SP_CFA
            && self.offsets.get(RBP_SLOT) == Some(&-2)
            && self.offsets.get(RA_SLOT) == Some(&-1);
        self.set == set && self.lo == lo && self.span == span && (f & F_RECORD != 0) == record
    }

    /// Whether this is a row (not [`CompactRow::EMPTY`] nor [`CompactRow::FULL`]).
    #[inline]
    pub fn is_row(&self) -> bool {
        self.tag == TAG_ROW
    }

    /// Whether this is the row of a frame-pointer frame (see `F_RECORD`): its step is the
    /// frame-pointer step, keeping what CFI knows of the other callee-saved registers.
    #[inline(always)]
    pub fn is_frame_record(&self) -> bool {
        self.flags & F_RECORD != 0
    }

    /// The registers the step of this row sets.
    #[inline(always)]
    pub fn sets(&self) -> u32 {
        self.set
    }

    /// Whether this is the mark of a row without a compact form.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.tag == TAG_FULL
    }

    /// Whether this is no row at all.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tag == TAG_EMPTY
    }

    /// A full row with the same effect ([`Row::EMPTY`] for a non-row): the rules of the
    /// registers outside the slots, which a normal frame does not restore, are lost.
    pub fn to_row(self) -> Row {
        let mut row = Row::EMPTY;
        if !self.is_row() {
            return row;
        }
        // `DW_OP_breg<cfa_reg> offset`, and `DW_OP_deref`: at most nine, of at most
        // BREG_EXPR_MAX bytes each, which a row has room for (so they never fail).
        const _: () = assert!((SLOTS + 1) * BREG_EXPR_MAX <= ROW_EXPR_BYTES);
        let breg = |row: &mut Row, offset: i64, deref: bool| {
            let mut bytes = [0u8; BREG_EXPR_MAX];
            let len = encode_breg(self.cfa_reg, offset, deref, &mut bytes);
            row.add_expr(bytes.get(..len).unwrap_or(&[]))
                .unwrap_or_default()
        };
        row.rules.cfa = if self.flags & F_CFA_DEREF != 0 {
            CfaRule::Expression(breg(&mut row, i64::from(self.cfa_offset), true))
        } else {
            CfaRule::RegOffset {
                reg: u16::from(self.cfa_reg),
                offset: self.cfa_offset,
            }
        };
        for (slot, (&reg, &words)) in SLOT_REGS.iter().zip(self.offsets.iter()).enumerate() {
            let bit = 1u8 << slot;
            let rule = if self.at_reg & bit != 0 {
                Rule::Expression(breg(&mut row, i64::from(words) * 8, false))
            } else if self.saved & bit != 0 {
                Rule::Offset(i32::from(words).wrapping_mul(8))
            } else if reg == RA {
                if self.flags & F_RA_SAME != 0 {
                    Rule::SameValue
                } else {
                    Rule::Default
                }
            } else if reg == RSP && self.flags & F_SP_SAME != 0 {
                Rule::SameValue
            } else if self.forget & bit != 0 {
                Rule::Undefined
            } else {
                Rule::Default
            };
            if let Some(r) = row.rules.regs.get_mut(usize::from(reg)) {
                *r = rule;
            }
        }
        row
    }

    /// The CFA of a frame with registers `regs`, if the registers alone give it: `None`
    /// if its register is unknown, or if it is read from the stack (`F_CFA_DEREF`: then
    /// [`CompactRow::cfa`] reads it).
    #[inline(always)]
    pub fn cfa_of_regs(&self, regs: &Regs) -> Option<u64> {
        if self.flags & F_CFA_DEREF != 0 {
            return None;
        }
        let base = regs.get(u16::from(self.cfa_reg))?;
        Some(base.wrapping_add(self.cfa_offset as i64 as u64))
    }

    /// The CFA of a frame with registers `regs`, read through `window` if the row says so.
    #[inline]
    pub fn cfa<M: UnwindMemory>(
        &self,
        regs: &Regs,
        window: &mut StackWindow,
        mem: &mut ReadAhead<M>,
    ) -> Result<u64, Error> {
        let base = regs
            .get(u16::from(self.cfa_reg))
            .ok_or(Error::Invalid(Invalid::UnknownRegister))?;
        let at = base.wrapping_add(self.cfa_offset as i64 as u64);
        if self.flags & F_CFA_DEREF == 0 {
            return Ok(at);
        }
        window.u64(mem, at)
    }

    /// The fast path of a step: makes the window hold every saved register of the frame
    /// whose CFA is `cfa` (usually they lie within a few words below it, often in the
    /// window already), and returns the window offset of the CFA (wrapping: it may lie
    /// past the window's end), to read them with [`CompactRow::saved_word`]: reads that
    /// cannot fail. `None` if the window cannot hold them all (a fault, a misaligned
    /// frame, a span over a window, slots saved at a register's place): then
    /// [`CompactRow::read_saved`] reads them one by one.
    #[inline(always)]
    pub fn in_window<M: UnwindMemory>(
        &self,
        cfa: u64,
        window: &mut StackWindow,
        mem: &mut ReadAhead<M>,
    ) -> Option<usize> {
        if self.saved == 0 {
            return Some(0);
        }
        if self.span == 0 {
            return None;
        }
        let lo_bytes = (i64::from(self.lo) as u64).wrapping_shl(3);
        let len = usize::from(self.span).wrapping_shl(3);
        let start = window.hold(mem, cfa.wrapping_add(lo_bytes), len)?;
        if start & 7 != 0 {
            return None;
        }
        Some(start.wrapping_sub(lo_bytes as usize))
    }

    /// The value saved for `slot`, from a window that [`CompactRow::in_window`] made hold
    /// it, with the CFA at offset `cfa_at`.
    #[inline(always)]
    fn saved_word(&self, window: &StackWindow, cfa_at: usize, slot: usize) -> u64 {
        let words = self.offsets.get(slot).copied().unwrap_or(0);
        // In the window, a multiple of 8: `lo <= words <= hi` (see `in_window`).
        window.word(cfa_at.wrapping_add((isize::from(words) as usize).wrapping_shl(3)))
    }

    /// The caller's IP and stack pointer, from a window that [`CompactRow::in_window`] made
    /// hold the saved registers (the row does not end the stack).
    #[inline(always)]
    pub fn caller_ip_sp_in_window(
        &self,
        regs: &Regs,
        cfa: u64,
        window: &StackWindow,
        cfa_at: usize,
    ) -> Result<(u64, u64), Error> {
        self.caller_ip_sp_from(regs, cfa, |slot| self.saved_word(window, cfa_at, slot))
    }

    /// The caller's IP and stack pointer, with `saved(slot)` the value saved in a slot the
    /// row saves: the one rule behind both ways of reading them.
    #[inline(always)]
    fn caller_ip_sp_from(
        &self,
        regs: &Regs,
        cfa: u64,
        saved: impl Fn(usize) -> u64,
    ) -> Result<(u64, u64), Error> {
        let unknown = Error::Invalid(Invalid::UnknownRegister);
        let ip = if self.saved & (1 << RA_SLOT) != 0 {
            saved(RA_SLOT)
        } else if self.flags & F_RA_SAME != 0 {
            regs.get(RA).ok_or(unknown)?
        } else {
            return Err(unknown);
        };
        let sp = if self.saved & (1 << RSP_SLOT) != 0 {
            saved(RSP_SLOT)
        } else if self.flags & F_SP_CFA != 0 {
            cfa
        } else if self.flags & F_SP_SAME != 0 {
            regs.get(RSP).ok_or(unknown)?
        } else {
            return Err(unknown);
        };
        Ok((ip, sp))
    }

    /// Makes `regs` the caller's registers, from a window that [`CompactRow::in_window`]
    /// made hold the saved registers.
    #[inline(always)]
    pub fn commit_in_window(&self, regs: &mut Regs, cfa: u64, window: &StackWindow, cfa_at: usize) {
        // Every slot in turn, written out: a test, a load and a store per slot, with its
        // register a constant, shorter than finding the next saved slot and its register
        // at each turn (a python3 frame saves six); the kernel's opt-level does not unroll
        // the loop of eight.
        let mut restore = |slot: usize| {
            if self.saved & (1 << slot) != 0 {
                regs.set_value(SLOT_REGS[slot], self.saved_word(window, cfa_at, slot));
            }
        };
        restore(0);
        restore(1);
        restore(2);
        restore(3);
        restore(4);
        restore(5);
        restore(6);
        restore(7);
        const _: () = assert!(SLOTS == 8);
        if self.flags & F_SP_CFA != 0 {
            regs.set_value(RSP, cfa);
        }
        regs.update_known(self.keep(), self.set);
    }

    /// The registers whose caller's value is known if this frame's is: a normal frame does
    /// not preserve the caller-saved registers, nor the undefined ones.
    #[inline(always)]
    fn keep(&self) -> u32 {
        if self.forget == 0 {
            NORMAL_FRAME_MASK
        } else {
            NORMAL_FRAME_MASK & !slot_regs(self.forget)
        }
    }

    /// Reads the saved registers of the frame whose registers are `regs` and CFA `cfa`
    /// into `values` (slot `i` into `values[i]`; the other slots are left alone) one by
    /// one, in register order (the slow path, when [`CompactRow::in_window`] fails: the
    /// first read that fails is the one [`super::step::step`] would fail on).
    pub fn read_saved<M: UnwindMemory>(
        &self,
        regs: &Regs,
        cfa: u64,
        window: &mut StackWindow,
        mem: &mut ReadAhead<M>,
        values: &mut [u64; SLOTS],
    ) -> Result<(), Error> {
        // The CFA register is known: the CFA came from it.
        let reg_base = regs.get(u16::from(self.cfa_reg)).unwrap_or(0);
        let mut left = self.saved;
        // Bounded: each iteration clears one of the 8 bits.
        while left != 0 {
            let slot = (left.trailing_zeros() & 7) as usize;
            left &= left.wrapping_sub(1);
            let (Some(&words), Some(value)) = (self.offsets.get(slot), values.get_mut(slot)) else {
                continue;
            };
            let base = if self.at_reg & (1 << slot) != 0 {
                reg_base
            } else {
                cfa
            };
            let addr = base.wrapping_add((i64::from(words) as u64).wrapping_shl(3));
            *value = window.u64(mem, addr)?;
        }
        Ok(())
    }

    /// Whether the row ends the stack (the return address has no rule or is undefined).
    #[inline]
    pub fn ends(&self) -> bool {
        self.flags & F_ENDS != 0
    }

    /// The caller's IP and stack pointer, after [`CompactRow::read_saved`] (the row does not
    /// end the stack).
    #[inline]
    pub fn caller_ip_sp(
        &self,
        regs: &Regs,
        cfa: u64,
        values: &[u64; SLOTS],
    ) -> Result<(u64, u64), Error> {
        self.caller_ip_sp_from(regs, cfa, |slot| values.get(slot).copied().unwrap_or(0))
    }

    /// Makes `regs` the caller's registers, after [`CompactRow::read_saved`] into `values`
    /// (which held the slots' values in `regs` before).
    #[inline]
    pub fn commit(&self, regs: &mut Regs, cfa: u64, mut values: [u64; SLOTS]) {
        if self.flags & F_SP_CFA != 0 {
            values[RSP_SLOT] = cfa;
        }
        regs.scatter(&SLOT_REGS, &values);
        regs.update_known(self.keep(), self.set);
    }
}

impl Default for CompactRow {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// Applies a compact row to `regs` as [`super::step::step`] applies a full one (the tests
/// compare the two): the caller's registers, `Ok(None)` at the end of the stack.
pub fn step_compact<M: UnwindMemory>(
    row: &CompactRow,
    regs: &Regs,
    window: &mut StackWindow,
    mem: &mut ReadAhead<M>,
) -> Result<Option<Caller>, Error> {
    if !row.is_row() {
        // Not a row: as a row without a CFA rule.
        return Err(super::MALFORMED);
    }
    let cfa = row.cfa(regs, window, mem)?;
    let mut caller = *regs;
    if let Some(cfa_at) = row.in_window(cfa, window, mem) {
        if row.ends() {
            return Ok(None);
        }
        row.caller_ip_sp_in_window(regs, cfa, window, cfa_at)?;
        row.commit_in_window(&mut caller, cfa, window, cfa_at);
        return Ok(Some(Caller { regs: caller, cfa }));
    }
    let mut values = regs.gather(&SLOT_REGS);
    row.read_saved(regs, cfa, window, mem, &mut values)?;
    if row.ends() {
        return Ok(None);
    }
    row.caller_ip_sp(regs, cfa, &values)?;
    row.commit(&mut caller, cfa, values);
    Ok(Some(Caller { regs: caller, cfa }))
}

/// [`super::step::step`] reading the stack through a [`StackWindow`] (for rows without a
/// compact form). Not inlined: its frame exists only while it runs.
#[inline(never)]
pub fn step_windowed<M: UnwindMemory>(
    row: &Row,
    regs: &Regs,
    window: &mut StackWindow,
    mem: &mut ReadAhead<M>,
) -> Result<Option<Caller>, Error> {
    super::step::step(row, regs, &mut StackReads { window, mem })
}
