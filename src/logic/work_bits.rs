// SPDX-License-Identifier: GPL-2.0
//! Allocation of the per-work bits of the per-task request mask.
//!
//! Each registered `unwind_work` owns one bit of a `usize` mask. Bit 0 is reserved for
//! [`PENDING`] (a task work is queued); the other `usize::BITS - 1` bits (63 on x86-64) are
//! handed out lowest first.

/// Set in a task's mask while its task work is queued and has not yet taken the mask.
pub const PENDING: usize = 1 << 0;

/// Bits that never belong to a work.
pub const RESERVED: usize = PENDING;

/// How many works can be registered at once (63 on 64-bit).
pub const MAX_WORKS: u32 = usize::BITS - RESERVED.count_ones();

/// The set of bits in use. Not synchronised: the owner serialises `alloc` and `free` (the
/// module does it under its registration mutex).
///
/// # Invariants
///
/// `RESERVED` bits are always set in `used`.
#[derive(Debug)]
pub struct WorkBits {
    used: usize,
}

impl WorkBits {
    /// All work bits free.
    pub const fn new() -> Self {
        // INVARIANT: the reserved bits start (and stay) set.
        Self { used: RESERVED }
    }

    /// Takes the lowest free bit, or `None` when all [`MAX_WORKS`] are in use.
    pub fn alloc(&mut self) -> Option<u32> {
        if self.used == usize::MAX {
            return None;
        }
        let bit = (!self.used).trailing_zeros();
        self.used |= 1 << bit;
        Some(bit)
    }

    /// Returns `bit` to the pool. Returns false (and changes nothing) for a reserved bit,
    /// an out-of-range bit, or a bit that is not allocated.
    pub fn free(&mut self, bit: u32) -> bool {
        if bit >= usize::BITS || RESERVED & (1 << bit) != 0 || self.used & (1 << bit) == 0 {
            return false;
        }
        self.used &= !(1 << bit);
        true
    }

    /// Number of bits currently allocated to works.
    pub fn in_use(&self) -> u32 {
        (self.used & !RESERVED).count_ones()
    }
}

impl Default for WorkBits {
    fn default() -> Self {
        Self::new()
    }
}
