// SPDX-License-Identifier: GPL-2.0
//! A caller-owned, direct-mapped cache of CFI rows, keyed by (module id, PC relative to the
//! module's load bias).
//!
//! Rows hold no absolute address, so a key relative to the bias lets one cache serve every
//! process that maps the same file (a per-CPU cache works as well as a per-task one). The
//! frames of a hot loop then cost one lookup each: no search table, no FDE, no CFA program.

use super::row::Row;

/// Entries of a [`RowCache`] (a power of two): about 20 KiB in all.
pub const ROW_CACHE_ENTRIES: usize = 64;
/// Entries per set: two, so that two hot PCs whose keys share a set do not evict each
/// other at every walk.
pub const ROW_CACHE_WAYS: usize = 2;
const SETS: usize = ROW_CACHE_ENTRIES / ROW_CACHE_WAYS;
const INDEX_BITS: u32 = SETS.trailing_zeros();
const _: () = assert!(SETS.is_power_of_two() && INDEX_BITS > 0);

/// One cached row.
#[derive(Clone, Copy)]
struct Entry {
    valid: bool,
    module: u64,
    rel_pc: u64,
    row: Row,
}

const EMPTY_ENTRY: Entry = Entry {
    valid: false,
    module: 0,
    rel_pc: 0,
    row: Row::EMPTY,
};

/// The row cache: [`ROW_CACHE_ENTRIES`] rows in sets of [`ROW_CACHE_WAYS`], least recently
/// used replaced. All-zero bytes are a valid, empty cache (every field is an integer, a
/// `bool`, or a `#[repr(u8)]` enum whose zero variant carries zeros), so the module may
/// allocate it zeroed.
///
/// # Invariants
///
/// `victim[s]` (0 or 1) is the way of set `s` to replace next: the one not used last.
pub struct RowCache {
    entries: [Entry; ROW_CACHE_ENTRIES],
    victim: [u8; SETS],
}

impl RowCache {
    /// An empty cache.
    pub const fn new() -> Self {
        Self {
            entries: [EMPTY_ENTRY; ROW_CACHE_ENTRIES],
            victim: [0; SETS],
        }
    }

    /// Forgets every row (for example when a module id may have been reused).
    pub fn clear(&mut self) {
        for e in self.entries.iter_mut() {
            e.valid = false;
        }
    }

    fn set_of(module: u64, rel_pc: u64) -> usize {
        let h = (rel_pc ^ module.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h.wrapping_shr(64 - INDEX_BITS) as usize
    }

    /// The row of `rel_pc` in `module`, if cached (and marks it used).
    #[inline]
    pub fn get(&mut self, module: u64, rel_pc: u64) -> Option<&Row> {
        let set = Self::set_of(module, rel_pc);
        let first = set.wrapping_mul(ROW_CACHE_WAYS);
        let ways = self
            .entries
            .get(first..first.wrapping_add(ROW_CACHE_WAYS))?;
        let way = ways
            .iter()
            .position(|e| e.valid && e.module == module && e.rel_pc == rel_pc)?;
        if let Some(v) = self.victim.get_mut(set) {
            *v = u8::from(way == 0);
        }
        self.entries.get(first.wrapping_add(way)).map(|e| &e.row)
    }

    /// Caches `row` as the row of `rel_pc` in `module`, replacing the least recently used
    /// row of its set.
    pub fn insert(&mut self, module: u64, rel_pc: u64, row: &Row) {
        let set = Self::set_of(module, rel_pc);
        let Some(v) = self.victim.get_mut(set) else {
            return;
        };
        let way = usize::from(*v & 1);
        *v = u8::from(way == 0);
        let slot = set.wrapping_mul(ROW_CACHE_WAYS).wrapping_add(way);
        if let Some(e) = self.entries.get_mut(slot) {
            e.valid = true;
            e.module = module;
            e.rel_pc = rel_pc;
            e.row = *row;
        }
    }
}

/// Where a walk finds and keeps rows. A walk may sleep between two accesses (its reads
/// fault pages in), so the module's store is a per-CPU [`RowCache`] reached for one access
/// at a time, which copies the row out; a test owns a [`RowCache`] outright.
pub trait RowStore {
    /// The row of `rel_pc` in `module`, copied into `out`, if cached.
    fn lookup(&mut self, module: u64, rel_pc: u64, out: &mut Row) -> bool;
    /// Caches `row` as the row of `rel_pc` in `module`.
    fn store(&mut self, module: u64, rel_pc: u64, row: &Row);
}

impl RowStore for RowCache {
    #[inline]
    fn lookup(&mut self, module: u64, rel_pc: u64, out: &mut Row) -> bool {
        match self.get(module, rel_pc) {
            Some(row) => {
                *out = *row;
                true
            }
            None => false,
        }
    }

    #[inline]
    fn store(&mut self, module: u64, rel_pc: u64, row: &Row) {
        self.insert(module, rel_pc, row);
    }
}

impl Default for RowCache {
    fn default() -> Self {
        Self::new()
    }
}
