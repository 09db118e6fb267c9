// SPDX-License-Identifier: GPL-2.0
//! The per-task state machine of deferred unwinding (what upstream keeps in
//! `task_struct::unwind_info`), without the task: the module pairs one [`RequestState`] with
//! each task in its side table.
//!
//! Contexts. Requests run on the task's own CPU, in task, IRQ or NMI context; the task work
//! and the end of the entry run on that CPU in task context (the end with interrupts off). So on one CPU every interleaving is a *nesting*: an NMI or IRQ runs to completion
//! in the middle of the code it interrupted. `cancel` runs on any CPU, truly concurrently.
//! All fields are single atomic words; no operation takes a lock, so every operation is
//! NMI-safe. The loom tests check these operations under arbitrary thread interleavings,
//! which include all nestings.
//!
//! Life of one kernel entry:
//!
//! 1. The first request sets the cookie, sets `PENDING | bit` and tells the caller to queue
//!    the task work. Later requests from other works add their bit (the queued work will
//!    see it); a request whose bit is already set returns [`Request::Already`].
//! 2. The task work takes the mask (clearing `PENDING`), walks the stack once and calls the
//!    works whose bit is set and that were not completed in this entry, marking each
//!    completed.
//! 3. A request while the callbacks run (one the callbacks themselves cause) finds its bit
//!    set and returns [`Request::Already`]: no second callback, no livelock. A request from
//!    a work that had not asked yet sets `PENDING` again, and the task work runs again,
//!    calling only that work (the completed set filters the others), with the same cached
//!    stack and cookie.
//! 4. At the end of the task work the state resets ([`RequestState::end_entry`]), unless
//!    `PENDING` is set (a request came in during the callbacks): then the task work that
//!    request queued ends the entry. Upstream resets at the return to user space instead;
//!    a module has no hook there but the user-return notifier, which every return to user
//!    space of every task would pay for. The difference: a request after the task work
//!    and before the return to user space (an event on the way out, a preemption's
//!    sched_switch, an NMI) starts a new entry, with a new cookie and its own walk of the
//!    same user stack, instead of sharing the finished one's cookie.

use super::sync::{fence, AtomicU64, AtomicUsize, Ordering};
use super::work_bits::PENDING;

/// Outcome of a request for one work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// This request must queue the task work (`unwind_deferred_request()` returns 0).
    QueueTaskWork,
    /// The task work was already queued and will see this work's bit (returns 0).
    Queued,
    /// This work's callback is already queued or already ran in this entry (returns 1).
    Already,
}

/// Per-task deferred-unwind state.
///
/// # Invariants
///
/// * `cookie` is 0 or the cookie of the current kernel entry.
/// * A work bit set in `mask` stays set until the entry ends (or cancel): that is what makes
///   a repeated request in one entry return [`Request::Already`].
/// * When `PENDING` is set in `mask`, exactly one task work is queued (or about to be by the
///   requester that saw [`Request::QueueTaskWork`]).
/// * `completed` ⊆ work bits whose callback ran in this entry.
#[derive(Debug)]
pub struct RequestState {
    mask: AtomicUsize,
    completed: AtomicUsize,
    cookie: AtomicU64,
}

