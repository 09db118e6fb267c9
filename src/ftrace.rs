// SPDX-License-Identifier: GPL-2.0
//! The decisions of the ftrace integration (src/ftrace.c), as FFI entry points over the pure
//! logic: option parsing, file hash folding, file offsets, and the per-instance file cache.

use kernel::prelude::*;

use crate::logic::file_cache::FileCache;
use crate::logic::{file_id, option};

/// Parses a write to `options/userstacktrace_delay`: 0 or 1, or -EINVAL.
///
/// # Safety
///
/// `buf` is valid for reading `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_parse_bool_option(buf: *const u8, len: usize) -> i32 {
    // SAFETY: guaranteed by our caller.
    let input = unsafe { core::slice::from_raw_parts(buf, len) };
    match option::parse_bool_option(input) {
        Some(value) => value as i32,
        None => EINVAL.to_errno(),
    }
}

/// The 32-bit file hash recorded per frame, from the keyed 64-bit siphash.
#[no_mangle]
pub(crate) extern "C" fn ud_rs_fold_file_hash(hash: u64) -> u32 {
    file_id::fold_file_hash(hash)
}

/// The file offset of `addr` in its mapping.
#[no_mangle]
pub(crate) extern "C" fn ud_rs_file_offset(addr: u64, vm_start: u64, pgoff: u64, page_shift: u32) -> u64 {
    file_id::file_offset(addr, vm_start, pgoff, page_shift)
}

/// A new, empty per-instance file cache (null when out of memory).
#[no_mangle]
pub(crate) extern "C" fn ud_rs_file_cache_new() -> *mut FileCache {
    match KBox::new(FileCache::new(), GFP_KERNEL) {
        Ok(cache) => KBox::into_raw(cache),
        Err(_) => core::ptr::null_mut(),
    }
}

/// Frees a cache of [`ud_rs_file_cache_new`].
///
/// # Safety
///
/// `cache` is null or came from `ud_rs_file_cache_new` and is not used afterwards.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_file_cache_free(cache: *mut FileCache) {
    if !cache.is_null() {
        // SAFETY: guaranteed by our caller.
        drop(unsafe { KBox::from_raw(cache) });
    }
}

/// Records a use of `hash` in an instance; true when a `file_cache` event must precede
/// the stack.
///
/// # Safety
///
/// `cache` came from `ud_rs_file_cache_new`, and the caller holds the instance's
/// cache lock (no concurrent use).
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_file_cache_use(cache: *mut FileCache, generation: u64, hash: u32) -> bool {
    // SAFETY: guaranteed by our caller.
    let cache = unsafe { &mut *cache };
    cache.sync_generation(generation);
    cache.use_hash(hash)
}
