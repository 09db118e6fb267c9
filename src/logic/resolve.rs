// SPDX-License-Identifier: GPL-2.0
//! Turns a walked stack (user addresses) into what `user_unwind_stack` records: per frame,
//! a file offset and a file hash (see Documentation/trace-events.rst).
//!
//! In two steps, so that the event is written straight from the stack:
//!
//! * [`resolve_runs`], under the mmap lock: the stack as [`Run`]s, consecutive frames that
//!   are recorded alike (their address plus one bias, one hash): a deep stack is a few runs
//!   (a program's own call chain, then the C library's start-up code).
//! * [`fill`], into the reserved event (preemption off, no lock): each frame's offset and
//!   hash from its run.
//!
//! The address space is behind [`AddressSpace`]: the module looks mappings up under the
//! mmap lock, tests use a table. A stack alternates between a few mappings (an
//! interpreter's stack goes from the C library to the interpreter and back to the C
//! library's start-up code and the interpreter's `_start`): a mapping is looked up only when
//! a frame falls outside the last [`RECENT`] mappings looked up in this stack, and a file is
//! hashed once per stack while it stays among them.
//!
//! Across stacks, a task's [`KnownMappings`] keep what its earlier resolutions looked up, while
//! its address space does not change: a stack whose frames all lie in known mappings is
//! resolved from them ([`resolve_known`]) without the mmap lock or a lookup.

use super::file_id::{file_offset, HASH_ANON, HASH_NO_MAPPING};
use super::task_maps::Stamp;

/// One mapping of the address space, as the resolver needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// Page of the file mapped at `start`.
    pub pgoff: u64,
    /// The mapped file, as an opaque non-zero identity (the module: the `struct file`
    /// pointer, never recorded), or 0 for anonymous memory.
    pub file: usize,
}

/// Mappings (and their files' hashes) a resolution keeps: a stack meets a few files.
pub const RECENT: usize = 4;

/// The address space a stack is resolved in.
pub trait AddressSpace {
    /// The mapping that contains `addr`, if any.
    fn lookup(&mut self, addr: u64) -> Option<Mapping>;
    /// Frames in `file` (non-zero) start: returns the hash to record for it (not
    /// [`HASH_ANON`] or [`HASH_NO_MAPPING`]). Called once per stack and file while the file
    /// stays among the last [`RECENT`] mappings looked up (again only if it left them), so that
    /// callers may count uses of a file per stack (the reminder rule of `file_cache`).
    fn file_run(&mut self, file: usize) -> u32;
}

impl<S: AddressSpace + ?Sized> AddressSpace for &mut S {
    fn lookup(&mut self, addr: u64) -> Option<Mapping> {
        (**self).lookup(addr)
    }

    fn file_run(&mut self, file: usize) -> u32 {
        (**self).file_run(file)
    }
}

/// Consecutive frames of a stack that are recorded alike: each as its address plus `bias`
/// (wrapping), with `hash`. (The layout is the C shim's `struct ud_run`.)
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Run {
    /// Added to each frame's address: the file offset of address 0 in the frame's mapping,
    /// or 0 (anonymous memory, no mapping: the address is recorded).
    pub bias: u64,
    /// Frames in the run (at least 1).
    pub len: u32,
    /// The file's hash, [`HASH_ANON`] or [`HASH_NO_MAPPING`].
    pub hash: u32,
}

/// Where [`resolve_runs`] puts the runs it finds, in stack order.
pub trait RunStore {
    /// Appends `run`; false if there is no room (the resolution stops before its frames).
    fn push(&mut self, run: Run) -> bool;
}

/// The runs found so far: the last one is held back while the next frames may still join it
/// (two mappings of one file side by side, such as a program's header page and its text,
/// make one run).
struct Runs<'a, S: RunStore> {
    store: &'a mut S,
    pending: Option<Run>,
    /// Frames of the runs in `store`.
    stored: usize,
}

impl<'a, S: RunStore> Runs<'a, S> {
    /// No run yet.
    fn new(store: &'a mut S) -> Self {
        Self {
            store,
            pending: None,
            stored: 0,
        }
    }

