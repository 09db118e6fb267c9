// SPDX-License-Identifier: GPL-2.0
//! The decisions of the ftrace integration (src/ftrace/), as FFI entry points over the pure
//! logic: option parsing, file hash folding, resolving stacks into file offsets and hashes,
//! and the per-instance file cache.

use kernel::prelude::*;

use core::ffi::c_void;

use crate::ffi;
use crate::logic::file_cache::FileCache;
use crate::logic::resolve::{resolve, AddressSpace, Mapping};
use crate::logic::cookie_placement::Placement;
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

/// Whether a cookie reserved from the ftrace export follows the event (see
/// [`Placement`]): the `Follows` value as an integer.
#[no_mangle]
pub(crate) extern "C" fn ud_rs_cookie_follows_event(
    subbuf_size: u64,
    subbuf_header: u64,
    entry: u64,
    reserved: u64,
    end_readable: bool,
    before: u32,
    after: u32,
) -> i32 {
    let placement = Placement {
        subbuf_size,
        subbuf_header,
        entry,
        reserved,
        end_word: end_readable.then_some((before, after)),
    };
    placement.follows() as i32
}

/// The address space of a stack being resolved: src/ftrace/stack.c's callbacks with their
/// context.
struct StackSpace(*mut c_void);

impl AddressSpace for StackSpace {
    fn lookup(&mut self, addr: u64) -> Option<Mapping> {
        let mut m = ffi::ud_mapping { start: 0, end: 0, pgoff: 0, file: core::ptr::null_mut() };
        // SAFETY: `self.0` is the context stack.c passed to `ud_rs_resolve_stack` (its mmap
        // lock is held for the whole call); `m` is valid for writing.
        if !unsafe { ffi::ud_stack_lookup(self.0, addr, &mut m) } {
            return None;
        }
        Some(Mapping { start: m.start, end: m.end, pgoff: m.pgoff, file: m.file as usize })
    }

    fn file_run(&mut self, file: usize) -> u32 {
        // SAFETY: as above; `file` is the `vm_file` of a mapping `lookup` returned, pinned by
        // its mapping while the mmap lock is held.
        unsafe { ffi::ud_stack_file_run(self.0, file as *mut c_void) }
    }
}

/// Resolves a stack for a `user_unwind_stack` event (see [`resolve`]).
///
/// # Safety
///
/// `frames` is valid for reading and `offsets`, `hashes` for writing `nr` elements; `ctx`
/// is what `ud_stack_lookup()` and `ud_stack_file_run()` expect, valid during the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_resolve_stack(
    ctx: *mut c_void,
    frames: *const u64,
    offsets: *mut u64,
    hashes: *mut u32,
    nr: u32,
) {
    let nr = nr as usize;
    // SAFETY: guaranteed by our caller (three distinct arrays of `nr` elements).
    let (frames, offsets, hashes) = unsafe {
        (
            core::slice::from_raw_parts(frames, nr),
            core::slice::from_raw_parts_mut(offsets, nr),
            core::slice::from_raw_parts_mut(hashes, nr),
        )
    };
    resolve(&mut StackSpace(ctx), kernel::page::PAGE_SHIFT as u32, frames, offsets, hashes);
}

/// A new, empty per-instance file cache (null when out of memory).
#[no_mangle]
pub(crate) extern "C" fn ud_rs_file_cache_new() -> *mut ffi::ud_file_cache {
    match KBox::new(FileCache::new(), GFP_KERNEL) {
        // C sees the cache as the opaque `struct ud_file_cache`.
        Ok(cache) => KBox::into_raw(cache).cast(),
        Err(_) => core::ptr::null_mut(),
    }
}

/// Frees a cache of [`ud_rs_file_cache_new`].
///
/// # Safety
///
/// `cache` is null or came from `ud_rs_file_cache_new` and is not used afterwards.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_file_cache_free(cache: *mut ffi::ud_file_cache) {
    if !cache.is_null() {
        // SAFETY: guaranteed by our caller: `cache` is the FileCache box of
        // ud_rs_file_cache_new().
        drop(unsafe { KBox::from_raw(cache.cast::<FileCache>()) });
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
pub(crate) unsafe extern "C" fn ud_rs_file_cache_use(
    cache: *mut ffi::ud_file_cache,
    generation: u64,
    hash: u32,
) -> bool {
    // SAFETY: guaranteed by our caller: a live FileCache of ud_rs_file_cache_new(), not
    // used concurrently.
    let cache = unsafe { &mut *cache.cast::<FileCache>() };
    cache.sync_generation(generation);
    cache.use_hash(hash)
}
