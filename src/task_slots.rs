// SPDX-License-Identifier: GPL-2.0
//! The per-task side table: what upstream keeps in `task_struct::unwind_info`.
//!
//! A fixed array of [`TaskSlot`], indexed through the lock-free
//! [`crate::logic::slot_index::SlotIndex`] keyed by the `task_struct` pointer. Allocated
//! once at load (vzalloc), so lookups and insertions never allocate and work in NMI.
//! A task gets a slot at its first request and gives it back when it is freed
//! (sched_process_free) or when the module unloads.

#![deny(unsafe_code)]

use core::sync::atomic::AtomicUsize;

use kernel::prelude::*;

use crate::ffi;
use crate::logic::request_state::RequestState;
use crate::logic::resolve::KnownMappings;
use crate::logic::slot_index::{self, Slot, SlotIndex, TableFull};
use crate::sys::{AtomicBox, TaskWork};
use crate::unwind::StackCache;

/// One task's deferred-unwind state.
#[repr(C)]
pub(crate) struct TaskSlot {
    /// The request mask, completed set and cookie.
    pub(crate) state: RequestState,
    /// The task work, queued on the task at the first request of an entry.
    pub(crate) work: TaskWork,
    /// The cached stack of the entry (allocated at the first unwind, in task context). The
    /// task work takes it out while it runs and puts it back.
    pub(crate) cache: AtomicBox<StackCache>,
    /// The mappings the task's stacks were resolved in (src/ftrace/stack.c), lent to the
    /// callbacks by the task work as the cache is.
    pub(crate) known: AtomicBox<KnownMappings>,
}

impl TaskSlot {
    const fn new() -> Self {
        Self {
            state: RequestState::new(),
            work: TaskWork::new(),
            cache: AtomicBox::new(),
            known: AtomicBox::new(),
        }
    }
}

/// Slots owned in the table, or more (see [`SlotIndex`]).
static LIVE_SLOTS: AtomicUsize = AtomicUsize::new(0);

/// The table: slots' ownership words and their entries, same index.
///
/// # Invariants
///
/// `owners` and `entries` have the same length, a power of two no smaller than
/// `PROBE_WINDOW`, and are never resized (the table's addresses are stable: task works
/// are queued with them).
pub(crate) struct TaskSlots {
    owners: VVec<Slot>,
    entries: VVec<TaskSlot>,
}

impl TaskSlots {
    /// Allocates a table for at least `max_tasks` tasks.
    pub(crate) fn new(max_tasks: usize) -> Result<Self> {
        let len = max_tasks
            .max(crate::logic::slot_index::PROBE_WINDOW)
            .checked_next_power_of_two()
            .ok_or(EINVAL)?;
        let mut owners = VVec::with_capacity(len, GFP_KERNEL)?;
        let mut entries = VVec::with_capacity(len, GFP_KERNEL)?;
        for _ in 0..len {
            owners.push(Slot::new(), GFP_KERNEL)?;
            entries.push(TaskSlot::new(), GFP_KERNEL)?;
        }
        // INVARIANT: two arrays of `len`, a power of two no smaller than PROBE_WINDOW.
        Ok(Self { owners, entries })
    }

    /// All entries.
    pub(crate) fn entries(&self) -> &[TaskSlot] {
        &self.entries
    }

    #[inline]
    fn table(&self) -> SlotIndex<'_> {
        // The length was validated at construction (type invariant); there is one table per
        // load, so the one counter (0 at load, like every static) is its own.
        SlotIndex::new(&self.owners, &LIVE_SLOTS).expect("table size checked at construction")
    }

    /// The entry of the task `key` if it is in its home slot (nearly every task's is): one
    /// probe, without the checks of a [`SlotIndex`] view. `None` says nothing (see
    /// [`TaskSlots::get_or_insert`]). NMI-safe.
    #[inline]
    pub(crate) fn lookup_home(&self, key: usize) -> Option<&TaskSlot> {
        self.entries.get(slot_index::find_at_home(&self.owners, key)?)
    }

    /// The entry of the task `key`, creating it if needed. NMI-safe.
    #[inline]
    pub(crate) fn get_or_insert(&self, key: usize) -> Result<&TaskSlot, TableFull> {
        let slot = self.table().find_or_insert(key)?;
        Ok(&self.entries[slot])
    }

    /// The entry whose task work is `head`, if it is one of this table's.
    pub(crate) fn entry_of_work(&self, head: *mut ffi::callback_head) -> Option<&TaskSlot> {
        let offset = (head as usize)
            .checked_sub(self.entries.as_ptr() as usize)?
            .checked_sub(core::mem::offset_of!(TaskSlot, work))?;
        let size = core::mem::size_of::<TaskSlot>();
        let entry = self.entries.get(offset / size)?;
        (offset % size == 0).then_some(entry)
    }

    /// Gives back every slot of the task `key` (a dead task). Not NMI-safe (frees the cache).
    pub(crate) fn release(&self, key: usize) -> bool {
        let table = self.table();
        let mut released = false;
        for slot in table.owned_by(key) {
            let entry = &self.entries[slot];
            entry.state.clear();
            drop(entry.cache.take());
            drop(entry.known.take());
            released |= table.release(slot, key);
        }
        released
    }

    /// Slots in use.
    pub(crate) fn occupancy(&self) -> usize {
        self.table().occupancy()
    }

    /// Slots in all.
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len()
    }
}