    /// The frames at the start of `rest` that lie in `[start, end)`, as one run recorded with
    /// `bias` and `hash`: how many, or `None` if out of room. (Inlined in each resolver, as
    /// its steps were written there: one function for both took 26 to 38 instructions more
    /// an event, qprof --ab.)
    #[inline(always)]
    fn take(&mut self, rest: &[u64], start: u64, end: u64, bias: u64, hash: u32) -> Option<usize> {
        let taken = frames_in(rest, start, end);
        self.add(bias, taken, hash).then_some(taken)
    }

    /// Stores the held-back run: the frames of the stored runs.
    #[inline]
    fn finish(mut self) -> usize {
        self.flush();
        self.stored
    }

    /// Appends `len` frames recorded with `bias` and `hash`; false if out of room.
    #[inline]
    fn add(&mut self, bias: u64, len: usize, hash: u32) -> bool {
        let Ok(len) = u32::try_from(len) else {
            return false;
        };
        if let Some(last) = &mut self.pending {
            if last.bias == bias && last.hash == hash {
                if let Some(sum) = last.len.checked_add(len) {
                    last.len = sum;
                    return true;
                }
            }
        }
        self.flush() && {
            self.pending = Some(Run { bias, len, hash });
            true
        }
    }

    /// Stores the held-back run; false if out of room.
    #[inline(always)]
    fn flush(&mut self) -> bool {
        let Some(run) = self.pending.take() else {
            return true;
        };
        if !self.store.push(run) {
            return false;
        }
        self.stored += run.len as usize;
        true
    }
}

/// `N` mappings, each with its range, a word (the bias of its frames in a stack's recent
/// mappings, its first page's file offset in a task's known ones), its file and the file's
/// hash; a new one replaces the oldest. (Arrays by field, all zero at first, an empty range:
/// built in place, where an array of entries was built and then copied.)
///
/// # Invariants
///
/// An entry whose range is empty has file 0.
struct MappingSet<const N: usize> {
    start: [u64; N],
    end: [u64; N],
    word: [u64; N],
    file: [usize; N],
    hash: [u32; N],
    /// The entry the next mapping replaces (in turn: no entry moves).
    next: usize,
}

impl<const N: usize> MappingSet<N> {
    /// No mapping.
    const fn new() -> Self {
        // INVARIANT: every range is empty, every file 0.
        Self {
            start: [0; N],
            end: [0; N],
            word: [0; N],
            file: [0; N],
            hash: [0; N],
            next: 0,
        }
    }

    /// The entry of the mapping that holds `addr`.
    #[inline]
    fn find(&self, addr: u64) -> Option<usize> {
        (0..N).find(|&i| self.start[i] <= addr && addr < self.end[i])
    }

    /// An entry of a mapping of `file` (non-zero).
    #[inline]
    fn of_file(&self, file: usize) -> Option<usize> {
        (0..N).find(|&i| self.file[i] == file)
    }

    /// Keeps a mapping (`start < end` if `file` is not 0), in place of the oldest.
    fn push(&mut self, start: u64, end: u64, word: u64, file: usize, hash: u32) {
        let i = self.next % N;
        self.next = (i + 1) % N;
        // INVARIANT: the caller's.
        (self.start[i], self.end[i], self.word[i]) = (start, end, word);
        (self.file[i], self.hash[i]) = (file, hash);
    }
}

/// The last [`RECENT`] mappings a stack's resolution looked up, with the bias of their
/// frames.
type Recent = MappingSet<RECENT>;

/// How many frames from the first lie in `[start, end)`. (Most of the work on a deep stack:
/// one comparison a frame, the range's start wrapping below to a huge word, four frames a
/// turn.)
#[inline(always)]
fn frames_in(frames: &[u64], start: u64, end: u64) -> usize {
    let span = end.wrapping_sub(start);
    let out = |a: u64| a.wrapping_sub(start) >= span;
    let mut chunks = frames.chunks_exact(4);
    let mut n: usize = 0;
    for chunk in &mut chunks {
        let &[a, b, c, d] = chunk else { break };
        if out(a) || out(b) || out(c) || out(d) {
            break;
        }
        // (No overflow: at most `frames.len()`.)
        n = n.wrapping_add(4);
    }
    let rest = frames.get(n..).unwrap_or_default();
    n + rest.iter().position(|&a| out(a)).unwrap_or(rest.len())
}

