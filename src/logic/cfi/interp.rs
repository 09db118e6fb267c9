// SPDX-License-Identifier: GPL-2.0
//! The CFA program interpreter: runs a CIE's initial instructions, then an FDE's up to a PC,
//! and returns the row in effect at that PC.
//!
//! The row in effect at `pc` is the one whose location range holds it: the interpreter
//! advances while the next location is `<= pc` and stops at the first advance past it.

use super::eh_frame::{Cie, Fde};
use super::encoding::read_encoded;
use super::memory::{Cursor, UnwindMemory};
use super::regs::{RA, REG_COUNT};
use super::row::{CfaRule, ExprRef, Row, Rule, Rules, MAX_EXPR_LEN};
use super::{unsupported, Error, Unsupported, MALFORMED};

/// Most CFA instructions executed for one row (the CIE's and the FDE's together). Most
/// programs are short (99% of the FDEs of Debian's libclang-cpp under 60 instructions),
/// but the largest functions of big C++ and Rust programs have thousands: 6,320 in
/// libclang-cpp 19, 7,150 in rustc 1.95's cargo, 20,446 in gcc 12's cc1plus (4,096, the
/// bound before, stopped their walks there). An instruction is at least a byte, and
/// a walk reads at most [`MAX_BYTES_PER_WALK`] bytes, so this bound, the same size, refuses
/// no program a walk could read; it bounds the work a row costs when the bytes come from
/// the reader's window again (a CIE's, a program of one-byte instructions).
///
/// [`MAX_BYTES_PER_WALK`]: super::memory::MAX_BYTES_PER_WALK
pub const MAX_CFA_INSTRUCTIONS: u32 = 64 * 1024;
/// Deepest `DW_CFA_remember_state` nesting (compilers nest one level; gimli allows 2–3).
pub const REMEMBER_DEPTH: usize = 4;

/// Instruction opcodes (DWARF 5, 6.4.2, and the GNU extensions).
mod op {
    pub(super) const ADVANCE_LOC: u8 = 0x40;
    pub(super) const OFFSET: u8 = 0x80;
    pub(super) const RESTORE: u8 = 0xc0;
    pub(super) const NOP: u8 = 0x00;
    pub(super) const SET_LOC: u8 = 0x01;
    pub(super) const ADVANCE_LOC1: u8 = 0x02;
    pub(super) const ADVANCE_LOC2: u8 = 0x03;
    pub(super) const ADVANCE_LOC4: u8 = 0x04;
    pub(super) const OFFSET_EXTENDED: u8 = 0x05;
    pub(super) const RESTORE_EXTENDED: u8 = 0x06;
    pub(super) const UNDEFINED: u8 = 0x07;
    pub(super) const SAME_VALUE: u8 = 0x08;
    pub(super) const REGISTER: u8 = 0x09;
    pub(super) const REMEMBER_STATE: u8 = 0x0a;
    pub(super) const RESTORE_STATE: u8 = 0x0b;
    pub(super) const DEF_CFA: u8 = 0x0c;
    pub(super) const DEF_CFA_REGISTER: u8 = 0x0d;
    pub(super) const DEF_CFA_OFFSET: u8 = 0x0e;
    pub(super) const DEF_CFA_EXPRESSION: u8 = 0x0f;
    pub(super) const EXPRESSION: u8 = 0x10;
    pub(super) const OFFSET_EXTENDED_SF: u8 = 0x11;
    pub(super) const DEF_CFA_SF: u8 = 0x12;
    pub(super) const DEF_CFA_OFFSET_SF: u8 = 0x13;
    pub(super) const VAL_OFFSET: u8 = 0x14;
    pub(super) const VAL_OFFSET_SF: u8 = 0x15;
    pub(super) const VAL_EXPRESSION: u8 = 0x16;
    pub(super) const GNU_ARGS_SIZE: u8 = 0x2e;
    pub(super) const GNU_NEGATIVE_OFFSET_EXTENDED: u8 = 0x2f;
}

