// SPDX-License-Identifier: GPL-2.0
//! Where C and Rust meet: the module's load and unload, which start and stop the C hooks,
//! and the functions C calls in Rust (`ud_rs_*`). Each entry point turns what C passes
//! (raw pointers) into the safe types of src/sys.rs, saying why that holds, and calls safe
//! code.
//!
//! rust-bindings/shim.h declares the entry points for the C side; bindgen turns those
//! declarations into `ffi::ud_rs_*`, and [`rust_functions_match_their_c_declarations`]
//! makes the compiler unify each with its Rust definition: a parameter or return type that
//! differs between the two does not build.

use core::ffi::c_void;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use kernel::prelude::*;

use crate::ffi;
use crate::logic::build_id_cache::{BuildIdCache, FileKey, BUILD_ID_SIZE_MAX};
use crate::logic::cookie_placement::Placement;
use crate::logic::file_cache::FileCache;
use crate::logic::resolve::KnownMappings;
use crate::logic::{file_id, option};
use crate::sys::{self, CurrentTask, StackContext, WorkPtr};
use crate::{deferred, ftrace, stats};

// --- Load and unload ---------------------------------------------------------------------------

/// The loaded module.
pub(crate) struct UnwindDeferred;

impl kernel::Module for UnwindDeferred {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // The Rust state must exist before the C hooks (which call into it) are live.
        deferred::publish()?;
        // SAFETY: called once, after the state is published.
        let ret = unsafe { ffi::ud_c_init() };
        if ret != 0 {
            take_state();
            return Err(Error::from_errno(ret));
        }
        // The tracer is the API's first client: it comes after the core is complete.
        // SAFETY: called once, after ud_c_init() succeeded.
        let ret = unsafe { ffi::ud_ftrace_init() };
        if ret != 0 {
            // SAFETY: undoes the successful ud_c_init() above; the tracer left nothing.
            unsafe { ffi::ud_c_exit() };
            take_state();
            return Err(Error::from_errno(ret));
        }
        // SAFETY: only reads the hook table, which both set-ups have filled.
        unsafe { ffi::ud_hooks_report() };
        pr_info!("version {} loaded\n", sys::version());
        Ok(UnwindDeferred)
    }
}

impl Drop for UnwindDeferred {
    fn drop(&mut self) {
        // No client module is loaded (they depend on our symbols), so only the tracer can
        // still request: it goes first (it cancels its works, waiting for their callbacks),
        // then the core's C hooks (tracepoint probe, debugfs), then the task works.
        // SAFETY: undoes the successful ud_ftrace_init() of init.
        unsafe { ffi::ud_ftrace_exit() };
        // SAFETY: undoes the successful ud_c_init() of init.
        unsafe { ffi::ud_c_exit() };
        take_state();
        pr_info!("unloaded\n");
    }
}

/// Takes back and frees the state, once no C hook is registered (never set up, or undone).
fn take_state() {
    // No hook calls in any more, so no request comes; take back or wait for the task works.
    deferred::drain();
    // SAFETY: the C hooks are gone or were never set up (our callers), so no request, task
    // work or debugfs read reaches the state: `drain` took back or waited for every task
    // work, the last users of it.
    drop(unsafe { deferred::DEFERRED.take() });
}

// --- The core's entry points ---------------------------------------------------------------------

/// # Safety
///
/// Called by the shim's task_work function with the `callback_head` it was queued with.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_task_work(head: *mut ffi::callback_head) {
    deferred::task_work(head);
}

/// # Safety
///
/// Called from the sched_process_free probe with the dying task.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_task_free(task: *mut ffi::task_struct) {
    // The task is only a key of the table here: it is never dereferenced.
    deferred::task_free(task as usize);
}

/// # Safety
///
/// `work` is null or a valid `struct unwind_work` that outlives its registration.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_init_work(work: *mut ffi::unwind_work, func: ffi::unwind_callback_fn) -> i32 {
    let Some(work) = NonNull::new(work) else { return EINVAL.to_errno() };
    if func.is_none() {
        return EINVAL.to_errno();
    }
    // SAFETY: the API's contract with its caller: valid until its cancel returns.
    let work = unsafe { WorkPtr::new(work) };
    match crate::registry::init(work, func) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `task` is current; `cookie` is valid for writing; preemption is off (or NMI).
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_request(
    task: *mut ffi::task_struct,
    bit: i32,
    nmi: kernel::ffi::c_ulong,
    cpu: u32,
    cookie: *mut u64,
) -> i32 {
    // SAFETY: `task` is current (our caller's guarantee: src/shim.c's
    // unwind_deferred_request()), which is never null, and the value stays in this call; so
    // does the reference to `cookie`, which that caller gives valid for writing.
    let (task, cookie) =
        unsafe { (CurrentTask::new(NonNull::new_unchecked(task)), &mut *cookie) };
    deferred::request(task, bit, nmi != 0, cpu, cookie)
}

