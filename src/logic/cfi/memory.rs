// SPDX-License-Identifier: GPL-2.0
//! Reading the traced process's memory: the trait the kernel implements, the windowed and
//! budgeted reader a walk goes through, and a bounded byte cursor over it.

use super::{Error, Invalid, MALFORMED};

/// Reads the traced process's memory at absolute (user) addresses. The module implements it
/// with `copy_from_user`; every call is one user-access section, so callers read through a
/// [`ReadAhead`].
pub trait UnwindMemory {
    /// Reads `out.len()` bytes at `addr`: all of them (`true`) or nothing (`false`, `out`
    /// unspecified). Must not panic whatever `addr` is.
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool;

    /// Like [`UnwindMemory::read`], for a random-access read (a binary search probe) that
    /// reading ahead would not help: a windowed reader reads exactly `out`.
    fn read_probe(&mut self, addr: u64, out: &mut [u8]) -> bool {
        self.read(addr, out)
    }

    /// A hint: `len` bytes at `addr` are about to be read (a frame's saved registers). A
    /// windowed reader may read them in one go; a failure shows again, and is reported, on
    /// the read that needs the bytes. The default does nothing.
    fn prefetch(&mut self, addr: u64, len: usize) {
        let _ = (addr, len);
    }
}

impl<M: UnwindMemory + ?Sized> UnwindMemory for &mut M {
    #[inline]
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        (**self).read(addr, out)
    }

    #[inline]
    fn read_probe(&mut self, addr: u64, out: &mut [u8]) -> bool {
        (**self).read_probe(addr, out)
    }

    #[inline]
    fn prefetch(&mut self, addr: u64, len: usize) {
        (**self).prefetch(addr, len)
    }
}

/// Read-ahead windows kept by a [`ReadAhead`]: the CIE, the FDE and the search table each
/// keep theirs while the others are read (the walk reads the stack through its own
/// [`StackWindow`]).
pub const WINDOW_SLOTS: usize = 4;
/// Bytes per read-ahead window: a typical FDE or CIE.
pub const WINDOW_BYTES: usize = 64;
/// Bytes of the [`StackWindow`]: the saved registers of several frames of a typical stack
/// (frames lie about 100 bytes apart: a window serves four or five of them, so a warm walk
/// makes a reader call every few frames).
pub const STACK_WINDOW_BYTES: usize = 512;
/// Bytes a [`StackWindow`] fill reads when reading a whole window would not pay (see
/// [`StackWindow`]): the saved registers of a frame.
pub const STACK_SHORT_FILL: usize = 64;
/// A [`StackWindow`] fill that starts further than this past the end of the previous window
/// reads only [`STACK_SHORT_FILL`] bytes.
pub const STACK_GAP: u64 = 256;
/// Bytes one walk may read from user memory (all reads: stack, search table, CIEs, FDEs).
/// A warm walk reads a stack window every few frames (at most [`STACK_WINDOW_BYTES`] each),
/// a cold frame about 300–500 more (the search, the FDE and CIE windows): 64 KiB is over a
/// hundred cold frames.
pub const MAX_BYTES_PER_WALK: u64 = 64 * 1024;

/// Why the last failed read of a [`ReadAhead`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFailure {
    /// No read failed.
    None,
    /// The range is empty at zero, wraps, or does not end below the end of user space.
    Range,
    /// The byte budget is spent.
    Budget,
    /// The underlying reader failed (the memory is not mapped or not readable).
    Fault,
}

/// One read-ahead window.
///
/// # Invariants
///
/// `len <= WINDOW_BYTES`; `data[..len]` holds the user bytes at `base..base + len`.
#[derive(Clone, Copy)]
struct Slot {
    base: u64,
    len: usize,
    last_use: u32,
    data: [u8; WINDOW_BYTES],
}

