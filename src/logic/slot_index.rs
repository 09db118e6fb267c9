// SPDX-License-Identifier: GPL-2.0
//! Lock-free, allocation-free index of the module's per-task side table.
//!
//! The module cannot add a field to `task_struct`, so it keeps a fixed array of slots and
//! finds a task's slot by hashing the task pointer. Lookup and insertion must work from NMI
//! context: they only load and compare-and-swap the slots' `owner` words.
//!
//! A task only ever inserts *itself* (requests are made for `current`), so two insertions of
//! the same key can only race on one CPU, as a nesting: an IRQ or NMI that runs to
//! completion inside the insertion it interrupted. Slots are released when their task is
//! freed (on any CPU), or by an insertion that lost its race (below).
//!
//! Probing is linear over a window of [`PROBE_WINDOW`] slots from the key's hash. A lookup
//! scans the whole window (released slots leave holes, so it cannot stop at the first free
//! one); the *canonical* slot of a key is the first one in probe order that it owns.
//! So that looking up a task that has no slot (the common case on the return-to-user path,
//! which runs for every task) costs one load instead of a window scan, each slot also counts
//! the keys *homed* there (whose window starts at it) that own a slot: zero means absent.
//! `tests/slot_index.rs` checks every nesting of two insertions and a remote release.

use super::sync::{AtomicUsize, Ordering};

/// Slots probed per key. Bounds the NMI-path cost; a window with no free slot is "full".
pub const PROBE_WINDOW: usize = 32;

/// The key of a free slot. Keys are task pointers, never 0.
pub const FREE: usize = 0;

/// The table could not give the key a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFull;

/// One slot's ownership word, and the count of keys homed at this slot that own a slot.
///
/// # Invariants
///
/// `homed` ≥ the number of slots owned by keys whose home is this slot: it is raised before
/// a claim and lowered after a release, so a lookup that reads 0 may skip the scan.
#[derive(Debug)]
pub struct Slot {
    owner: AtomicUsize,
    homed: AtomicUsize,
}

impl Slot {
    /// A free slot.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            owner: AtomicUsize::new(FREE),
            homed: AtomicUsize::new(0),
        }
    }

    /// A free slot.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            owner: AtomicUsize::new(FREE),
            homed: AtomicUsize::new(0),
        }
    }

    /// The key owning this slot, or [`FREE`].
    pub fn owner(&self) -> usize {
        self.owner.load(Ordering::Acquire)
    }
}

#[cfg(not(loom))]
impl Default for Slot {
    fn default() -> Self {
        Self::new()
    }
}

/// Hooks called between the atomic steps of [`SlotIndex::find_or_insert_with`]: the tests
/// run interrupting contexts there. The module passes `|| {}`, which compiles away.
pub trait Interleave {
    /// Called after each atomic access.
    fn step(&mut self);
}

impl<F: FnMut()> Interleave for F {
    fn step(&mut self) {
        self()
    }
}

/// The first slot of a key's window in an array of `len` slots (a power of two; any other
/// nonzero length still gives an index below it; for 0, an index that `get` finds nothing at).
#[inline]
fn home_in(len: usize, key: usize) -> usize {
    // Task structs are cache-line aligned: drop the low bits, then a Fibonacci hash.
    ((key as u64 >> 6).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & len.wrapping_sub(1)
}

/// `key`'s home slot, if `key` owns it: the first probe of [`SlotIndex::find`] (where
/// nearly every key is found), for a caller that holds the slot array but no checked view
/// of it. `None` says nothing: the key may own a slot further in its window.
#[inline]
pub fn find_at_home(slots: &[Slot], key: usize) -> Option<usize> {
    let home = home_in(slots.len(), key);
    (slots.get(home)?.owner() == key).then_some(home)
}

/// A view of the slot array and its count of owned slots.
///
/// # Invariants
///
/// * `slots.len()` is a power of two, at least [`PROBE_WINDOW`].
/// * `live` ≥ the number of owned slots: like each slot's `homed`, it is raised before a
///   claim and lowered after a release, so a reader that sees 0 knows that no task has a
///   slot (the return-to-user path uses this to skip the lookup altogether).
pub struct SlotIndex<'a> {
    slots: &'a [Slot],
    live: &'a AtomicUsize,
}

impl<'a> SlotIndex<'a> {
    /// Returns `None` unless `slots.len()` is a power of two and at least [`PROBE_WINDOW`].
    /// `live` counts the owned slots of `slots` (0 for a new table): every view of one
    /// slot array must be given the same counter.
    pub fn new(slots: &'a [Slot], live: &'a AtomicUsize) -> Option<Self> {
        if !slots.len().is_power_of_two() || slots.len() < PROBE_WINDOW {
            return None;
        }
        // INVARIANT: checked just above; `live` is the array's counter (caller).
        Some(Self { slots, live })
    }

