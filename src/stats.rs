// SPDX-License-Identifier: GPL-2.0
//! Counters shown in `/sys/kernel/debug/unwind_deferred/stats`.
//!
//! Per-CPU counters kept by the C shim (`this_cpu_add()`, one instruction, safe in NMI):
//! the request path may run on every CPU at once, and shared atomics would bounce their
//! cache lines between them. A read sums the CPUs; it needs each value to be eventually
//! right, not a consistent snapshot.

use crate::ffi;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Event counters; see the debugfs documentation in Documentation/unwind-deferred.rst.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        #[repr(u32)]
        pub(crate) enum Counter { $($name,)* }

        const COUNTERS: usize = [$(Counter::$name),*].len();

        /// Sums every counter into the C structure read by debugfs.
        pub(crate) fn fill(out: &mut ffi::ud_stats) {
            // SAFETY: every index is below UD_NR_COUNTERS (checked below).
            $(out.$name = unsafe { ffi::ud_count_sum(Counter::$name as u32) };)*
        }
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

const _: () = assert!(COUNTERS <= ffi::UD_NR_COUNTERS as usize);

/// Adds one to a counter.
pub(crate) fn bump(counter: Counter) {
    add(counter, 1);
}

/// Adds `n` to a counter.
pub(crate) fn add(counter: Counter, n: u64) {
    // SAFETY: the index is below UD_NR_COUNTERS (checked above); any context.
    unsafe { ffi::ud_count_add(counter as u32, n) };
}