/// Interrupts are off (or NMI), `cpu` is the one we run on.
#[no_mangle]
pub(crate) extern "C" fn ud_rs_request_refused(
    why: ffi::ud_unwindable,
    nmi: kernel::ffi::c_ulong,
    cpu: u32,
) -> i32 {
    deferred::refuse(why, nmi != 0, cpu)
}

/// # Safety
///
/// `work` is null or a valid `struct unwind_work` (initialised or not); sleepable context.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_cancel(work: *mut ffi::unwind_work) {
    let Some(work) = NonNull::new(work) else { return };
    // SAFETY: the API's contract: valid until this cancel returns.
    deferred::cancel(unsafe { WorkPtr::new(work) });
}

/// The core's counters and gauges as text (debugfs `stats`); returns the bytes written.
///
/// # Safety
///
/// `buf` is valid for writing `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_stats(buf: *mut u8, len: usize) -> usize {
    // SAFETY: guaranteed by our caller.
    deferred::write_stats(unsafe { core::slice::from_raw_parts_mut(buf, len) })
}

/// The unwinder's counters as text (debugfs `unwinder`); returns the bytes written.
///
/// # Safety
///
/// `buf` is valid for writing `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_unwinder_stats(buf: *mut u8, len: usize) -> usize {
    // SAFETY: guaranteed by our caller.
    stats::write_unwinder_stats(unsafe { core::slice::from_raw_parts_mut(buf, len) })
}

// --- The tracer's entry points (src/ftrace/) ------------------------------------------------------

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

/// What a token written to `trace_options` does to the option: 1 (set), 0 (clear) or -1
/// (another option).
///
/// # Safety
///
/// `token` is valid for reading `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_parse_trace_option(token: *const u8, len: usize) -> i32 {
    // SAFETY: guaranteed by our caller.
    let token = unsafe { core::slice::from_raw_parts(token, len) };
    match option::parse_trace_option(token) {
        Some(value) => value as i32,
        None => -1,
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

/// Resolves the `nr` frames at `frames` with `resolve` (given the frames and `runs`' array
/// of small runs, as uninitialised memory) and writes its result into `runs`, or `runs` as
/// empty if it gives none: whether it gave one.
///
/// # Safety
///
/// `frames` is valid for reading `nr` elements (if `nr > 0`) and `runs` for writing (its
/// contents may be uninitialised), during the call.
unsafe fn resolve_into(
    frames: *const u64,
    nr: u32,
    runs: *mut ffi::ud_runs,
    resolve: impl FnOnce(&[u64], &mut [MaybeUninit<ffi::ud_run>]) -> Option<ftrace::StackRuns>,
) -> bool {
    // SAFETY: guaranteed by our caller. No reference to `*runs` is formed: the C caller
    // leaves it uninitialised (zeroing 280 bytes per stack for nothing), so `small` is seen
    // as what it is.
    let (frames, small) = unsafe {
        (
            // (Empty: `frames` may then be null, which a slice may not.)
            if nr == 0 { &[] } else { core::slice::from_raw_parts(frames, nr as usize) },
            core::slice::from_raw_parts_mut(
                core::ptr::addr_of_mut!((*runs).small).cast::<MaybeUninit<ffi::ud_run>>(),
                ffi::UD_SMALL_RUNS as usize,
            ),
        )
    };
    let resolved = resolve(frames, small);
    let found = resolved.is_some();
    let resolved = resolved.unwrap_or(ftrace::StackRuns { nr_small: 0, heap: None, covered: 0 });
    let (heap, nr_heap, heap_cap) = match resolved.heap {
        // INVARIANT: a KVec's parts, taken back by ud_rs_runs_free() (lengths and capacities
        // are at most one per frame, so they fit in u32 as `nr` does).
        Some(heap) => heap.into_raw_parts(),
        None => (core::ptr::null_mut(), 0, 0),
    };
    // SAFETY: `runs` is valid for writing (our caller); the counts fit in u32 (see above).
    unsafe {
        (*runs).heap = heap;
        (*runs).nr_small = resolved.nr_small as u32;
        (*runs).nr_heap = nr_heap as u32;
        (*runs).heap_cap = heap_cap as u32;
        (*runs).covered = resolved.covered as u32;
    }
    found
}

/// Resolves a stack for a `user_unwind_stack` event into `runs` (see
/// [`crate::logic::resolve`]), keeping what it looks up in `known` (if not null);
/// [`ud_rs_runs_free`] frees what it may allocate.
///
/// # Safety
///
/// `frames` is valid for reading `nr` elements and `runs` for writing (its contents may be
/// uninitialised); `ctx` is what `ud_stack_lookup()` and `ud_stack_file_run()` expect, valid
/// during the call; `known` is null or a task's known mappings the caller may use alone
/// during the call (lent by the task work, see `ud_work_call()`).
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_resolve_stack(
    ctx: *mut c_void,
    known: *mut ffi::ud_known_mappings,
    frames: *const u64,
    nr: u32,
    runs: *mut ffi::ud_runs,
) {
    // SAFETY: null or ours alone during the call (our caller).
    let known = unsafe { known.cast::<KnownMappings>().as_mut() };
    let resolve = |frames: &[u64], small: &mut [MaybeUninit<ffi::ud_run>]| {
        // SAFETY: guaranteed by our caller; the context lives during this call only.
        let ctx = unsafe { StackContext::new(NonNull::new(ctx)?) };
        Some(ftrace::resolve_stack(ctx, known, frames, small))
    };
    // SAFETY: `frames` and `runs` as our caller guarantees.
    unsafe { resolve_into(frames, nr, runs, resolve) };
}

/// Resolves a stack into `runs` from the task's `known` mappings alone, without the mmap
/// lock (see [`ftrace::resolve_stack_known`]): whether it did. If not, `runs` is written as
/// empty (freeing it is a no-op) and nothing was counted: the caller calls
/// [`ud_rs_resolve_stack`].
///
/// # Safety
///
/// As [`ud_rs_resolve_stack`] (`ctx` is also what `ud_stack_files_use()` expects), with
/// `known` not null.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_resolve_known(
    ctx: *mut c_void,
    known: *mut ffi::ud_known_mappings,
    frames: *const u64,
    nr: u32,
    runs: *mut ffi::ud_runs,
) -> bool {
    // SAFETY: not null and ours alone during the call (our caller).
    let known = unsafe { known.cast::<KnownMappings>().as_ref() };
    let resolve = |frames: &[u64], small: &mut [MaybeUninit<ffi::ud_run>]| {
        // SAFETY: guaranteed by our caller; the context lives during this call only.
        let ctx = unsafe { StackContext::new(NonNull::new(ctx)?) };
        ftrace::resolve_stack_known(ctx, known?, frames, small)
    };
    // SAFETY: `frames` and `runs` as our caller guarantees.
    unsafe { resolve_into(frames, nr, runs, resolve) }
}

