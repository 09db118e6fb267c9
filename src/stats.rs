// SPDX-License-Identifier: GPL-2.0
//! Counters shown in `/sys/kernel/debug/unwind_deferred/stats` and `unwinder`.
//!
//! Per-CPU counters: the request path may run on every CPU at once, and shared atomics
//! would bounce their cache lines between them. Each CPU has its own block of atomics (an
//! NMI may count between a task's load and store on the same CPU, so plain integers would
//! lose counts); the request path, which knows its CPU, counts without a call into C. A
//! read sums the CPUs; it needs each value to be eventually right, not a consistent
//! snapshot.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;

use crate::ffi;
use crate::sys;
use crate::logic::cfi::Stop;

/// Counters per CPU.
const PER_CPU: usize = ffi::UD_NR_COUNTERS as usize;

/// One CPU's counters, on cache lines of their own.
#[repr(C, align(64))]
pub(crate) struct CpuCounts([AtomicU64; PER_CPU]);

impl CpuCounts {
    /// Adds `n` to counter `idx` (any context, NMI included).
    #[inline(always)]
    fn add(&self, idx: usize, n: u64) {
        if let Some(c) = self.0.get(idx) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// The counters of every possible CPU, allocated at load and owned by the module's state.
pub(crate) struct Counts(pub(crate) KVec<CpuCounts>);

impl Counts {
    /// Zeroed counters for `cpus` CPUs.
    pub(crate) fn new(cpus: usize) -> Result<Self> {
        let mut v = KVec::with_capacity(cpus, GFP_KERNEL)?;
        for _ in 0..cpus {
            v.push(CpuCounts([const { AtomicU64::new(0) }; PER_CPU]), GFP_KERNEL)?;
        }
        Ok(Self(v))
    }

    /// Adds `n` to counter `idx` of CPU `cpu` (any context, NMI included).
    #[inline]
    fn add_on(&self, cpu: u32, idx: usize, n: u64) {
        if let Some(c) = self.0.get(cpu as usize) {
            c.add(idx, n);
        }
    }

    /// Adds one to `counter` of CPU `cpu`, the one we run on: [`bump_on`] for a caller that
    /// holds the module's state.
    #[inline]
    pub(crate) fn bump_on(&self, cpu: u32, counter: Counter) {
        self.add_on(cpu, counter as usize, 1);
    }
}

/// Every CPU's counters (none while the module's state is not published).
#[inline]
fn all_cpus() -> &'static [CpuCounts] {
    crate::deferred::get().map_or(&[], |d| &d.counts.0)
}

/// Adds `n` to counter `idx` of CPU `cpu` (any context, NMI included).
#[inline]
fn add_on(cpu: u32, idx: usize, n: u64) {
    if let Some(d) = crate::deferred::get() {
        d.counts.add_on(cpu, idx, n);
    }
}

/// The sum of counter `idx` over every CPU.
fn sum(idx: usize) -> u64 {
    all_cpus()
        .iter()
        .filter_map(|c| c.0.get(idx))
        .fold(0u64, |s, c| s.wrapping_add(c.load(Ordering::Relaxed)))
}

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

// (`requests` is not counted: the request path counts its outcome only, and the
// `requests` line of debugfs sums the outcomes, see `requests()`.)
counters!(
    requests_nmi,
    queued,
    joined,
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
    /// CFI rows found in the caches (the task's hot rows, then the per-CPU row cache), and
    /// computed.
    rows_cached,
    rows_computed,
    /// Lookups that went past the task's hot rows to the per-CPU row cache (each with
    /// preemption off around it), and those of them found in the table all CPUs share.
    rows_shared,
    rows_all_cpus,
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
    /// Of the files read, those whose program headers were not in the head read first (a
    /// file rewritten by BOLT or patchelf) and were read where `e_phoff` says.
    modules_headers_apart,
);

/// First per-CPU counter of [`UnwinderCounter`], then of the stop reasons.
const UNWINDER_BASE: usize = COUNTERS;
const STOP_BASE: usize = UNWINDER_BASE + UNWINDER_NAMES.len();
const _: () = assert!(STOP_BASE + Stop::COUNT <= ffi::UD_NR_COUNTERS as usize);
const _: () = assert!(core::mem::size_of::<CpuCounts>().is_power_of_two());

/// Adds `n` to an unwinder counter of the CPU we run on.
pub(crate) fn add_unwinder(counter: UnwinderCounter, n: u64) {
    here().add_unwinder(counter, n);
}

/// The counters of the CPU we run on, for the counts of a task work and its walk: one
/// lookup of the CPU's block for all of them (if we migrate meanwhile, they go to the one we
/// ran on: the sums are the same).
pub(crate) fn here() -> CpuBlock {
    CpuBlock(all_cpus().get(sys::this_cpu() as usize))
}

/// One CPU's counters ([`here`]): each count an atomic add at a fixed place of the block
/// (the counters are constants), without asking again which CPU we run on. None while the
/// module's state is not published: then nothing is counted.
#[derive(Clone, Copy)]
pub(crate) struct CpuBlock(Option<&'static CpuCounts>);

impl CpuBlock {
    /// Adds one to `counter`.
    #[inline(always)]
    pub(crate) fn bump(self, counter: Counter) {
        self.add(counter, 1);
    }

    /// Adds `n` to `counter`.
    #[inline(always)]
    pub(crate) fn add(self, counter: Counter, n: u64) {
        if let Some(cpu) = self.0 {
            cpu.add(counter as usize, n);
        }
    }

    /// Adds `n` to an unwinder counter, if not zero (most of a walk's counts are).
    #[inline(always)]
    pub(crate) fn add_unwinder(self, counter: UnwinderCounter, n: u64) {
        if let (Some(cpu), true) = (self.0, n != 0) {
            cpu.add(UNWINDER_BASE + counter as usize, n);
        }
    }

    /// Counts a walk's stop reason.
    #[inline(always)]
    pub(crate) fn stop(self, stop: Stop) {
        if let Some(cpu) = self.0 {
            cpu.add(STOP_BASE + stop.index(), 1);
        }
    }
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
/// counters, then `stop_<reason>[_<kind>]` for every stop reason. Returns the bytes written.
pub(crate) fn write_unwinder_stats(buf: &mut [u8]) -> usize {
    use core::fmt::Write;
    let mut w = BufWriter { buf, len: 0 };
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
pub(crate) fn write_stats(buf: &mut [u8], gauges: &[(&str, u64)]) -> usize {
    use core::fmt::Write;
    let mut w = BufWriter { buf, len: 0 };
    for (i, name) in COUNTER_NAMES.iter().enumerate() {
        let _ = writeln!(w, "{}: {}", name, sum(i));
    }
    for (name, value) in gauges {
        let _ = writeln!(w, "{}: {}", name, value);
    }
    w.len
}

/// Every request that got as far as an outcome: the sum of the outcome counters (one per
/// request, so that the request path counts once).
pub(crate) fn requests() -> u64 {
    use Counter::*;
    [
        queued,
        joined,
        already,
        err_kthread,
        err_user_worker,
        err_exiting,
        err_not_user,
        err_compat,
        err_cancelled,
        err_table_full,
        err_task_work,
    ]
    .iter()
    .fold(0u64, |s, &c| s.wrapping_add(sum(c as usize)))
}

/// Adds one to a counter of the CPU we run on.
pub(crate) fn bump(counter: Counter) {
    here().bump(counter);
}

/// Adds one to a counter of CPU `cpu`, the one we run on, without asking which it is (the
/// request path knows it).
#[inline]
pub(crate) fn bump_on(cpu: u32, counter: Counter) {
    add_on(cpu, counter as usize, 1);
}
