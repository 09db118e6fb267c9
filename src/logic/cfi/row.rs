// SPDX-License-Identifier: GPL-2.0
//! One row of the CFI table: how to find the CFA and each tracked register of the caller.
//!
//! A [`Row`] is self-contained `Copy` data (its expressions are copied into it) so that it
//! can be cached and used without the unwind information it came from. It holds no
//! absolute address: the same row serves every process that maps the file, wherever.

use super::regs::REG_COUNT;
use super::{unsupported, Error, Unsupported};

/// Longest DWARF expression a row stores (glibc's signal frame uses 4 bytes, the `.plt`
/// expression 11, gcc's DRAP 3).
pub const MAX_EXPR_LEN: usize = 32;
/// Bytes of expressions one row stores in all (glibc's `__restore_rt`: 55).
pub const ROW_EXPR_BYTES: usize = 128;

/// An expression stored in a [`Row`]: `len` bytes at `offset` of its expression bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExprRef {
    /// Offset in the row's expression bytes.
    pub offset: u8,
    /// Length in bytes.
    pub len: u8,
}

/// How to find the CFA (the caller's stack pointer before the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CfaRule {
    /// No CFA rule was given (the row cannot be used). Zero is this rule.
    Undefined = 0,
    /// The value of register `reg` plus `offset`.
    RegOffset {
        /// The register (DWARF number; a rule with one above 16 is rejected).
        reg: u16,
        /// The offset.
        offset: i32,
    },
    /// The value of a DWARF expression (evaluated with an empty stack).
    Expression(ExprRef),
}

/// How to find the caller's value of one register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Rule {
    /// No rule: callee-saved registers keep their value, the others are unknown (the ABI's
    /// default). Zero is this rule.
    Default = 0,
    /// The value is not recoverable (for the return address: the end of the stack).
    Undefined,
    /// The value is unchanged.
    SameValue,
    /// Saved at CFA + n.
    Offset(i32),
    /// The value is CFA + n.
    ValOffset(i32),
    /// The value is in register r (in this frame).
    Register(u16),
    /// Saved at the address a DWARF expression computes (the CFA pushed first).
    Expression(ExprRef),
    /// The value a DWARF expression computes (the CFA pushed first).
    ValExpression(ExprRef),
}

/// The CFA rule and the register rules of a row (what `DW_CFA_remember_state` saves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The CFA rule.
    pub cfa: CfaRule,
    /// The rule of each tracked register (DWARF numbering, 16 = return address).
    pub regs: [Rule; REG_COUNT],
}

impl Rules {
    /// No rule at all.
    pub const EMPTY: Rules = Rules {
        cfa: CfaRule::Undefined,
        regs: [Rule::Default; REG_COUNT],
    };
}

/// A row of the CFI table, for one PC.
///
/// # Invariants
///
/// Every [`ExprRef`] in `rules` lies inside `exprs[..exprs_len]`; `exprs_len` is at most
/// [`ROW_EXPR_BYTES`]. All-zero bytes are a valid (unusable, CFA-less) row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The rules.
    pub rules: Rules,
    /// Whether the FDE describes a signal frame (CIE augmentation `S`): every register with
    /// a rule is restored, and the caller's IP is exact (not a return address).
    pub signal: bool,
    exprs_len: u8,
    exprs: [u8; ROW_EXPR_BYTES],
}

impl Row {
    /// A row without rules.
    pub const EMPTY: Row = Row {
        rules: Rules::EMPTY,
        signal: false,
        exprs_len: 0,
        exprs: [0; ROW_EXPR_BYTES],
    };

    /// The bytes of an expression of this row (empty if `e` is not one of its own).
    pub fn expr(&self, e: ExprRef) -> &[u8] {
        let start = usize::from(e.offset);
        let end = start.wrapping_add(usize::from(e.len));
        self.exprs
            .get(..usize::from(self.exprs_len))
            .and_then(|b| b.get(start..end))
            .unwrap_or(&[])
    }

    /// Stores `bytes` as an expression of this row, sharing an identical one already
    /// stored; fails when longer than [`MAX_EXPR_LEN`] or when the row is full.
    pub fn add_expr(&mut self, bytes: &[u8]) -> Result<ExprRef, Error> {
        if bytes.len() > MAX_EXPR_LEN {
            return Err(unsupported(Unsupported::ExpressionLength));
        }
        let len = bytes.len() as u8;
        let used = usize::from(self.exprs_len);
        let stored = self.exprs.get(..used).unwrap_or(&[]);
        if !bytes.is_empty() {
            if let Some(at) = stored.windows(bytes.len()).position(|w| w == bytes) {
                return Ok(ExprRef {
                    offset: at as u8,
                    len,
                });
            }
        }
        let end = used.wrapping_add(bytes.len());
        let Some(dst) = self.exprs.get_mut(used..end) else {
            return Err(unsupported(Unsupported::ExpressionPool));
        };
        dst.copy_from_slice(bytes);
        // INVARIANT: end <= ROW_EXPR_BYTES (the slice exists), which fits a u8.
        self.exprs_len = end as u8;
        Ok(ExprRef {
            offset: used as u8,
            len,
        })
    }

    /// The rule of register `reg` ([`Rule::Default`] for an untracked register).
    pub fn rule(&self, reg: u16) -> Rule {
        self.rules
            .regs
            .get(usize::from(reg))
            .copied()
            .unwrap_or(Rule::Default)
    }
}

impl Default for Row {
    fn default() -> Self {
        Self::EMPTY
    }
}
