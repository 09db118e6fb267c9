// SPDX-License-Identifier: GPL-2.0
//! The decisions of the ftrace integration (src/ftrace/), over the pure logic: resolving
//! stacks into file offsets and hashes, through the address space of src/ftrace/stack.c.
//! (Its other calls, option parsing, file-hash folding, cookie placement and the
//! per-instance file cache, go straight to the logic: see src/c_boundary.rs.)

#![deny(unsafe_code)]

use crate::logic::resolve::{resolve, AddressSpace, Mapping};
use crate::sys::StackContext;

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

/// Resolves a stack for a `user_unwind_stack` event (see [`resolve`]).
pub(crate) fn resolve_stack(ctx: StackContext<'_>, frames: &[u64], offsets: &mut [u64], hashes: &mut [u32]) {
    resolve(&mut StackSpace(ctx), kernel::page::PAGE_SHIFT as u32, frames, offsets, hashes);
}