/// Resolves `frames` into runs in `store` (see [`Run`]): returns how many frames the stored
/// runs cover, all of them unless `store` ran out of room (never if it has room for one run
/// per frame).
///
/// * a frame in a file mapping: its file offset and the file's hash;
/// * in anonymous memory: the address and [`HASH_ANON`];
/// * in no mapping: the address and [`HASH_NO_MAPPING`].
pub fn resolve_runs(
    space: &mut impl AddressSpace,
    page_shift: u32,
    frames: &[u64],
    store: &mut impl RunStore,
) -> usize {
    let mut recent = Recent::new();
    let mut runs = Runs::new(store);
    let mut i = 0;
    while let Some(&addr) = frames.get(i) {
        let (start, end, bias, hash) = match recent.find(addr) {
            Some(i) => (
                recent.start[i],
                recent.end[i],
                recent.word[i],
                recent.hash[i],
            ),
            None => {
                let Some(m) = space
                    .lookup(addr)
                    .filter(|m| m.start <= addr && addr < m.end)
                else {
                    if !runs.add(0, 1, HASH_NO_MAPPING) {
                        return runs.stored;
                    }
                    i += 1;
                    continue;
                };
                // (Two mappings of one file, such as its header page and its text, share
                // the file's hash and its use.)
                let (bias, hash) = match m.file {
                    0 => (0, HASH_ANON),
                    file => (
                        file_offset(0, m.start, m.pgoff, page_shift),
                        match recent.of_file(file) {
                            Some(j) => recent.hash[j],
                            None => space.file_run(file),
                        },
                    ),
                };
                recent.push(m.start, m.end, bias, m.file, hash);
                (m.start, m.end, bias, hash)
            }
        };
        // The frames from `i` on in that mapping: one run.
        let Some(taken) = runs.take(frames.get(i..).unwrap_or_default(), start, end, bias, hash)
        else {
            return runs.stored;
        };
        i += taken;
    }
    runs.finish()
}

/// Writes the record of the first `n` frames (`n` the shortest of `frames`, `offsets` and
/// `hashes`, and at most what `runs` cover) from their runs: frame `i`'s address plus its
/// run's bias into `offsets[i]`, the run's hash into `hashes[i]`, in native byte order (the
/// arrays are a ring-buffer event's, 4-byte aligned). Returns `n`.
pub fn fill(
    frames: &[u64],
    runs: impl IntoIterator<Item = Run>,
    offsets: &mut [[u8; 8]],
    hashes: &mut [[u8; 4]],
) -> usize {
    let n = frames.len().min(offsets.len()).min(hashes.len());
    let (mut frames, mut offsets, mut hashes) = (&frames[..n], &mut offsets[..n], &mut hashes[..n]);
    let mut done = 0;
    for run in runs {
        let len = (run.len as usize).min(frames.len());
        if len == 0 {
            break;
        }
        let (these, rest) = frames.split_at(len);
        let (out, rest_out) = core::mem::take(&mut offsets).split_at_mut(len);
        let (out_h, rest_h) = core::mem::take(&mut hashes).split_at_mut(len);
        // Four frames a turn, offsets and hashes in one loop.
        let (bias, hash) = (run.bias, run.hash.to_ne_bytes());
        let mut f4 = these.chunks_exact(4);
        let mut o4 = out.chunks_exact_mut(4);
        let mut h4 = out_h.chunks_exact_mut(4);
        for ((f, o), h) in (&mut f4).zip(&mut o4).zip(&mut h4) {
            if let (&[f0, f1, f2, f3], [o0, o1, o2, o3], [h0, h1, h2, h3]) = (f, o, h) {
                *o0 = f0.wrapping_add(bias).to_ne_bytes();
                *o1 = f1.wrapping_add(bias).to_ne_bytes();
                *o2 = f2.wrapping_add(bias).to_ne_bytes();
                *o3 = f3.wrapping_add(bias).to_ne_bytes();
                (*h0, *h1, *h2, *h3) = (hash, hash, hash, hash);
            }
        }
        let tail = f4
            .remainder()
            .iter()
            .zip(o4.into_remainder())
            .zip(h4.into_remainder());
        for ((&f, o), h) in tail {
            *o = f.wrapping_add(bias).to_ne_bytes();
            *h = hash;
        }
        (frames, offsets, hashes) = (rest, rest_out, rest_h);
        done += len;
    }
    done
}

