// SPDX-License-Identifier: GPL-2.0
//! Turns a walked stack (user addresses) into what `user_unwind_stack` records: per frame,
//! a file offset and a file hash (see Documentation/trace-events.rst).
//!
//! The address space is behind [`AddressSpace`]: the module looks mappings up under the
//! mmap lock, tests use a table. Consecutive frames usually lie in one mapping (a program's
//! own call chain, then the C library's), and a stack alternates between a few (an
//! interpreter's stack goes from the C library to the interpreter and back to the C
//! library's start-up code and the interpreter's `_start`): a mapping is looked up only when
//! a frame falls outside the last [`RECENT`] mappings looked up in this stack, and a file is
//! hashed once per stack while it stays among them.

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

/// Mappings (and their files' hashes) a resolution keeps: a stack meets a few files.
pub const RECENT: usize = 4;

/// The address space a stack is resolved in.
pub trait AddressSpace {
    /// The mapping that contains `addr`, if any.
    fn lookup(&mut self, addr: u64) -> Option<Mapping>;
    /// Frames in `file` (non-zero) start: returns the hash to record for it (not
    /// [`HASH_ANON`] or [`HASH_NO_MAPPING`]). Called once per stack and file while the file
    /// stays among the last [`RECENT`] mappings looked up (again only if it left them), so that
    /// callers may count uses of a file per stack (the reminder rule of `file_cache`).
    fn file_run(&mut self, file: usize) -> u32;
}

/// The last [`RECENT`] mappings looked up, with the hash of each one's file.
struct Recent {
    kept: [(Mapping, u32); RECENT],
    /// Entries in use.
    len: usize,
    /// The entry the next mapping replaces once all are in use (in turn: no entry moves,
    /// which for 40-byte entries would cost a `memmove` at every change of file).
    next: usize,
}

impl Recent {
    /// The kept mapping that holds `addr`.
    fn find(&self, addr: u64) -> Option<(Mapping, u32)> {
        let kept = self.kept.get(..self.len)?;
        kept.iter()
            .find(|(m, _)| m.start <= addr && addr < m.end)
            .copied()
    }

    /// The hash of `file` if a kept mapping is in it.
    fn hash_of(&self, file: usize) -> Option<u32> {
        let kept = self.kept.get(..self.len)?;
        kept.iter().find(|(m, _)| m.file == file).map(|&(_, h)| h)
    }

    /// Keeps `m`, in place of the oldest when all entries are in use.
    fn keep(&mut self, m: Mapping, hash: u32) {
        let at = if self.len < RECENT {
            self.len += 1;
            self.len - 1
        } else {
            let at = self.next;
            self.next = (at + 1) % RECENT;
            at
        };
        if let Some(slot) = self.kept.get_mut(at) {
            *slot = (m, hash);
        }
    }
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
    const NONE: Mapping = Mapping {
        start: 0,
        end: 0,
        pgoff: 0,
        file: 0,
    };
    let mut recent = Recent {
        kept: [(NONE, 0); RECENT],
        len: 0,
        next: 0,
    };
    let mut i = 0;
    while let Some(&addr) = frames.get(i) {
        let (m, hash) = match recent.find(addr) {
            Some(kept) => kept,
            None => {
                let Some(m) = space
                    .lookup(addr)
                    .filter(|m| m.start <= addr && addr < m.end)
                else {
                    offsets[i] = addr;
                    hashes[i] = HASH_NO_MAPPING;
                    i += 1;
                    continue;
                };
                // (Two mappings of one file, such as its header page and its text, share
                // the file's hash and its use.)
                let hash = match m.file {
                    0 => HASH_ANON,
                    file => recent.hash_of(file).unwrap_or_else(|| space.file_run(file)),
                };
                recent.keep(m, hash);
                (m, hash)
            }
        };
        let bias = if m.file == 0 {
            0
        } else {
            file_offset(0, m.start, m.pgoff, page_shift)
        };
        // Every frame from `i` on that lies in `m` is resolved here, without another lookup
        // (this loop is most of the work on a deep stack: keep it tight: one comparison for
        // the range, and the count kept apart from the loop's own).
        let span = m.end.wrapping_sub(m.start);
        let mut taken = 0usize;
        for ((&addr, offset), h) in frames[i..]
            .iter()
            .zip(&mut offsets[i..])
            .zip(&mut hashes[i..])
        {
            if addr.wrapping_sub(m.start) >= span {
                break;
            }
            *offset = addr.wrapping_add(bias);
            *h = hash;
            // At most `n`: no overflow.
            taken = taken.wrapping_add(1);
        }
        i += taken;
    }
}
