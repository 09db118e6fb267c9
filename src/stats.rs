// SPDX-License-Identifier: GPL-2.0
//! Counters shown in `/sys/kernel/debug/unwind_deferred/stats`.
//!
//! Per-CPU counters kept by the C shim (`this_cpu_add()`, one instruction, safe in NMI):
//! the request path may run on every CPU at once, and shared atomics would bounce their
//! cache lines between them. A read sums the CPUs; it needs each value to be eventually
//! right, not a consistent snapshot.

use crate::ffi;
use crate::logic::cfi::Stop;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Event counters; see the debugfs documentation in Documentation/unwind-deferred.rst.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        #[repr(u32)]
        pub(crate) enum Counter { $($name,)* }

        const COUNTERS: usize = [$(Counter::$name),*].len();

        /// Their names, in the same order: the only list of them (debugfs `stats` prints
        /// these, C has no copy).
        const COUNTER_NAMES: [&str; COUNTERS] = [$(stringify!($name)),*];
    };
}

counters!(
    requests,
    requests_nmi,
    queued,
    already,
    task_works,
    unwinds,
    unwind_frames,
    unwind_cached,
    unwind_empty,
    callbacks,
    resets,
    err_kthread,
    err_user_worker,
    err_exiting,
    err_not_user,
    err_compat,
    err_cancelled,
    err_table_full,
    err_task_work,
    err_nomem,
    tasks_freed,
);

macro_rules! unwinder_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Counters of the unwinder (debugfs `unwinder`), after [`Counter`]'s in the per-CPU
        /// array.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        #[repr(u32)]
        pub(crate) enum UnwinderCounter { $($(#[$doc])* $name,)* }

        /// Their names, in the same order.
        const UNWINDER_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}

unwinder_counters!(
    /// Walks in each mode.
    walks_auto,
    walks_cfi,
    walks_fp,
    /// Frames found by CFI, and by the frame-pointer chain (in `auto` and `cfi` walks).
    frames_cfi,
    frames_fp,
    /// Signal frames unwound through.
    frames_signal,
    /// CFI rows found in the per-CPU row cache, and computed.
    rows_cached,
    rows_computed,
    /// User memory read by the CFI walks: bytes, and reads (one user-access section each).
    bytes_read,
    reads,
    /// PCs whose mapping came from the task's cache of mappings, and those looked up (mmap
    /// lock, maple tree).
    maps_cached,
    maps_looked_up,
    /// Per-file summaries read from a file's (or the vDSO's) headers, and the files whose
    /// headers could not be used (unreadable, not x86-64 ELF): walked by frame pointers.
    modules_read,
    modules_unreadable,
);

/// First per-CPU counter of [`UnwinderCounter`], then of the stop reasons.
const UNWINDER_BASE: usize = COUNTERS;
const STOP_BASE: usize = UNWINDER_BASE + UNWINDER_NAMES.len();
const _: () = assert!(STOP_BASE + Stop::COUNT <= ffi::UD_NR_COUNTERS as usize);

/// Adds `n` to an unwinder counter.
pub(crate) fn add_unwinder(counter: UnwinderCounter, n: u64) {
    // SAFETY: the index is below UD_NR_COUNTERS (checked above); any context.
    unsafe { ffi::ud_count_add((UNWINDER_BASE + counter as usize) as u32, n) };
}

/// Counts a walk's stop reason.
pub(crate) fn count_stop(stop: Stop) {
    // SAFETY: as above: `index()` is below `Stop::COUNT`.
    unsafe { ffi::ud_count_add((STOP_BASE + stop.index()) as u32, 1) };
}

/// Writes into a byte buffer, dropping what does not fit.
struct BufWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl core::fmt::Write for BufWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.len().saturating_sub(self.len);
        let n = s.len().min(room);
        if let (Some(dst), Some(src)) = (self.buf.get_mut(self.len..self.len + n), s.as_bytes().get(..n)) {
            dst.copy_from_slice(src);
            self.len += n;
        }
        Ok(())
    }
}

/// The unwinder's counters, one "name value" line each (debugfs `unwinder`): the mode
/// counters, then `stop_<reason>[_<kind>]` for every stop reason.
///
/// # Safety
///
/// `buf` is valid for writing `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_unwinder_stats(buf: *mut u8, len: usize) -> usize {
    use core::fmt::Write;
    // SAFETY: guaranteed by our caller.
    let buf = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let mut w = BufWriter { buf, len: 0 };
    let sum = |i: usize| {
        // SAFETY: every index is below UD_NR_COUNTERS (checked above).
        unsafe { ffi::ud_count_sum(i as u32) }
    };
    for (i, name) in UNWINDER_NAMES.iter().enumerate() {
        let _ = writeln!(w, "{} {}", name, sum(UNWINDER_BASE + i));
    }
    for i in 0..Stop::COUNT {
        let Some(stop) = Stop::from_index(i) else { continue };
        let detail = stop.detail();
        let sep = if detail.is_empty() { "" } else { "_" };
        let _ = writeln!(w, "stop_{}{}{} {}", stop.name(), sep, detail, sum(STOP_BASE + i));
    }
    w.len
}

/// The core's counters, one "name: value" line each (debugfs `stats`), then `gauges`: values
/// read at the time (table occupancy, ...) rather than counted. Returns the bytes written.
///
/// # Safety
///
/// `buf` is valid for writing `len` bytes.
pub(crate) unsafe fn write_stats(buf: *mut u8, len: usize, gauges: &[(&str, u64)]) -> usize {
    use core::fmt::Write;
    // SAFETY: guaranteed by our caller.
    let buf = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let mut w = BufWriter { buf, len: 0 };
    for (i, name) in COUNTER_NAMES.iter().enumerate() {
        // SAFETY: every index is below UD_NR_COUNTERS (checked above).
        let _ = writeln!(w, "{}: {}", name, unsafe { ffi::ud_count_sum(i as u32) });
    }
    for (name, value) in gauges {
        let _ = writeln!(w, "{}: {}", name, value);
    }
    w.len
}

/// Adds one to a counter.
pub(crate) fn bump(counter: Counter) {
    add(counter, 1);
}

/// Adds `n` to a counter.
pub(crate) fn add(counter: Counter, n: u64) {
    // SAFETY: the index is below UD_NR_COUNTERS (checked above); any context.
    unsafe { ffi::ud_count_add(counter as u32, n) };
}
