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

use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;

use crate::ffi;
use crate::logic::cookie;
use crate::logic::request_state::Request;
use crate::registry::{self, SrcuReadGuard};
use crate::stats::{self, bump, Counter};
use crate::task_slots::TaskSlots;
use crate::unwind;

/// Everything the hooks need, allocated at load.
pub(crate) struct Deferred {
    tasks: TaskSlots,
    /// The unwinder's row and per-file caches.
    caches: unwind::UnwindCaches,
    /// Per-CPU cookie counters (`nr_cpu_ids` of them).
    counters: KVec<AtomicU32>,
    /// The event counters of debugfs (per CPU).
    counts: stats::Counts,
}

/// The live state, published after it is fully built and retracted at unload after every
/// hook is gone (see `UnwindDeferred::drop`).
static DEFERRED: AtomicPtr<Deferred> = AtomicPtr::new(null_mut());

/// Task works queued and not finished: unload waits for zero (see `retract`). A shared
/// atomic, not a per-CPU counter: it goes down on another CPU than it went up, and unload
/// needs the exact value.
static TASK_WORKS_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

fn deferred() -> Option<&'static Deferred> {
    // SAFETY: DEFERRED is null or points to the leaked box of `publish()`, which `retract()`
    // frees only after every path that can reach this function has stopped.
    unsafe { DEFERRED.load(Ordering::Acquire).as_ref() }
}

/// Builds the state and makes it reachable from the hooks.
pub(crate) fn publish() -> Result {
    // SAFETY: reads a module parameter and a kernel constant.
    let (max_tasks, cpus) = unsafe { (ffi::ud_param_max_tasks(), ffi::ud_nr_cpu_ids()) };
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
    stats::attach(&state.counts);
    DEFERRED.store(KBox::into_raw(state), Ordering::Release);
    Ok(())
}

/// Unload, after the C hooks are gone and no request can come any more: take back the
/// queued task works, wait for running ones, free the state.
pub(crate) fn retract() {
    let Some(d) = deferred() else { return };
    for entry in d.tasks.entries() {
        if !entry.state.is_pending() {
            continue;
        }
        let task = d.tasks.owner_of(entry);
        // SAFETY: a pending entry holds a reference on its task (taken when its task work
        // was queued), so `task` is valid; task_work_cancel() is called in process context.
        if !task.is_null() && unsafe { ffi::ud_task_work_cancel(task, entry.work_head()) } {
            // The task work will not run: drop what it would have dropped.
            // SAFETY: the reference taken at queue time.
            unsafe { ffi::ud_put_task(task) };
            TASK_WORKS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        }
    }
    // Task works already dequeued by task_work_run() are running or about to: they hold
    // no lock we hold, so they finish. Their last access to module memory is the counter
    // decrement (then a return into this module's text, which is still mapped while we
    // sleep here; only the final instructions race with the unload, as for any task work
    // or timer callback of a module).
    while TASK_WORKS_IN_FLIGHT.load(Ordering::Acquire) != 0 {
        // SAFETY: process context.
        unsafe { ffi::ud_msleep(10) };
    }
    let state = DEFERRED.swap(null_mut(), Ordering::AcqRel);
    // SAFETY: nothing counts any more (hooks gone, task works done).
    unsafe { stats::detach() };
    // SAFETY: `state` came from `KBox::into_raw` in `publish()` and nothing can reach it any
    // more (hooks gone, task works done).
    drop(unsafe { KBox::from_raw(state) });
}

