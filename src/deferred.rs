// SPDX-License-Identifier: GPL-2.0
//! Deferred unwinding: the request path, the task work, the end of the entry and task
//! lifetime, with the semantics of upstream `kernel/unwind/deferred.c` (Linux 6.17).
//!
//! * `unwind_deferred_request()` may run in any context, NMI included: it takes no lock,
//!   allocates nothing, and only touches atomics of the task's table entry.
//! * The task work walks the user stack once per kernel entry and calls every work that
//!   requested in it, once, with the entry's cookie, inside an SRCU read section.
//! * The end of the task work ends the entry (new cookie and stack for the next request):
//!   see [`crate::logic::request_state`] for how and why this differs from upstream.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use crate::ffi;
use crate::logic::cookie;
use crate::logic::request_state::Request;
use crate::logic::resolve::KnownMappings;
use crate::registry;
use crate::stats::{self, bump, Counter};
use crate::sys::{self, CurrentTask, IrqsOff, Published, SrcuReadGuard, WorkPtr};
use crate::task_slots::TaskSlots;
use crate::unwind::{self, StackCache};

/// Everything the hooks need, allocated at load.
pub(crate) struct Deferred {
    tasks: TaskSlots,
    /// The unwinder's row and per-file caches.
    caches: unwind::UnwindCaches,
    /// Per-CPU cookie counters (`nr_cpu_ids` of them).
    counters: KVec<AtomicU32>,
    /// The event counters of debugfs (per CPU).
    pub(crate) counts: stats::Counts,
}

/// The live state, published after it is fully built and taken back at unload after every
/// hook and task work is gone (see `UnwindDeferred::drop`).
pub(crate) static DEFERRED: Published<Deferred> = Published::new();

/// Task works queued and not finished: unload waits for zero (see `drain`). A shared
/// atomic, not a per-CPU counter: it goes down on another CPU than it went up, and unload
/// needs the exact value.
static TASK_WORKS_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// The live state, while the module is loaded.
#[inline]
pub(crate) fn get() -> Option<&'static Deferred> {
    DEFERRED.get()
}

/// Builds the state and makes it reachable from the hooks.
pub(crate) fn publish() -> Result {
    let (max_tasks, cpus) = (sys::param_max_tasks(), sys::nr_cpu_ids());
    let mut counters = KVec::with_capacity(cpus as usize, GFP_KERNEL)?;
    for _ in 0..cpus {
        counters.push(AtomicU32::new(0), GFP_KERNEL)?;
    }
    let state = KBox::new(
        Deferred {
            tasks: TaskSlots::new(max_tasks as usize)?,
            caches: unwind::UnwindCaches::new()?,
            counters,
            counts: stats::Counts::new(cpus as usize)?,
        },
        GFP_KERNEL,
    )?;
    DEFERRED.publish(state);
    Ok(())
}

/// Unload, after the C hooks are gone and no request can come any more: take back the
/// queued task works and wait for running ones. Then nothing reaches the state.
pub(crate) fn drain() {
    let Some(d) = get() else { return };
    for entry in d.tasks.entries() {
        if entry.work.cancel() {
            // The task work will not run: account for it here.
            TASK_WORKS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        }
    }
    // Task works already dequeued by task_work_run() are running or about to: they hold
    // no lock we hold, so they finish. Their last access to module memory is the counter
    // decrement (then a return into this module's text, which is still mapped while we
    // sleep here; only the final instructions race with the unload, as for any task work
    // or timer callback of a module).
    while TASK_WORKS_IN_FLIGHT.load(Ordering::Acquire) != 0 {
        sys::msleep(10);
    }
}

impl Deferred {
    /// A new cookie for a kernel entry on CPU `cpu`, the one we run on (preemption off: it
    /// holds).
    fn new_cookie(&self, cpu: u32) -> u64 {
        let Some(counter) = self.counters.get(cpu as usize) else {
            return cookie::make(cpu, 1);
        };
        // An NMI may take a value between our read and write: fetch_add gives each a
        // distinct one.
        let prev = counter.fetch_add(2, Ordering::Relaxed);
        cookie::make(cpu, cookie::next_counter(prev))
    }
}

