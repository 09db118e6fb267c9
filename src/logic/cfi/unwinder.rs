// SPDX-License-Identifier: GPL-2.0
//! The walk driver: from the user registers at kernel entry to the list of return addresses,
//! by CFI where an FDE covers the PC and by the frame-pointer chain where none does.
//!
//! The driver asks an [`UnwindInfoSource`] (the module: the VMA of the PC and its file's
//! cached ELF summary) where the unwind information of each PC is, caches the rows it
//! computes in a caller-owned [`RowCache`] (in [`CompactRow`] form, nearly all of them),
//! reads the unwind information through a [`ReadAhead`] and the stack through a
//! [`StackWindow`] (filled through the same [`ReadAhead`], under the same byte budget).
//!
//! A warm frame (its row in the task's hot rows, [`RowStore::hot`]) goes through one loop
//! ([`Unwinder::warm_frames`]) that builds nothing per frame: a probe of the hot rows, a
//! few loads from the stack window, the checks, and an update of the registers in place;
//! a run of frame-pointer frames keeps `%rbp`, the IP and `%rsp` in registers. The window
//! is refilled every few frames. Anything else (rows without a compact form, cache misses,
//! a window that cannot hold a frame's saved registers, the end of the stack, every error,
//! the frame-pointer fallback) is left to [`Unwinder::next_frame`], one frame at a time.
//!
//! Safety of a walk (every check is counted by its [`Stop`]):
//!
//! * at most `out.len()` frames, [`WalkParams::byte_budget`] bytes read, and bounded work
//!   per frame (see the constants of each module);
//! * the stack pointer strictly grows from one frame to the next (so a cyclic stack ends),
//!   except across a signal frame (a `sigaltstack` can be anywhere), and at most
//!   [`MAX_SIGNAL_FRAMES`] of those;
//! * every address written to the output and every address read is non-zero and below
//!   `user_end`.

use super::cache::RowStore;
use super::compact::{step_windowed, CompactRow, SLOT_REGS};
use super::eh_frame::parse_fde;
use super::eh_frame_hdr;
use super::interp::row_for_pc_into;
use super::memory::{ReadAhead, StackWindow, UnwindMemory, MAX_BYTES_PER_WALK};
use super::regs::{Regs, NORMAL_FRAME_MASK, RA, RBP, RSP};
use super::row::Row;
use super::{Error, Invalid, Unsupported};
// Relative: the module includes these files as `crate::logic`, the host crate as its root.
use super::super::walker;

/// Most signal frames on one stack (nested signals).
pub const MAX_SIGNAL_FRAMES: u32 = 8;
/// The smallest `user_end` a walk accepts (below it nothing is user space).
const MIN_USER_END: u64 = 4096;

/// How frames are unwound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// CFI where an FDE covers the PC, the frame-pointer chain where none does (code
    /// without unwind information: hand-written assembly, JIT code, anonymous memory).
    Auto,
    /// CFI only: the walk stops ([`Stop::NoUnwindInfo`]) at a PC no FDE covers.
    Cfi,
    /// The frame-pointer walk of [`walker::walk`], unchanged.
    Fp,
}

/// Where the unwind information of a mapped file is (what a per-file cache provides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Identifies the file's unwind information for the [`RowCache`]: two modules with the
    /// same id must have identical `.eh_frame_hdr` and `.eh_frame` (for example a hash of
    /// the file's identity, as the module's file ids).
    pub id: u64,
    /// Load bias: runtime address minus link-time address ([`super::ElfInfo::bias`]).
    pub bias: u64,
    /// Link-time address of `.eh_frame_hdr` (`PT_GNU_EH_FRAME`'s `p_vaddr`).
    pub eh_frame_hdr: u64,
    /// Its size (`p_memsz`; 0 if unknown).
    pub eh_frame_hdr_len: u64,
}

/// What an [`UnwindInfoSource`] knows about a PC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The PC is in no mapping: it is not code (the walk is broken).
    Unmapped,
    /// The PC is mapped, but without unwind information (anonymous memory, a file without
    /// `PT_GNU_EH_FRAME`, a file whose headers cannot be read).
    NoInfo,
    /// The PC is in a mapped file with a `.eh_frame_hdr`.
    Module(ModuleInfo),
}

/// What an [`UnwindInfoSource`] knows about a PC, and the addresses it knows it for: the
/// mapping that holds the PC (or the PC alone, if none does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    /// The first address of the range.
    pub start: u64,
    /// The end of the range (excluded).
    pub end: u64,
    /// Where the unwind information of every address of `start..end` is.
    pub lookup: Lookup,
}

impl Located {
    /// Nothing known (an empty range).
    pub const NOTHING: Located = Located {
        start: 0,
        end: 0,
        lookup: Lookup::Unmapped,
    };

    /// What is known of the PC `pc` alone (no mapping holds it, or none is known).
    pub const fn at(pc: u64, lookup: Lookup) -> Located {
        Located {
            start: pc,
            end: pc.wrapping_add(1),
            lookup,
        }
    }

    /// Whether `pc` lies in the range.
    #[inline(always)]
    pub fn holds(&self, pc: u64) -> bool {
        self.start <= pc && pc < self.end
    }
}

/// Finds the unwind information of a PC (the module: `find_vma`, then the file's cached
/// ELF summary).
pub trait UnwindInfoSource {
    /// Where the unwind information of `pc` is, and for which range of addresses around it
    /// the answer holds: a walk asks again only for a PC outside it (most frames of a stack
    /// lie in the mapping of the frame before).
    fn find(&mut self, pc: u64) -> Located;
}

