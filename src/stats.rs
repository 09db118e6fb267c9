// SPDX-License-Identifier: GPL-2.0
//! Counters shown in `/sys/kernel/debug/unwind_deferred/stats`.
//!
//! Plain relaxed atomics: they are bumped from every context including NMI, and a reader
//! only needs each value to be eventually right, not a consistent snapshot.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Event counters; see the debugfs documentation in Documentation/unwind-deferred.rst.
        pub(crate) struct Stats { $(pub(crate) $name: AtomicU64,)* }

        pub(crate) static STATS: Stats = Stats { $($name: AtomicU64::new(0),)* };

        impl Stats {
            /// Copies every counter into the C structure read by debugfs.
            pub(crate) fn fill(&self, out: &mut crate::ffi::ud_stats) {
                $(out.$name = self.$name.load(Relaxed);)*
            }
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
    task_works_in_flight,
);

/// Adds one to a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}
