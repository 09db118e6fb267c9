// SPDX-License-Identifier: GPL-2.0
//! How a user frame is recorded: a file offset plus a 32-bit file hash (see
//! Documentation/trace-events.rst).

/// Hash value of a frame in anonymous memory: the offset is the raw address.
pub const HASH_ANON: u32 = 0;
/// Hash value of a frame no mapping covers: the offset is the raw address.
pub const HASH_NO_MAPPING: u32 = u32::MAX;

/// Folds a keyed 64-bit hash of a file into the 32 bits recorded per frame, keeping clear of
/// the two reserved values.
pub const fn fold_file_hash(hash: u64) -> u32 {
    match (hash ^ (hash >> 32)) as u32 {
        HASH_ANON => 1,
        HASH_NO_MAPPING => HASH_NO_MAPPING - 1,
        h => h,
    }
}

/// Offset in the mapped file of `addr`, in a mapping that starts at `vm_start` and maps the
/// file from page `pgoff`: `(addr - vm_start) + (pgoff << page_shift)`.
pub const fn file_offset(addr: u64, vm_start: u64, pgoff: u64, page_shift: u32) -> u64 {
    addr.wrapping_sub(vm_start)
        .wrapping_add(pgoff << page_shift)
}