/// The parameters of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkParams {
    /// How frames are unwound.
    pub mode: Mode,
    /// The end of user space: every address must lie below it.
    pub user_end: u64,
    /// The page size (a power of two): read-ahead never crosses a page end.
    pub page_size: u64,
    /// Bytes the walk may read ([`MAX_BYTES_PER_WALK`] by default).
    pub byte_budget: u64,
    /// The top of the main thread's stack, its initial stack pointer (`u64::MAX` by
    /// default: none known): the stack window reads ahead no further (see [`StackWindow`]).
    pub stack_top: u64,
}

impl WalkParams {
    /// Parameters with the default byte budget.
    pub const fn new(mode: Mode, user_end: u64, page_size: u64) -> Self {
        Self {
            mode,
            user_end,
            page_size,
            byte_budget: MAX_BYTES_PER_WALK,
            stack_top: u64::MAX,
        }
    }

    /// The same parameters for a task whose main thread's stack starts at `top`.
    pub const fn with_stack_top(self, top: u64) -> Self {
        Self {
            stack_top: top,
            ..self
        }
    }
}

/// Why a walk stopped. Every value is distinct (see [`Stop::index`]) so that the module can
/// count each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The end of the stack: an undefined return address (`_start`, `clone`), a zero return
    /// address, or a zero frame pointer.
    End,
    /// The output is full.
    Full,
    /// Reading memory faulted (the stack or the unwind information).
    Fault,
    /// The byte budget is spent.
    Budget,
    /// CFI mode: no FDE covers the PC.
    NoUnwindInfo,
    /// The stack or the unwind information is invalid.
    Invalid(Invalid),
    /// The unwind information needs something this unwinder does not do.
    Unsupported(Unsupported),
}

/// The stop reasons without a kind.
const SIMPLE_STOPS: usize = 5;

impl Stop {
    /// Number of distinct stop reasons ([`Stop::index`] is below it).
    pub const COUNT: usize = SIMPLE_STOPS + Invalid::ALL.len() + Unsupported::ALL.len();

    /// A dense index in `0..Stop::COUNT` (for counters).
    pub const fn index(self) -> usize {
        match self {
            Stop::End => 0,
            Stop::Full => 1,
            Stop::Fault => 2,
            Stop::Budget => 3,
            Stop::NoUnwindInfo => 4,
            Stop::Invalid(k) => SIMPLE_STOPS + k.index(),
            Stop::Unsupported(k) => SIMPLE_STOPS + Invalid::ALL.len() + k.index(),
        }
    }

    /// The stop reason of index `i` (the inverse of [`Stop::index`]).
    pub fn from_index(i: usize) -> Option<Stop> {
        Some(match i {
            0 => Stop::End,
            1 => Stop::Full,
            2 => Stop::Fault,
            3 => Stop::Budget,
            4 => Stop::NoUnwindInfo,
            _ => {
                let k = i.checked_sub(SIMPLE_STOPS)?;
                match Invalid::ALL.get(k) {
                    Some(&v) => Stop::Invalid(v),
                    None => Stop::Unsupported(
                        *Unsupported::ALL.get(k.checked_sub(Invalid::ALL.len())?)?,
                    ),
                }
            }
        })
    }

    /// A short name of the reason's class (`"invalid"`, `"unsupported"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Stop::End => "end",
            Stop::Full => "full",
            Stop::Fault => "fault",
            Stop::Budget => "budget",
            Stop::NoUnwindInfo => "no_unwind_info",
            Stop::Invalid(_) => "invalid",
            Stop::Unsupported(_) => "unsupported",
        }
    }

    /// The name of the kind of an `Invalid` or `Unsupported` reason (`""` otherwise).
    pub const fn detail(self) -> &'static str {
        match self {
            Stop::Invalid(k) => k.name(),
            Stop::Unsupported(k) => k.name(),
            _ => "",
        }
    }

    fn from_error(e: Error) -> Stop {
        match e {
            Error::Fault => Stop::Fault,
            Error::Budget => Stop::Budget,
            Error::NotFound => Stop::NoUnwindInfo,
            Error::Invalid(k) => Stop::Invalid(k),
            Error::Unsupported(k) => Stop::Unsupported(k),
        }
    }
}

/// Per-walk statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WalkStats {
    /// Frames unwound by CFI.
    pub cfi_frames: u32,
    /// Frames unwound by the frame-pointer chain.
    pub fp_frames: u32,
    /// Signal frames unwound.
    pub signal_frames: u32,
    /// Rows found in the row cache.
    pub cache_hits: u32,
    /// Rows computed (and cached).
    pub cache_misses: u32,
    /// Bytes read from user memory.
    pub bytes_read: u64,
    /// Calls of the memory reader.
    pub read_calls: u32,
}

/// The result of [`walk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkResult {
    /// Entries written to the output.
    pub len: usize,
    /// Why the walk stopped.
    pub stop: Stop,
    /// Statistics.
    pub stats: WalkStats,
}

/// How a frame was unwound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// By its CFI row.
    Cfi,
    /// By the frame-pointer chain.
    Fp,
}

/// A frame found by [`Unwinder::next_frame`]: the caller of the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The caller's IP (a return address, or an interrupted IP after a signal frame).
    pub ip: u64,
    /// The caller's stack pointer (the CFA of the frame unwound).
    pub sp: u64,
    /// How the frame was unwound.
    pub method: Method,
    /// Whether the frame unwound was a signal frame (so `ip` is exact).
    pub signal: bool,
}

/// Answers of the [`UnwindInfoSource`] a walk keeps.
const LOCATED: usize = 4;
const _: () = assert!(LOCATED >= 2);