    /// The first slot of `key`'s window.
    fn home(&self, key: usize) -> usize {
        home_in(self.slots.len(), key)
    }

    /// Slot indices of `key`'s window, in probe order.
    fn window(&self, key: usize) -> impl Iterator<Item = usize> {
        let home = self.home(key);
        let mask = self.slots.len() - 1;
        (0..PROBE_WINDOW).map(move |i| (home + i) & mask)
    }

    /// The canonical slot of `key`, if it has one.
    #[inline]
    pub fn find(&self, key: usize) -> Option<usize> {
        // The common case first: the key owns its home slot (the first in probe order, so
        // the canonical one). Not the whole window: a lookup of a task without a slot, on
        // every return to user space, stops at the home's count.
        find_at_home(self.slots, key).or_else(|| self.find_hooked(key, &mut || {}))
    }

    fn find_hooked(&self, key: usize, hook: &mut impl Interleave) -> Option<usize> {
        let homed = self.slots[self.home(key)].homed.load(Ordering::Acquire);
        hook.step();
        if homed == 0 {
            return None;
        }
        for i in self.window(key) {
            let owner = self.slots[i].owner();
            hook.step();
            if owner == key {
                return Some(i);
            }
        }
        None
    }

    /// The canonical slot of `key`, claiming a free one if it has none.
    #[inline]
    pub fn find_or_insert(&self, key: usize) -> Result<usize, TableFull> {
        // The lookup alone is the common case (every request but a task's first): kept
        // apart from the claiming loop, which compilers otherwise unroll around it.
        match self.find(key) {
            Some(slot) => Ok(slot),
            None => self.insert(key),
        }
    }

    #[inline(never)]
    fn insert(&self, key: usize) -> Result<usize, TableFull> {
        self.find_or_insert_with(key, &mut || {})
    }

    /// [`SlotIndex::find_or_insert`] with a hook between atomic steps (for tests).
    pub fn find_or_insert_with(
        &self,
        key: usize,
        hook: &mut impl Interleave,
    ) -> Result<usize, TableFull> {
        debug_assert_ne!(key, FREE);
        // Each failed claim means another context took that slot; the window has only so
        // many, so the loop is bounded.
        for _ in 0..PROBE_WINDOW {
            if let Some(slot) = self.find_hooked(key, hook) {
                return Ok(slot);
            }
            let mut free = None;
            for i in self.window(key) {
                let owner = self.slots[i].owner();
                hook.step();
                if owner == FREE {
                    free = Some(i);
                    break;
                }
            }
            let claim = free.ok_or(TableFull)?;
            let homed = &self.slots[self.home(key)].homed;
            // Raised before the claim, so that no lookup can skip a slot we own.
            self.live.fetch_add(1, Ordering::AcqRel);
            homed.fetch_add(1, Ordering::AcqRel);
            hook.step();
            let claimed = self.slots[claim]
                .owner
                .compare_exchange(FREE, key, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            hook.step();
            if !claimed {
                homed.fetch_sub(1, Ordering::AcqRel);
                self.live.fetch_sub(1, Ordering::AcqRel);
                hook.step();
                continue;
            }
            // Race: an IRQ or NMI that ran between our lookup and our claim may have
            // inserted the same key. It claimed the first free slot it saw, which precedes
            // ours unless a slot ahead of ours was released in between (then it is ours
            // that comes first). Either way the first slot in probe order is the canonical
            // one, which is also what any context interrupting us from now on will find:
            // keep it and give the other back.
            let canonical = self.find_hooked(key, hook).unwrap_or(claim);
            if canonical != claim {
                self.slots[claim].owner.store(FREE, Ordering::Release);
                homed.fetch_sub(1, Ordering::AcqRel);
                self.live.fetch_sub(1, Ordering::AcqRel);
                hook.step();
            }
            return Ok(canonical);
        }
        Err(TableFull)
    }

    /// Gives `slot` back. The caller has reset the slot's payload and owns `key`'s slot:
    /// nobody can look `key` up any more (its task is dead).
    pub fn release(&self, slot: usize, key: usize) -> bool {
        let released = self.slots[slot]
            .owner
            .compare_exchange(key, FREE, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if released {
            self.slots[self.home(key)]
                .homed
                .fetch_sub(1, Ordering::AcqRel);
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
        released
    }

    /// Every slot currently owned by `key` (normally one).
    pub fn owned_by(&self, key: usize) -> impl Iterator<Item = usize> + '_ {
        self.window(key)
            .filter(move |&i| self.slots[i].owner() == key)
    }

    /// Number of owned slots (a debugfs counter; racy by nature).
    pub fn occupancy(&self) -> usize {
        self.slots.iter().filter(|s| s.owner() != FREE).count()
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}