/// An [`UnwindMemory`] that reads through [`WINDOW_SLOTS`] read-ahead windows of
/// [`WINDOW_BYTES`] bytes, rejects any range that is not inside `1..user_end`, and stops
/// reading when a byte budget is spent. It counts the calls and bytes of the underlying
/// reader (the cost of a walk).
///
/// A window never reads past the end of the page the requested address is on (unless the
/// request itself crosses it): reading ahead must not touch a page the walk never uses.
/// Reads larger than a window go straight to the underlying reader. A window read that
/// fails is retried once for exactly the requested bytes.
///
/// # Invariants
///
/// Every slot that is not `None` holds bytes that the underlying reader returned during
/// this walk; `bytes` is the sum of the lengths of all underlying reads. (Slots start as
/// `None`, not as empty windows: a walk whose rows are all cached reads no unwind
/// information, and zeroing the windows was a `memset` of some 350 bytes per walk.)
pub struct ReadAhead<M> {
    inner: M,
    page_size: u64,
    user_end: u64,
    budget: u64,
    bytes: u64,
    calls: u32,
    clock: u32,
    failure: ReadFailure,
    slots: [Option<Slot>; WINDOW_SLOTS],
}

impl<M: UnwindMemory> ReadAhead<M> {
    /// A reader over `inner` for a system with `page_size` byte pages (a power of two;
    /// anything else disables reading ahead), accepting addresses below `user_end` and at
    /// most `budget` bytes of underlying reads.
    pub fn new(inner: M, page_size: u64, user_end: u64, budget: u64) -> Self {
        // INVARIANT: no slot holds anything, nothing was read.
        Self {
            inner,
            page_size,
            user_end,
            budget,
            bytes: 0,
            calls: 0,
            clock: 0,
            failure: ReadFailure::None,
            // (Four elements written out, not `[None; WINDOW_SLOTS]`: the kernel's build made
            // the repeat a loop into a temporary and a copy of all 384 bytes of it.)
            slots: [None, None, None, None],
        }
    }

    /// The underlying reader.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Bytes read from the underlying reader so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Whether more than half the byte budget is spent.
    pub(crate) fn spent_half(&self) -> bool {
        self.bytes > self.budget / 2
    }

    /// Calls of the underlying reader so far.
    pub fn read_calls(&self) -> u32 {
        self.calls
    }

    /// Why the most recent failed read failed.
    pub fn last_failure(&self) -> ReadFailure {
        self.failure
    }

    /// The [`Error`] matching the most recent failed read.
    pub fn failure_error(&self) -> Error {
        match self.failure {
            ReadFailure::Budget => Error::Budget,
            ReadFailure::Range => Error::Invalid(Invalid::Address),
            ReadFailure::None | ReadFailure::Fault => Error::Fault,
        }
    }

    /// One underlying read, counted against the budget.
    #[inline(always)]
    pub(crate) fn fetch(&mut self, addr: u64, out: &mut [u8]) -> bool {
        let len = out.len() as u64;
        match self.bytes.checked_add(len) {
            Some(total) if total <= self.budget => self.bytes = total,
            _ => {
                self.failure = ReadFailure::Budget;
                return false;
            }
        }
        self.calls = self.calls.saturating_add(1);
        if self.inner.read(addr, out) {
            true
        } else {
            self.failure = ReadFailure::Fault;
            false
        }
    }

    /// Checks `addr..addr + len` is a non-empty range inside `1..user_end`; returns its end.
    pub(crate) fn check_range(&mut self, addr: u64, len: usize) -> Option<u64> {
        let end = addr.checked_add(len as u64);
        match end {
            Some(end) if addr != 0 && end <= self.user_end => Some(end),
            _ => {
                self.failure = ReadFailure::Range;
                None
            }
        }
    }

