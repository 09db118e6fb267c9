// SPDX-License-Identifier: GPL-2.0
//! The per-task side table: what upstream keeps in `task_struct::unwind_info`.
//!
//! A fixed array of [`TaskSlot`], indexed through the lock-free
//! [`crate::logic::slot_index::SlotIndex`] keyed by the `task_struct` pointer. Allocated
//! once at load (vzalloc), so lookups and insertions never allocate and work in NMI.
//! A task gets a slot at its first request and gives it back when it is freed
//! (sched_process_free) or when the module unloads.

use core::cell::UnsafeCell;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use kernel::prelude::*;

use crate::ffi;
use crate::logic::request_state::RequestState;
use crate::logic::slot_index::{Slot, TableFull, SlotIndex};
use crate::unwind::StackCache;

/// One task's deferred-unwind state.
#[repr(C)]
pub(crate) struct TaskSlot {
    /// The request mask, completed set and cookie.
    pub(crate) state: RequestState,
    /// The `struct callback_head` queued with task_work_add(); only the C shim reads or
    /// writes it, and only while it is queued or running.
    work: UnsafeCell<[usize; ffi::UD_CALLBACK_HEAD_SIZE as usize / 8]>,
    /// The cached stack of this entry (allocated at the first unwind, in task context).
    pub(crate) cache: AtomicPtr<StackCache>,
}

/// Slots owned in the table, or more (see [`SlotIndex`]).
static LIVE_SLOTS: AtomicUsize = AtomicUsize::new(0);

/// The table: slots' ownership words and their entries, same index.
///
/// # Invariants
///
/// * `owners` and `entries` point to `len` zeroed-then-used elements from vzalloc, owned
///   by this struct and freed in drop; `len` is a power of two ≥ `PROBE_WINDOW`.
/// * All-zero bytes are a valid `Slot` (free) and `TaskSlot` (never requested, no work
///   queued, no cache): both consist of atomics and plain integers only.
pub(crate) struct TaskSlots {
    owners: *mut Slot,
    entries: *mut TaskSlot,
    len: usize,
}

// SAFETY: all shared state is atomics, plus `TaskSlot::work` which only the owning task's
// task_work machinery touches (see its documentation).
unsafe impl Sync for TaskSlots {}
// SAFETY: as above; the arrays are plain heap memory.
unsafe impl Send for TaskSlots {}

impl TaskSlots {
    /// Allocates a table for at least `max_tasks` tasks.
    pub(crate) fn new(max_tasks: usize) -> Result<Self> {
        let len = max_tasks
            .max(crate::logic::slot_index::PROBE_WINDOW)
            .checked_next_power_of_two()
            .ok_or(EINVAL)?;
        let owners_size = len.checked_mul(core::mem::size_of::<Slot>()).ok_or(EINVAL)?;
        let entries_size = len.checked_mul(core::mem::size_of::<TaskSlot>()).ok_or(EINVAL)?;
        // SAFETY: plain vzalloc() of a computed size.
        let owners = unsafe { ffi::ud_vzalloc(owners_size as _) }.cast::<Slot>();
        // SAFETY: as above.
        let entries = unsafe { ffi::ud_vzalloc(entries_size as _) }.cast::<TaskSlot>();
        if owners.is_null() || entries.is_null() {
            // SAFETY: vfree() accepts null and what vzalloc() returned.
            unsafe {
                ffi::ud_vfree(owners.cast());
                ffi::ud_vfree(entries.cast());
            }
            return Err(ENOMEM);
        }
        // INVARIANT: both arrays are zeroed vzalloc memory of `len` elements, and `len` is a
        // power of two no smaller than PROBE_WINDOW.
        Ok(Self { owners, entries, len })
    }

    #[inline]
    fn slots(&self) -> &[Slot] {
        // SAFETY: by the type invariants `owners` holds `len` valid `Slot`s for our lifetime.
        unsafe { core::slice::from_raw_parts(self.owners, self.len) }
    }

    /// All entries.
    pub(crate) fn entries(&self) -> &[TaskSlot] {
        // SAFETY: by the type invariants `entries` holds `len` valid entries.
        unsafe { core::slice::from_raw_parts(self.entries, self.len) }
    }

    #[inline]
    fn table(&self) -> SlotIndex<'_> {
        // The length was validated at construction (type invariant); there is one table per
        // load, so the one counter (0 at load, like every static) is its own.
        SlotIndex::new(self.slots(), &LIVE_SLOTS).expect("table size checked at construction")
    }

    /// The entry of `task`, creating it if needed. NMI-safe.
    #[inline]
    pub(crate) fn get_or_insert(&self, task: *mut ffi::task_struct) -> Result<&TaskSlot, TableFull> {
        let slot = self.table().find_or_insert(task as usize)?;
        Ok(&self.entries()[slot])
    }

    /// The owner of the slot of `entry`.
    pub(crate) fn owner_of(&self, entry: &TaskSlot) -> *mut ffi::task_struct {
        self.slots()[self.index_of(entry)].owner() as *mut ffi::task_struct
    }

    fn index_of(&self, entry: &TaskSlot) -> usize {
        (entry as *const TaskSlot as usize - self.entries as usize) / core::mem::size_of::<TaskSlot>()
    }

    /// The entry whose `callback_head` is `head`.
    ///
    /// # Safety
    ///
    /// `head` was obtained from [`TaskSlot::work_head`] of an entry of this table.
    pub(crate) unsafe fn entry_of_work(&self, head: *mut ffi::callback_head) -> &TaskSlot {
        let offset = core::mem::offset_of!(TaskSlot, work);
        let index = (head as usize - offset - self.entries as usize) / core::mem::size_of::<TaskSlot>();
        &self.entries()[index]
    }

    /// Gives back every slot of `task` (a dead task). Not NMI-safe (frees the cache).
    pub(crate) fn release(&self, task: *mut ffi::task_struct) -> bool {
        let table = self.table();
        let mut released = false;
        for slot in table.owned_by(task as usize) {
            let entry = &self.entries()[slot];
            entry.state.clear();
            entry.free_cache();
            released |= table.release(slot, task as usize);
        }
        released
    }

    /// Slots in use.
    pub(crate) fn occupancy(&self) -> usize {
        self.table().occupancy()
    }

    /// Slots in all.
    pub(crate) fn capacity(&self) -> usize {
        self.len
    }
}

impl TaskSlot {
    /// The `struct callback_head` of this entry, for task_work_add().
    pub(crate) fn work_head(&self) -> *mut ffi::callback_head {
        self.work.get().cast()
    }

    /// Frees the cached stack (the task is gone or the module unloads).
    pub(crate) fn free_cache(&self) {
        let cache = self.cache.swap(null_mut(), Ordering::AcqRel);
        // SAFETY: the cache was allocated with kzalloc (see `unwind::StackCache::alloc`)
        // and, swapped out, is no longer reachable by anyone else; kfree accepts null.
        unsafe { ffi::ud_kfree(cache.cast()) };
    }
}

impl Drop for TaskSlots {
    fn drop(&mut self) {
        for entry in self.entries() {
            entry.free_cache();
        }
        // SAFETY: both arrays come from vzalloc() (type invariant) and nothing references
        // them any more (we are being dropped).
        unsafe {
            ffi::ud_vfree(self.owners.cast());
            ffi::ud_vfree(self.entries.cast());
        }
    }
}