/// `unwind_deferred_request()` after its C half (src/shim.c) found out who asks and turned
/// preemption off: `task` (current, able to be unwound; the others go to [`refuse`]) on
/// CPU `cpu` (it holds), from NMI if `nmi`, for the work whose bit, as read and not checked
/// yet, is `bit` (a cancelled work's is -1, one never initialised has 0). Any context, NMI
/// included. Its common path (a repeated request of the entry: one probe of the table, the
/// mask and the cookie) calls nothing and writes only its counter and the cookie; the rest
/// is out of line, so that this path saves no registers it does not use.
///
/// Interrupts may be on: this path only reads the table and the task's state, which are
/// written for an NMI to interleave anywhere, and an interrupt's request (which may run
/// [`request_slow`] in full) interleaves with the reads as an NMI's would. Whatever it
/// reads, it answers `Already` only with the bit set and the cookie of that entry, read
/// after the bit (as `RequestState::request` does).
#[inline]
pub(crate) fn request(
    task: CurrentTask,
    bit: i32,
    nmi: bool,
    cpu: u32,
    cookie_out: &mut u64,
) -> i32 {
    if nmi {
        stats::bump_on(cpu, Counter::requests_nmi);
    }
    // Valid bits are 1 to 63 (0 is PENDING): one comparison, negative bits wrap above.
    let bit = bit as u32;
    if bit.wrapping_sub(1) >= usize::BITS - 1 {
        return refuse_work(cpu);
    }
    let Some(d) = get() else { return ENODEV.to_errno() };
    let entry = d.tasks.lookup_home(task.key());
    let already = entry.and_then(|entry| entry.state.already_requested(bit));
    if let Some(cookie) = already {
        d.counts.bump_on(cpu, Counter::already);
        *cookie_out = cookie;
        return 1;
    }
    request_slow(task, bit, nmi, cpu, cookie_out, d)
}

/// A request from a task that cannot be unwound (`why`, never `UD_OK`): counted, -EINVAL.
#[cold]
pub(crate) fn refuse(why: ffi::ud_unwindable, nmi: bool, cpu: u32) -> i32 {
    if nmi {
        stats::bump_on(cpu, Counter::requests_nmi);
    }
    let counter = match why {
        ffi::ud_unwindable::UD_KTHREAD => Counter::err_kthread,
        ffi::ud_unwindable::UD_USER_WORKER => Counter::err_user_worker,
        ffi::ud_unwindable::UD_EXITING => Counter::err_exiting,
        // (UD_OK is never passed: the C half requests then.)
        ffi::ud_unwindable::UD_NOT_USER_REGS | ffi::ud_unwindable::UD_OK => Counter::err_not_user,
        ffi::ud_unwindable::UD_COMPAT => Counter::err_compat,
    };
    stats::bump_on(cpu, counter);
    EINVAL.to_errno()
}

/// A request of a cancelled or never initialised work: counted, -EINVAL.
#[cold]
#[inline(never)]
fn refuse_work(cpu: u32) -> i32 {
    stats::bump_on(cpu, Counter::err_cancelled);
    EINVAL.to_errno()
}

/// The rest of [`request`]: the entry's first request of this work, or the task's first
/// request (its slot is claimed here), or a task whose slot is not its home one. Its
/// arguments are [`request`]'s, in registers, in the order of `ud_rs_request()`'s (the tail
/// call from [`request`] then moves none of them).
#[inline(never)]
fn request_slow(
    task: CurrentTask,
    bit: u32,
    nmi: bool,
    cpu: u32,
    cookie_out: &mut u64,
    d: &Deferred,
) -> i32 {
    // Interrupts off for the writes: then only an NMI can interleave with them on this CPU,
    // which the table and the task's state are written for. (The fast path in `request`
    // only reads, with interrupts on.)
    let _irqs = IrqsOff::new();
    let Ok(entry) = d.tasks.get_or_insert(task.key()) else {
        stats::bump_on(cpu, Counter::err_table_full);
        sys::warn_table_full();
        return ENOSPC.to_errno();
    };
    let (outcome, cookie) = entry.state.request(bit, || d.new_cookie(cpu));
    *cookie_out = cookie;
    match outcome {
        Request::Already => {
            stats::bump_on(cpu, Counter::already);
            1
        }
        Request::Queued => {
            stats::bump_on(cpu, Counter::joined);
            0
        }
        Request::QueueTaskWork => {
            TASK_WORKS_IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
            // (The queued work holds a reference on the task, so that unload can cancel it.)
            if let Err(ret) = entry.work.queue(task, nmi) {
                // The task is exiting (task works are shut). Undo, so that the state does
                // not claim a queued work that will never run.
                entry.state.abort_queue(bit);
                TASK_WORKS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
                stats::bump_on(cpu, Counter::err_task_work);
                *cookie_out = 0;
                return ret;
            }
            stats::bump_on(cpu, Counter::queued);
            0
        }
    }
}