/// The last answers of an [`UnwindInfoSource`], and the ranges they hold for, that a walk
/// keeps and passes on to the next walk of the same address space: `located[0]` is the
/// current frame's, the others the most recent ones before it (a stack alternates between
/// a few files: a program, its libraries, the C library). The next walk of a stack of the
/// same shape starts with the answers it needs (the module keeps one per task: a short
/// stack through the C library asked the task's cache of mappings twice a walk, and the
/// zeroing of a new set was a `memset`).
///
/// The caller makes sure the answers still hold: [`RecentAnswers::clear`] whenever what
/// the source would answer may have changed (the module: a task whose address space has a
/// new stamp, as the task's cache of mappings, `task_maps`, is emptied).
///
/// # Invariants
///
/// `victim` is in `1..LOCATED`.
#[derive(Debug, Clone)]
pub struct RecentAnswers {
    located: [Located; LOCATED],
    /// Where the next answer of the source puts the current one (the entries are replaced
    /// in turn).
    victim: usize,
}

impl RecentAnswers {
    /// No answers.
    pub const fn new() -> Self {
        // INVARIANT: 1 is in 1..LOCATED.
        Self {
            located: [Located::NOTHING; LOCATED],
            victim: 1,
        }
    }

    /// Forgets every answer (the source's may have changed).
    pub fn clear(&mut self) {
        *self = Self::new();
    }
}

impl Default for RecentAnswers {
    fn default() -> Self {
        Self::new()
    }
}

/// A walk in progress, one frame at a time ([`walk`] drives one to fill an array).
///
/// A warm frame (its row cached in compact form) is a cache lookup, the reads of its saved
/// registers from the stack window, and an update of the registers in place.
///
/// # Invariants
///
/// `regs` has `RA` (the frame's IP, non-zero, below `user_end`) and `RSP` known; once
/// `done` is set, every call of [`Unwinder::next_frame`] returns it.
pub struct Unwinder<'a, M: UnwindMemory, S: UnwindInfoSource, C: RowStore> {
    /// Reads the unwind information (and fills the stack window).
    mem: ReadAhead<&'a mut M>,
    /// Reads the stack (the caller's window: a walk of the module reuses its task's, which
    /// is not zeroed again at every walk).
    stack: &'a mut StackWindow,
    source: &'a mut S,
    /// The last answers of `source` (those of the caller's earlier walks first).
    recent: &'a mut RecentAnswers,
    cache: &'a mut C,
    regs: Regs,
    /// Whether `regs`' IP is exact (the first frame, or interrupted by a signal) rather than
    /// a return address (whose call instruction ends just before it).
    exact: bool,
    mode: Mode,
    user_end: u64,
    stats: WalkStats,
    done: Option<Stop>,
}

impl<'a, M: UnwindMemory, S: UnwindInfoSource, C: RowStore> Unwinder<'a, M, S, C> {
    /// A walk from `regs`, the user registers at kernel entry (the IP is `regs`' `RA`
    /// column; `RSP` must be known), reading the stack through `window` (emptied first),
    /// starting with the answers of `source` in `recent` (which must hold for it).
    pub fn new(
        mem: &'a mut M,
        source: &'a mut S,
        cache: &'a mut C,
        window: &'a mut StackWindow,
        recent: &'a mut RecentAnswers,
        regs: Regs,
        params: &WalkParams,
    ) -> Self {
        let mut done = None;
        match (regs.get(RA), regs.get(RSP)) {
            (Some(ip), Some(_)) if ip != 0 && ip < params.user_end => {}
            (Some(_), Some(_)) => done = Some(Stop::Invalid(Invalid::Address)),
            _ => done = Some(Stop::Invalid(Invalid::UnknownRegister)),
        }
        if params.user_end < MIN_USER_END {
            done = Some(Stop::Invalid(Invalid::Address));
        }
        // (What the window holds was read by an earlier walk.)
        window.begin(params.stack_top);
        // INVARIANT: `done` is set unless the IP and the stack pointer are valid.
        Self {
            mem: ReadAhead::new(mem, params.page_size, params.user_end, params.byte_budget),
            stack: window,
            source,
            recent,
            cache,
            regs,
            exact: true,
            mode: params.mode,
            user_end: params.user_end,
            stats: WalkStats::default(),
            done,
        }
    }

    /// The registers of the current frame.
    pub fn regs(&self) -> &Regs {
        &self.regs
    }

    /// The statistics so far.
    pub fn stats(&self) -> WalkStats {
        let mut s = self.stats;
        s.bytes_read = self.mem.bytes_read();
        s.read_calls = self.mem.read_calls();
        s
    }

    /// Unwinds one frame: returns the caller of the current frame (which becomes current),
    /// or why there is none. After an error, returns the same error.
    #[inline]
    pub fn next_frame(&mut self) -> Result<Frame, Stop> {
        if let Some(stop) = self.done {
            return Err(stop);
        }
        let r = self.unwind_one();
        if let Err(stop) = r {
            self.done = Some(stop);
        }
        r
    }

    #[cold]
    fn stop_of(&self, e: Error) -> Stop {
        match e {
            // The reader knows whether a read faulted, was out of range or over budget.
            Error::Fault => Stop::from_error(self.mem.failure_error()),
            e => Stop::from_error(e),
        }
    }