/// The runs `runs` holds: those in `small`, then those on the heap.
///
/// # Safety
///
/// `runs` is as [`ud_rs_resolve_stack`] left it (or has its counts 0), not freed yet, and
/// stays unchanged for `'a`.
unsafe fn runs_of<'a>(runs: *const ffi::ud_runs) -> (&'a [ffi::ud_run], &'a [ffi::ud_run]) {
    // SAFETY: the counts are always written (our caller); the rest may not be, so no
    // reference to the whole struct is formed.
    let (nr_small, nr_heap) = unsafe { ((*runs).nr_small as usize, (*runs).nr_heap as usize) };
    // SAFETY: ud_rs_resolve_stack() wrote the first `nr_small` (at most UD_SMALL_RUNS) runs
    // of `small`.
    let small = unsafe {
        core::slice::from_raw_parts(core::ptr::addr_of!((*runs).small).cast::<ffi::ud_run>(), nr_small)
    };
    if nr_heap == 0 {
        return (small, &[]);
    }
    // SAFETY: `heap` holds `nr_heap` runs of a KVec's array (ud_rs_resolve_stack()), alive
    // until ud_rs_runs_free() (guaranteed by our caller).
    (small, unsafe { core::slice::from_raw_parts((*runs).heap, nr_heap) })
}

/// Frees the heap array of `runs`, if any (it may be called again).
///
/// # Safety
///
/// `runs` is as [`ud_rs_resolve_stack`] left it (or has its counts 0).
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_runs_free(runs: *mut ffi::ud_runs) {
    // SAFETY: guaranteed by our caller (the counts are always written).
    let cap = unsafe { (*runs).heap_cap } as usize;
    if cap != 0 {
        // SAFETY: the parts of a KVec (ud_rs_resolve_stack()), taken back once: `heap_cap` is
        // cleared with it.
        unsafe {
            drop(KVec::from_raw_parts((*runs).heap, (*runs).nr_heap as usize, cap));
            (*runs).heap = core::ptr::null_mut();
            (*runs).nr_heap = 0;
            (*runs).heap_cap = 0;
        }
    }
}

