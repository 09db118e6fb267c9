// SPDX-License-Identifier: GPL-2.0
//! Registered works: `unwind_deferred_init()` and `unwind_deferred_cancel()`.
//!
//! A work is identified by its bit of the per-task mask. `WORKS[bit]` points to the
//! caller's `struct unwind_work`; callbacks read it under SRCU, so that cancel can wait for
//! running callbacks without a global lock around them (upstream's "SRCU for callbacks").

use core::cell::UnsafeCell;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::prelude::*;

use crate::ffi;
use crate::logic::work_bits::WorkBits;

/// `WORKS[bit]`: the work owning `bit`, or null.
static WORKS: [AtomicPtr<ffi::unwind_work>; usize::BITS as usize] =
    [const { AtomicPtr::new(null_mut()) }; usize::BITS as usize];

/// The bit allocator.
///
/// # Invariants
///
/// `bits` is only accessed with the C registry mutex held (through [`RegistryGuard`]).
struct Registry {
    bits: UnsafeCell<WorkBits>,
}

// SAFETY: every access to `bits` goes through `RegistryGuard`, which holds the mutex.
unsafe impl Sync for Registry {}

static REGISTRY: Registry = Registry { bits: UnsafeCell::new(WorkBits::new()) };

/// Holds the registry mutex.
struct RegistryGuard;

impl RegistryGuard {
    fn lock() -> Self {
        // SAFETY: plain mutex_lock() on a static mutex; may sleep, and our callers
        // (init/cancel) run in sleepable context as documented.
        unsafe { ffi::ud_registry_lock() };
        RegistryGuard
    }

    fn bits(&mut self) -> &mut WorkBits {
        // SAFETY: the mutex is held for the guard's lifetime and `&mut self` makes this
        // the only reference derived from this guard.
        unsafe { &mut *REGISTRY.bits.get() }
    }
}

impl Drop for RegistryGuard {
    fn drop(&mut self) {
        // SAFETY: the guard holds the mutex.
        unsafe { ffi::ud_registry_unlock() };
    }
}

/// `unwind_deferred_init()`: gives `work` the lowest free bit. `-EBUSY` when all
/// [`crate::logic::work_bits::MAX_WORKS`] are taken.
///
/// # Safety
///
/// `work` points to a `struct unwind_work` that stays valid until it is cancelled.
pub(crate) unsafe fn init(work: *mut ffi::unwind_work, func: ffi::unwind_callback_fn) -> Result {
    // SAFETY: the caller guarantees `work` is valid; -1 marks it unusable until it has a bit.
    unsafe { ffi::ud_work_init(work, func, -1) };
    let mut guard = RegistryGuard::lock();
    let bit = guard.bits().alloc().ok_or(EBUSY)?;
    // SAFETY: as above.
    unsafe { ffi::ud_work_set_bit(work, bit as i32) };
    WORKS[bit as usize].store(work, Ordering::Release);
    Ok(())
}

/// `unwind_deferred_cancel()`: after it returns, `work`'s callback never runs again, it
/// can no longer request, and its bit is clear in every task and free for reuse.
///
/// # Safety
///
/// `work` points to a valid `struct unwind_work` (initialised or cancelled).
pub(crate) unsafe fn cancel(work: *mut ffi::unwind_work, clear_tasks: impl Fn(u32)) {
    let mut guard = RegistryGuard::lock();
    // SAFETY: the caller guarantees `work` is valid.
    let bit = unsafe { ffi::ud_work_bit(work) };
    if bit <= 0 || bit >= usize::BITS as i32 || WORKS[bit as usize].load(Ordering::Relaxed) != work {
        return; // Never initialised, already cancelled, or not ours: nothing to do.
    }
    let bit = bit as u32;
    WORKS[bit as usize].store(null_mut(), Ordering::Release);
    // SAFETY: as above.
    unsafe { ffi::ud_work_set_bit(work, -1) };
    // Race: a request that read the old bit just before we cleared it may still be
    // setting it in a task's mask. Requests run with interrupts off (or in NMI), which
    // synchronize_rcu() waits for: after it, no request can set the bit again.
    // SAFETY: sleepable context (cancel may sleep, as upstream).
    unsafe { kernel::bindings::synchronize_rcu() };
    clear_tasks(bit);
    // A task work that took its bits before the clearing runs its callbacks inside an SRCU
    // read section: wait for it, so that no callback of `work` runs after we return and
    // the bit cannot reach a future owner of it.
    // SAFETY: sleepable context.
    unsafe { ffi::ud_synchronize_srcu() };
    // Race: such a task work marks the bit completed in its task after the clearing above
    // (it found the work null, or called it before we nulled it). Left there, a completed
    // bit would filter out the callback of the bit's next owner if that owner requested
    // later in the same kernel entry: its request returns 0 and it is never called back.
    // No task work holds the bit any more, and no request can set it: clear it again.
    clear_tasks(bit);
    guard.bits().free(bit);
}

/// The work owning `bit`, if any. Call inside an SRCU read section and only use the
/// pointer within it.
pub(crate) fn work(bit: u32) -> *mut ffi::unwind_work {
    WORKS[bit as usize].load(Ordering::Acquire)
}

/// Number of registered works.
pub(crate) fn registered() -> u64 {
    WORKS.iter().filter(|w| !w.load(Ordering::Relaxed).is_null()).count() as u64
}

/// Holds an SRCU read section of the callback registry.
pub(crate) struct SrcuReadGuard(i32);

impl SrcuReadGuard {
    pub(crate) fn new() -> Self {
        // SAFETY: srcu_read_lock() on the module's static srcu_struct; paired in drop.
        Self(unsafe { ffi::ud_srcu_read_lock() })
    }
}

impl Drop for SrcuReadGuard {
    fn drop(&mut self) {
        // SAFETY: `self.0` is the index returned by the matching srcu_read_lock().
        unsafe { ffi::ud_srcu_read_unlock(self.0) };
    }
}
