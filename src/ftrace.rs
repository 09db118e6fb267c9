// SPDX-License-Identifier: GPL-2.0
//! The decisions of the ftrace integration (src/ftrace/), over the pure logic: resolving
//! stacks into file offsets and hashes, through the address space of src/ftrace/stack.c.
//! (Its other calls, option parsing, file-hash folding, cookie placement and the
//! per-instance file cache, go straight to the logic: see src/c_boundary.rs.)

#![deny(unsafe_code)]

use core::mem::MaybeUninit;

use kernel::prelude::*;

use crate::ffi;
use crate::logic::resolve::{
    fill, resolve_known, resolve_runs, AddressSpace, KnownFiles, KnownMappings, Mapping, Run,
    RunStore,
};
use crate::logic::task_maps::Stamp;
use crate::sys::{self, StackContext};

/// The address space of a stack being resolved: src/ftrace/stack.c's callbacks with their
/// context.
struct StackSpace<'a>(StackContext<'a>);

impl AddressSpace for StackSpace<'_> {
    fn lookup(&mut self, addr: u64) -> Option<Mapping> {
        let m = self.0.lookup(addr)?;
        Some(Mapping { start: m.start, end: m.end, pgoff: m.pgoff, file: m.file as usize })
    }

    fn file_run(&mut self, file: usize) -> u32 {
        self.0.file_run(file)
    }
}

/// The runs of a stack being resolved: the first [`ffi::UD_SMALL_RUNS`] in the C caller's
/// array (`struct ud_runs`'s `small`), the rest in an array on the heap with room for all
/// the frames after those (a run has at least one frame, so it never grows again). Out of
/// memory, the runs end there (the stack is cut short: the frames covered say where).
struct RunsOut<'a> {
    small: &'a mut [MaybeUninit<ffi::ud_run>],
    /// Runs written to `small`.
    nr_small: usize,
    heap: Option<KVec<ffi::ud_run>>,
    /// Frames of the whole stack.
    frames: usize,
}

impl RunsOut<'_> {
    /// `run`, the first one past `small` (full). Out of line: the common path stays small
    /// enough to be inlined.
    #[cold]
    #[inline(never)]
    fn push_to_heap(&mut self, run: ffi::ud_run) -> bool {
        // The runs in `small` cover at least one frame each.
        let room = self.frames.saturating_sub(self.nr_small).max(1);
        let Ok(mut heap) = KVec::with_capacity(room, GFP_KERNEL) else {
            return false;
        };
        if heap.push(run, GFP_KERNEL).is_err() {
            return false;
        }
        self.heap = Some(heap);
        true
    }
}

impl RunStore for RunsOut<'_> {
    #[inline]
    fn push(&mut self, run: Run) -> bool {
        let run = ffi::ud_run { bias: run.bias, len: run.len, hash: run.hash };
        if let Some(heap) = &mut self.heap {
            heap.push(run, GFP_KERNEL).is_ok()
        } else if let Some(slot) = self.small.get_mut(self.nr_small) {
            slot.write(run);
            self.nr_small += 1;
            true
        } else {
            // (Rare: a stack that changes mapping this often, JIT code calling into a runtime.)
            self.push_to_heap(run)
        }
    }
}

/// A stack resolved by [`resolve_stack`].
pub(crate) struct StackRuns {
    /// Runs written to the caller's `small` array, in stack order.
    pub(crate) nr_small: usize,
    /// The runs after them, if any.
    pub(crate) heap: Option<KVec<ffi::ud_run>>,
    /// Frames the runs cover: the whole stack unless out of memory.
    pub(crate) covered: usize,
}

/// The current task's address space stamp (see [`crate::logic::task_maps`]).
fn current_stamp() -> Option<Stamp> {
    sys::current_maps_stamp().map(|(exec_id, seq)| Stamp { exec_id, seq })
}

/// Resolves a stack for a `user_unwind_stack` event (see [`resolve_runs`]), the mmap lock
/// held: its first runs into `small`, the rest into [`StackRuns::heap`]. What it looks up
/// is kept in `known`, if any, for the task's next stacks.
pub(crate) fn resolve_stack(
    ctx: StackContext<'_>,
    known: Option<&mut KnownMappings>,
    frames: &[u64],
    small: &mut [MaybeUninit<ffi::ud_run>],
) -> StackRuns {
    let mut runs = RunsOut { small, nr_small: 0, heap: None, frames: frames.len() };
    let shift = kernel::page::PAGE_SHIFT as u32;
    let covered = match known {
        // The stamp read with the lock held: no writer is changing the mappings (even).
        Some(known) => resolve_runs(&mut known.recording(current_stamp(), StackSpace(ctx)), shift, frames, &mut runs),
        None => resolve_runs(&mut StackSpace(ctx), shift, frames, &mut runs),
    };
    StackRuns { nr_small: runs.nr_small, heap: runs.heap, covered }
}

/// Resolves a stack as [`resolve_stack`] would, without the mmap lock, from the task's
/// `known` mappings alone (see [`resolve_known`]), if they hold every frame and none of the
/// files met needs an announcement in the instance (the uses are then counted); `None`
/// otherwise (nothing counted: resolve the stack with [`resolve_stack`]).
pub(crate) fn resolve_stack_known(
    mut ctx: StackContext<'_>,
    known: &KnownMappings,
    frames: &[u64],
    small: &mut [MaybeUninit<ffi::ud_run>],
) -> Option<StackRuns> {
    // Read without the lock; odd (a writer at work) gives none. A writer that starts after
    // this read changes nothing of what we use: the stack is resolved as the address space
    // was at the read.
    let stamp = current_stamp()?;
    let mut runs = RunsOut { small, nr_small: 0, heap: None, frames: frames.len() };
    let mut files = KnownFiles::new();
    let covered = resolve_known(known, stamp, kernel::page::PAGE_SHIFT as u32, frames, &mut runs, &mut files)?;
    if !ctx.files_use(files.hashes()) {
        return None;
    }
    Some(StackRuns { nr_small: runs.nr_small, heap: runs.heap, covered })
}

/// Writes the arrays of a `user_unwind_stack` event from a stack's runs, `small` then `heap`
/// (see [`fill`]).
pub(crate) fn fill_stack(
    frames: &[u64],
    small: &[ffi::ud_run],
    heap: &[ffi::ud_run],
    offsets: &mut [[u8; 8]],
    hashes: &mut [[u8; 4]],
) {
    let runs = Iterator::chain(small.iter(), heap).map(|r| Run { bias: r.bias, len: r.len, hash: r.hash });
    fill(frames, runs, offsets, hashes);
}
