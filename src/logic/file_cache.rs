// SPDX-License-Identifier: GPL-2.0
//! When to write a `file_cache` event (hash → path, build-id) into an instance.
//!
//! Rule (Documentation/trace-events.rst): the first time a hash is used in a stack after
//! the cache was reset, and again every [`REMINDER_EVERY`]th use, so that a reader never has
//! to look far back. Memory is bounded: [`CACHE_SLOTS`] entries in sets of [`WAYS`]; a hash
//! that loses its entry to another is simply announced again when it comes back, which keeps
//! the rule ("a hash means the file of the most recent file_cache carrying it") true. Sets
//! rather than a direct-mapped table, so that two hot files (a program and its libc) do not
//! evict each other at every stack when their hashes happen to share a slot.

/// Entries in one instance's cache.
pub const CACHE_SLOTS: usize = 256;
/// Entries per set.
pub const WAYS: usize = 4;
/// A hash is announced again after this many uses.
pub const REMINDER_EVERY: u32 = 256;

#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Entry {
    hash: u32,
    uses: u32,
}

/// One instance's record of announced hashes. Not synchronised: the owner holds a lock.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FileCache {
    generation: u64,
    entries: [Entry; CACHE_SLOTS],
}

impl FileCache {
    /// An empty cache at generation 0.
    pub const fn new() -> Self {
        Self {
            generation: 0,
            entries: [Entry { hash: 0, uses: 0 }; CACHE_SLOTS],
        }
    }

    /// Forgets every hash when `generation` differs from the one the cache was filled in
    /// (the owner bumps its generation on every reset event: tracing on/off, option
    /// toggled, buffer cleared, clock changed).
    pub fn sync_generation(&mut self, generation: u64) {
        if self.generation != generation {
            self.entries = [Entry::default(); CACHE_SLOTS];
            self.generation = generation;
        }
    }

    /// Records a use of `hash` (a file hash, never 0); returns whether a `file_cache`
    /// event must be written before the stack that uses it.
    pub fn use_hash(&mut self, hash: u32) -> bool {
        let ways = self.ways(hash);
        let Some(slot) = ways.iter_mut().find(|e| e.hash == hash) else {
            // Not announced (or evicted): take a free entry, else the least used one.
            let victim = ways
                .iter_mut()
                .min_by_key(|e| (e.hash != 0, e.uses))
                .unwrap();
            *victim = Entry { hash, uses: 1 };
            return true;
        };
        slot.uses += 1;
        if slot.uses > REMINDER_EVERY {
            slot.uses = 1;
            return true;
        }
        false
    }

    /// Records a use of each of `hashes` (in order, a hash as often as it is there), if none
    /// of them needs a `file_cache` event now; returns whether it did. Otherwise changes
    /// nothing: the caller finds the files to announce and calls [`FileCache::use_hash`]
    /// for each.
    pub fn use_all_unannounced(&mut self, hashes: &[u32]) -> bool {
        // Counted in turn as `use_hash` would (a hash met twice sees its first use), and
        // taken back if one would need an event.
        let mut used = 0;
        for &hash in hashes {
            match self.entry_of(hash) {
                Some(entry) if entry.uses < REMINDER_EVERY => entry.uses += 1,
                _ => break,
            }
            used += 1;
        }
        if used == hashes.len() {
            return true;
        }
        for &hash in hashes.get(..used).unwrap_or_default() {
            if let Some(entry) = self.entry_of(hash) {
                entry.uses -= 1;
            }
        }
        false
    }

    /// The entry of `hash`, if it has one.
    #[inline]
    fn entry_of(&mut self, hash: u32) -> Option<&mut Entry> {
        self.ways(hash).iter_mut().find(|e| e.hash == hash)
    }

    /// The entries of `hash`'s set.
    #[inline]
    fn ways(&mut self, hash: u32) -> &mut [Entry] {
        let set = set_of(hash) * WAYS;
        &mut self.entries[set..set + WAYS]
    }
}

/// The set of `hash` (exposed for tests).
pub const fn set_of(hash: u32) -> usize {
    (hash as usize).wrapping_mul(0x9e37_79b9) >> 24 & (CACHE_SLOTS / WAYS - 1)
}

impl Default for FileCache {
    fn default() -> Self {
        Self::new()
    }
}
