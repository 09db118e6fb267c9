// SPDX-License-Identifier: GPL-2.0
//! The row table all CPUs share: compact rows behind the per-CPU row caches, so that a
//! program with more return addresses than a per-CPU cache holds (a large program: each
//! stack another path through its functions) computes each row once, not again whenever
//! the per-CPU cache lost it.
//!
//! Computing a row is the costly part of a cold frame (the search table, the FDE and its
//! CIE read from user memory, the CFA program run up to the PC: 7,500 to 12,000
//! instructions); finding it here is a hash, a few loads and two sequence reads. The per-CPU
//! caches ([`super::RowCache`]) stay in front: they are smaller (a per-CPU allocation has 32
//! KiB at most) and need no atomics. This table has [`SHARED_ROW_ENTRIES`] entries (48
//! bytes each, 384 KiB), whatever the number of CPUs, in sets of [`SHARED_ROW_WAYS`].
//!
//! Concurrency: walks run in task context on every CPU at once, preemptible, and never in
//! interrupts. Each entry is a sequence lock of its own, lock-free on both sides:
//!
//! * a writer claims the entry by moving its sequence from even to odd with an acquire
//!   compare-and-exchange (another writer holding it, or claiming it first, makes the store
//!   give up: a lost store of a cache only costs a later computation), writes the words,
//!   and releases it with the next even number;
//! * a reader reads the sequence (acquire), the words, then the sequence again after an
//!   acquire fence: a row read while a writer had the entry, or torn between two rows, shows
//!   as an odd or a changed sequence and is taken as a miss (the fences are the pattern of
//!   Boehm's "Can seqlocks get along with programming language memory models?").
//!
//! So a reader never waits and never sees a row that was not stored whole for its key; a
//! writer never waits either (a preempted writer leaves its entry unreadable until it runs
//! again: that entry misses meanwhile). The loom model (tests/loom.rs) checks both.
//!
//! Keys are (module id, PC relative to the module's bias), as in the per-CPU caches; a
//! module id is never 0 (the empty entry).

use super::super::sync::{fence, AtomicU64, AtomicUsize, Ordering};
use super::compact::CompactRow;

/// Entries of the table (a multiple of [`SHARED_ROW_WAYS`], whose quotient is a power of
/// two).
pub const SHARED_ROW_ENTRIES: usize = 8192;
/// Entries per set.
pub const SHARED_ROW_WAYS: usize = 4;
const _: () = assert!((SHARED_ROW_ENTRIES / SHARED_ROW_WAYS).is_power_of_two());

/// One entry: a compact row and its key, under a sequence number.
///
/// # Invariants
///
/// While `seq` is even, `module`, `rel_pc` and `row` hold the words one writer stored
/// whole ([`CompactRow::to_words`] of the row of that key), or all zeros (never written);
/// an odd `seq` marks a writer at work.
pub struct SharedSlot {
    seq: AtomicU64,
    module: AtomicU64,
    rel_pc: AtomicU64,
    row: [AtomicU64; 3],
}