/// Computes the row in effect at `pc` in `fde` (which must cover it, else
/// [`Error::NotFound`]), reading the instructions through `mem`.
pub fn row_for_pc<M: UnwindMemory>(mem: &mut M, fde: &Fde, pc: u64) -> Result<Row, Error> {
    let mut row = Row::EMPTY;
    row_for_pc_into(mem, fde, pc, &mut row)?;
    Ok(row)
}

/// [`row_for_pc`] into `out` (which holds some partial row after an error): the walk
/// keeps a single row on its stack.
pub fn row_for_pc_into<M: UnwindMemory>(
    mem: &mut M,
    fde: &Fde,
    pc: u64,
    out: &mut Row,
) -> Result<(), Error> {
    if !fde.covers(pc) {
        return Err(Error::NotFound);
    }
    *out = Row::EMPTY;
    let mut m = Machine {
        row: out,
        initial: Rules::EMPTY,
        stack: [Rules::EMPTY; REMEMBER_DEPTH],
        depth: 0,
        executed: 0,
    };
    m.row.signal = fde.cie.signal;
    m.run(mem, &fde.cie, fde.cie.instructions, fde.cie.end, None)?;
    m.initial = m.row.rules;
    // Remembered states do not outlive the CIE's program.
    m.depth = 0;
    m.run(
        mem,
        &fde.cie,
        fde.instructions,
        fde.end,
        Some(Target {
            loc: fde.pc_begin,
            pc,
        }),
    )?;
    m.finish()
}

/// The location of the row being built and the PC whose row is wanted (FDE programs only).
struct Target {
    loc: u64,
    pc: u64,
}

/// The interpreter's state.
///
/// # Invariants
///
/// `depth <= REMEMBER_DEPTH`; `stack[..depth]` are the remembered states; every
/// [`ExprRef`] anywhere refers to `row`'s expression bytes.
struct Machine<'r> {
    row: &'r mut Row,
    initial: Rules,
    stack: [Rules; REMEMBER_DEPTH],
    depth: usize,
    executed: u32,
}

/// A register number operand: at most 16 bits (as gimli), else malformed.
fn reg_of(n: u64) -> Result<u16, Error> {
    u16::try_from(n).map_err(|_| MALFORMED)
}

/// An offset that a row stores in 32 bits.
fn off32(n: i64) -> Result<i32, Error> {
    i32::try_from(n).map_err(|_| unsupported(Unsupported::Offset))
}

/// Whether the row has a column for `reg`.
fn tracked(reg: u16) -> bool {
    usize::from(reg) < REG_COUNT
}