    #[inline(always)]
    fn unwind_one(&mut self) -> Result<Frame, Stop> {
        let unknown = Stop::Invalid(Invalid::UnknownRegister);
        let ip = self.regs.get(RA).ok_or(unknown)?;
        let sp = self.regs.get(RSP).ok_or(unknown)?;
        // The call instruction ends just before a return address: look up the call.
        let pc = if self.exact { ip } else { ip.wrapping_sub(1) };
        let stepped = match self.mode {
            Mode::Fp => self.fp_step(sp),
            Mode::Auto | Mode::Cfi => {
                if !self.recent.located[0].holds(pc) {
                    self.locate(pc);
                }
                // (Only the two words the fast path needs are copied out of the answer.)
                if let Lookup::Module(ModuleInfo { id, bias, .. }) = self.recent.located[0].lookup {
                    // The fast path: a warm frame.
                    let rel_pc = pc.wrapping_sub(bias);
                    match self.cache.lookup(id, rel_pc) {
                        Some(row) if row.is_row() => {
                            self.stats.cache_hits = self.stats.cache_hits.saturating_add(1);
                            self.compact_step(&row, sp)
                        }
                        cached => match self.full_step(pc, rel_pc, sp, cached.is_some()) {
                            Err(Error::NotFound) if self.mode == Mode::Auto => self.fp_step(sp),
                            r => r,
                        },
                    }
                } else {
                    self.no_row_step(self.recent.located[0].lookup, sp)
                }
            }
        };
        match stepped {
            Ok(Some(frame)) => Ok(frame),
            Ok(None) => Err(Stop::End),
            Err(e) => Err(self.stop_of(e)),
        }
    }

    /// Makes `located[0]` the answer for `pc` (which it does not hold): one of the recent
    /// ones, swapped to the front, or the source's, in front (the one it displaces takes the
    /// place of the least recently displaced). Swaps, not a rotation: an answer is 48
    /// bytes, and a rotation of a few of them was a call of `memmove` and `memcpy` each time
    /// a stack went from one file to another (a tenth of an interpreter's walk).
    #[inline(never)]
    fn locate(&mut self, pc: u64) {
        let recent = &mut *self.recent;
        if let Some(i) = (1..LOCATED).find(|&i| recent.located[i].holds(pc)) {
            recent.located.swap(0, i);
            return;
        }
        let victim = recent.victim;
        // INVARIANT: `victim` stays in 1..LOCATED.
        recent.victim = if victim + 1 < LOCATED { victim + 1 } else { 1 };
        // The source's answer first, then the current one into the victim's place: copied
        // into its place the current one went through `memmove` (the compiler could not
        // tell that the victim is never entry 0).
        let current = recent.located[0];
        recent.located[0] = self.source.find(pc);
        if let Some(slot) = recent.located.get_mut(victim) {
            *slot = current;
        }
    }

    /// The step of a PC outside every module with unwind information: by the frame pointer
    /// if the mode allows and the PC is mapped.
    #[cold]
    fn no_row_step(&mut self, lookup: Lookup, sp: u64) -> Result<Option<Frame>, Error> {
        match lookup {
            Lookup::Unmapped => Err(Error::Invalid(Invalid::Unmapped)),
            _ if self.mode == Mode::Auto => self.fp_step(sp),
            _ => Err(Error::NotFound),
        }
    }

    /// Checks the caller's IP and stack pointer found by a step of the frame whose stack
    /// pointer is `sp` (`Ok(None)`: the end of the stack), and counts the frame. The step
    /// commits the caller's registers only if this accepts them.
    #[inline]
    fn accept(
        &mut self,
        sp: u64,
        new_ip: u64,
        new_sp: u64,
        method: Method,
        signal: bool,
    ) -> Result<Option<Frame>, Error> {
        if new_ip == 0 {
            return Ok(None);
        }
        if new_ip >= self.user_end || new_sp == 0 || new_sp >= self.user_end {
            return Err(Error::Invalid(Invalid::Address));
        }
        if signal {
            // (Counted once accepted: the statistics say how many the walk went through.)
            if self.stats.signal_frames >= MAX_SIGNAL_FRAMES {
                return Err(Error::Invalid(Invalid::SignalFrames));
            }
            self.stats.signal_frames += 1;
        } else if new_sp <= sp {
            return Err(Error::Invalid(Invalid::NotIncreasing));
        }
        match method {
            Method::Cfi => self.stats.cfi_frames = self.stats.cfi_frames.saturating_add(1),
            Method::Fp => self.stats.fp_frames = self.stats.fp_frames.saturating_add(1),
        }
        self.exact = signal;
        Ok(Some(Frame {
            ip: new_ip,
            sp: new_sp,
            method,
            signal,
        }))
    }

    /// The frames of a warm stretch of the stack, written into `out` from `out[len]` on:
    /// while the current frame's PC is in a module with unwind information, its row is in
    /// the task's hot rows ([`RowStore::hot`]), and its step succeeds without an error or
    /// the end of the stack ([`Unwinder::warm_step`]). Returns the new length. A frame it
    /// does not take is left as it was, for [`Unwinder::next_frame`], which takes every
    /// other case (and gives each error).
    ///
    /// This is the loop a frame of a hot stack costs (a deep recursion, an interpreter's
    /// loop): the row probe, the step and the checks, the registers kept in place, and
    /// nothing built for the frame; the statistics are added once at the end.
    #[inline(always)]
    fn warm_frames(&mut self, out: &mut [u64], mut len: usize) -> usize {
        if self.done.is_some() {
            return len;
        }
        let mut frames = 0u32;
        // Bounded by the output's length.
        while let Some(slot) = out.get_mut(len) {
            let (Some(ip), Some(sp)) = (self.regs.get(RA), self.regs.get(RSP)) else {
                break;
            };
            let pc = if self.exact { ip } else { ip.wrapping_sub(1) };
            // (A stack that goes back to a file met before, as an interpreter's goes from
            // the program to the C library and back, finds it among the recent answers;
            // a file met first in this walk is asked of the source, which the module
            // answers from the task's cache of mappings.)
            if !self.recent.located[0].holds(pc) {
                self.locate(pc);
            }
            let Lookup::Module(ModuleInfo { id, bias, .. }) = self.recent.located[0].lookup else {
                break;
            };
            let Some(row) = self.cache.hot(id, pc.wrapping_sub(bias)) else {
                break;
            };
            if row.is_frame_record() {
                let n = self.record_run(out, len, row.sets());
                if n == 0 {
                    break;
                }
                len += n;
                frames = frames.saturating_add(n as u32);
                continue;
            }
            // (The row is read where the hot rows keep it: a copy of it was loaded whole,
            // its eight offsets widened and kept aside, on every frame.)
            let Some(new_ip) = Self::compact_warm_step(
                row,
                &mut self.regs,
                self.stack,
                &mut self.mem,
                self.user_end,
                sp,
            ) else {
                break;
            };
            self.exact = false;
            *slot = new_ip;
            // (No overflow: both at most the output's length.)
            len = len.wrapping_add(1);
            frames = frames.wrapping_add(1);
        }
        // (Each frame is a row found in the cache and a frame unwound by CFI.)
        self.stats.cache_hits = self.stats.cache_hits.saturating_add(frames);
        self.stats.cfi_frames = self.stats.cfi_frames.saturating_add(frames);
        len
    }

