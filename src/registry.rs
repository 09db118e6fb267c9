// SPDX-License-Identifier: GPL-2.0
//! Registered works: `unwind_deferred_init()` and `unwind_deferred_cancel()`.
//!
//! A work is identified by its bit of the per-task mask. [`WORKS`] maps each bit to the
//! caller's `struct unwind_work`; callbacks read it under SRCU, so that cancel can wait for
//! running callbacks without a global lock around them (upstream's "SRCU for callbacks").

#![deny(unsafe_code)]

use kernel::prelude::*;

use crate::ffi;
use crate::logic::resolve::KnownMappings;
use crate::logic::work_bits::WorkBits;
use crate::sys::{self, RegistryMutex, SrcuReadGuard, WorkPtr, WorkTable};

/// The work owning each bit.
static WORKS: WorkTable = WorkTable::new();

/// The bit allocator, behind the registry mutex (init and cancel only).
static BITS: RegistryMutex<WorkBits> = RegistryMutex::new(WorkBits::new());

/// `unwind_deferred_init()`: gives `work` the lowest free bit. `-EBUSY` when all
/// [`crate::logic::work_bits::MAX_WORKS`] are taken.
pub(crate) fn init(work: WorkPtr, func: ffi::unwind_callback_fn) -> Result {
    // -1 marks the work unusable until it has a bit.
    work.init(func, -1);
    let mut bits = BITS.lock();
    let bit = bits.alloc().ok_or(EBUSY)?;
    work.set_bit(bit as i32);
    WORKS.install(bit, work);
    Ok(())
}

/// `unwind_deferred_cancel()`: after it returns, `work`'s callback never runs again, it
/// can no longer request, and its bit is clear in every task and free for reuse.
pub(crate) fn cancel(work: WorkPtr, clear_tasks: impl Fn(u32)) {
    let mut bits = BITS.lock();
    let Ok(bit) = u32::try_from(work.bit()) else { return };
    if bit == 0 || bit >= usize::BITS || !WORKS.owns(bit, work) {
        return; // Never initialised, already cancelled, or not ours: nothing to do.
    }
    // No new callback of `work` starts; retire() waits for those running (SRCU readers)
    // after the steps below.
    WORKS.retire(bit, || {
        work.set_bit(-1);
        // Race: a request that read the old bit just before we cleared it may still be
        // setting it in a task's mask. Requests run with interrupts off (or in NMI), which
        // synchronize_rcu() waits for: after it, no request can set the bit again.
        sys::synchronize_rcu();
        clear_tasks(bit);
    });
    // Race: a task work that took its bits before the clearing marks the bit completed in
    // its task after it (it found the work retired, or called it before). Left there, a
    // completed bit would filter out the callback of the bit's next owner if that owner
    // requested later in the same kernel entry: its request returns 0 and it is never
    // called back. retire() waited for such task works (they hold the SRCU read section
    // while they handle their bits); now no task work holds the bit and no request can set
    // it: clear it again.
    clear_tasks(bit);
    bits.free(bit);
}

/// Calls back the work owning `bit`, if any (inside the SRCU section of `srcu`): whether
/// there was one.
pub(crate) fn call(
    bit: u32,
    srcu: &SrcuReadGuard,
    stack: &mut [u64],
    cookie: u64,
    known: Option<&mut KnownMappings>,
) -> bool {
    WORKS.call(bit, srcu, stack, cookie, known)
}

/// Number of registered works.
pub(crate) fn registered() -> u64 {
    WORKS.registered()
}