    /// Reads a window at `addr` into `buf`: at least `need` bytes (the request, at most
    /// `buf.len()`), at most `buf.len()`, but not past the end of `addr`'s page (unless the
    /// request crosses it), nor past the end of user space, nor past the budget (the
    /// request itself still may exceed the budget: then it fails). A window read that
    /// fails is retried once for exactly the request. Returns the bytes read into `buf`.
    ///
    /// The caller checked the request's range ([`ReadAhead::check_range`]).
    #[inline(always)]
    pub(crate) fn fill(&mut self, addr: u64, need: usize, buf: &mut [u8]) -> Option<usize> {
        let mut want = buf.len() as u64;
        if self.page_size.is_power_of_two() {
            let in_page = addr & self.page_size.wrapping_sub(1);
            want = want.min(self.page_size.wrapping_sub(in_page));
        } else {
            want = 0;
        }
        let left = self.budget.saturating_sub(self.bytes);
        want = want
            .min(self.user_end.wrapping_sub(addr))
            .min(left)
            .max(need as u64)
            .min(buf.len() as u64);
        let want = want as usize;
        let window = buf.get_mut(..want)?;
        if self.fetch(addr, window) {
            return Some(want);
        }
        if want <= need || self.failure == ReadFailure::Budget {
            return None;
        }
        // The read-ahead part may be what failed: retry for exactly the request.
        let exact = buf.get_mut(..need)?;
        if self.fetch(addr, exact) {
            Some(need)
        } else {
            None
        }
    }

    fn tick(&mut self) -> u32 {
        self.clock = self.clock.wrapping_add(1);
        self.clock
    }
}

impl<M: UnwindMemory> UnwindMemory for ReadAhead<M> {
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        let n = out.len();
        if n == 0 {
            return true;
        }
        if self.check_range(addr, n).is_none() {
            return false;
        }
        let now = self.tick();
        // A window that holds the whole range.
        for slot in self.slots.iter_mut().flatten() {
            let Some(start) = addr.checked_sub(slot.base) else {
                continue;
            };
            let Ok(start) = usize::try_from(start) else {
                continue;
            };
            let Some(stop) = start.checked_add(n) else {
                continue;
            };
            if let Some(bytes) = slot.data.get(..slot.len).and_then(|d| d.get(start..stop)) {
                out.copy_from_slice(bytes);
                slot.last_use = now;
                return true;
            }
        }
        if n > WINDOW_BYTES {
            return self.fetch(addr, out);
        }
        // An empty slot, else the least recently used one.
        let mut victim = 0;
        let mut oldest = 0;
        for (i, slot) in self.slots.iter().enumerate() {
            let Some(slot) = slot else {
                victim = i;
                break;
            };
            let age = now.wrapping_sub(slot.last_use);
            if age > oldest {
                victim = i;
                oldest = age;
            }
        }
        let mut buf = [0u8; WINDOW_BYTES];
        let Some(got) = self.fill(addr, n, &mut buf) else {
            return false;
        };
        let Some(bytes) = buf.get(..n) else {
            return false;
        };
        out.copy_from_slice(bytes);
        if let Some(slot) = self.slots.get_mut(victim) {
            // INVARIANT: `buf[..got]` was just read at `addr`.
            *slot = Some(Slot {
                base: addr,
                len: got,
                last_use: now,
                data: buf,
            });
        }
        true
    }

    fn read_probe(&mut self, addr: u64, out: &mut [u8]) -> bool {
        if self.check_range(addr, out.len()).is_none() {
            return false;
        }
        if out.is_empty() {
            return true;
        }
        self.fetch(addr, out)
    }
}