/// Writes the arrays of a `user_unwind_stack` event for the first `nr` frames from `runs`.
///
/// # Safety
///
/// `frames` is valid for reading `nr` elements, `offsets` for writing `nr * 8` bytes and
/// `hashes` `nr * 4` (neither overlapping the other or `frames`; any alignment); `runs` is
/// as [`ud_rs_resolve_stack`] left it, not freed yet.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_fill_stack(
    frames: *const u64,
    runs: *const ffi::ud_runs,
    offsets: *mut c_void,
    hashes: *mut c_void,
    nr: u32,
) {
    let nr = nr as usize;
    if nr == 0 {
        return; // (An empty stack: `frames` may then be null, which a slice may not.)
    }
    // SAFETY: guaranteed by our caller (byte arrays: no alignment needed).
    let (frames, offsets, hashes, runs) = unsafe {
        (
            core::slice::from_raw_parts(frames, nr),
            core::slice::from_raw_parts_mut(offsets.cast::<[u8; 8]>(), nr),
            core::slice::from_raw_parts_mut(hashes.cast::<[u8; 4]>(), nr),
            runs_of(runs),
        )
    };
    ftrace::fill_stack(frames, runs.0, runs.1, offsets, hashes);
}

/// The box `value` held by C as the opaque struct `C` (null for `None`: out of memory).
fn box_for_c<T, C>(value: Option<KBox<T>>) -> *mut C {
    value.map_or(core::ptr::null_mut(), |b| KBox::into_raw(b).cast())
}

/// Frees a box of [`box_for_c`].
///
/// # Safety
///
/// `ptr` is null or came from `box_for_c::<T, C>` and is not used afterwards.
unsafe fn free_from_c<T, C>(ptr: *mut C) {
    if let Some(ptr) = NonNull::new(ptr) {
        // SAFETY: guaranteed by our caller: the `KBox<T>` of box_for_c().
        drop(unsafe { KBox::from_raw(ptr.as_ptr().cast::<T>()) });
    }
}

/// A new, empty per-instance file cache (null when out of memory).
#[no_mangle]
pub(crate) extern "C" fn ud_rs_file_cache_new() -> *mut ffi::ud_file_cache {
    // (Zeroed in place, an empty cache: `FileCache::new()` as a value went through a
    // 2 KiB stack frame.)
    box_for_c(sys::zeroed_box::<FileCache>())
}

/// Frees a cache of [`ud_rs_file_cache_new`].
///
/// # Safety
///
/// `cache` is null or came from `ud_rs_file_cache_new` and is not used afterwards.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_file_cache_free(cache: *mut ffi::ud_file_cache) {
    // SAFETY: guaranteed by our caller.
    unsafe { free_from_c::<FileCache, _>(cache) };
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

/// Counts the uses of `nr` hashes at `hashes` in `cache` if none needs an announcement
/// (see [`FileCache::use_all_unannounced`]): whether it did.
///
/// # Safety
///
/// `cache` is a live FileCache of ud_rs_file_cache_new(), not used concurrently; `hashes`
/// is valid for reading `nr` u32s.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_file_cache_use_all(
    cache: *mut ffi::ud_file_cache,
    generation: u64,
    hashes: *const u32,
    nr: u32,
) -> bool {
    // SAFETY: guaranteed by our caller.
    let cache = unsafe { &mut *cache.cast::<FileCache>() };
    let hashes = if nr == 0 {
        &[][..]
    } else {
        // SAFETY: guaranteed by our caller.
        unsafe { core::slice::from_raw_parts(hashes, nr as usize) }
    };
    cache.sync_generation(generation);
    cache.use_all_unannounced(hashes)
}

/// A new, empty build-id cache (null when out of memory).
#[no_mangle]
pub(crate) extern "C" fn ud_rs_build_id_cache_new() -> *mut ffi::ud_build_id_cache {
    // (Zeroed in place, an empty cache: `BuildIdCache::new()` as a value went through a
    // 4 KiB stack frame.)
    box_for_c(sys::zeroed_box::<BuildIdCache>())
}

/// Frees a cache of [`ud_rs_build_id_cache_new`].
///
/// # Safety
///
/// `cache` is null or came from `ud_rs_build_id_cache_new` and is not used afterwards.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_build_id_cache_free(cache: *mut ffi::ud_build_id_cache) {
    // SAFETY: guaranteed by our caller.
    unsafe { free_from_c::<BuildIdCache, _>(cache) };
}

