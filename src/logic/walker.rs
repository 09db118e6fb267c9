// SPDX-License-Identifier: GPL-2.0
//! x86-64 frame-pointer walk of a user stack, over any [`UserMemory`].
//!
//! With frame pointers, every frame starts with `push %rbp; mov %rsp, %rbp`, so at `fp`
//! lies the caller's frame pointer and at `fp + 8` the return address into the caller.
//! User memory is untrusted: every step is validated and the walk stops cleanly, keeping
//! what it has, on a fault or on anything that does not look like a frame chain.

/// Reads user memory. The module's implementation faults pages in (task context).
pub trait UserMemory {
    /// The frame record at the 8-byte aligned `fp`: `[next fp, return address]`, or `None`
    /// if either word cannot be read. The walker reads one record per frame, so a reader
    /// fetches both words at once (the module: one user-access section).
    fn read_frame(&mut self, fp: u64) -> Option<[u64; 2]>;

    /// The frame record at `fp` if the reader holds it already (no read, no fault): the
    /// walk's common step, before it checks `fp` in full. Only an 8-byte aligned `fp` at or
    /// above an address the walk passed to [`UserMemory::read_frame`] may give `Some` (so
    /// that a record held is one the walk's lower bound and alignment admit), and only the
    /// words `read_frame` would give for it. `None` (the default) sends the walk to the
    /// full checks and `read_frame`.
    #[inline(always)]
    fn held_frame(&self, _fp: u64) -> Option<[u64; 2]> {
        None
    }
}

/// Reads consecutive 8-byte words of user memory: the primitive under [`Windowed`].
pub trait WordReader {
    /// Reads up to `out.len()` words starting at the 8-byte aligned `addr`, stopping at the
    /// first word that cannot be read. Returns how many words were read.
    fn read_words(&mut self, addr: u64, out: &mut [u64]) -> usize;
}

/// Words read ahead per window: 256 bytes, several frames of a typical stack.
pub const WINDOW_WORDS: usize = 32;

/// A [`UserMemory`] that reads the stack a window at a time: one [`WordReader`] call (for
/// the module, one user-access section) serves every frame record that lies in the window.
/// Frame records sit at increasing addresses, usually a few dozen bytes apart, so most
/// records come from the window the previous one was in.
///
/// A window never reads past the end of the page its first record is on (unless the record
/// itself straddles the page end): reading ahead must not fault on a page the chain never
/// uses. Nor past the stack's top, when the walk knows it ([`Windowed::begin`]: the main
/// thread's initial stack pointer, above which lie the arguments and environment, never a
/// frame record), unless the record itself straddles it.
///
/// # Invariants
///
/// The window holds `records` frame records, at `base`, `base + 8`, ...: `words[..records +
/// 1]` are the user words there when `records > 0` (a record is two words, so a window of
/// `n >= 1` words holds `n - 1`); `records < WINDOW_WORDS`. `base` is an address the walk
/// passed to [`UserMemory::read_frame`] when `records > 0`.
pub struct Windowed<R> {
    reader: R,
    page_size: u64,
    base: u64,
    records: u64,
    top: u64,
    words: [u64; WINDOW_WORDS],
}

impl<R: WordReader> Windowed<R> {
    /// A reader over `reader` for a system with `page_size` (a power of two) byte pages.
    pub const fn new(reader: R, page_size: u64) -> Self {
        // INVARIANT: the window is empty.
        Self {
            reader,
            page_size,
            base: 0,
            records: 0,
            top: u64::MAX,
            words: [0; WINDOW_WORDS],
        }
    }

    /// Forgets the window (the next read reads): for a reader kept from one walk to the
    /// next, so that a walk neither zeroes a new one nor uses what an earlier walk read.
    pub fn forget(&mut self) {
        // INVARIANT: the window is empty.
        self.records = 0;
    }

    /// Forgets the window, as [`Windowed::forget`], for a walk of a stack whose top is `top`
    /// (`u64::MAX`: none known): a window that starts below it reads no further.
    pub fn begin(&mut self, top: u64) {
        self.forget();
        self.top = top;
    }

    /// The underlying reader (tests count its calls).
    pub fn reader(&self) -> &R {
        &self.reader
    }

    #[inline(always)]
    fn cached(&self, fp: u64) -> Option<[u64; 2]> {
        // One comparison for alignment and both ends: below `base` the difference wraps to
        // a huge word, and an unaligned one keeps its low bits at the top after the
        // rotation. So `i < records` exactly when `fp` is `base + 8 * i` (`base` is below
        // the end of user space, so `base + 8 * i` does not wrap).
        let i = fp.wrapping_sub(self.base).rotate_right(3);
        if i >= self.records {
            return None;
        }
        // `i + 1 <= records < WINDOW_WORDS` (invariant), so the masks change nothing:
        // they only spare the bounds checks (no indexing that could panic: the module has
        // no unwinding).
        let i = i as usize;
        Some([
            self.words[i % WINDOW_WORDS],
            self.words[(i + 1) % WINDOW_WORDS],
        ])
    }
}