/// The stack as a walk reads it: one window of [`STACK_WINDOW_BYTES`] bytes, filled through
/// a [`ReadAhead`] (so against its range checks and byte budget, and counted in its
/// statistics), separate from the [`ReadAhead`]'s own windows, which keep the unwind
/// information (read only when a row is computed).
///
/// A frame's reads (the return address, the saved registers) lie just below its CFA, and
/// the next frame's above: a window filled from the lowest address a frame reads usually
/// serves several frames, each read a bounds check and a load. Where frames lie far apart,
/// or once half the byte budget is spent, a fill reads about what the frame needs
/// ([`STACK_SHORT_FILL`] bytes): the bytes read stay about what the old per-frame windows
/// read, and a deep stack fits the budget. A fill never reads past the end of the page its
/// first byte is on (unless the request itself crosses it), nor past the end of user space
/// or of the budget; a fill that fails is retried once for exactly the request.
///
/// Nor does a fill that starts below the stack's top (set by [`StackWindow::begin`]: the
/// main thread's initial stack pointer) read ahead past it: above it lie the process's
/// arguments and environment, never a frame, and the last fill of a walk of the main
/// thread read up to a window of them (argc, argv, envp, auxv: 376 bytes a walk of a
/// 70-deep program in the VM) before there was a top. A request for
/// bytes above the top is still read: the top only bounds what is read ahead.
///
/// # Invariants
///
/// `len <= STACK_WINDOW_BYTES`; `data[..len]` holds the user bytes at `base..base + len`,
/// read during this walk (a walk starts with [`StackWindow::begin`]; the bytes past `len`
/// may be an earlier walk's, never read).
pub struct StackWindow {
    base: u64,
    len: usize,
    top: u64,
    data: [u8; STACK_WINDOW_BYTES],
}

const _: () = assert!(
    STACK_WINDOW_BYTES.is_power_of_two()
        && STACK_WINDOW_BYTES >= 64
        && STACK_SHORT_FILL <= STACK_WINDOW_BYTES
);

impl StackWindow {
    /// An empty window.
    pub const fn new() -> Self {
        // INVARIANT: empty.
        Self {
            base: 0,
            len: 0,
            top: u64::MAX,
            data: [0; STACK_WINDOW_BYTES],
        }
    }

    /// Empties the window (for a new walk), without zeroing its bytes.
    #[inline]
    pub fn clear(&mut self) {
        // INVARIANT: empty.
        self.base = 0;
        self.len = 0;
    }

    /// Empties the window for a new walk of a stack whose top is `top` (`u64::MAX`: none
    /// known): fills that start below it read ahead no further.
    #[inline]
    pub fn begin(&mut self, top: u64) {
        self.clear();
        self.top = top;
    }

    /// The bytes at `addr..addr + n`, if the window holds them all.
    #[inline]
    pub fn cached(&self, addr: u64, n: usize) -> Option<&[u8]> {
        let start = usize::try_from(addr.wrapping_sub(self.base)).ok()?;
        self.data.get(..self.len)?.get(start..start.checked_add(n)?)
    }

    /// Where `addr..addr + n` starts in the window, if the window holds it all.
    #[inline]
    pub fn offset_of(&self, addr: u64, n: usize) -> Option<usize> {
        let start = addr.wrapping_sub(self.base);
        let len = self.len as u64;
        if start <= len && n as u64 <= len.wrapping_sub(start) {
            // INVARIANT (of the result): start + n <= len <= STACK_WINDOW_BYTES.
            Some(start as usize)
        } else {
            None
        }
    }

    /// The little-endian word at offset `at` of the window, for an `at` that is a multiple
    /// of 8 and at most `len - 8` (from [`StackWindow::offset_of`]); for any other `at`,
    /// some word of the window (never a panic): a load, without a bounds check.
    #[inline]
    pub fn word(&self, at: usize) -> u64 {
        word_at(&self.data, at)
    }