/// Mappings a task's stacks were resolved in, kept for its next stacks (a program's stacks
/// meet the same few mappings again and again).
pub const KNOWN_MAPPINGS: usize = 8;
/// Files a stack resolved from the known mappings may meet (more: it is resolved with
/// lookups).
pub const KNOWN_FILES: usize = 16;

/// What a task's earlier resolutions looked up: mappings with their files' hashes, valid
/// while the task's address space is as it was when they were looked up (the [`Stamp`]:
/// every change of a mapping takes the mmap write lock, which moves the stamp; see
/// [`super::task_maps`]).
///
/// # Invariants
///
/// Every non-empty entry of `set` was answered by a lookup under `stamp` (never `None`
/// then): its word is the mapping's `pgoff`, its file the mapping's file identity (0:
/// anonymous), its hash that file's hash, or 0 while not known; every entry of one file has
/// the same hash.
pub struct KnownMappings {
    stamp: Option<Stamp>,
    set: MappingSet<KNOWN_MAPPINGS>,
}

impl Default for KnownMappings {
    fn default() -> Self {
        Self::new()
    }
}

impl KnownMappings {
    /// Nothing known.
    pub const fn new() -> Self {
        // INVARIANT: every entry is empty.
        Self {
            stamp: None,
            set: MappingSet::new(),
        }
    }

    /// `space`, recording what it answers, for a resolution under `stamp` (the address
    /// space's stamp, read where `space` answers, i.e. with the mmap lock held; `None` if
    /// it could not be stamped: then nothing is kept). What was known under another stamp is
    /// forgotten.
    pub fn recording<S: AddressSpace>(
        &mut self,
        stamp: Option<Stamp>,
        space: S,
    ) -> Recording<'_, S> {
        // (Without a stamp nothing is kept, so there is nothing to forget either.)
        if self.stamp != stamp {
            // INVARIANT: nothing kept (the new stamp holds for no entry).
            *self = Self::new();
            self.stamp = stamp;
        }
        Recording { space, known: self }
    }

    /// The hash kept for `file` (non-zero), 0 if none.
    fn hash_of(&self, file: usize) -> u32 {
        self.set.of_file(file).map_or(0, |i| self.set.hash[i])
    }

    /// Keeps the mapping `m`, which a lookup of `addr` answered under the stamp.
    fn keep(&mut self, addr: u64, m: &Mapping) {
        if self.stamp.is_none()
            || !(m.start <= addr && addr < m.end)
            || self.set.find(addr).is_some()
        {
            return;
        }
        // A file met before keeps its hash (a second mapping of it is not hashed again in
        // a stack that met the first).
        let hash = match m.file {
            0 => 0,
            file => self.hash_of(file),
        };
        // INVARIANT: answered under `stamp` (the caller's), holds `addr`; the file's hash.
        self.set.push(m.start, m.end, m.pgoff, m.file, hash);
    }

    /// `file` (non-zero) has `hash`.
    fn set_hash(&mut self, file: usize, hash: u32) {
        if self.stamp.is_none() {
            return;
        }
        // INVARIANT: every entry of the file, so they keep one hash.
        for i in 0..KNOWN_MAPPINGS {
            if self.set.file[i] == file {
                self.set.hash[i] = hash;
            }
        }
    }
}

/// An [`AddressSpace`] that keeps what it answers in a task's [`KnownMappings`].
pub struct Recording<'a, S> {
    space: S,
    known: &'a mut KnownMappings,
}

