// SPDX-License-Identifier: GPL-2.0
//! A task's recent mappings and where their unwind information is, kept across kernel
//! entries: the frames of one program lie in a handful of mappings (the program, its C
//! library, the interpreter's modules), and looking a mapping up takes the mmap lock, walks
//! the maple tree and hashes the file's identity.
//!
//! The answers hold while the task's address space does not change. The module stamps them
//! with the mm's `mm_lock_seq` (a seqcount every mmap write lock bumps: no mapping changes
//! without it) and the task's `self_exec_id` (an exec gives the task a new mm, possibly at
//! the old one's address, whose count starts again): a different stamp empties the cache.
//! A stamp read while a writer holds the lock (odd count) is not usable: the walk then
//! neither uses nor fills the cache.

use super::cfi::Lookup;

/// Mappings kept per task.
pub const TASK_MAPS: usize = 16;

/// Where the task's address space stood when the answers were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// The task's `self_exec_id`.
    pub exec_id: u64,
    /// The mm's `mm_lock_seq` (even).
    pub seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    start: u64,
    end: u64,
    lookup: Lookup,
}

/// The cache (all-zero bytes are not assumed valid: build it with [`TaskMaps::new`]).
///
/// # Invariants
///
/// `entries[..len]` hold answers found under `stamp`, the most used roughly first; `len <=
/// TASK_MAPS`.
#[derive(Debug, Clone, Copy)]
pub struct TaskMaps {
    stamp: Stamp,
    len: usize,
    entries: [Entry; TASK_MAPS],
}

impl Default for TaskMaps {
    fn default() -> Self {
        Self::new()
    }
}

impl TaskMaps {
    /// An empty cache.
    pub const fn new() -> Self {
        const EMPTY: Entry = Entry {
            start: 0,
            end: 0,
            lookup: Lookup::Unmapped,
        };
        // INVARIANT: no entry in use.
        Self {
            stamp: Stamp { exec_id: 0, seq: 0 },
            len: 0,
            entries: [EMPTY; TASK_MAPS],
        }
    }

    /// Starts a walk at `stamp`: a different one empties the cache.
    pub fn begin(&mut self, stamp: Stamp) {
        if stamp != self.stamp {
            // INVARIANT: nothing kept under the old stamp survives.
            self.len = 0;
            self.stamp = stamp;
        }
    }

    /// The mapping kept that holds `pc`, as `(start, end, answer)`, if any (it moves one
    /// place towards the front).
    pub fn find(&mut self, pc: u64) -> Option<(u64, u64, Lookup)> {
        let kept = self.entries.get_mut(..self.len)?;
        let i = kept.iter().position(|e| e.start <= pc && pc < e.end)?;
        // One step towards the front (a swap, not a rotation: an entry is 48 bytes): the
        // mappings a walk meets most often end up scanned first.
        if i > 0 {
            kept.swap(i - 1, i);
        }
        let entry = kept.get(i.saturating_sub(1))?;
        Some((entry.start, entry.end, entry.lookup))
    }

    /// Keeps the answer for the mapping `start..end` (found under the stamp of the last
    /// [`TaskMaps::begin`]) in front, dropping the last one when full.
    pub fn keep(&mut self, start: u64, end: u64, lookup: Lookup) {
        if start >= end {
            return;
        }
        let len = (self.len + 1).min(TASK_MAPS);
        if let Some(kept) = self.entries.get_mut(..len) {
            kept.rotate_right(1);
            if let Some(first) = kept.first_mut() {
                *first = Entry { start, end, lookup };
                // INVARIANT: `len <= TASK_MAPS`, the new answer first.
                self.len = len;
            }
        }
    }
}