    /// The frame records (two words, `[%rbp, return address]`) the window holds now, for a
    /// loop that reads many while the window does not change.
    #[inline(always)]
    pub fn records(&self) -> HeldRecords<'_> {
        // A record at `base + 8 * i` ends at `8 * i + 16 <= len` exactly when `i < len / 8 - 1`.
        HeldRecords {
            base: self.base,
            count: ((self.len / 8) as u64).saturating_sub(1),
            data: &self.data,
        }
    }

    /// Makes the window hold `addr..addr + n` (`0 < n <= STACK_WINDOW_BYTES`, a range the
    /// caller checked), reading from `addr`: whether it does.
    ///
    /// The fill reads a whole window ahead while the walk reads the stack in sequence (the
    /// first fill, or one that starts less than [`STACK_GAP`] bytes past the end of the
    /// previous window); after a longer jump (frames far apart: the bytes in between are
    /// never used) it reads [`STACK_SHORT_FILL`] bytes, and so once half the byte budget is
    /// spent (a deep walk then reads about what it needs, as frames far apart do).
    #[inline(always)]
    fn load<M: UnwindMemory>(&mut self, mem: &mut ReadAhead<M>, addr: u64, n: usize) -> bool {
        let end = self.base.wrapping_add(self.len as u64);
        let in_sequence =
            self.len == 0 || (addr >= self.base && addr.saturating_sub(end) < STACK_GAP);
        let mut max = if in_sequence && !mem.spent_half() {
            STACK_WINDOW_BYTES
        } else {
            STACK_SHORT_FILL.max(n)
        };
        // Not past the stack's top (the request itself may be above it: then read it all).
        if addr < self.top {
            let to_top = self.top.wrapping_sub(addr);
            if to_top < max as u64 {
                max = (to_top as usize).max(n);
            }
        }
        // INVARIANT: empty until the fill succeeds (it may have written part of `data`).
        self.len = 0;
        let Some(buf) = self.data.get_mut(..max) else {
            return false;
        };
        match mem.fill(addr, n, buf) {
            Some(got) => {
                // INVARIANT: `data[..got]` was just read at `addr` (`got <= max`).
                self.base = addr;
                self.len = got;
                true
            }
            None => false,
        }
    }

    /// Reads `out.len()` bytes at `addr` (like [`ReadAhead::read`]'s).
    pub fn read<M: UnwindMemory>(
        &mut self,
        mem: &mut ReadAhead<M>,
        addr: u64,
        out: &mut [u8],
    ) -> bool {
        let n = out.len();
        if n == 0 {
            return true;
        }
        if let Some(bytes) = self.cached(addr, n) {
            out.copy_from_slice(bytes);
            return true;
        }
        if mem.check_range(addr, n).is_none() {
            return false;
        }
        if n > STACK_WINDOW_BYTES {
            return mem.fetch(addr, out);
        }
        if !self.load(mem, addr, n) {
            return false;
        }
        match self.cached(addr, n) {
            Some(bytes) => {
                out.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    /// Reads a little-endian `u64` at `addr`: the window's hit is a bounds check and a load.
    #[inline]
    pub fn u64<M: UnwindMemory>(
        &mut self,
        mem: &mut ReadAhead<M>,
        addr: u64,
    ) -> Result<u64, Error> {
        if let Some(&[a, b, c, d, e, f, g, h]) = self.cached(addr, 8) {
            return Ok(u64::from_le_bytes([a, b, c, d, e, f, g, h]));
        }
        let mut b = [0u8; 8];
        if self.read(mem, addr, &mut b) {
            Ok(u64::from_le_bytes(b))
        } else {
            Err(Error::Fault)
        }
    }

    /// Makes the window hold `addr..addr + n` if it fits one window (a frame's saved
    /// registers, read next). A failure shows again on the read that needs the bytes.
    #[inline]
    pub fn prefetch<M: UnwindMemory>(&mut self, mem: &mut ReadAhead<M>, addr: u64, n: usize) {
        if self.cached(addr, n).is_none() {
            let _ = self.fill_for(mem, addr, n);
        }
    }

    /// Fills the window for `addr..addr + n`, which it does not hold, if the range fits one
    /// window and passes the reader's checks: whether the fill succeeded.
    #[inline(always)]
    fn fill_for<M: UnwindMemory>(&mut self, mem: &mut ReadAhead<M>, addr: u64, n: usize) -> bool {
        n != 0
            && n <= STACK_WINDOW_BYTES
            && mem.check_range(addr, n).is_some()
            && self.load(mem, addr, n)
    }

    /// Makes the window hold `addr..addr + n` if it fits one window, as
    /// [`StackWindow::prefetch`]; returns where it starts in the window if it does.
    #[inline]
    pub fn hold<M: UnwindMemory>(
        &mut self,
        mem: &mut ReadAhead<M>,
        addr: u64,
        n: usize,
    ) -> Option<usize> {
        match self.offset_of(addr, n) {
            Some(at) => Some(at),
            None => self.hold_slow(mem, addr, n),
        }
    }

    /// [`StackWindow::hold`] when the window does not hold the range: the fill of
    /// [`StackWindow::prefetch`] without its look at the window, which `hold` has just had,
    /// with the range check, the read and its bookkeeping in one function: one of a deep
    /// stack every few frames (the calls through `prefetch`, `load`, `fill` and `fetch` were
    /// about 60 instructions of its 190, qprof).
    #[inline(never)]
    fn hold_slow<M: UnwindMemory>(
        &mut self,
        mem: &mut ReadAhead<M>,
        addr: u64,
        n: usize,
    ) -> Option<usize> {
        if !self.fill_for(mem, addr, n) {
            return None;
        }
        self.offset_of(addr, n)
    }
}

/// The frame records a [`StackWindow`] holds ([`StackWindow::records`]).
///
/// # Invariants
///
/// `count <= STACK_WINDOW_BYTES / 8 - 1`, and the record at `base + 8 * i` for `i < count`
/// is the window's bytes `8 * i..8 * i + 16`, read during the walk.
pub struct HeldRecords<'w> {
    base: u64,
    count: u64,
    data: &'w [u8; STACK_WINDOW_BYTES],
}

impl HeldRecords<'_> {
    /// The record `[word at addr, word at addr + 8]` if the window holds both words at an
    /// offset that is a multiple of 8 (the one [`StackWindow::hold`] then gives): what
    /// [`StackWindow::word`] would read there.
    #[inline(always)]
    pub fn at(&self, addr: u64) -> Option<[u64; 2]> {
        // One comparison for the alignment and both ends (as the frame-pointer walker's
        // window): below `base` the offset wraps to a huge word, and an unaligned one keeps
        // its low bits at the top after the rotation.
        let i = addr.wrapping_sub(self.base).rotate_right(3);
        if i >= self.count {
            return None;
        }
        // `i < count` (invariant): the record lies in `data`, so the masks change nothing
        // and only spare the bounds checks.
        let at = (i as usize).wrapping_mul(8);
        Some([
            word_at(self.data, at),
            word_at(self.data, at.wrapping_add(8)),
        ])
    }
}