impl Deferred {
    /// A new cookie for a kernel entry on CPU `cpu`, the one we run on (interrupts off or
    /// NMI: it holds).
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

/// `unwind_deferred_request()`, after its C half (src/shim.c) found out who asks and turned
/// interrupts off. Any context, NMI included; nothing on its common path (a repeated
/// request of the entry) calls into C.
fn request(req: &ffi::ud_request, cookie_out: &mut u64) -> i32 {
    *cookie_out = 0;
    let cpu = req.cpu;
    if req.nmi {
        stats::bump_on(cpu, Counter::requests_nmi);
    }
    let refused = match req.why {
        ffi::ud_unwindable::UD_OK => None,
        ffi::ud_unwindable::UD_KTHREAD => Some(Counter::err_kthread),
        ffi::ud_unwindable::UD_USER_WORKER => Some(Counter::err_user_worker),
        ffi::ud_unwindable::UD_EXITING => Some(Counter::err_exiting),
        ffi::ud_unwindable::UD_NOT_USER_REGS => Some(Counter::err_not_user),
        ffi::ud_unwindable::UD_COMPAT => Some(Counter::err_compat),
    };
    if let Some(counter) = refused {
        stats::bump_on(cpu, counter);
        return EINVAL.to_errno();
    }
    // A cancelled work has bit -1 (and one never initialised, 0).
    let bit = match u32::try_from(req.bit) {
        Ok(bit) if bit > 0 && bit < usize::BITS => bit,
        _ => {
            stats::bump_on(cpu, Counter::err_cancelled);
            return EINVAL.to_errno();
        }
    };
    let Some(d) = deferred() else { return ENODEV.to_errno() };
    let task = req.task;
    let Ok(entry) = d.tasks.get_or_insert(task) else {
        stats::bump_on(cpu, Counter::err_table_full);
        // SAFETY: pr_warn_once() is safe in any context but NMI, where printk defers.
        unsafe { ffi::ud_pr_warn_table_full() };
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
            // The queued work holds a reference on the task, so that unload can cancel it.
            // SAFETY: `task` is current, alive; get_task_struct() is an atomic increment
            // (NMI-safe).
            unsafe { ffi::ud_get_task(task) };
            // SAFETY: the entry's callback_head is not queued (PENDING was clear and we set
            // it: we own the queueing), and the entry outlives the task work.
            let ret = unsafe { ffi::ud_task_work_add(entry.work_head(), req.nmi) };
            if ret != 0 {
                // The task is exiting (task works are shut). Undo, so that the state does
                // not claim a queued work that will never run.
                entry.state.abort_queue(bit);
                // SAFETY: drops the reference taken above; current holds its own, so this
                // is a plain decrement (also in NMI).
                unsafe { ffi::ud_put_task(task) };
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

/// The task work: one walk, then every requested work's callback, once.
fn task_work(head: *mut ffi::callback_head) {
    let Some(d) = deferred() else { return };
    // SAFETY: task works are only queued with an entry's callback_head (request_irqs_off).
    let entry = unsafe { d.tasks.entry_of_work(head) };
    bump(Counter::task_works);
    {
        // Take the bits inside the SRCU section: cancel clears a bit in every task and then
        // waits for SRCU readers, so a task work either sees the bit cleared or finishes
        // before cancel returns (never calls back a later owner of the bit).
        let _srcu = SrcuReadGuard::new();
        let mut bits = entry.state.take_pending();
        let (entries, nr) = unwind::current_stack(entry, &d.caches);
        let cookie = entry.state.current_cookie();
        // Only the set bits: a loop over all 63 costs more than a stack of a few frames.
        while bits != 0 {
            let bit = bits.trailing_zeros();
            bits &= bits - 1;
            let work = registry::work(bit);
            if !work.is_null() {
                // SAFETY: `work` is registered (SRCU keeps it so until we leave the
                // section); `entries[..nr]` is this entry's cached stack, valid during the
                // call.
                unsafe { ffi::ud_work_call(work, entries.cast(), nr as u32, cookie) };
                bump(Counter::callbacks);
            }
            entry.state.complete(bit);
        }
    }
    // End of the entry, with interrupts off: an interrupt's request on this task would
    // interleave with the reset as an NMI's can (the state is written for NMIs only).
    // SAFETY: paired with the restore below.
    let flags = unsafe { ffi::ud_local_irq_save() };
    if entry.state.end_entry() {
        unwind::invalidate(entry);
        bump(Counter::resets);
    }
    // SAFETY: the flags of the save above.
    unsafe { ffi::ud_local_irq_restore(flags) };
    // SAFETY: drops the reference taken when this work was queued; current is alive.
    unsafe { ffi::ud_put_task(ffi::ud_current()) };
    // Last access to module state (see `retract`).
    TASK_WORKS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
}

/// sched_process_free: the task is dead and its task works have run.
fn task_free(task: *mut ffi::task_struct) {
    let Some(d) = deferred() else { return };
    if d.tasks.release(task) {
        bump(Counter::tasks_freed);
    }
}

// --- Entry points called from the C shim ----------------------------------------------

/// # Safety
///
/// Called by the shim's task_work function with the `callback_head` it was queued with.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_task_work(head: *mut ffi::callback_head) {
    task_work(head);
}

/// # Safety
///
/// Called from the sched_process_free probe with the dying task.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_task_free(task: *mut ffi::task_struct) {
    task_free(task);
}

/// # Safety
///
/// `work` is a valid `struct unwind_work` that outlives its registration.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_init_work(work: *mut ffi::unwind_work, func: ffi::unwind_callback_fn) -> i32 {
    if work.is_null() || func.is_none() {
        return EINVAL.to_errno();
    }
    // SAFETY: guaranteed by our caller.
    match unsafe { registry::init(work, func) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `req` is valid for reading, its `task` is current; `cookie` is valid for writing;
/// interrupts are off (or NMI).
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_request(req: *const ffi::ud_request, cookie: *mut u64) -> i32 {
    // SAFETY: guaranteed by our caller.
    let (req, cookie) = unsafe { (&*req, &mut *cookie) };
    request(req, cookie)
}

/// # Safety
///
/// `work` is a valid `struct unwind_work`; sleepable context.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_cancel(work: *mut ffi::unwind_work) {
    // SAFETY: guaranteed by our caller.
    unsafe {
        registry::cancel(work, |bit| {
            if let Some(d) = deferred() {
                for entry in d.tasks.entries() {
                    entry.state.cancel(bit);
                }
            }
        })
    };
}

/// The core's counters and gauges as text (debugfs `stats`); returns the bytes written.
///
/// # Safety
///
/// `buf` is valid for writing `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_stats(buf: *mut u8, len: usize) -> usize {
    let (table_used, table_size) = match deferred() {
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
    // SAFETY: guaranteed by our caller.
    unsafe { stats::write_stats(buf, len, &gauges) }
}