impl RequestState {
    /// A task that never requested.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            mask: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            cookie: AtomicU64::new(0),
        }
    }

    /// A task that never requested (loom's atomics have no `const fn new`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            mask: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            cookie: AtomicU64::new(0),
        }
    }

    /// The cookie of this entry, assigning one with `new_cookie` if there is none yet.
    fn cookie(&self, new_cookie: impl Fn() -> u64) -> u64 {
        let current = self.cookie.load(Ordering::Acquire);
        if current != 0 {
            return current;
        }
        let candidate = new_cookie();
        // An NMI may have assigned one between the load and here: both then use the one
        // that got in first.
        match self
            .cookie
            .compare_exchange(0, candidate, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => candidate,
            Err(winner) => winner,
        }
    }

    /// The current cookie (0 if none was assigned in this entry).
    pub fn current_cookie(&self) -> u64 {
        self.cookie.load(Ordering::Acquire)
    }

    /// Request a callback for the work owning `bit` in this entry; returns the outcome and
    /// the entry's cookie, assigning one with `new_cookie` if there is none yet.
    ///
    /// `new_cookie` may be called even when another context's cookie wins the race; it
    /// must tolerate that (the module's just skips one counter value).
    pub fn request(&self, bit: u32, new_cookie: impl Fn() -> u64) -> (Request, u64) {
        if let Some(cookie) = self.already_requested(bit) {
            return (Request::Already, cookie);
        }
        let bit = 1usize << bit;
        // Cheap check first: a repeated request must not dirty the cache line.
        let outcome = if self.mask.load(Ordering::Relaxed) & bit != 0 {
            Request::Already
        } else {
            let old = self.mask.fetch_or(PENDING | bit, Ordering::AcqRel);
            // Pairs with the fence in `end_entry`: of our mask update and the
            // reset's cookie clearing, at least one sees the other (store-buffering
            // pattern; free on x86, where the locked RMW is already a full barrier).
            fence(Ordering::SeqCst);
            if old & bit != 0 {
                // An interrupting request of the same work got in between.
                Request::Already
            } else if old & PENDING != 0 {
                // The queued task work has not taken the mask yet: it will see our bit.
                Request::Queued
            } else {
                Request::QueueTaskWork
            }
        };
        // The cookie is read only now, with our bit in the mask. Race: the end of the entry
        // clears the mask, then the cookie. Had we read the cookie first, a reset
        // running between that read and our mask update would leave us holding the old
        // entry's cookie while the task work we queued reports a new one. Read after, the
        // cookie is either still the old one (the reset then sees our bit and puts it back
        // for the pending work) or already cleared (then we assign the new entry's).
        (outcome, self.cookie(new_cookie))
    }

    /// The entry's cookie if the work owning `bit` already requested in this entry and
    /// the cookie is assigned: [`RequestState::request`]'s answer [`Request::Already`], with
    /// two loads and no write (the module's request path asks this first). `None` decides
    /// nothing: `request` then does.
    #[inline]
    pub fn already_requested(&self, bit: u32) -> Option<u64> {
        if self.mask.load(Ordering::Relaxed) & (1usize << bit) == 0 {
            return None;
        }
        // Read after the mask, as in `request` (see there): the cookie of the entry in
        // which our bit is set, or 0 while an interrupted request of ours assigns it.
        let cookie = self.cookie.load(Ordering::Acquire);
        (cookie != 0).then_some(cookie)
    }

    /// The caller saw [`Request::QueueTaskWork`] but could not queue the task work (the
    /// task is exiting): forget the request so that the state stays consistent.
    pub fn abort_queue(&self, bit: u32) {
        self.mask
            .fetch_and(!(PENDING | (1usize << bit)), Ordering::AcqRel);
    }

    /// Start of the task work: takes the set of works to call back (work bits requested and
    /// not yet completed in this entry) and clears `PENDING`, so that a request arriving
    /// from now on queues the task work again.
    pub fn take_pending(&self) -> usize {
        let bits = self.mask.fetch_and(!PENDING, Ordering::AcqRel);
        bits & !PENDING & !self.completed.load(Ordering::Acquire)
    }

    /// The callback of the work owning `bit` ran in this entry.
    pub fn complete(&self, bit: u32) {
        self.completed.fetch_or(1usize << bit, Ordering::AcqRel);
    }

    /// Whether anything was requested in this entry (the reset has work to do).
    pub fn is_active(&self) -> bool {
        self.mask.load(Ordering::Relaxed) != 0
    }

    /// Whether a task work is queued.
    pub fn is_pending(&self) -> bool {
        self.mask.load(Ordering::Acquire) & PENDING != 0
    }

    /// The end of the task work: the next request starts a new entry. Returns true when the
    /// state was reset (the caller then drops the cached stack); false when nothing was
    /// requested, or when a task work is pending again (a request during the callbacks),
    /// which then runs with this entry's cookie and ends the entry after it.
    ///
    /// Runs with interrupts off on the task's CPU, so only an NMI can interleave.
    pub fn end_entry(&self) -> bool {
        let mut bits = self.mask.load(Ordering::Relaxed);
        loop {
            if bits == 0 || bits & PENDING != 0 {
                return false;
            }
            match self
                .mask
                .compare_exchange_weak(bits, 0, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => bits = now,
            }
        }
        self.completed.store(0, Ordering::Release);
        let old_cookie = self.cookie.swap(0, Ordering::AcqRel);
        fence(Ordering::SeqCst); // see `request`

        // Race: an NMI between the mask reset and the cookie swap found an empty mask, so
        // it queued a task work, but it took the old cookie (still set then) for its event.
        // Keep that cookie for the work it queued, unless a later NMI already assigned a
        // fresh one (then that one is reported; two NMIs in this window, a few instructions
        // with interrupts off, cannot both keep their cookie, and the first one's stack is
        // reported under the second's). Upstream's reset has the same window.
        if self.mask.load(Ordering::Acquire) != 0 {
            let _ =
                self.cookie
                    .compare_exchange(0, old_cookie, Ordering::AcqRel, Ordering::Relaxed);
        }
        true
    }

    /// `unwind_deferred_cancel()`: forget the work owning `bit` in this task.
    pub fn cancel(&self, bit: u32) {
        let bit = 1usize << bit;
        self.mask.fetch_and(!bit, Ordering::AcqRel);
        self.completed.fetch_and(!bit, Ordering::AcqRel);
    }

    /// Back to the never-requested state (the slot is about to be given to another task;
    /// nobody else can reach it).
    pub fn clear(&self) {
        self.mask.store(0, Ordering::Relaxed);
        self.completed.store(0, Ordering::Relaxed);
        self.cookie.store(0, Ordering::Relaxed);
    }
}

#[cfg(not(loom))]
impl Default for RequestState {
    fn default() -> Self {
        Self::new()
    }
}