/// The little-endian word at offset `at` of `data`, for `at` a multiple of 8 below its
/// end; some word of `data` otherwise (a load without a bounds check, never a panic).
#[inline(always)]
fn word_at(data: &[u8; STACK_WINDOW_BYTES], at: usize) -> u64 {
    let i = at & (STACK_WINDOW_BYTES - 8);
    match data.get(i..i.wrapping_add(8)) {
        Some(&[a, b, c, d, e, f, g, h]) => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => 0,
    }
}

impl Default for StackWindow {
    fn default() -> Self {
        Self::new()
    }
}

/// An [`UnwindMemory`] that reads the stack through a [`StackWindow`] (and its
/// [`ReadAhead`]): what the general step and its expressions read through.
pub struct StackReads<'w, M> {
    /// The window.
    pub window: &'w mut StackWindow,
    /// The reader behind it.
    pub mem: &'w mut ReadAhead<M>,
}

impl<M: UnwindMemory> UnwindMemory for StackReads<'_, M> {
    #[inline]
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        self.window.read(self.mem, addr, out)
    }

    #[inline]
    fn prefetch(&mut self, addr: u64, len: usize) {
        self.window.prefetch(self.mem, addr, len)
    }
}

/// Reads a little-endian `u64` at `addr`.
#[inline]
pub(crate) fn read_u64(mem: &mut impl UnwindMemory, addr: u64) -> Result<u64, Error> {
    let mut b = [0u8; 8];
    if mem.read(addr, &mut b) {
        Ok(u64::from_le_bytes(b))
    } else {
        Err(Error::Fault)
    }
}