/// The task work queued with `head`: one walk, then every requested work's callback, once.
pub(crate) fn task_work(head: *mut ffi::callback_head) {
    let Some(d) = get() else { return };
    // Task works are only queued with an entry's `work` (see `request`).
    let Some(entry) = d.tasks.entry_of_work(head) else { return };
    // The reference the queued work held on its task (none if unload took it back
    // meanwhile): dropped when this run ends.
    let reference = entry.work.begin_run();
    // This CPU's counters, looked up once for the run's counts.
    let counts = stats::here();
    counts.bump(Counter::task_works);
    // The entry's cached stack is ours alone while we run: taken out, put back at the end.
    let mut cache = entry.cache.take().or_else(|| {
        let cache = StackCache::new_boxed();
        if cache.is_none() {
            counts.bump(Counter::err_nomem);
        }
        cache
    });
    // Likewise the mappings its stacks were resolved in (the callbacks resolve without them,
    // under the mmap lock, if there is no memory for them).
    let mut known = entry.known.take().or_else(|| {
        let known = KBox::new(KnownMappings::new(), GFP_KERNEL).ok();
        if known.is_none() {
            counts.bump(Counter::err_nomem);
        }
        known
    });
    {
        // Take the bits inside the SRCU section: cancel clears a bit in every task and then
        // waits for SRCU readers, so a task work either sees the bit cleared or finishes
        // before cancel returns (never calls back a later owner of the bit).
        let srcu = SrcuReadGuard::new();
        let mut bits = entry.state.take_pending();
        let stack = unwind::current_stack(cache.as_deref_mut(), &d.caches, counts);
        let cookie = entry.state.current_cookie();
        // Only the set bits: a loop over all 63 costs more than a stack of a few frames.
        while bits != 0 {
            let bit = bits.trailing_zeros();
            bits &= bits - 1;
            if registry::call(bit, &srcu, stack, cookie, known.as_deref_mut()) {
                counts.bump(Counter::callbacks);
            }
            entry.state.complete(bit);
        }
    }
    {
        // End of the entry, with interrupts off: an interrupt's request on this task would
        // interleave with the reset as an NMI's can (the state is written for NMIs only).
        let _irqs = IrqsOff::new();
        if entry.state.end_entry() {
            if let Some(cache) = cache.as_deref_mut() {
                cache.invalidate();
            }
            counts.bump(Counter::resets);
        }
    }
    if let Some(cache) = cache {
        entry.cache.put(cache);
    }
    if let Some(known) = known {
        entry.known.put(known);
    }
    drop(reference);
    // Last access to module state (see `drain`).
    TASK_WORKS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
}

/// sched_process_free: the task `key` is dead and its task works have run.
pub(crate) fn task_free(key: usize) {
    let Some(d) = get() else { return };
    if d.tasks.release(key) {
        bump(Counter::tasks_freed);
    }
}

/// `unwind_deferred_cancel()`.
pub(crate) fn cancel(work: WorkPtr) {
    registry::cancel(work, |bit| {
        if let Some(d) = get() {
            for entry in d.tasks.entries() {
                entry.state.cancel(bit);
            }
        }
    });
}

/// The core's counters and gauges as text (debugfs `stats`); returns the bytes written.
pub(crate) fn write_stats(buf: &mut [u8]) -> usize {
    let (table_used, table_size) = match get() {
        Some(d) => (d.tasks.occupancy() as u64, d.tasks.capacity() as u64),
        None => (0, 0),
    };
    let gauges = [
        ("requests", stats::requests()),
        ("table_used", table_used),
        ("table_size", table_size),
        ("works_registered", registry::registered()),
        ("task_works_in_flight", TASK_WORKS_IN_FLIGHT.load(Ordering::Relaxed)),
    ];
    stats::write_stats(buf, &gauges)
}