impl<S: AddressSpace> AddressSpace for Recording<'_, S> {
    fn lookup(&mut self, addr: u64) -> Option<Mapping> {
        let m = self.space.lookup(addr)?;
        self.known.keep(addr, &m);
        Some(m)
    }

    fn file_run(&mut self, file: usize) -> u32 {
        let hash = self.space.file_run(file);
        self.known.set_hash(file, hash);
        hash
    }
}

/// The files a stack resolved from the known mappings met: their hashes, once per time
/// [`AddressSpace::file_run`] would have been asked for them (what the tracer counts as
/// uses of its files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownFiles {
    hashes: [u32; KNOWN_FILES],
    len: usize,
}

impl KnownFiles {
    /// None yet.
    pub const fn new() -> Self {
        Self {
            hashes: [0; KNOWN_FILES],
            len: 0,
        }
    }

    /// The hashes, in the order the resolution met them.
    pub fn hashes(&self) -> &[u32] {
        self.hashes.get(..self.len).unwrap_or_default()
    }
}

/// Resolves `frames` as [`resolve_runs`] would, from `known` alone, if the address space is
/// still at `stamp` (the caller read it just before, without the mmap lock) and every frame
/// lies in a known mapping: the frames the runs cover (all of them unless `store` ran out
/// of room), with the files met in `files` (new, filled in place: the caller counts their
/// uses as [`AddressSpace::file_run`] would have). `None` otherwise, with runs possibly
/// pushed to `store` (the caller starts again with lookups).
///
/// A mapping may change right after the stamp was read: the stack is then resolved as the
/// address space was at that moment, as a resolution under the lock resolves it as it was
/// when the lock was taken (the stack itself was walked before either).
pub fn resolve_known(
    known: &KnownMappings,
    stamp: Stamp,
    page_shift: u32,
    frames: &[u64],
    store: &mut impl RunStore,
    files: &mut KnownFiles,
) -> Option<usize> {
    if known.stamp != Some(stamp) {
        return None;
    }
    let set = &known.set;
    // `resolve_runs` over the known mappings, with its recent mappings as indices into
    // them: the same lookups (a frame outside the recent ones), so the same runs and the
    // same files met, without copying entries.
    // The `looked_up` last lookups' mappings, in turn; only the entries that hold one are
    // read (a short stack makes two or three lookups: scanning empty entries, twice each,
    // cost more).
    let mut recent = [0; RECENT];
    let mut looked_up = 0usize;
    let holds = |j: usize, addr: u64| {
        set.start.get(j).is_some_and(|&s| s <= addr) && set.end.get(j).is_some_and(|&e| addr < e)
    };
    let mut runs = Runs::new(store);
    let mut i = 0;
    while let Some(&addr) = frames.get(i) {
        let met = recent.get(..looked_up.min(RECENT)).unwrap_or_default();
        let j = match met.iter().find(|&&j| holds(j, addr)) {
            Some(&j) => j,
            None => {
                // A frame no known mapping holds: resolved with lookups.
                let j = set.find(addr)?;
                let file = set.file[j];
                // A file not among the recent mappings' files is met (`file_run`), once
                // per such lookup; its hash must be known (every entry of a file has it).
                if file != 0 && !met.iter().any(|&k| set.file.get(k) == Some(&file)) {
                    let slot = files
                        .hashes
                        .get_mut(files.len)
                        .filter(|_| set.hash[j] != 0)?;
                    *slot = set.hash[j];
                    files.len += 1;
                }
                recent[looked_up % RECENT] = j;
                looked_up = looked_up.wrapping_add(1);
                j
            }
        };
        let (start, end) = (set.start[j], set.end[j]);
        let (bias, hash) = match set.file[j] {
            0 => (0, HASH_ANON),
            _ => (file_offset(0, start, set.word[j], page_shift), set.hash[j]),
        };
        let Some(taken) = runs.take(frames.get(i..).unwrap_or_default(), start, end, bias, hash)
        else {
            return Some(runs.stored);
        };
        i += taken;
    }
    Some(runs.finish())
}
