// SPDX-License-Identifier: GPL-2.0
//! The user-stack walk of one kernel entry, and its per-task cache.
//!
//! Runs in the task work (task context, may fault and sleep): the frame walker of
//! [`crate::logic::walker`] reads the task's user memory a window of words at a time. The result
//! is cached so that every callback of the entry (and every later task work run of the
//! same entry) sees the same array; the cache is invalidated at return to user space.

use core::sync::atomic::Ordering;

use crate::ffi;
use crate::logic::walker::{self, UserRegs, Windowed, WordReader};
use crate::stats::{add, bump, Counter};
use crate::tasks::TaskEntry;

/// Frames kept per stack: the cache fills one 4 KiB allocation.
pub(crate) const MAX_ENTRIES: usize = ffi::UD_MAX_STACK_ENTRIES as usize;

/// One task's cached stack.
#[repr(C)]
pub(crate) struct StackCache {
    /// Whether `entries[..nr]` holds this entry's stack.
    filled: usize,
    nr: usize,
    entries: [u64; MAX_ENTRIES],
}

const _: () = assert!(core::mem::size_of::<StackCache>() == 4096);

/// Reads the current task's user memory, faulting pages in.
struct CurrentUserMemory;

impl WordReader for CurrentUserMemory {
    fn read_words(&mut self, addr: u64, out: &mut [u64]) -> usize {
        // SAFETY: task context (the task work); `out` is valid for `out.len()` words of
        // writes; user_access_begin() validates the user range.
        unsafe { ffi::ud_read_user_words(addr, out.as_mut_ptr(), out.len() as _) as usize }
    }
}

/// The user stack of the current kernel entry of the current task, as `(entries, nr)`.
/// Walks once per entry and caches. Returns an empty trace when the task has no user
/// memory any more (exit) or the cache cannot be allocated.
///
/// Must run in the task work of `entry`'s task (current).
pub(crate) fn current_stack(entry: &TaskEntry) -> (*mut u64, usize) {
    let mut cache = entry.cache.load(Ordering::Acquire);
    if cache.is_null() {
        // SAFETY: kzalloc(GFP_KERNEL) in task context; zeroed memory is a valid, empty
        // StackCache (integers only).
        cache = unsafe { ffi::ud_kzalloc(core::mem::size_of::<StackCache>() as _) }.cast();
        if cache.is_null() {
            bump(Counter::err_nomem);
            return (core::ptr::null_mut(), 0);
        }
        entry.cache.store(cache, Ordering::Release);
    }
    // SAFETY: the cache is only accessed by its task: here (task work) and in the
    // return-to-user reset, never concurrently; it is freed only when the task is dead or
    // the module unloads after every task work finished.
    let cache = unsafe { &mut *cache };
    if cache.filled != 0 {
        bump(Counter::unwind_cached);
        return (cache.entries.as_mut_ptr(), cache.nr);
    }
    // SAFETY: plain reads of current's state.
    let nr = if unsafe { ffi::ud_current_has_mm() } {
        let mut regs = UserRegs { ip: 0, sp: 0, fp: 0 };
        // SAFETY: current is a user task (checked at request time) in task context.
        unsafe { ffi::ud_current_user_regs(&mut regs.ip, &mut regs.sp, &mut regs.fp) };
        // SAFETY: reads a constant.
        let user_end = unsafe { ffi::ud_user_end() };
        let mut mem = Windowed::new(CurrentUserMemory, kernel::page::PAGE_SIZE as u64);
        walker::walk(&mut mem, regs, user_end, &mut cache.entries).0
    } else {
        0 // exit_mm() already ran: the task exits with a pending request.
    };
    bump(Counter::unwinds);
    add(Counter::unwind_frames, nr as u64);
    if nr == 0 {
        bump(Counter::unwind_empty);
    }
    cache.nr = nr;
    cache.filled = 1;
    (cache.entries.as_mut_ptr(), nr)
}

/// Start of a new kernel entry: the cached stack is stale.
pub(crate) fn invalidate(entry: &TaskEntry) {
    let cache = entry.cache.load(Ordering::Acquire);
    if !cache.is_null() {
        // SAFETY: see `current_stack`: only the owning task touches its cache, and this
        // runs on its return to user space, not concurrently with its task work.
        unsafe { (*cache).filled = 0 };
    }
}