impl<R: WordReader> UserMemory for Windowed<R> {
    #[inline]
    fn read_frame(&mut self, fp: u64) -> Option<[u64; 2]> {
        if fp & 7 != 0 {
            return None;
        }
        if let Some(record) = self.cached(fp) {
            return Some(record);
        }
        // A power of two: a mask, not a division (which could panic on zero).
        let in_page = fp & self.page_size.wrapping_sub(1);
        let to_page_end = self.page_size.wrapping_sub(in_page) / 8;
        let mut want = (to_page_end as usize).clamp(2, WINDOW_WORDS);
        // Not past the stack's top (a window from a record at or above it reads ahead as
        // if there were no top: it is not the main thread's stack as exec made it).
        if fp < self.top {
            let to_top = self.top.wrapping_sub(fp).div_ceil(8);
            if to_top < want as u64 {
                want = (to_top as usize).max(2);
            }
        }
        let window = self.words.get_mut(..want)?;
        let read = self.reader.read_words(fp, window).min(want);
        // INVARIANT: `read <= want <= WINDOW_WORDS` words were read at `base`, an address
        // passed to `read_frame`.
        self.base = fp;
        self.records = read.saturating_sub(1) as u64;
        self.cached(fp)
    }

    #[inline(always)]
    fn held_frame(&self, fp: u64) -> Option<[u64; 2]> {
        // Aligned and at or above `base` when `Some` (see `cached`): as the trait asks.
        self.cached(fp)
    }
}

/// The user registers saved at kernel entry that the walk starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (`%rbp`).
    pub fp: u64,
}

/// Why a walk stopped (for counters and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The chain ended normally (a zero frame pointer or return address).
    End,
    /// The output is full.
    Full,
    /// Reading a frame faulted.
    Fault,
    /// The chain is not a valid frame chain (misaligned, not increasing, out of bounds).
    Invalid,
}

/// Walks the frame chain from `regs`, writing the user IP then each return address into
/// `out`, innermost first. Returns how many entries were written and why it stopped.
///
/// `user_end` is the end of the user address space: frames must lie below it.
pub fn walk(
    mem: &mut impl UserMemory,
    regs: UserRegs,
    user_end: u64,
    out: &mut [u64],
) -> (usize, Stop) {
    if out.is_empty() {
        return (0, Stop::Full);
    }
    if regs.ip == 0 || regs.ip >= user_end {
        return (0, Stop::Invalid);
    }
    out[0] = regs.ip;
    let mut n = 1;
    let mut fp = regs.fp;
    // Where a frame record may lie, `low..fp_limit` (computed once): on the stack, at or
    // above the stack pointer, and inside user space; never at 0, the end of the chain. An
    // address is in it when its distance from `low` (wrapping below it to a huge word) is
    // below `span`.
    let low = regs.sp.max(1);
    let fp_limit = user_end.saturating_sub(16);
    let span = fp_limit.saturating_sub(low);
    loop {
        // The common step, while the reader holds the records (see
        // `UserMemory::held_frame`): `fp` is then aligned and at or above an `fp` that passed
        // the full checks below, so at or above `low`; with `fp < fp_limit` and room left,
        // those checks would pass too. (A loop of its own: merged into the one below, the
        // compiler tested the room twice and moved between the two paths, 27 instructions
        // a frame instead of 20.)
        while n < out.len() && fp < fp_limit {
            let Some(record) = mem.held_frame(fp) else {
                break;
            };
            fp = match take(record, fp, user_end, out, &mut n) {
                Ok(next_fp) => next_fp,
                Err(stop) => return (n, stop),
            };
        }
        // The frame record must be aligned and in range (0, out of it, ends the chain).
        if fp & 7 != 0 || fp.wrapping_sub(low) >= span {
            return (n, if fp == 0 { Stop::End } else { Stop::Invalid });
        }
        if n == out.len() {
            return (n, Stop::Full);
        }
        let Some(record) = mem.read_frame(fp) else {
            return (n, Stop::Fault);
        };
        fp = match take(record, fp, user_end, out, &mut n) {
            Ok(next_fp) => next_fp,
            Err(stop) => return (n, stop),
        };
    }
}

/// Takes the frame record `[next fp, return address]` read at `fp`: appends the return
/// address to `out` at `*n` (the caller made sure there is room) and returns the next frame
/// pointer, or why the walk ends there.
#[inline(always)]
fn take(
    record: [u64; 2],
    fp: u64,
    user_end: u64,
    out: &mut [u64],
    n: &mut usize,
) -> Result<u64, Stop> {
    let [next_fp, ret] = record;
    // One comparison for both: 0 wraps to the largest word.
    if ret.wrapping_sub(1) >= user_end.wrapping_sub(1) {
        return Err(if ret == 0 { Stop::End } else { Stop::Invalid });
    }
    if let Some(slot) = out.get_mut(*n) {
        *slot = ret;
        *n += 1;
    }
    // Frames grow down, so callers' frames are at strictly higher addresses: this also
    // guarantees termination on a corrupted (cyclic) chain.
    if next_fp != 0 && next_fp <= fp {
        return Err(Stop::Invalid);
    }
    Ok(next_fp)
}
