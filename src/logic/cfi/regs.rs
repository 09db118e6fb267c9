// SPDX-License-Identifier: GPL-2.0
//! DWARF x86-64 register numbers and the register set of one frame.
//!
//! The numbering is the psABI's, not the hardware encoding: 0 `%rax`, 1 `%rdx`, 2 `%rcx`,
//! 3 `%rbx`, 4 `%rsi`, 5 `%rdi`, 6 `%rbp`, 7 `%rsp`, 8–15 `%r8`–`%r15`, 16 the return
//! address column (`%rip`).

/// `%rax`.
pub const RAX: u16 = 0;
/// `%rdx`.
pub const RDX: u16 = 1;
/// `%rcx`.
pub const RCX: u16 = 2;
/// `%rbx`.
pub const RBX: u16 = 3;
/// `%rsi`.
pub const RSI: u16 = 4;
/// `%rdi`.
pub const RDI: u16 = 5;
/// `%rbp`.
pub const RBP: u16 = 6;
/// `%rsp`.
pub const RSP: u16 = 7;
/// `%r8`.
pub const R8: u16 = 8;
/// `%r9`.
pub const R9: u16 = 9;
/// `%r10`.
pub const R10: u16 = 10;
/// `%r11`.
pub const R11: u16 = 11;
/// `%r12`.
pub const R12: u16 = 12;
/// `%r13`.
pub const R13: u16 = 13;
/// `%r14`.
pub const R14: u16 = 14;
/// `%r15`.
pub const R15: u16 = 15;
/// The return address column: the caller's `%rip`.
pub const RA: u16 = 16;

/// Registers tracked: the 16 general-purpose registers and the return address column.
pub const REG_COUNT: usize = 17;

/// Whether `reg` is preserved across calls by the psABI (`%rbx`, `%rbp`, `%r12`–`%r15`):
/// without a rule, its value in the caller is its value in the callee.
pub const fn is_callee_saved(reg: u16) -> bool {
    matches!(reg, RBX | RBP | R12 | R13 | R14 | R15)
}

/// The registers a normal (not signal) frame may pass on to its caller: the callee-saved
/// ones, `%rsp` and the return address (bit `n` for register `n`).
pub const NORMAL_FRAME_MASK: u32 = (1 << RBX)
    | (1 << RBP)
    | (1 << RSP)
    | (1 << R12)
    | (1 << R13)
    | (1 << R14)
    | (1 << R15)
    | (1 << RA);

/// The registers of one frame: a value for each of the [`REG_COUNT`] registers and which of
/// them are known.
///
/// # Invariants
///
/// `known` has no bit at or above [`REG_COUNT`] set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    values: [u64; REG_COUNT],
    known: u32,
}

/// The mask of every tracked register.
const ALL_KNOWN: u32 = (1 << REG_COUNT) - 1;

impl Regs {
    /// A register set where nothing is known.
    pub const fn new() -> Self {
        Self {
            values: [0; REG_COUNT],
            known: 0,
        }
    }

    /// A register set where every register is known: the user registers at kernel entry
    /// (`values[16]` is the user IP).
    pub const fn all_known(values: [u64; REG_COUNT]) -> Self {
        Self {
            values,
            known: ALL_KNOWN,
        }
    }

    /// The value of `reg`, if it is tracked and known.
    #[inline]
    pub fn get(&self, reg: u16) -> Option<u64> {
        let bit = 1u32.checked_shl(u32::from(reg))?;
        if self.known & bit & ALL_KNOWN == 0 {
            return None;
        }
        self.values.get(usize::from(reg)).copied()
    }

    /// Sets `reg` to `value` (known); ignores an untracked register.
    #[inline]
    pub fn set(&mut self, reg: u16, value: u64) {
        if let Some(slot) = self.values.get_mut(usize::from(reg)) {
            *slot = value;
            // INVARIANT: `reg < REG_COUNT` since `values` has that many slots.
            self.known |= 1 << reg;
        }
    }

    /// Stores `value` as the value of `reg` without changing whether it is known (see
    /// [`Regs::update_known`]); ignores an untracked register.
    #[inline]
    pub fn set_value(&mut self, reg: u16, value: u64) {
        if let Some(slot) = self.values.get_mut(usize::from(reg)) {
            *slot = value;
        }
    }

    /// Sets `reg` to `value` if `Some`, else makes it unknown.
    #[inline]
    pub fn set_option(&mut self, reg: u16, value: Option<u64>) {
        match value {
            Some(v) => self.set(reg, v),
            None => self.forget(reg),
        }
    }

    /// Makes `reg` unknown.
    #[inline]
    pub fn forget(&mut self, reg: u16) {
        if let Some(bit) = 1u32.checked_shl(u32::from(reg)) {
            self.known &= !bit;
        }
    }

    /// Makes unknown every register whose bit is clear in `mask` (bit `n` for register `n`).
    #[inline]
    pub fn retain(&mut self, mask: u32) {
        self.known &= mask;
    }

    /// Makes known exactly the registers known before and in `keep`, plus those in `set`
    /// (bit `n` for register `n`).
    #[inline]
    pub fn update_known(&mut self, keep: u32, set: u32) {
        // INVARIANT: no bit at or above REG_COUNT.
        self.known = ((self.known & keep) | set) & ALL_KNOWN;
    }

    /// The values of the registers `regs` (meaningful only where known; 0 for an untracked
    /// register).
    #[inline]
    pub fn gather<const N: usize>(&self, regs: &[u16; N]) -> [u64; N] {
        let mut out = [0; N];
        for (value, &reg) in out.iter_mut().zip(regs.iter()) {
            *value = self.values.get(usize::from(reg)).copied().unwrap_or(0);
        }
        out
    }

    /// Stores `values` as the values of the registers `regs`, without changing which are
    /// known (see [`Regs::update_known`]); ignores untracked registers.
    #[inline]
    pub fn scatter<const N: usize>(&mut self, regs: &[u16; N], values: &[u64; N]) {
        for (&value, &reg) in values.iter().zip(regs.iter()) {
            if let Some(slot) = self.values.get_mut(usize::from(reg)) {
                *slot = value;
            }
        }
    }

    /// The mask of known registers (bit `n` for register `n`).
    pub const fn known_mask(&self) -> u32 {
        self.known
    }

    /// The values (meaningful only where known).
    pub const fn values(&self) -> &[u64; REG_COUNT] {
        &self.values
    }
}

impl Default for Regs {
    fn default() -> Self {
        Self::new()
    }
}