fn file_key(key: &ffi::ud_file_key) -> FileKey {
    FileKey { sb: key.sb, ino: key.ino, ctime_sec: key.ctime_sec, ctime_nsec: key.ctime_nsec }
}

/// The build-id kept for `key`, copied to `id`: its size, or -1 (the file must be read).
///
/// # Safety
///
/// `cache` came from `ud_rs_build_id_cache_new`, its lock is held (no concurrent store);
/// `key` is valid for reading; `id` is valid for writing `BUILD_ID_SIZE_MAX` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_build_id_lookup(
    cache: *const ffi::ud_build_id_cache,
    key: *const ffi::ud_file_key,
    id: *mut u8,
) -> i32 {
    // SAFETY: guaranteed by our caller.
    let (cache, key, id) = unsafe {
        (&*cache.cast::<BuildIdCache>(), &*key, &mut *id.cast::<[u8; BUILD_ID_SIZE_MAX]>())
    };
    cache.lookup(&file_key(key), id).map_or(-1, |len| len as i32)
}

/// Keeps `id` (`size` bytes) as the build-id of `key`.
///
/// # Safety
///
/// `cache` came from `ud_rs_build_id_cache_new`, its lock is held (no concurrent use);
/// `key` is valid for reading; `id` for reading `size` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn ud_rs_build_id_store(
    cache: *mut ffi::ud_build_id_cache,
    key: *const ffi::ud_file_key,
    id: *const u8,
    size: u32,
) {
    // SAFETY: guaranteed by our caller.
    let (cache, key, id) = unsafe {
        (&mut *cache.cast::<BuildIdCache>(), &*key, core::slice::from_raw_parts(id, size as usize))
    };
    cache.store(&file_key(key), id);
}

// --- Signatures ------------------------------------------------------------------------------------

/// Compiles only if both arguments have one type.
fn same<T>(_: T, _: T) {}

#[allow(dead_code)]
fn rust_functions_match_their_c_declarations() {
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_task_work, ud_rs_task_work);
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_task_free, ud_rs_task_free);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_init_work, ud_rs_init_work);
    same::<unsafe extern "C" fn(_, _, _, _, _) -> _>(ffi::ud_rs_request, ud_rs_request);
    same::<unsafe extern "C" fn(_, _, _) -> _>(
        ffi::ud_rs_request_refused,
        ud_rs_request_refused as extern "C" fn(_, _, _) -> _,
    );
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_cancel, ud_rs_cancel);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_stats, ud_rs_stats);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_unwinder_stats, ud_rs_unwinder_stats);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_parse_bool_option, ud_rs_parse_bool_option);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_parse_trace_option, ud_rs_parse_trace_option);
    same::<unsafe extern "C" fn(_) -> _>(ffi::ud_rs_fold_file_hash, ud_rs_fold_file_hash);
    same::<unsafe extern "C" fn(_, _, _, _, _, _, _) -> _>(
        ffi::ud_rs_cookie_follows_event,
        ud_rs_cookie_follows_event,
    );
    same::<unsafe extern "C" fn(_, _, _, _, _)>(ffi::ud_rs_resolve_stack, ud_rs_resolve_stack);
    same::<unsafe extern "C" fn(_, _, _, _, _) -> _>(ffi::ud_rs_resolve_known, ud_rs_resolve_known);
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_runs_free, ud_rs_runs_free);
    same::<unsafe extern "C" fn(_, _, _, _, _)>(ffi::ud_rs_fill_stack, ud_rs_fill_stack);
    same::<unsafe extern "C" fn() -> _>(ffi::ud_rs_file_cache_new, ud_rs_file_cache_new);
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_file_cache_free, ud_rs_file_cache_free);
    same::<unsafe extern "C" fn(_, _, _) -> _>(ffi::ud_rs_file_cache_use, ud_rs_file_cache_use);
    same::<unsafe extern "C" fn(_, _, _, _) -> _>(ffi::ud_rs_file_cache_use_all, ud_rs_file_cache_use_all);
    same::<unsafe extern "C" fn() -> _>(ffi::ud_rs_build_id_cache_new, ud_rs_build_id_cache_new);
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_build_id_cache_free, ud_rs_build_id_cache_free);
    same::<unsafe extern "C" fn(_, _, _) -> _>(ffi::ud_rs_build_id_lookup, ud_rs_build_id_lookup);
    same::<unsafe extern "C" fn(_, _, _, _)>(ffi::ud_rs_build_id_store, ud_rs_build_id_store);
}