/// Maximum bytes of a LEB128 number: 10 hold 64 bits.
pub const MAX_LEB128_BYTES: usize = 10;

/// Bytes a [`Cursor`] reads ahead: a CIE's or an FDE's instructions are a few dozen bytes,
/// read a byte or a LEB128 number at a time.
const CURSOR_AHEAD: usize = 32;

/// A position in user memory and the end of the region it may read (an entry, a section):
/// every read is checked against `end`.
///
/// It reads ahead: a read of `n` bytes that the bytes kept do not hold reads up to
/// [`CURSOR_AHEAD`] bytes from there (never past `end`), then serves the next small reads
/// from them. A parser reads a byte or a LEB128 number at a time, and each read of the
/// reader behind (its windows searched, a copy of a length it learns at run time) cost
/// about fifty instructions: most of the cost of computing a row. (If the read ahead
/// fails, the exact read is tried: reading ahead never turns a good read into a fault.)
///
/// # Invariants
///
/// `pos <= end` (a read that would pass `end` fails and leaves the cursor unchanged);
/// `ahead[..ahead_len]` holds the bytes of memory at `ahead_base..`, inside the region.
pub(crate) struct Cursor<'m, M: UnwindMemory> {
    pub(crate) mem: &'m mut M,
    pos: u64,
    end: u64,
    ahead: [u8; CURSOR_AHEAD],
    ahead_base: u64,
    ahead_len: usize,
}

impl<'m, M: UnwindMemory> Cursor<'m, M> {
    /// A cursor over `start..end` (empty if `end < start`).
    pub(crate) fn new(mem: &'m mut M, start: u64, end: u64) -> Self {
        // INVARIANT: pos <= end; nothing read ahead.
        Self {
            mem,
            pos: start,
            end: end.max(start),
            ahead: [0; CURSOR_AHEAD],
            ahead_base: 0,
            ahead_len: 0,
        }
    }

    /// The address of the next byte.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    /// Whether the region is consumed.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    /// Bytes left.
    pub(crate) fn remaining(&self) -> u64 {
        self.end.wrapping_sub(self.pos)
    }

    /// The `n` bytes at `pos` if the bytes read ahead hold them.
    #[inline(always)]
    fn kept(&self, n: usize) -> Option<&[u8]> {
        let start = usize::try_from(self.pos.wrapping_sub(self.ahead_base)).ok()?;
        self.ahead
            .get(..self.ahead_len)?
            .get(start..start.checked_add(n)?)
    }

    /// Reads ahead from `pos`: at least `n` bytes (at most what is left), up to
    /// [`CURSOR_AHEAD`]. Whether it did.
    #[inline(never)]
    fn read_ahead(&mut self, n: usize) -> bool {
        let left = usize::try_from(self.remaining()).unwrap_or(usize::MAX);
        let want = left.min(CURSOR_AHEAD);
        if n > want {
            return false;
        }
        // INVARIANT: empty until the read succeeds (it may have written part of `ahead`).
        self.ahead_len = 0;
        let Some(buf) = self.ahead.get_mut(..want) else {
            return false;
        };
        if !self.mem.read(self.pos, buf) {
            return false;
        }
        // INVARIANT: `ahead[..want]` was just read at `pos`, and `pos + want <= end`.
        self.ahead_base = self.pos;
        self.ahead_len = want;
        true
    }

