// SPDX-License-Identifier: GPL-2.0
//! A caller-owned, direct-mapped cache of CFI rows, keyed by (module id, PC relative to the
//! module's load bias).
//!
//! Rows hold no absolute address, so a key relative to the bias lets one cache serve every
//! process that maps the same file (a per-CPU cache works as well as a per-task one). The
//! frames of a hot loop then cost one lookup each: no search table, no FDE, no CFA program.
//!
//! Rows are kept in [`CompactRow`] form (24 bytes, what a warm frame copies out); the few
//! rows without one (expressions, signal frames) are kept whole in a small second table.

use super::compact::CompactRow;
use super::row::Row;

/// Entries of a [`RowCache`] (a power of two), of 40 bytes (the key and a compact row):
/// 20 KiB, with the full rows about 22.6 KiB per CPU: the next power of two would pass the
/// 32 KiB a per-CPU allocation may have. (With 256, a walk of a program whose stacks met
/// about 450 return addresses, more than the cache holds, computed 17 rows an event again,
/// 141,000 instructions an event; with 512, 9 rows and 85,000.)
pub const ROW_CACHE_ENTRIES: usize = 512;
/// Entries per set: two, so that two hot PCs whose keys share a set do not evict each
/// other at every walk.
pub const ROW_CACHE_WAYS: usize = 2;
/// Rows without a compact form (expressions, signal frames) a [`RowCache`] keeps whole,
/// replaced in turn: about 2.3 KiB.
pub const FULL_ROW_ENTRIES: usize = 8;
const SETS: usize = ROW_CACHE_ENTRIES / ROW_CACHE_WAYS;
const INDEX_BITS: u32 = SETS.trailing_zeros();
const _: () = assert!(SETS.is_power_of_two() && INDEX_BITS > 0);
const _: () = assert!(FULL_ROW_ENTRIES > 0 && FULL_ROW_ENTRIES <= 256);

/// One cached row: empty if `row` is [`CompactRow::EMPTY`], else a compact row or the mark
/// that the row is one of the full rows (if still there).
#[derive(Clone, Copy)]
struct Entry {
    module: u64,
    rel_pc: u64,
    row: CompactRow,
}

const EMPTY_ENTRY: Entry = Entry {
    module: 0,
    rel_pc: 0,
    row: CompactRow::EMPTY,
};

/// One cached row without a compact form.
#[derive(Clone, Copy)]
struct FullEntry {
    valid: bool,
    module: u64,
    rel_pc: u64,
    row: Row,
}

const EMPTY_FULL: FullEntry = FullEntry {
    valid: false,
    module: 0,
    rel_pc: 0,
    row: Row::EMPTY,
};

/// The row cache: [`ROW_CACHE_ENTRIES`] compact rows in sets of [`ROW_CACHE_WAYS`], least
/// recently used replaced, and [`FULL_ROW_ENTRIES`] full rows, for the rows without a
/// compact form (their compact entry is [`CompactRow::FULL`]). All-zero bytes are a valid,
/// empty cache (every field is an integer, a `bool`, or a `#[repr(u8)]` enum whose zero
/// variant carries zeros, and a zero [`CompactRow`] is [`CompactRow::EMPTY`]), so the
/// module may allocate it zeroed.
///
/// # Invariants
///
/// `victim[s]` (0 or 1) is the way of set `s` to replace next: the one not used last;
/// `next_full` is the full entry to replace next (taken modulo [`FULL_ROW_ENTRIES`]).
pub struct RowCache {
    entries: [Entry; ROW_CACHE_ENTRIES],
    victim: [u8; SETS],
    full: [FullEntry; FULL_ROW_ENTRIES],
    next_full: u8,
}

impl RowCache {
    /// An empty cache.
    pub const fn new() -> Self {
        Self {
            entries: [EMPTY_ENTRY; ROW_CACHE_ENTRIES],
            victim: [0; SETS],
            full: [EMPTY_FULL; FULL_ROW_ENTRIES],
            next_full: 0,
        }
    }

    /// Forgets every row (for example when a module id may have been reused).
    pub fn clear(&mut self) {
        for e in self.entries.iter_mut() {
            e.row = CompactRow::EMPTY;
        }
        for e in self.full.iter_mut() {
            e.valid = false;
        }
    }