    /// The frames of a run of frame-pointer frames, from the current one, whose row (a
    /// frame record, [`CompactRow::is_frame_record`], which sets the registers `sets`)
    /// the caller found in the hot rows: [`Unwinder::warm_step`] of each frame in turn, for
    /// as long as the next frame's row is a frame record in the hot rows, in the same
    /// module. Written into `out` from `out[len]` on; returns how many. The loop of a deep
    /// frame-pointer stack (every frame of a program built with frame pointers): the
    /// registers it changes (`%rbp`, the IP, `%rsp`) are kept in locals and written back
    /// once, as what every record step does to the others is the same
    /// ([`Regs::update_known`] of the same masks, which gives the same result once or
    /// many times).
    #[inline(always)]
    fn record_run(&mut self, out: &mut [u64], len: usize, sets: u32) -> usize {
        let (Some(mut sp), Some(mut rbp)) = (self.regs.get(RSP), self.regs.get(RBP)) else {
            return 0;
        };
        let Located {
            start,
            end,
            lookup: Lookup::Module(ModuleInfo { id, bias, .. }),
        } = self.recent.located[0]
        else {
            return 0;
        };
        // (The last user address, not the end: the loop's checks then keep one bound in a
        // register, not two, see `plausible_below`.)
        let user_last = self.user_end.wrapping_sub(1);
        // The next frame's slot (the IP taken last is the one before it).
        let mut k = len;
        // The PC whose row was last found a frame record (none yet: the return addresses
        // taken are not 0, see `plausible`, so no PC is the largest word).
        let mut record_pc = u64::MAX;
        // (One test for both ends of the module's range: below `start` wraps to a huge
        // offset; an empty or inverted range holds nothing.)
        let span = end.saturating_sub(start);
        // Whether the row of the frame whose PC is `pc` (a return address less one) is a
        // frame record in the hot rows, in the same module: the run goes on.
        let mut goes_on = |cache: &C, pc: u64| {
            // A recursion returns to one call site frame after frame: the same PC has the
            // same row, found a frame record already (and in the range).
            if pc == record_pc {
                return true;
            }
            if pc.wrapping_sub(start) >= span {
                return false;
            }
            record_pc = pc;
            cache
                .hot(id, pc.wrapping_sub(bias))
                .is_some_and(|row| row.is_frame_record())
        };
        // Each turn: the records the window holds, in a loop of their own (as the
        // frame-pointer walker's: the window's bounds stay in registers, one comparison
        // tests a record's place), then one record the window does not hold, filling it.
        // The current frame's row is a frame record (the caller's probe, then `goes_on`).
        // Bounded by the output's length.
        'run: loop {
            let held = self.stack.records();
            let caller = loop {
                let Some(slot) = out.get_mut(k) else {
                    break 'run;
                };
                let Some([caller_rbp, ret]) = held.at(rbp) else {
                    // Not in the window (or not 8-aligned in it): `record_caller` fills the
                    // window from the record, or refuses it (a misaligned record, a fault,
                    // a caller that is not plausible) and the run ends.
                    break self.record_caller(rbp, sp);
                };
                let cfa = rbp.wrapping_add(16);
                if !plausible_below(user_last, sp, ret, cfa) {
                    break 'run;
                }
                let pc = ret.wrapping_sub(1);
                *slot = ret;
                // (No overflow: at most the output's length.)
                k = k.wrapping_add(1);
                (sp, rbp) = (cfa, caller_rbp);
                if !goes_on(&*self.cache, pc) {
                    break 'run;
                }
            };
            let (Some((caller_rbp, ret, cfa)), Some(slot)) = (caller, out.get_mut(k)) else {
                break;
            };
            *slot = ret;
            k = k.wrapping_add(1);
            (sp, rbp) = (cfa, caller_rbp);
            if !goes_on(&*self.cache, ret.wrapping_sub(1)) {
                break;
            }
        }
        let n = k.wrapping_sub(len);
        // The IP: the return address taken last.
        if let Some(&ip) = out.get(k.wrapping_sub(1)).filter(|_| n != 0) {
            // INVARIANT: the new IP is non-zero and below user_end, RA and RSP are known.
            self.regs.set_value(RBP, rbp);
            self.regs.set_value(RA, ip);
            self.regs.set_value(RSP, sp);
            self.regs.update_known(NORMAL_FRAME_MASK, sets);
            self.exact = false;
        }
        n
    }

    /// The step of a frame whose row is `row` (a compact row) and whose stack pointer is
    /// `sp`, when it succeeds: the caller's registers replace the frame's, and its IP is
    /// returned. `None` when the step would fail or end the stack, or the window cannot
    /// hold the saved registers: then nothing changed (but what the window holds), and the
    /// general step ([`Unwinder::compact_step`]) finds out what happens. What it accepts
    /// is what [`Unwinder::accept`] accepts of a normal frame; the statistics are the
    /// caller's.
    #[inline(always)]
    fn warm_step(&mut self, row: &CompactRow, sp: u64) -> Option<u64> {
        let ip = if row.is_frame_record() {
            let rbp = self.regs.get(RBP)?;
            let (caller_rbp, ret, cfa) = self.record_caller(rbp, sp)?;
            // INVARIANT: the new IP is non-zero and below user_end, RA and RSP are known.
            self.regs.set_value(RBP, caller_rbp);
            self.regs.set_value(RA, ret);
            self.regs.set_value(RSP, cfa);
            self.regs.update_known(NORMAL_FRAME_MASK, row.sets());
            ret
        } else {
            Self::compact_warm_step(
                row,
                &mut self.regs,
                self.stack,
                &mut self.mem,
                self.user_end,
                sp,
            )?
        };
        self.exact = false;
        Some(ip)
    }

    /// [`Unwinder::warm_step`] of a row that is not a frame record, on the walk's parts
    /// (so that the row may stay where the row store keeps it while the registers change).
    #[inline(always)]
    fn compact_warm_step(
        row: &CompactRow,
        regs: &mut Regs,
        stack: &mut StackWindow,
        mem: &mut ReadAhead<&'a mut M>,
        user_end: u64,
        sp: u64,
    ) -> Option<u64> {
        let cfa = row.cfa_of_regs(regs)?;
        let cfa_at = row.in_window(cfa, stack, mem)?;
        if row.ends() {
            return None;
        }
        let (ip, new_sp) = row.caller_ip_sp_in_window(regs, cfa, stack, cfa_at).ok()?;
        if !plausible(user_end, sp, ip, new_sp) {
            return None;
        }
        // INVARIANT: the new IP is non-zero and below user_end, RA and RSP are known.
        row.commit_in_window(regs, cfa, stack, cfa_at);
        Some(ip)
    }

    /// The caller of a frame-pointer frame (a frame-record row, the most common row of
    /// compiled code) whose `%rbp` is `rbp` and stack pointer `sp`: its `%rbp` and return
    /// address, the frame record at `rbp`, and its stack pointer, `rbp + 16` (the other
    /// callee-saved registers keep their values: what the general step computes for the
    /// row, in fewer instructions). `None` if the window cannot hold the record or the
    /// caller fails [`Unwinder::plausible`].
    #[inline(always)]
    fn record_caller(&mut self, rbp: u64, sp: u64) -> Option<(u64, u64, u64)> {
        let at = self.stack.hold(&mut self.mem, rbp, 16)?;
        if at & 7 != 0 {
            return None;
        }
        let (caller_rbp, ret) = (self.stack.word(at), self.stack.word(at.wrapping_add(8)));
        let cfa = rbp.wrapping_add(16);
        self.plausible(sp, ret, cfa)
            .then_some((caller_rbp, ret, cfa))
    }

    /// Whether a normal frame's caller with IP `ip` and stack pointer `new_sp`, found from a
    /// frame whose stack pointer is `sp`, is what [`Unwinder::accept`] accepts as a frame
    /// (not the end of the stack, not an error).
    #[inline(always)]
    fn plausible(&self, sp: u64, ip: u64, new_sp: u64) -> bool {
        plausible(self.user_end, sp, ip, new_sp)
    }

    /// The step of a row in compact form: the registers are updated in place. Its common
    /// case is [`Unwinder::warm_step`]; the rest gives the end of the stack or the error.
    #[inline(always)]
    fn compact_step(&mut self, row: &CompactRow, sp: u64) -> Result<Option<Frame>, Error> {
        if let Some(ip) = self.warm_step(row, sp) {
            self.stats.cfi_frames = self.stats.cfi_frames.saturating_add(1);
            let new_sp = self.regs.get(RSP).unwrap_or(0);
            return Ok(Some(Frame {
                ip,
                sp: new_sp,
                method: Method::Cfi,
                signal: false,
            }));
        }
        self.compact_step_slow(row, sp)
    }

    /// [`Unwinder::compact_step`] when [`Unwinder::warm_step`] does not take the frame: a
    /// window that cannot hold the saved registers (they are read one by one, each read may
    /// fail), the end of the stack, or an error.
    #[inline(never)]
    fn compact_step_slow(&mut self, row: &CompactRow, sp: u64) -> Result<Option<Frame>, Error> {
        let cfa = row.cfa(&self.regs, self.stack, &mut self.mem)?;
        let Some(cfa_at) = row.in_window(cfa, self.stack, &mut self.mem) else {
            return self.compact_step_unwindowed(row, cfa, sp);
        };
        // Every saved register is in the window: no read can fail (so the order of the
        // reads does not matter).
        if row.ends() {
            return Ok(None);
        }
        let (new_ip, new_sp) = row.caller_ip_sp_in_window(&self.regs, cfa, self.stack, cfa_at)?;
        let frame = self.accept(sp, new_ip, new_sp, Method::Cfi, false)?;
        if frame.is_some() {
            // INVARIANT: the new IP is non-zero and below user_end, RA and RSP are known.
            row.commit_in_window(&mut self.regs, cfa, self.stack, cfa_at);
        }
        Ok(frame)
    }

    /// [`Unwinder::compact_step_slow`] when the window cannot hold the saved registers: they
    /// are read one by one (each read may fail), then the registers updated.
    #[inline(never)]
    fn compact_step_unwindowed(
        &mut self,
        row: &CompactRow,
        cfa: u64,
        sp: u64,
    ) -> Result<Option<Frame>, Error> {
        let mut values = self.regs.gather(&SLOT_REGS);
        row.read_saved(&self.regs, cfa, self.stack, &mut self.mem, &mut values)?;
        if row.ends() {
            return Ok(None);
        }
        let (new_ip, new_sp) = row.caller_ip_sp(&self.regs, cfa, &values)?;
        let frame = self.accept(sp, new_ip, new_sp, Method::Cfi, false)?;
        if frame.is_some() {
            // INVARIANT: the new IP is non-zero and below user_end, RA and RSP are known.
            row.commit(&mut self.regs, cfa, values);
        }
        Ok(frame)
    }

    /// The step of a row not cached in compact form: a full row from the cache (`marked`:
    /// the cache says it has one), else computed and cached. The PC is in the module of
    /// the last answer of the source.
    #[inline(never)]
    fn full_step(
        &mut self,
        pc: u64,
        rel_pc: u64,
        sp: u64,
        marked: bool,
    ) -> Result<Option<Frame>, Error> {
        let Lookup::Module(module) = self.recent.located[0].lookup else {
            return Err(Error::NotFound);
        };
        let module = &module;
        let mut row = Row::EMPTY;
        if marked && self.cache.lookup_full(module.id, rel_pc, &mut row) {
            self.stats.cache_hits = self.stats.cache_hits.saturating_add(1);
        } else {
            self.stats.cache_misses = self.stats.cache_misses.saturating_add(1);
            compute_row_into(&mut self.mem, module, pc, &mut row)?;
            self.cache.store(module.id, rel_pc, &row);
            if let Some(compact) = CompactRow::from_row(&row) {
                return self.compact_step(&compact, sp);
            }
        }
        let Some(caller) = step_windowed(&row, &self.regs, self.stack, &mut self.mem)? else {
            return Ok(None);
        };
        let unknown = Error::Invalid(Invalid::UnknownRegister);
        let new_ip = caller.regs.get(RA).ok_or(unknown)?;
        let new_sp = caller.regs.get(RSP).ok_or(unknown)?;
        let frame = self.accept(sp, new_ip, new_sp, Method::Cfi, row.signal)?;
        if frame.is_some() {
            // INVARIANT: the new IP is non-zero and below user_end, RA and RSP are known.
            self.regs = caller.regs;
        }
        Ok(frame)
    }

    /// One frame-pointer step: `[rbp]` is the caller's `%rbp`, `[rbp + 8]` the return
    /// address, `rbp + 16` the caller's stack pointer. Only those three are known after it.
    fn fp_step(&mut self, sp: u64) -> Result<Option<Frame>, Error> {
        let rbp = self
            .regs
            .get(RBP)
            .ok_or(Error::Invalid(Invalid::UnknownRegister))?;
        if rbp == 0 {
            return Ok(None);
        }
        if rbp & 7 != 0 || rbp < sp {
            return Err(Error::Invalid(Invalid::FramePointer));
        }
        let caller_sp = match rbp.checked_add(16) {
            Some(end) if end <= self.user_end => end,
            _ => return Err(Error::Invalid(Invalid::Address)),
        };
        let mut record = [0u8; 16];
        if !self.stack.read(&mut self.mem, rbp, &mut record) {
            return Err(Error::Fault);
        }
        let [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = record;
        let next_rbp = u64::from_le_bytes([a, b, c, d, e, f, g, h]);
        let ret = u64::from_le_bytes([i, j, k, l, m, n, o, p]);
        if ret == 0 {
            return Ok(None);
        }
        let frame = self.accept(sp, ret, caller_sp, Method::Fp, false)?;
        if frame.is_some() {
            // INVARIANT: the new IP is non-zero and below user_end, RA and RSP are known.
            self.regs = Regs::new();
            self.regs.set(RA, ret);
            self.regs.set(RSP, caller_sp);
            self.regs.set(RBP, next_rbp);
        }
        Ok(frame)
    }
}

