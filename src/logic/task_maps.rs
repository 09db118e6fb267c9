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
/// `entries[..len]` hold answers found under `stamp`; `len <= TASK_MAPS`. `last_use[i]` is
/// the value of `clock` when entry `i` was last used: the one to drop when full is the
/// least recently used (16-bit ages: the module's task cache has no room for more, and a
/// use 65,536 uses ago is old whatever its age reads). (Entries stay in their place: moving one towards the front at
/// each use was a `memmove` of 48 bytes at every walk's change of file.)
#[derive(Debug, Clone, Copy)]
pub struct TaskMaps {
    stamp: Stamp,
    len: usize,
    clock: u16,
    entries: [Entry; TASK_MAPS],
    last_use: [u16; TASK_MAPS],
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
            clock: 0,
            entries: [EMPTY; TASK_MAPS],
            last_use: [0; TASK_MAPS],
        }
    }

    /// Starts a walk at `stamp`: a different one empties the cache. Returns whether the
    /// stamp is the last walk's (what was found then still holds).
    pub fn begin(&mut self, stamp: Stamp) -> bool {
        if stamp == self.stamp {
            return true;
        }
        // INVARIANT: nothing kept under the old stamp survives.
        self.len = 0;
        self.stamp = stamp;
        false
    }

    /// The mapping kept that holds `pc`, as `(start, end, answer)`, if any (marked used).
    pub fn find(&mut self, pc: u64) -> Option<(u64, u64, Lookup)> {
        self.clock = self.clock.wrapping_add(1);
        let i = self
            .entries
            .get(..self.len)?
            .iter()
            .position(|e| e.start <= pc && pc < e.end)?;
        if let Some(used) = self.last_use.get_mut(i) {
            *used = self.clock;
        }
        let entry = self.entries.get(i)?;
        Some((entry.start, entry.end, entry.lookup))
    }

    /// Keeps the answer for the mapping `start..end` (found under the stamp of the last
    /// [`TaskMaps::begin`]), in place of the least recently used one when full.
    pub fn keep(&mut self, start: u64, end: u64, lookup: Lookup) {
        if start >= end {
            return;
        }
        self.clock = self.clock.wrapping_add(1);
        let clock = self.clock;
        let at = if self.len < TASK_MAPS {
            // INVARIANT: one more entry in use, at most TASK_MAPS.
            self.len += 1;
            self.len - 1
        } else {
            // The oldest use (ages wrap with the clock: compared as differences).
            (0..TASK_MAPS)
                .max_by_key(|&i| {
                    self.last_use
                        .get(i)
                        .map_or(0, |&used| clock.wrapping_sub(used))
                })
                .unwrap_or(0)
        };
        if let (Some(slot), Some(used)) = (self.entries.get_mut(at), self.last_use.get_mut(at)) {
            *slot = Entry { start, end, lookup };
            *used = clock;
        }
    }
}
