// SPDX-License-Identifier: GPL-2.0
//! One frame up: applying a [`Row`] to the registers of a frame gives the caller's.
//!
//! * The CFA comes from the CFA rule; the caller's `%rsp` is the CFA (unless a signal frame
//!   gives `%rsp` a rule of its own), its `%rip` the return address column's value.
//! * A register with a rule takes the value of the rule. In a normal frame only the
//!   callee-saved registers (`%rbx`, `%rbp`, `%r12`–`%r15`), `%rsp` and the return address
//!   are restored: the others are not preserved across a call, whatever the CFI says. In a
//!   signal frame (CIE augmentation `S`) every register with a rule is restored: the frame
//!   saved all of them (glibc's `__restore_rt` gives a rule for each).
//! * A register without a rule keeps its value if it is callee-saved, else becomes unknown.
//! * An undefined return address is the end of the stack (glibc's `_start` and `clone`).

use super::expr::eval;
use super::memory::{read_u64, UnwindMemory};
use super::regs::{is_callee_saved, Regs, RA, RSP};
use super::row::{CfaRule, Row, Rule};
use super::{Error, Invalid, MALFORMED};

/// The caller's frame, as computed by [`step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// The caller's registers (`RA` is its IP).
    pub regs: Regs,
    /// The CFA of the frame just unwound.
    pub cfa: u64,
}

/// The value of the CFA of a frame with registers `regs` under `row`.
pub fn cfa<M: UnwindMemory>(row: &Row, regs: &Regs, mem: &mut M) -> Result<u64, Error> {
    match row.rules.cfa {
        CfaRule::Undefined => Err(MALFORMED),
        CfaRule::RegOffset { reg, offset } => {
            let base = regs
                .get(reg)
                .ok_or(Error::Invalid(Invalid::UnknownRegister))?;
            Ok(base.wrapping_add(offset as i64 as u64))
        }
        CfaRule::Expression(e) => eval(row.expr(e), regs, mem, None),
    }
}

/// Announces the range of the stack that holds the saved registers, so that a windowed
/// reader reads it in one go before the register reads that follow (the return address and
/// the saved registers usually lie within 64 bytes below the CFA).
fn prefetch<M: UnwindMemory>(row: &Row, cfa: u64, mem: &mut M) {
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    for (reg, rule) in (0u16..).zip(row.rules.regs.iter()) {
        if let Rule::Offset(n) = *rule {
            if row.signal || is_callee_saved(reg) || reg == RA || reg == RSP {
                lo = lo.min(i64::from(n));
                hi = hi.max(i64::from(n));
            }
        }
    }
    // Both ends are 32-bit: no overflow.
    if lo <= hi {
        if let Ok(len) = usize::try_from(hi - lo + 8) {
            mem.prefetch(cfa.wrapping_add(lo as u64), len);
        }
    }
}

/// Unwinds one frame: the registers of the caller of the frame with registers `regs`,
/// under its `row`. `Ok(None)` is the end of the stack (the return address is undefined).
pub fn step<M: UnwindMemory>(row: &Row, regs: &Regs, mem: &mut M) -> Result<Option<Caller>, Error> {
    let cfa = cfa(row, regs, mem)?;
    prefetch(row, cfa, mem);
    let mut caller = *regs;
    for (reg, rule) in (0u16..).zip(row.rules.regs.iter()) {
        let essential = reg == RA || reg == RSP;
        let value = match *rule {
            Rule::Default if reg == RSP => Some(cfa),
            Rule::Default if is_callee_saved(reg) => regs.get(reg),
            // Return address: no rule is no return address.
            Rule::Default => None,
            // A normal frame does not preserve caller-saved registers.
            _ if !(row.signal || essential || is_callee_saved(reg)) => None,
            rule => match apply(reg, rule, row, regs, cfa, mem) {
                Ok(v) => v,
                // A register other than the two a walk needs may stay unknown.
                Err(Error::Invalid(Invalid::UnknownRegister)) if !essential => None,
                Err(e) => return Err(e),
            },
        };
        caller.set_option(reg, value);
    }
    if matches!(row.rule(RA), Rule::Default | Rule::Undefined) {
        return Ok(None);
    }
    if caller.get(RA).is_none() || caller.get(RSP).is_none() {
        return Err(Error::Invalid(Invalid::UnknownRegister));
    }
    Ok(Some(Caller { regs: caller, cfa }))
}

/// The caller's value of register `reg` under `rule`; `None`: unknown.
fn apply<M: UnwindMemory>(
    reg: u16,
    rule: Rule,
    row: &Row,
    regs: &Regs,
    cfa: u64,
    mem: &mut M,
) -> Result<Option<u64>, Error> {
    Ok(match rule {
        Rule::Default | Rule::Undefined => None,
        Rule::SameValue => regs.get(reg),
        Rule::Offset(n) => Some(read_u64(mem, cfa.wrapping_add(n as i64 as u64))?),
        Rule::ValOffset(n) => Some(cfa.wrapping_add(n as i64 as u64)),
        Rule::Register(src) => Some(
            regs.get(src)
                .ok_or(Error::Invalid(Invalid::UnknownRegister))?,
        ),
        Rule::Expression(e) => {
            let addr = eval(row.expr(e), regs, mem, Some(cfa))?;
            Some(read_u64(mem, addr)?)
        }
        Rule::ValExpression(e) => Some(eval(row.expr(e), regs, mem, Some(cfa))?),
    })
}