/// The row of `pc` in `module`: `.eh_frame_hdr` search, FDE and CIE, CFA program.
pub fn compute_row<M: UnwindMemory>(
    mem: &mut M,
    module: &ModuleInfo,
    pc: u64,
) -> Result<Row, Error> {
    let mut row = Row::EMPTY;
    compute_row_into(mem, module, pc, &mut row)?;
    Ok(row)
}

/// [`compute_row`] into `out` (which holds some partial row after an error).
///
/// Not inlined: its frame (the interpreter's remembered states) exists only while it runs.
#[inline(never)]
pub fn compute_row_into<M: UnwindMemory>(
    mem: &mut M,
    module: &ModuleInfo,
    pc: u64,
    out: &mut Row,
) -> Result<(), Error> {
    let hdr_addr = module.bias.wrapping_add(module.eh_frame_hdr);
    let hdr = eh_frame_hdr::parse(mem, hdr_addr, module.eh_frame_hdr_len)?;
    let fde_addr = hdr.find_fde(mem, pc)?;
    let fde = parse_fde(mem, fde_addr)?;
    if !fde.covers(pc) {
        return Err(Error::NotFound);
    }
    row_for_pc_into(mem, &fde, pc, out)
}

/// [`Unwinder::plausible`] with the last user address, `user_last` (`user_end - 1`): a
/// loop that keeps one bound in a register instead of two. (`new_sp` is not 0: it is above
/// `sp`.)
#[inline(always)]
fn plausible_below(user_last: u64, sp: u64, ip: u64, new_sp: u64) -> bool {
    // `ip != 0 && ip < user_end` in one comparison: 0 wraps to the largest word (and the
    // frame-record loop's PC, `ip - 1`, is the same subtraction).
    ip.wrapping_sub(1) < user_last && new_sp <= user_last && new_sp > sp
}