    #[inline]
    fn set_of(module: u64, rel_pc: u64) -> usize {
        let h = (rel_pc ^ module.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h.wrapping_shr(64 - INDEX_BITS) as usize
    }

    /// The compact entry of `rel_pc` in `module`, if cached (a row or [`CompactRow::FULL`]),
    /// and marks it used.
    #[inline]
    pub fn find(&mut self, module: u64, rel_pc: u64) -> Option<CompactRow> {
        let set = Self::set_of(module, rel_pc);
        let first = set.wrapping_mul(ROW_CACHE_WAYS);
        let ways = self
            .entries
            .get(first..first.wrapping_add(ROW_CACHE_WAYS))?;
        let way = ways
            .iter()
            .position(|e| e.module == module && e.rel_pc == rel_pc && !e.row.is_empty())?;
        let row = ways.get(way)?.row;
        if let Some(v) = self.victim.get_mut(set) {
            *v = u8::from(way == 0);
        }
        Some(row)
    }

    /// The full row of `rel_pc` in `module`, if cached.
    pub fn find_full(&self, module: u64, rel_pc: u64) -> Option<&Row> {
        self.full
            .iter()
            .find(|e| e.valid && e.module == module && e.rel_pc == rel_pc)
            .map(|e| &e.row)
    }

    /// The row of `rel_pc` in `module`, if cached (a compact one as a full row of the
    /// same effect, see [`CompactRow::to_row`]).
    pub fn get(&mut self, module: u64, rel_pc: u64) -> Option<Row> {
        let c = self.find(module, rel_pc)?;
        if c.is_full() {
            self.find_full(module, rel_pc).copied()
        } else {
            Some(c.to_row())
        }
    }

    /// Caches `row` as the row of `rel_pc` in `module`, replacing the least recently used
    /// row of its set (and, for a row without a compact form, the oldest full row).
    pub fn insert(&mut self, module: u64, rel_pc: u64, row: &Row) {
        let compact = match CompactRow::from_row(row) {
            Some(c) => c,
            None => {
                self.insert_full(module, rel_pc, row);
                CompactRow::FULL
            }
        };
        self.insert_compact(module, rel_pc, compact);
    }

    fn insert_full(&mut self, module: u64, rel_pc: u64, row: &Row) {
        // A row already there (a walk that raced with itself on another CPU cannot happen,
        // but a full row evicted from the compact entries may still be here) is replaced.
        let at = match self
            .full
            .iter()
            .position(|e| e.valid && e.module == module && e.rel_pc == rel_pc)
        {
            Some(i) => i,
            None => {
                let i = usize::from(self.next_full) % FULL_ROW_ENTRIES;
                // INVARIANT: taken modulo the entries on use; fits a u8.
                self.next_full = ((i + 1) % FULL_ROW_ENTRIES) as u8;
                i
            }
        };
        if let Some(e) = self.full.get_mut(at) {
            e.valid = true;
            e.module = module;
            e.rel_pc = rel_pc;
            e.row = *row;
        }
    }

    /// Caches `row`, a compact row (found elsewhere: the row table all CPUs share), as the
    /// row of `rel_pc` in `module`, replacing the least recently used row of its set.
    pub fn insert_compact(&mut self, module: u64, rel_pc: u64, row: CompactRow) {
        let set = Self::set_of(module, rel_pc);
        let Some(v) = self.victim.get_mut(set) else {
            return;
        };
        let way = usize::from(*v & 1);
        *v = u8::from(way == 0);
        let slot = set.wrapping_mul(ROW_CACHE_WAYS).wrapping_add(way);
        if let Some(e) = self.entries.get_mut(slot) {
            e.module = module;
            e.rel_pc = rel_pc;
            e.row = row;
        }
    }
}

/// Where a walk finds and keeps rows. A walk may sleep between two accesses (its reads
/// fault pages in), so the module's store is a per-CPU [`RowCache`] reached for one access
/// at a time, which copies the row out; a test owns a [`RowCache`] outright.
///
/// A warm frame costs one [`RowStore::lookup`], which copies a 24-byte [`CompactRow`]; only
/// the rare rows without a compact form need [`RowStore::lookup_full`] too.
pub trait RowStore {
    /// The compact row of `rel_pc` in `module`, if cached: a row, or [`CompactRow::FULL`]
    /// for a row without a compact form (then [`RowStore::lookup_full`] may have it).
    fn lookup(&mut self, module: u64, rel_pc: u64) -> Option<CompactRow>;
    /// The full row of `rel_pc` in `module`, copied into `out`, if cached.
    fn lookup_full(&mut self, module: u64, rel_pc: u64, out: &mut Row) -> bool;
    /// Caches `row` as the row of `rel_pc` in `module`.
    fn store(&mut self, module: u64, rel_pc: u64, row: &Row);
    /// The compact row of `rel_pc` in `module` (a row, never [`CompactRow::FULL`]) if the
    /// store finds it at its first probe, without keeping track of the use: the walk's fast
    /// path ([`super::Unwinder`]'s warm frames). `None` says nothing (then the walk asks
    /// [`RowStore::lookup`]); the default finds nothing. Must not answer another row than
    /// [`RowStore::lookup`] would.
    #[inline(always)]
    fn hot(&self, module: u64, rel_pc: u64) -> Option<&CompactRow> {
        let _ = (module, rel_pc);
        None
    }
}

impl<S: RowStore + ?Sized> RowStore for &mut S {
    #[inline(always)]
    fn lookup(&mut self, module: u64, rel_pc: u64) -> Option<CompactRow> {
        (**self).lookup(module, rel_pc)
    }