    /// Reads `N` bytes: from the bytes read ahead, a bounds check and a load.
    #[inline(always)]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        if (N as u64) <= self.remaining() {
            if let Some(Ok(bytes)) = self.kept(N).map(<[u8; N]>::try_from) {
                // INVARIANT: N <= end - pos.
                self.pos = self.pos.wrapping_add(N as u64);
                return Ok(bytes);
            }
        }
        let mut bytes = [0u8; N];
        self.bytes(&mut bytes)?;
        Ok(bytes)
    }

    /// Reads `out.len()` bytes.
    pub(crate) fn bytes(&mut self, out: &mut [u8]) -> Result<(), Error> {
        let len = out.len() as u64;
        if len > self.remaining() {
            return Err(MALFORMED);
        }
        let n = out.len();
        if self.kept(n).is_none() && !self.read_ahead(n) {
            // A read larger than the read-ahead, or one whose read-ahead failed: exactly.
            if !self.mem.read(self.pos, out) {
                return Err(Error::Fault);
            }
        } else {
            // (Held now: the bytes kept, or just read ahead from `pos`, at least `n`.)
            out.copy_from_slice(self.kept(n).ok_or(Error::Fault)?);
        }
        // INVARIANT: len <= end - pos.
        self.pos = self.pos.wrapping_add(len);
        Ok(())
    }

    /// Skips `len` bytes.
    pub(crate) fn skip(&mut self, len: u64) -> Result<(), Error> {
        if len > self.remaining() {
            return Err(MALFORMED);
        }
        // INVARIANT: len <= end - pos.
        self.pos = self.pos.wrapping_add(len);
        Ok(())
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, Error> {
        let [b] = self.array::<1>()?;
        Ok(b)
    }

    #[inline]
    pub(crate) fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    #[inline]
    pub(crate) fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// An unsigned LEB128 number; more than 64 bits of value is malformed.
    pub(crate) fn uleb(&mut self) -> Result<u64, Error> {
        let mut leb = Leb::new();
        for _ in 0..MAX_LEB128_BYTES {
            if let Some(v) = leb.push(self.u8()?, false)? {
                return Ok(v.0);
            }
        }
        Err(MALFORMED)
    }

    /// A signed LEB128 number; more than 64 bits of value is malformed.
    pub(crate) fn sleb(&mut self) -> Result<i64, Error> {
        let mut leb = Leb::new();
        for _ in 0..MAX_LEB128_BYTES {
            if let Some((v, shift, last)) = leb.push(self.u8()?, true)? {
                return Ok(sign_extend_leb(v, shift, last));
            }
        }
        Err(MALFORMED)
    }
}

/// The state of a LEB128 decoder (shared by the memory cursor and the expression reader).
pub(crate) struct Leb {
    value: u64,
    shift: u32,
}

impl Leb {
    pub(crate) const fn new() -> Self {
        Self { value: 0, shift: 0 }
    }

    /// Adds one byte of an unsigned (or `signed`) number; returns `(value, bits consumed,
    /// last byte)` after the last byte. A value that does not fit 64 bits is malformed.
    pub(crate) fn push(&mut self, byte: u8, signed: bool) -> Result<Option<(u64, u32, u8)>, Error> {
        let low = u64::from(byte & 0x7f);
        if self.shift >= 64 {
            return Err(MALFORMED);
        }
        // At bit 63 only one bit is left: the byte must be 0 or 1 (unsigned), or the sign
        // extension 0 or 0x7f (signed).
        if self.shift == 63 {
            let fits = if signed {
                low == 0 || low == 0x7f
            } else {
                low <= 1
            };
            if !fits {
                return Err(MALFORMED);
            }
        }
        self.value |= low.wrapping_shl(self.shift);
        self.shift = self.shift.wrapping_add(7);
        if byte & 0x80 == 0 {
            Ok(Some((self.value, self.shift, byte)))
        } else {
            Ok(None)
        }
    }
}

/// Sign-extends a decoded signed LEB128 value of `shift` bits whose last byte was `last`.
pub(crate) fn sign_extend_leb(value: u64, shift: u32, last: u8) -> i64 {
    if shift < 64 && last & 0x40 != 0 {
        (value | u64::MAX.wrapping_shl(shift)) as i64
    } else {
        value as i64
    }
}