/// [`Unwinder::plausible`] below `user_end`, which is at least [`MIN_USER_END`] in a walk
/// that steps (see [`Unwinder::new`]): `user_end - 1` does not wrap.
#[inline(always)]
fn plausible(user_end: u64, sp: u64, ip: u64, new_sp: u64) -> bool {
    plausible_below(user_end.wrapping_sub(1), sp, ip, new_sp)
}

/// Adapts a [`ReadAhead`] to the frame-pointer walker's memory trait.
struct FrameRecords<'r, M: UnwindMemory>(&'r mut ReadAhead<M>);

impl<M: UnwindMemory> walker::UserMemory for FrameRecords<'_, M> {
    fn read_frame(&mut self, fp: u64) -> Option<[u64; 2]> {
        let mut b = [0u8; 16];
        if !self.0.read(fp, &mut b) {
            return None;
        }
        let [a, b2, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = b;
        Some([
            u64::from_le_bytes([a, b2, c, d, e, f, g, h]),
            u64::from_le_bytes([i, j, k, l, m, n, o, p]),
        ])
    }
}

/// Walks the user stack from `regs` (the user registers at kernel entry, all known; the IP
/// in the `RA` column), writing the IP then each return address into `out`, innermost
/// first (as [`walker::walk`]). Returns how many entries were written, why the walk
/// stopped, and its statistics.
///
/// [`Mode::Fp`] runs [`walker::walk`] itself (through the same read-ahead and byte
/// budget). `cache` keeps rows across walks; `source` finds each PC's unwind information.
pub fn walk<M: UnwindMemory, S: UnwindInfoSource, C: RowStore>(
    mem: &mut M,
    source: &mut S,
    cache: &mut C,
    regs: &Regs,
    params: &WalkParams,
    out: &mut [u64],
) -> WalkResult {
    walk_in(
        &mut StackWindow::new(),
        &mut RecentAnswers::new(),
        mem,
        source,
        cache,
        regs,
        params,
        out,
    )
}