impl SharedSlot {
    /// An empty entry (all zeros: a table may also be allocated zeroed).
    pub fn new() -> Self {
        // INVARIANT: even sequence, all zeros.
        Self {
            seq: AtomicU64::new(0),
            module: AtomicU64::new(0),
            rel_pc: AtomicU64::new(0),
            row: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// The row kept for the key, if the entry holds it and no writer changed it meanwhile.
    #[inline]
    fn read(&self, module: u64, rel_pc: u64) -> Option<CompactRow> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 != 0 {
            return None;
        }
        if self.module.load(Ordering::Relaxed) != module
            || self.rel_pc.load(Ordering::Relaxed) != rel_pc
        {
            return None;
        }
        let words = [
            self.row[0].load(Ordering::Relaxed),
            self.row[1].load(Ordering::Relaxed),
            self.row[2].load(Ordering::Relaxed),
        ];
        // Orders the loads above before the sequence's second load: a writer that changed
        // any word had made the sequence odd before (its release fence), so the second load
        // sees another number.
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != seq {
            return None;
        }
        CompactRow::from_words(words)
    }

    /// Whether the entry is empty or holds `module`'s `rel_pc` (a writer may be at work:
    /// only a choice of where to store).
    #[inline]
    fn free_or_holds(&self, module: u64, rel_pc: u64) -> bool {
        let m = self.module.load(Ordering::Relaxed);
        m == 0 || (m == module && self.rel_pc.load(Ordering::Relaxed) == rel_pc)
    }

    /// Stores the row of the key, unless another writer holds the entry.
    fn write(&self, module: u64, rel_pc: u64, words: [u64; 3]) {
        let seq = self.seq.load(Ordering::Relaxed);
        if seq & 1 != 0
            || self
                .seq
                .compare_exchange(
                    seq,
                    seq.wrapping_add(1),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            // Another writer has it (or took it first): give up, see the module comment.
            return;
        }
        // (Acquire: the previous writer's words, published by its release, come before
        // ours in every word's order. With a relaxed claim, loom found a word of that
        // writer landing after ours: a key with another key's row.)
        // The odd sequence before every word: a reader that loads one of the new words
        // then sees the sequence changed (its acquire fence).
        fence(Ordering::Release);
        self.module.store(module, Ordering::Relaxed);
        self.rel_pc.store(rel_pc, Ordering::Relaxed);
        for (slot, word) in self.row.iter().zip(words) {
            slot.store(word, Ordering::Relaxed);
        }
        // INVARIANT: the words of one row, whole; the next even number publishes them.
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

impl Default for SharedSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// The table over its entries `S` (the module's: a kvmalloc'd vector; the tests': a
/// `Vec`). Any length works (a length that is not [`SHARED_ROW_ENTRIES`] is used as one
/// set per [`SHARED_ROW_WAYS`] entries, rounded down to a power of two; an empty table
/// keeps nothing).
pub struct SharedRows<S> {
    /// Picks the entry a store replaces when its set is full (in turn, over all sets).
    clock: AtomicUsize,
    slots: S,
}

impl<S: core::ops::Deref<Target = [SharedSlot]>> SharedRows<S> {
    /// A table over `slots` (empty entries: [`SharedSlot::new`]).
    pub fn new(slots: S) -> Self {
        Self {
            clock: AtomicUsize::new(0),
            slots,
        }
    }

    /// The entries of the set of the key.
    #[inline]
    fn set(&self, module: u64, rel_pc: u64) -> &[SharedSlot] {
        let first = set_of(self.slots.len(), module, rel_pc).wrapping_mul(SHARED_ROW_WAYS);
        self.slots
            .get(first..first.wrapping_add(SHARED_ROW_WAYS))
            .unwrap_or(&[])
    }

    /// The row of `rel_pc` in `module`, if the table has it (`module` 0: never).
    #[inline]
    pub fn lookup(&self, module: u64, rel_pc: u64) -> Option<CompactRow> {
        if module == 0 {
            return None;
        }
        self.set(module, rel_pc)
            .iter()
            .find_map(|slot| slot.read(module, rel_pc))
    }

    /// Keeps `row` (a row, not a mark: anything else is not kept) as the row of `rel_pc`
    /// in `module` (not 0): in the entry that has the key, else in an empty one of its set,
    /// else in place of one of the set's, in turn. A store that meets another writer on its
    /// entry is dropped.
    pub fn store(&self, module: u64, rel_pc: u64, row: &CompactRow) {
        if module == 0 || !row.is_row() {
            return;
        }
        let set = self.set(module, rel_pc);
        let at = match set
            .iter()
            .position(|slot| slot.free_or_holds(module, rel_pc))
        {
            Some(at) => at,
            None => self.clock.fetch_add(1, Ordering::Relaxed) % SHARED_ROW_WAYS,
        };
        if let Some(slot) = set.get(at) {
            slot.write(module, rel_pc, row.to_words());
        }
    }
}

/// The set of the key in a table of `entries` entries (exposed for tests): one set per
/// [`SHARED_ROW_WAYS`] entries, as many as the largest power of two of them (none: set 0
/// of an empty table, which has no entries).
#[inline]
pub fn set_of(entries: usize, module: u64, rel_pc: u64) -> usize {
    let sets = entries / SHARED_ROW_WAYS;
    if sets <= 1 {
        return 0;
    }
    let bits = usize::BITS - 1 - sets.leading_zeros();
    let h = (rel_pc ^ module.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - bits)) as usize
}
