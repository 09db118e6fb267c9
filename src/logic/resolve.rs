// SPDX-License-Identifier: GPL-2.0
//! Turns a walked stack (user addresses) into what `user_unwind_stack` records: per frame,
//! a file offset and a file hash (see Documentation/trace-events.rst).
//!
//! The address space is behind [`AddressSpace`]: the module looks mappings up under the
//! mmap lock, tests use a table. Consecutive frames usually lie in one mapping (a program's
//! own call chain, then the C library's), so a mapping is looked up only when a frame
//! falls outside the previous frame's, and a file is hashed once per run of frames in it.

use super::file_id::{file_offset, HASH_ANON, HASH_NO_MAPPING};

/// One mapping of the address space, as the resolver needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// Page of the file mapped at `start`.
    pub pgoff: u64,
    /// The mapped file, as an opaque non-zero identity (the module: the `struct file`
    /// pointer, never recorded), or 0 for anonymous memory.
    pub file: usize,
}

/// The address space a stack is resolved in.
pub trait AddressSpace {
    /// The mapping that contains `addr`, if any.
    fn lookup(&mut self, addr: u64) -> Option<Mapping>;
    /// A run of frames in `file` (non-zero) starts: returns the hash to record for it (not
    /// [`HASH_ANON`] or [`HASH_NO_MAPPING`]). Called once per run, so that callers may count
    /// uses of a file per run (the reminder rule of `file_cache`).
    fn file_run(&mut self, file: usize) -> u32;
}

/// Resolves `frames` into `offsets` and `hashes` (the three slices have the same length;
/// extra elements of the longer ones are left alone):
///
/// * a frame in a file mapping: its file offset and the file's hash;
/// * in anonymous memory: the address and [`HASH_ANON`];
/// * in no mapping: the address and [`HASH_NO_MAPPING`].
pub fn resolve(
    space: &mut impl AddressSpace,
    page_shift: u32,
    frames: &[u64],
    offsets: &mut [u64],
    hashes: &mut [u32],
) {
    let n = frames.len().min(offsets.len()).min(hashes.len());
    let (frames, offsets, hashes) = (&frames[..n], &mut offsets[..n], &mut hashes[..n]);
    // The file of the previous frame, and its hash: a run continues while it matches (also
    // across two mappings of one file).
    let mut run: Option<(usize, u32)> = None;
    let mut i = 0;
    while let Some(&addr) = frames.get(i) {
        let Some(m) = space
            .lookup(addr)
            .filter(|m| m.start <= addr && addr < m.end)
        else {
            offsets[i] = addr;
            hashes[i] = HASH_NO_MAPPING;
            run = None;
            i += 1;
            continue;
        };
        // Every frame from `i` on that lies in `m` is resolved here, without another lookup
        // (this loop is most of the work on a deep stack: keep it tight).
        let (hash, bias) = if m.file == 0 {
            run = None;
            (HASH_ANON, 0)
        } else {
            let hash = match run {
                Some((file, h)) if file == m.file => h,
                _ => space.file_run(m.file),
            };
            run = Some((m.file, hash));
            (hash, file_offset(0, m.start, m.pgoff, page_shift))
        };
        for ((&addr, offset), h) in frames[i..]
            .iter()
            .zip(&mut offsets[i..])
            .zip(&mut hashes[i..])
        {
            if addr < m.start || addr >= m.end {
                break;
            }
            *offset = addr.wrapping_add(bias);
            *h = hash;
            i += 1;
        }
    }
}
