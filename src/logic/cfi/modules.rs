// SPDX-License-Identifier: GPL-2.0
//! What unwinding needs to know of each mapped file, read once per file and kept in a
//! bounded table: where its `.eh_frame_hdr` is and how its executable segments are laid
//! out (to compute the load bias of a mapping that holds a PC).
//!
//! The module reads a file's headers from the file (its page cache) the first time a walk
//! meets one of its PCs, summarises them with [`ModuleSummary::from_elf`], and keeps the
//! summary in a direct-mapped table of [`ModuleSlot`]s keyed by the file's identity (an
//! opaque 64-bit key that changes when the file is rewritten). Files without unwind
//! information are kept too, so that their headers are not read again.

use super::elf::ElfInfo;
use super::unwinder::ModuleInfo;

/// Executable `PT_LOAD`s a summary keeps (programs have one; the rest do not hold PCs).
pub const MAX_EXEC_LOADS: usize = 4;

/// An executable segment: file range `start..end` (start page-aligned) mapped with
/// `vaddr - offset` = `delta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct ExecLoad {
    start: u64,
    end: u64,
    delta: u64,
}

/// The summary of one file.
///
/// # Invariants
///
/// `exec[..nr_exec]` are the file's executable `PT_LOAD`s with a non-empty file range, in
/// header order; `nr_exec <= MAX_EXEC_LOADS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModuleSummary {
    /// Link-time address of `.eh_frame_hdr` (0: the file has none).
    eh_frame_hdr: u64,
    eh_frame_hdr_len: u64,
    nr_exec: u8,
    exec: [ExecLoad; MAX_EXEC_LOADS],
}

impl ModuleSummary {
    /// The summary of a file with these headers, for pages of `page_size` bytes (a power of
    /// two). A file with more executable segments than [`MAX_EXEC_LOADS`] keeps the first
    /// ones.
    pub fn from_elf(elf: &ElfInfo, page_size: u64) -> Self {
        let mask = !page_size.wrapping_sub(1);
        let mut summary = Self {
            eh_frame_hdr: elf.eh_frame_hdr.unwrap_or(0),
            eh_frame_hdr_len: elf.eh_frame_hdr_len,
            ..Self::default()
        };
        let exec = elf.loads().iter().enumerate().filter_map(|(i, load)| {
            let end = load.offset.checked_add(load.filesz)?;
            (elf.is_exec(i) && load.filesz != 0).then_some(ExecLoad {
                start: load.offset & mask,
                end,
                delta: load.vaddr.wrapping_sub(load.offset),
            })
        });
        for (slot, seg) in summary.exec.iter_mut().zip(exec) {
            *slot = seg;
            // INVARIANT: at most MAX_EXEC_LOADS (the zip stops there), in order.
            summary.nr_exec += 1;
        }
        summary
    }

    /// Whether the file has unwind information (`PT_GNU_EH_FRAME`).
    pub fn has_unwind_info(&self) -> bool {
        self.eh_frame_hdr != 0
    }

    /// Where the unwind information of an executable mapping of the file is: the mapping
    /// starts at `vma_start` and maps the file from `vma_file_offset`. `None` if the file
    /// has no `.eh_frame_hdr` or no executable segment maps that offset (as
    /// [`ElfInfo::bias`] with `vma_exec`: when two executable segments hold the offset
    /// and disagree, the one starting at that very page wins, else there is no answer).
    pub fn module(&self, id: u64, vma_start: u64, vma_file_offset: u64) -> Option<ModuleInfo> {
        if !self.has_unwind_info() {
            return None;
        }
        let mut any: Option<(u64, bool)> = None;
        let mut at_page: Option<(u64, bool)> = None;
        for seg in self.exec.iter().take(usize::from(self.nr_exec)) {
            if vma_file_offset < seg.start || vma_file_offset >= seg.end {
                continue;
            }
            let bias = vma_start
                .wrapping_sub(vma_file_offset)
                .wrapping_sub(seg.delta);
            let merge = |acc: Option<(u64, bool)>| match acc {
                None => Some((bias, true)),
                Some((b, unique)) => Some((b, unique && b == bias)),
            };
            any = merge(any);
            if seg.start == vma_file_offset {
                at_page = merge(at_page);
            }
        }
        let bias = match (any?, at_page) {
            ((bias, true), _) | (_, Some((bias, true))) => bias,
            _ => return None,
        };
        Some(ModuleInfo {
            id,
            bias,
            eh_frame_hdr: self.eh_frame_hdr,
            eh_frame_hdr_len: self.eh_frame_hdr_len,
        })
    }
}

/// One slot of the table of summaries (all-zero: empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModuleSlot {
    /// The file's key; 0: empty.
    key: u64,
    summary: ModuleSummary,
}

/// Slots of a set of the table: a file's summary may be in any of its set's. (Direct
/// mapping let two files of one program share a slot at about one boot in five, a program
/// of six files in 64 slots: each new process of it then read the headers of both again,
/// and under the VM's 9p a read from the file stalled the walk for milliseconds.)
pub const MODULE_WAYS: usize = 4;

/// The slots of `key`'s set in a table of `slots_len` slots (a table smaller than a set is
/// one set): the slots that may hold its summary.
pub fn set_of(slots_len: usize, key: u64) -> core::ops::Range<usize> {
    let ways = slots_len.min(MODULE_WAYS);
    let sets = slots_len.checked_div(ways).unwrap_or(0).max(1);
    // The high bits are the best mixed.
    let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let first = ((h >> 32) as usize % sets).wrapping_mul(ways);
    first..first.wrapping_add(ways)
}

/// The summary of the file `key` (non-zero), if the table has it.
pub fn find(slots: &[ModuleSlot], key: u64) -> Option<ModuleSummary> {
    if key == 0 {
        return None;
    }
    slots
        .get(set_of(slots.len(), key))?
        .iter()
        .find(|slot| slot.key == key)
        .map(|slot| slot.summary)
}

/// Keeps the summary of the file `key` (non-zero) in its set: in its own slot if it has
/// one, else in an empty one, else in place of the set's oldest (the others move up: a set
/// keeps its files in the order they came, empty slots last).
pub fn keep(slots: &mut [ModuleSlot], key: u64, summary: &ModuleSummary) {
    if key == 0 {
        return;
    }
    let Some(set) = slots
        .get_mut(set_of(slots.len(), key))
        .filter(|set| !set.is_empty())
    else {
        return;
    };
    let at = match set.iter().position(|slot| slot.key == key || slot.key == 0) {
        Some(at) => at,
        None => {
            set.rotate_left(1);
            set.len().wrapping_sub(1)
        }
    };
    if let Some(slot) = set.get_mut(at) {
        *slot = ModuleSlot {
            key,
            summary: *summary,
        };
    }
}