/// [`walk`] through the stack window `window` (whatever it holds is dropped first): a
/// window kept across walks (the module keeps one per task) spares each walk the zeroing
/// of a new one. The walk starts with the answers of `source` in `recent`, which must
/// hold for it (see [`RecentAnswers`]), and leaves its own there.
#[allow(clippy::too_many_arguments)]
pub fn walk_in<M: UnwindMemory, S: UnwindInfoSource, C: RowStore>(
    window: &mut StackWindow,
    recent: &mut RecentAnswers,
    mem: &mut M,
    source: &mut S,
    cache: &mut C,
    regs: &Regs,
    params: &WalkParams,
    out: &mut [u64],
) -> WalkResult {
    if params.mode == Mode::Fp {
        return fp_walk(mem, regs, params, out);
    }
    let mut unwinder = Unwinder::new(mem, source, cache, window, recent, *regs, params);
    let Some(first) = out.first_mut() else {
        return WalkResult {
            len: 0,
            stop: Stop::Full,
            stats: unwinder.stats(),
        };
    };
    if let Some(stop) = unwinder.done {
        return WalkResult {
            len: 0,
            stop,
            stats: unwinder.stats(),
        };
    }
    *first = regs.get(RA).unwrap_or(0);
    let mut len = 1;
    // Bounded by the output's length.
    let stop = loop {
        len = unwinder.warm_frames(out, len);
        let Some(slot) = out.get_mut(len) else {
            break Stop::Full;
        };
        match unwinder.next_frame() {
            Ok(frame) => {
                *slot = frame.ip;
                len += 1;
            }
            Err(stop) => break stop,
        }
    };
    WalkResult {
        len,
        stop,
        stats: unwinder.stats(),
    }
}

/// [`Mode::Fp`]: the frame-pointer walker, through a [`ReadAhead`].
fn fp_walk<M: UnwindMemory>(
    mem: &mut M,
    regs: &Regs,
    params: &WalkParams,
    out: &mut [u64],
) -> WalkResult {
    let mut reader = ReadAhead::new(mem, params.page_size, params.user_end, params.byte_budget);
    let mut stats = WalkStats::default();
    let (len, stop) = match (regs.get(RA), regs.get(RSP)) {
        _ if params.user_end < MIN_USER_END => (0, Stop::Invalid(Invalid::Address)),
        (Some(ip), Some(sp)) => {
            let user = walker::UserRegs {
                ip,
                sp,
                fp: regs.get(RBP).unwrap_or(0),
            };
            let (len, stop) =
                walker::walk(&mut FrameRecords(&mut reader), user, params.user_end, out);
            let stop = match stop {
                walker::Stop::End => Stop::End,
                walker::Stop::Full => Stop::Full,
                walker::Stop::Fault => Stop::from_error(reader.failure_error()),
                walker::Stop::Invalid => Stop::Invalid(Invalid::FramePointer),
            };
            (len, stop)
        }
        _ => (0, Stop::Invalid(Invalid::UnknownRegister)),
    };
    stats.fp_frames = len.saturating_sub(1) as u32;
    stats.bytes_read = reader.bytes_read();
    stats.read_calls = reader.read_calls();
    WalkResult { len, stop, stats }
}