    fn lookup_full(&mut self, module: u64, rel_pc: u64, out: &mut Row) -> bool {
        (**self).lookup_full(module, rel_pc, out)
    }

    fn store(&mut self, module: u64, rel_pc: u64, row: &Row) {
        (**self).store(module, rel_pc, row);
    }

    #[inline(always)]
    fn hot(&self, module: u64, rel_pc: u64) -> Option<&CompactRow> {
        (**self).hot(module, rel_pc)
    }
}

impl RowStore for RowCache {
    #[inline]
    fn lookup(&mut self, module: u64, rel_pc: u64) -> Option<CompactRow> {
        self.find(module, rel_pc)
    }

    fn lookup_full(&mut self, module: u64, rel_pc: u64, out: &mut Row) -> bool {
        match self.find_full(module, rel_pc) {
            Some(row) => {
                *out = *row;
                true
            }
            None => false,
        }
    }

    fn store(&mut self, module: u64, rel_pc: u64, row: &Row) {
        self.insert(module, rel_pc, row);
    }

    /// A row of the set of `rel_pc`, without marking it used (the least recently used
    /// mark only chooses which row of the set a store replaces).
    #[inline]
    fn hot(&self, module: u64, rel_pc: u64) -> Option<&CompactRow> {
        let first = Self::set_of(module, rel_pc).wrapping_mul(ROW_CACHE_WAYS);
        self.entries
            .get(first..first.wrapping_add(ROW_CACHE_WAYS))?
            .iter()
            .find(|e| e.module == module && e.rel_pc == rel_pc && e.row.is_row())
            .map(|e| &e.row)
    }
}

impl Default for RowCache {
    fn default() -> Self {
        Self::new()
    }
}

/// Entries of a [`HotRows`] (a power of two): 5 KiB. With 32, two of the dozen return
/// addresses of a python3 stack often shared an entry and evicted each other at every walk
/// (a per-CPU lookup each time): 64 took 700 to 950 instructions off a python3 event
/// (icount). Two entries a set did no better (the longer lookup costs every frame); two
/// places a row (below) cost a second probe only where the first misses. 128 (the task's
/// cached stack moved out of its allocation to make room) took 6.5% to 10% off the
/// module's instructions an event of `nofp-many` (a large program's spread of return
/// addresses), python3 0.4%; 256 would not fit the 8 KiB allocation.
pub const HOT_ROWS: usize = 128;
const HOT_INDEX_BITS: u32 = HOT_ROWS.trailing_zeros();
const _: () = assert!(HOT_ROWS.is_power_of_two() && HOT_INDEX_BITS > 0 && HOT_INDEX_BITS <= 16);

/// A small cache of compact rows owned by one task, in front of the shared [`RowCache`]:
/// the rows of the code a task runs again and again (a deep recursion repeats one return
/// address at every frame). Only its task reads or writes it, so, unlike the module's
/// per-CPU row caches, a lookup needs no preemption guard. Build it with [`HotRows::new`],
/// or, where it must not go through the stack (it is over 5 KiB), make all-zero bytes one
/// with [`HotRows::reset`]: all-zero bytes are a value of the type (its fields are integers
/// all the way down, and zero is [`CompactRow::EMPTY`]) that lacks only the mark of the last
/// entry.
///
/// Each row has two places (two-choice hashing): its first, which a lookup probes first,
/// and a second, probed only when the first holds another row. A row goes to its first
/// place if that is empty, else to its second if that is empty, else to its first. Direct
/// mapping (one place) left two of a stack's rows in one entry in most python3 stacks
/// (eighteen return addresses in 64 entries), which evicted each other at every walk: a
/// simulation over random file ids gave 4.0 misses a warm walk of a python3 stack with one
/// place, 0.5 with two.
pub struct HotRows {
    /// The rows, and at `HOT_ROWS` the mark of a row without a compact form (which a
    /// lookup answers through its entry number like any other, see [`Layered`]).
    entries: [Entry; HOT_ROWS + 1],
}

// (No `Default`: a value over 5 KiB, which the module builds in place with `reset`, never
// through the stack; `scripts/frame-sizes.sh` fails on any function whose frame holds it.)
#[allow(clippy::new_without_default)]
impl HotRows {
    /// An empty cache.
    pub const fn new() -> Self {
        let mut entries = [EMPTY_ENTRY; HOT_ROWS + 1];
        entries[HOT_ROWS].row = CompactRow::FULL;
        Self { entries }
    }