impl Machine<'_> {
    /// Sets the rule of `reg` (untracked registers: ignored).
    fn set(&mut self, reg: u16, rule: Rule) {
        if let Some(slot) = self.row.rules.regs.get_mut(usize::from(reg)) {
            *slot = rule;
        }
    }

    /// Reads an expression of `len` bytes; stores it in the row if `keep`, else skips it.
    fn expr<M: UnwindMemory>(
        &mut self,
        cur: &mut Cursor<'_, M>,
        keep: bool,
    ) -> Result<Option<ExprRef>, Error> {
        let len = cur.uleb()?;
        if !keep {
            cur.skip(len)?;
            return Ok(None);
        }
        if len > MAX_EXPR_LEN as u64 {
            return Err(unsupported(Unsupported::ExpressionLength));
        }
        let mut buf = [0u8; MAX_EXPR_LEN];
        let bytes = buf.get_mut(..len as usize).ok_or(MALFORMED)?;
        cur.bytes(bytes)?;
        self.row.add_expr(bytes).map(Some)
    }

    /// The CFA rule as a register and offset, to change one of them (gimli's default rule
    /// is register 0, offset 0; an expression cannot be changed that way).
    fn cfa_reg_offset(&self) -> Result<(u16, i32), Error> {
        match self.row.rules.cfa {
            CfaRule::Undefined => Ok((0, 0)),
            CfaRule::RegOffset { reg, offset } => Ok((reg, offset)),
            CfaRule::Expression(_) => Err(MALFORMED),
        }
    }

    /// Moves the location to `new`; returns whether the row at the target PC is complete.
    fn advance(target: &mut Option<Target>, new: Option<u64>) -> Result<bool, Error> {
        // CIE programs have no location: advances only end a row nobody looks at.
        let Some(t) = target.as_mut() else {
            return Ok(false);
        };
        let new = new.ok_or(MALFORMED)?;
        if new > t.pc {
            return Ok(true);
        }
        t.loc = new;
        Ok(false)
    }

    /// Runs the instructions at `start..end`: a CIE's (`target` is `None`) or an FDE's up
    /// to the target PC.
    fn run<M: UnwindMemory>(
        &mut self,
        mem: &mut M,
        cie: &Cie,
        start: u64,
        end: u64,
        mut target: Option<Target>,
    ) -> Result<(), Error> {
        let mut cur = Cursor::new(mem, start, end);
        let caf = cie.code_align;
        let daf = cie.data_align;
        let in_fde = target.is_some();
        // Bounded: each iteration counts one instruction against MAX_CFA_INSTRUCTIONS.
        while !cur.at_end() {
            self.executed = self.executed.wrapping_add(1);
            if self.executed > MAX_CFA_INSTRUCTIONS {
                return Err(unsupported(Unsupported::TooManyInstructions));
            }
            let opcode = cur.u8()?;
            let low = opcode & 0x3f;
            let loc = target.as_ref().map_or(0, |t| t.loc);
            let done = match opcode & 0xc0 {
                op::ADVANCE_LOC => {
                    let delta = u64::from(low).checked_mul(caf);
                    Self::advance(&mut target, delta.and_then(|d| loc.checked_add(d)))?
                }
                op::OFFSET => {
                    let n = (cur.uleb()? as i64).wrapping_mul(daf);
                    self.offset(u16::from(low), n, Rule::Offset)?;
                    false
                }
                op::RESTORE => {
                    self.restore(u16::from(low), in_fde)?;
                    false
                }
                _ => match opcode {
                    op::NOP => false,
                    op::SET_LOC => {
                        let new = read_encoded(&mut cur, cie.fde_encoding, None)?;
                        if in_fde && new < loc {
                            return Err(MALFORMED);
                        }
                        Self::advance(&mut target, Some(new))?
                    }
                    op::ADVANCE_LOC1 | op::ADVANCE_LOC2 | op::ADVANCE_LOC4 => {
                        let delta = match opcode {
                            op::ADVANCE_LOC1 => u64::from(cur.u8()?),
                            op::ADVANCE_LOC2 => u64::from(cur.u16()?),
                            _ => u64::from(cur.u32()?),
                        };
                        let new = delta.checked_mul(caf).and_then(|d| loc.checked_add(d));
                        Self::advance(&mut target, new)?
                    }
                    op::OFFSET_EXTENDED | op::VAL_OFFSET | op::GNU_NEGATIVE_OFFSET_EXTENDED => {
                        let reg = reg_of(cur.uleb()?)?;
                        let n = (cur.uleb()? as i64).wrapping_mul(daf);
                        match opcode {
                            op::OFFSET_EXTENDED => self.offset(reg, n, Rule::Offset)?,
                            op::VAL_OFFSET => self.offset(reg, n, Rule::ValOffset)?,
                            _ => self.offset(reg, n.wrapping_neg(), Rule::Offset)?,
                        }
                        false
                    }
                    op::OFFSET_EXTENDED_SF | op::VAL_OFFSET_SF => {
                        let reg = reg_of(cur.uleb()?)?;
                        let n = cur.sleb()?.wrapping_mul(daf);
                        if opcode == op::OFFSET_EXTENDED_SF {
                            self.offset(reg, n, Rule::Offset)?;
                        } else {
                            self.offset(reg, n, Rule::ValOffset)?;
                        }
                        false
                    }
                    op::RESTORE_EXTENDED => {
                        let reg = reg_of(cur.uleb()?)?;
                        self.restore(reg, in_fde)?;
                        false
                    }
                    op::UNDEFINED | op::SAME_VALUE => {
                        let reg = reg_of(cur.uleb()?)?;
                        let rule = if opcode == op::UNDEFINED {
                            Rule::Undefined
                        } else {
                            Rule::SameValue
                        };
                        self.set(reg, rule);
                        false
                    }
                    op::REGISTER => {
                        let reg = reg_of(cur.uleb()?)?;
                        let src = reg_of(cur.uleb()?)?;
                        self.set(reg, Rule::Register(src));
                        false
                    }
                    op::REMEMBER_STATE => {
                        let slot = self
                            .stack
                            .get_mut(self.depth)
                            .ok_or(unsupported(Unsupported::RememberDepth))?;
                        *slot = self.row.rules;
                        // INVARIANT: the slot existed, so depth < REMEMBER_DEPTH.
                        self.depth += 1;
                        false
                    }
                    op::RESTORE_STATE => {
                        let depth = self.depth.checked_sub(1).ok_or(MALFORMED)?;
                        self.row.rules = *self.stack.get(depth).ok_or(MALFORMED)?;
                        self.depth = depth;
                        false
                    }
                    op::DEF_CFA | op::DEF_CFA_SF => {
                        let reg = reg_of(cur.uleb()?)?;
                        let offset = if opcode == op::DEF_CFA {
                            cur.uleb()? as i64
                        } else {
                            cur.sleb()?.wrapping_mul(daf)
                        };
                        self.row.rules.cfa = CfaRule::RegOffset {
                            reg,
                            offset: off32(offset)?,
                        };
                        false
                    }
                    op::DEF_CFA_REGISTER => {
                        let reg = reg_of(cur.uleb()?)?;
                        let (_, offset) = self.cfa_reg_offset()?;
                        self.row.rules.cfa = CfaRule::RegOffset { reg, offset };
                        false
                    }
                    op::DEF_CFA_OFFSET | op::DEF_CFA_OFFSET_SF => {
                        let offset = if opcode == op::DEF_CFA_OFFSET {
                            cur.uleb()? as i64
                        } else {
                            cur.sleb()?.wrapping_mul(daf)
                        };
                        let (reg, _) = self.cfa_reg_offset()?;
                        self.row.rules.cfa = CfaRule::RegOffset {
                            reg,
                            offset: off32(offset)?,
                        };
                        false
                    }
                    op::DEF_CFA_EXPRESSION => {
                        if let Some(e) = self.expr(&mut cur, true)? {
                            self.row.rules.cfa = CfaRule::Expression(e);
                        }
                        false
                    }
                    op::EXPRESSION | op::VAL_EXPRESSION => {
                        let reg = reg_of(cur.uleb()?)?;
                        if let Some(e) = self.expr(&mut cur, tracked(reg))? {
                            let rule = if opcode == op::EXPRESSION {
                                Rule::Expression(e)
                            } else {
                                Rule::ValExpression(e)
                            };
                            self.set(reg, rule);
                        }
                        false
                    }
                    op::GNU_ARGS_SIZE => {
                        cur.uleb()?;
                        false
                    }
                    _ => return Err(unsupported(Unsupported::Instruction)),
                },
            };
            if done {
                break;
            }
        }
        Ok(())
    }

    /// An offset rule (`Offset` or `ValOffset`) for `reg` at CFA + `n`.
    fn offset(&mut self, reg: u16, n: i64, make: fn(i32) -> Rule) -> Result<(), Error> {
        if tracked(reg) {
            self.set(reg, make(off32(n)?));
        }
        Ok(())
    }

    /// `DW_CFA_restore`: the rule the CIE's program left (not allowed in a CIE).
    fn restore(&mut self, reg: u16, in_fde: bool) -> Result<(), Error> {
        if !in_fde {
            return Err(MALFORMED);
        }
        if let Some(&rule) = self.initial.regs.get(usize::from(reg)) {
            self.set(reg, rule);
        }
        Ok(())
    }

    /// The row, if the CFA and the return address are computable from tracked registers.
    fn finish(self) -> Result<(), Error> {
        match self.row.rules.cfa {
            CfaRule::Undefined => return Err(MALFORMED),
            CfaRule::RegOffset { reg, .. } if !tracked(reg) => {
                return Err(unsupported(Unsupported::Register))
            }
            _ => {}
        }
        if let Rule::Register(src) = self.row.rule(RA) {
            if !tracked(src) {
                return Err(unsupported(Unsupported::Register));
            }
        }
        Ok(())
    }
}