    /// Empties the cache in place: every entry empty, the last one the mark (what
    /// [`HotRows::new`] builds, without a copy of it on the stack).
    pub fn reset(&mut self) {
        for e in self.entries.iter_mut() {
            *e = EMPTY_ENTRY;
        }
        if let Some(last) = self.entries.get_mut(HOT_ROWS) {
            last.row = CompactRow::FULL;
        }
    }

    /// The hash of the row of `rel_pc` in `module`, from which its two places are taken.
    #[inline(always)]
    fn hash_of(module: u64, rel_pc: u64) -> u64 {
        (rel_pc ^ module.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// The first place of a row of hash `h`.
    #[inline(always)]
    fn first_place(h: u64) -> usize {
        h.wrapping_shr(64 - HOT_INDEX_BITS) as usize
    }

    /// The second place of a row of hash `h`: other bits of the hash, and never the first
    /// (a second place equal to the first would be no second chance).
    #[inline(always)]
    fn second_place(h: u64) -> usize {
        let first = Self::first_place(h);
        let other = (h.wrapping_shr(64 - 2 * HOT_INDEX_BITS) as usize) & (HOT_ROWS - 1);
        if other == first {
            first ^ 1
        } else {
            other
        }
    }

    /// Whether the entry `at` holds the row of `rel_pc` in `module`.
    #[inline(always)]
    fn holds(&self, at: usize, module: u64, rel_pc: u64) -> bool {
        self.entries
            .get(at)
            .is_some_and(|e| e.module == module && e.rel_pc == rel_pc && e.row.is_row())
    }

    /// The entry holding the row of `rel_pc` in `module`, if it is in its first place.
    #[inline(always)]
    fn in_first_place(&self, module: u64, rel_pc: u64) -> Option<usize> {
        let at = Self::first_place(Self::hash_of(module, rel_pc));
        self.holds(at, module, rel_pc).then_some(at)
    }

    /// The entry holding the row of `rel_pc` in `module`, if it is in its second place.
    #[inline]
    fn in_second_place(&self, module: u64, rel_pc: u64) -> Option<usize> {
        let at = Self::second_place(Self::hash_of(module, rel_pc));
        self.holds(at, module, rel_pc).then_some(at)
    }

    /// The entry holding the row of `rel_pc` in `module`, if any.
    #[inline]
    fn position(&self, module: u64, rel_pc: u64) -> Option<usize> {
        self.in_first_place(module, rel_pc)
            .or_else(|| self.in_second_place(module, rel_pc))
    }

    /// The row of entry `at` ([`CompactRow::FULL`] for `HOT_ROWS` and past it).
    #[inline(always)]
    fn row_at(&self, at: usize) -> CompactRow {
        self.entries[at.min(HOT_ROWS)].row
    }

    /// The row of entry `at` ([`CompactRow::FULL`] for `HOT_ROWS` and past it), in place.
    #[inline(always)]
    fn row_ref(&self, at: usize) -> &CompactRow {
        &self.entries[at.min(HOT_ROWS)].row
    }

    /// The compact row of `rel_pc` in `module`, if this cache has it.
    pub fn find(&self, module: u64, rel_pc: u64) -> Option<CompactRow> {
        self.position(module, rel_pc).map(|at| self.row_at(at))
    }

    /// Keeps `row` (a compact row; anything else is not kept) for `rel_pc` in `module`
    /// (which this cache does not hold: a lookup missed it); returns the entry it went to.
    #[inline]
    pub fn insert(&mut self, module: u64, rel_pc: u64, row: CompactRow) -> Option<usize> {
        if !row.is_row() {
            return None;
        }
        let h = Self::hash_of(module, rel_pc);
        let (first, second) = (Self::first_place(h), Self::second_place(h));
        let empty = |e: Option<&Entry>| e.is_some_and(|e| !e.row.is_row());
        let at = if !empty(self.entries.get(first)) && empty(self.entries.get(second)) {
            second
        } else {
            first
        };
        let e = self.entries.get_mut(at)?;
        *e = Entry {
            module,
            rel_pc,
            row,
        };
        Some(at)
    }
}

/// A task's [`HotRows`] in front of a shared store: a compact row found in the shared store
/// (or computed) is kept in the hot rows too.
pub struct Layered<'a, S: RowStore> {
    /// The task's own rows.
    pub hot: &'a mut HotRows,
    /// The shared store behind them.
    pub shared: S,
}

impl<S: RowStore> Layered<'_, S> {
    /// A lookup that missed the first place of the hot rows: their second place, then the
    /// shared store (whose compact row is kept hot). Returns the entry of the hot rows that
    /// holds the row, or `HOT_ROWS` for a row without a compact form. Out of line: the
    /// fast path of a warm frame keeps nothing for it.
    #[inline(never)]
    fn lookup_past_first(&mut self, module: u64, rel_pc: u64) -> Option<usize> {
        if let Some(at) = self.hot.in_second_place(module, rel_pc) {
            return Some(at);
        }
        let row = self.shared.lookup(module, rel_pc)?;
        Some(self.hot.insert(module, rel_pc, row).unwrap_or(HOT_ROWS))
    }
}

impl<S: RowStore> RowStore for Layered<'_, S> {
    #[inline(always)]
    fn lookup(&mut self, module: u64, rel_pc: u64) -> Option<CompactRow> {
        // Entry numbers, not rows, meet where the paths join: the row is copied once, from
        // the entry, after the join. (Where two copies of a row joined, the kernel's build
        // loaded every field of it before the test of a frame-record row: two dozen
        // instructions a frame on the path of every frame-pointer frame.)
        let at = match self.hot.in_first_place(module, rel_pc) {
            Some(at) => at,
            None => self.lookup_past_first(module, rel_pc)?,
        };
        Some(self.hot.row_at(at))
    }

    fn lookup_full(&mut self, module: u64, rel_pc: u64, out: &mut Row) -> bool {
        self.shared.lookup_full(module, rel_pc, out)
    }

    fn store(&mut self, module: u64, rel_pc: u64, row: &Row) {
        self.shared.store(module, rel_pc, row);
        if let Some(compact) = CompactRow::from_row(row) {
            self.hot.insert(module, rel_pc, compact);
        }
    }

    /// The row in the hot rows, in its first place or its second (what
    /// [`Layered::lookup`] finds before it asks the shared store).
    #[inline(always)]
    fn hot(&self, module: u64, rel_pc: u64) -> Option<&CompactRow> {
        self.hot
            .position(module, rel_pc)
            .map(|at| self.hot.row_ref(at))
    }
}
