// SPDX-License-Identifier: GPL-2.0
//! The safe edge: every call the Rust side makes into C (the shim, src/shim.c, and through it
//! the kernel) and every piece of raw memory it owns, each wrapped once in a safe function or
//! type. Apart from this file, only the entry points C calls (src/c_boundary.rs) contain
//! `unsafe`.
//!
//! What a wrapper cannot check is in its type: a [`CurrentTask`] is the running task, a
//! [`WorkPtr`] a client's `struct unwind_work` that stays valid while it is registered, a
//! [`StackContext`] the resolver's context of src/ftrace/stack.c. Only c_boundary.rs makes
//! them, from what C passes in, and says why each is what it claims.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::prelude::*;
use kernel::task::Task;
// The one Rust difference between the kernels (set by Kbuild): where the kernel crate has ARef.
#[cfg(ud_aref_in_sync)]
use kernel::sync::aref::ARef;
#[cfg(not(ud_aref_in_sync))]
use kernel::types::ARef;

use crate::ffi;
use crate::logic::resolve::KnownMappings;

// --- Kernel facts, module parameters -----------------------------------------------------

/// `nr_cpu_ids`.
pub(crate) fn nr_cpu_ids() -> u32 {
    // SAFETY: reads a kernel constant.
    unsafe { ffi::ud_nr_cpu_ids() }
}

/// The CPU we run on (raw: the caller may migrate right after).
#[inline]
pub(crate) fn this_cpu() -> u32 {
    // SAFETY: reads the CPU number of the running context.
    unsafe { ffi::ud_smp_processor_id() }
}

/// Module parameter `max_tasks`.
pub(crate) fn param_max_tasks() -> u32 {
    // SAFETY: reads a module parameter.
    unsafe { ffi::ud_param_max_tasks() }
}

/// The module's version string.
pub(crate) fn version() -> &'static CStr {
    // SAFETY: `ud_version` returns a pointer to a static NUL-terminated string.
    unsafe { CStr::from_char_ptr(ffi::ud_version()) }
}

/// Sleeps `ms` milliseconds (process context).
pub(crate) fn msleep(ms: u32) {
    // SAFETY: plain msleep(); every caller runs in process context (module unload).
    unsafe { ffi::ud_msleep(ms) }
}

/// The one warning of a full per-task table (`pr_warn_once`).
pub(crate) fn warn_table_full() {
    // SAFETY: pr_warn_once() may be called in any context (in NMI printk defers it).
    unsafe { ffi::ud_pr_warn_table_full() }
}

// --- Synchronisation -------------------------------------------------------------------------

/// Waits for every interrupts-off (and NMI) section running now: `synchronize_rcu()`.
pub(crate) fn synchronize_rcu() {
    // SAFETY: may sleep; the only caller is unwind_deferred_cancel(), which may sleep.
    unsafe { kernel::bindings::synchronize_rcu() }
}

/// Waits for every [`SrcuReadGuard`] section running now.
fn synchronize_srcu() {
    // SAFETY: synchronize_srcu() on the module's static srcu_struct; may sleep (as above).
    unsafe { ffi::ud_synchronize_srcu() }
}

/// An SRCU read section of the module's srcu_struct, for the callbacks of registered works.
pub(crate) struct SrcuReadGuard(i32);

impl SrcuReadGuard {
    pub(crate) fn new() -> Self {
        // SAFETY: srcu_read_lock() on the module's static srcu_struct; paired in drop.
        Self(unsafe { ffi::ud_srcu_read_lock() })
    }
}

impl Drop for SrcuReadGuard {
    fn drop(&mut self) {
        // SAFETY: `self.0` is the index of the matching srcu_read_lock().
        unsafe { ffi::ud_srcu_read_unlock(self.0) };
    }
}

/// Interrupts off on this CPU while it lives (`local_irq_save()`).
pub(crate) struct IrqsOff(kernel::ffi::c_ulong);

impl IrqsOff {
    pub(crate) fn new() -> Self {
        // SAFETY: local_irq_save(); restored in drop, in the same context.
        Self(unsafe { ffi::ud_local_irq_save() })
    }
}

impl Drop for IrqsOff {
    fn drop(&mut self) {
        // SAFETY: the flags of the save in `new`.
        unsafe { ffi::ud_local_irq_restore(self.0) };
    }
}

/// A value behind the shim's registry mutex (`ud_registry_mutex`, one for the module).
///
/// # Invariants
///
/// `value` is only reached through a [`RegistryGuard`], which holds the mutex.
pub(crate) struct RegistryMutex<T> {
    value: UnsafeCell<T>,
}

// SAFETY: every access to `value` holds the mutex (type invariant); `T: Send` may be used from
// whichever task holds it.
unsafe impl<T: Send> Sync for RegistryMutex<T> {}

impl<T> RegistryMutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self { value: UnsafeCell::new(value) }
    }

    /// Takes the mutex (may sleep).
    pub(crate) fn lock(&self) -> RegistryGuard<'_, T> {
        // SAFETY: mutex_lock() on a static mutex; our callers (init and cancel of a work) run
        // in sleepable context, as the API documents.
        unsafe { ffi::ud_registry_lock() };
        RegistryGuard(self)
    }
}

/// Holds the registry mutex.
pub(crate) struct RegistryGuard<'a, T>(&'a RegistryMutex<T>);

impl<T> Deref for RegistryGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the mutex is held while the guard lives (type invariant of RegistryMutex).
        unsafe { &*self.0.value.get() }
    }
}

impl<T> DerefMut for RegistryGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and `&mut self` makes this the only reference of the guard's.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for RegistryGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard holds the mutex.
        unsafe { ffi::ud_registry_unlock() };
    }
}

// --- Memory the module owns ------------------------------------------------------------------

/// Types for which all-zero bytes are a valid value (the module's own trait: the kernel
/// crate's `Zeroable` moved between 6.12 and 7.x).
///
/// # Safety
///
/// All-zero bytes are a valid value of the type, and dropping it (if it has drop glue) is
/// sound.
pub(crate) unsafe trait ZeroValid {}

/// A boxed value published to every context (hooks, NMI) until it is taken back.
///
/// # Invariants
///
/// `ptr` is null or comes from `KBox::into_raw` in [`Published::publish`], and stays valid
/// until [`Published::take`] (whose caller guarantees no reader is left).
pub(crate) struct Published<T>(AtomicPtr<T>);

impl<T: Sync> Published<T> {
    pub(crate) const fn new() -> Self {
        Self(AtomicPtr::new(null_mut()))
    }

    /// Makes `value` reachable (after it is fully built: release ordering).
    pub(crate) fn publish(&self, value: KBox<T>) {
        // INVARIANT: a pointer of KBox::into_raw.
        let old = self.0.swap(KBox::into_raw(value), Ordering::AcqRel);
        debug_assert!(old.is_null());
    }

    /// The published value, if any.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        // SAFETY: null or valid until `take`, after which no reader runs (type invariant).
        unsafe { self.0.load(Ordering::Acquire).as_ref() }
    }

    /// Takes the value back.
    ///
    /// # Safety
    ///
    /// No reference returned by [`Published::get`] is alive and none will be asked for: every
    /// path that reads the value has stopped.
    pub(crate) unsafe fn take(&self) -> Option<KBox<T>> {
        let ptr = self.0.swap(null_mut(), Ordering::AcqRel);
        // SAFETY: `ptr` is null or came from KBox::into_raw (type invariant), and it is no
        // longer reachable (the caller's guarantee).
        NonNull::new(ptr).map(|ptr| unsafe { KBox::from_raw(ptr.as_ptr()) })
    }
}

/// A box that moves in and out of a shared place atomically: whoever takes it owns it alone.
///
/// # Invariants
///
/// `ptr` is null or comes from `KBox::into_raw` and is owned by this value.
pub(crate) struct AtomicBox<T>(AtomicPtr<T>, PhantomData<KBox<T>>);

impl<T> AtomicBox<T> {
    /// An empty place.
    pub(crate) const fn new() -> Self {
        Self(AtomicPtr::new(null_mut()), PhantomData)
    }

    /// Takes the box out (empty afterwards).
    pub(crate) fn take(&self) -> Option<KBox<T>> {
        let ptr = self.0.swap(null_mut(), Ordering::Acquire);
        // SAFETY: by the type invariant, and the swap gave the pointer to us alone.
        NonNull::new(ptr).map(|ptr| unsafe { KBox::from_raw(ptr.as_ptr()) })
    }

    /// Puts `value` back; if the place was filled meanwhile, the newcomer is kept and `value`
    /// dropped.
    pub(crate) fn put(&self, value: KBox<T>) {
        let ptr = KBox::into_raw(value);
        // INVARIANT: a pointer of KBox::into_raw, owned from now on by the place.
        if let Err(_filled) = self.0.compare_exchange(null_mut(), ptr, Ordering::Release, Ordering::Relaxed) {
            // SAFETY: `ptr` came from into_raw just above and was not stored.
            drop(unsafe { KBox::from_raw(ptr) });
        }
    }
}

impl<T> Drop for AtomicBox<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}


/// A value per CPU, zeroed at allocation (`alloc_percpu`).
///
/// # Invariants
///
/// `ptr` is a per-CPU allocation of one zeroed (so valid: `T: ZeroValid`) `T` per CPU, owned
/// by this value; a CPU's copy is only reached with preemption off ([`PerCpu::with`]).
pub(crate) struct PerCpu<T: ZeroValid> {
    ptr: NonNull<c_void>,
    _value: PhantomData<T>,
}

// SAFETY: each CPU's copy is reached by one context at a time (preemption off, never from
// interrupts: see `with`), whichever task runs there.
unsafe impl<T: ZeroValid + Send> Sync for PerCpu<T> {}
// SAFETY: as above.
unsafe impl<T: ZeroValid + Send> Send for PerCpu<T> {}

impl<T: ZeroValid> PerCpu<T> {
    pub(crate) fn new() -> Result<Self> {
        let (size, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
        // SAFETY: plain zeroed per-CPU allocation.
        let ptr = unsafe { ffi::ud_percpu_alloc(size as _, align as _) };
        // INVARIANT: zeroed per-CPU memory of one T per CPU.
        Ok(Self { ptr: NonNull::new(ptr).ok_or(ENOMEM)?, _value: PhantomData })
    }

    /// Runs `f` on this CPU's copy, preemption off. Task context only: an interrupt that
    /// used the same copy would interleave with `f` (no caller does).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: a valid per-CPU allocation (type invariant); get_cpu_ptr() disables
        // preemption, so nothing else reaches this CPU's copy until put_cpu_ptr().
        let value = unsafe { &mut *ffi::ud_percpu_get(self.ptr.as_ptr()).cast::<T>() };
        let r = f(value);
        // SAFETY: pairs with the get above.
        unsafe { ffi::ud_percpu_put(self.ptr.as_ptr()) };
        r
    }
}

impl<T: ZeroValid> Drop for PerCpu<T> {
    fn drop(&mut self) {
        // SAFETY: from ud_percpu_alloc() (type invariant), and `&mut self`: no `with` runs.
        // (T needs no drop: the types kept per CPU are plain data.)
        unsafe { ffi::ud_percpu_free(self.ptr.as_ptr()) };
    }
}

// The logic's types the module keeps in zeroed memory.

// SAFETY: integers only; all zeros is an empty cache (see RowCache).
unsafe impl ZeroValid for crate::logic::cfi::RowCache {}
// SAFETY: integers only (see HotRows); all zeros lacks only the mark of the last entry,
// which `HotRows::reset` writes (see `zeroed_then`).
unsafe impl ZeroValid for crate::logic::cfi::HotRows {}
// SAFETY: integers and a bool only; all zeros is an empty cache (see its Entry).
unsafe impl ZeroValid for crate::logic::build_id_cache::BuildIdCache {}
// SAFETY: integers only; all zeros is an empty cache at generation 0 (`FileCache::new`).
unsafe impl ZeroValid for crate::logic::file_cache::FileCache {}

#[cfg(ud_pin_init_crate)]
use pin_init::init_from_closure;
#[cfg(not(ud_pin_init_crate))]
use kernel::init::init_from_closure;

/// An initialiser of a `T` whose all-zero bytes are a value: the bytes zeroed in place, then
/// the value given to `finish`. For a large field of a value built in place (`init!`), which
/// as a value (`field: T::new()`) would go through the stack first.
pub(crate) fn zeroed_then<T: ZeroValid>(
    finish: impl FnOnce(&mut T),
) -> impl Init<T, core::convert::Infallible> {
    let init = move |slot: *mut T| {
        // SAFETY: the initialiser's caller gives a `slot` valid and aligned for a write of
        // one `T`.
        unsafe { slot.write_bytes(0, 1) };
        // SAFETY: `*slot` holds a value of `T` now (all zeros, `T: ZeroValid`), and nothing
        // else refers to it until the initialiser returns.
        finish(unsafe { &mut *slot });
        Ok(())
    };
    // SAFETY: `init` initialises `*slot` and never fails: all zeros is a value of `T`
    // (`T: ZeroValid`), which `finish` changes only through a `&mut T`.
    unsafe { init_from_closure(init) }
}

/// A new `T` of all-zero bytes, allocated and zeroed in place (`None` when out of memory):
/// for values too large to build on the stack and move (`KBox::new(T::new())` may).
pub(crate) fn zeroed_box<T: ZeroValid>() -> Option<KBox<T>> {
    KBox::init(zeroed_then(|_: &mut T| {}), GFP_KERNEL).ok()
}

// --- Tasks and task work -------------------------------------------------------------------

/// The task that runs (`current`): alive while we run on its behalf.
///
/// # Invariants
///
/// `0` is `current` of the context that holds the value (it is not `Send`).
#[derive(Clone, Copy)]
pub(crate) struct CurrentTask(NonNull<ffi::task_struct>, PhantomData<*mut ()>);

impl CurrentTask {
    /// # Safety
    ///
    /// `task` is `current` of the calling context, and the value does not leave it.
    #[inline]
    pub(crate) unsafe fn new(task: NonNull<ffi::task_struct>) -> Self {
        // INVARIANT: guaranteed by the caller.
        Self(task, PhantomData)
    }

    /// The task's identity in the per-task table.
    #[inline]
    pub(crate) fn key(self) -> usize {
        self.0.as_ptr() as usize
    }
}

/// A reference on a task (`get_task_struct()`), dropped with the value (`put_task_struct()`:
/// when it is the last one the task is freed through RCU, which is safe in every context we
/// drop one in; in NMI we only drop a reference while current holds its own).
type TaskRef = ARef<Task>;

impl CurrentTask {
    /// A new reference on the task (an atomic increment: NMI-safe).
    #[inline]
    fn get(self) -> TaskRef {
        // SAFETY: `self.0` is current, alive while we run (type invariant), and `Task` is a
        // transparent wrapper of `struct task_struct`.
        let task = unsafe { &*self.0.as_ptr().cast::<Task>() };
        ARef::from(task)
    }
}

/// A task work (`struct callback_head`) that, while queued, holds a reference on its task.
///
/// # Invariants
///
/// * `task` is null, or the task `head` was queued on, with a reference owned by this value
///   (taken before it was stored, dropped by whoever swaps it out).
/// * `head` is queued at most once at a time: only [`TaskWork::queue`] queues it, after it
///   swapped `task` from null to the task. The work's run ([`TaskWork::begin_run`], after the
///   kernel dequeued `head`) and [`TaskWork::cancel`] swap it back to null, so `head` can be
///   queued again only once it is off the task's list.
#[repr(C)]
pub(crate) struct TaskWork {
    /// The `struct callback_head` itself: only the kernel's task_work code touches it,
    /// while it is queued.
    head: UnsafeCell<[usize; ffi::UD_CALLBACK_HEAD_SIZE as usize / 8]>,
    task: AtomicPtr<ffi::task_struct>,
}

// SAFETY: `head` is only written by the kernel's task_work code while queued (type
// invariant: one queueing at a time); `task` is atomic.
unsafe impl Sync for TaskWork {}
// SAFETY: as above.
unsafe impl Send for TaskWork {}

impl TaskWork {
    /// A task work never queued.
    pub(crate) const fn new() -> Self {
        Self { head: UnsafeCell::new([0; ffi::UD_CALLBACK_HEAD_SIZE as usize / 8]), task: AtomicPtr::new(null_mut()) }
    }

    /// The `struct callback_head` (an address; only the kernel dereferences it).
    pub(crate) fn head(&self) -> *mut ffi::callback_head {
        self.head.get().cast()
    }

    /// Queues the work on the current task (`task_work_add()`, TWA_NMI_CURRENT in NMI,
    /// TWA_RESUME otherwise). Any context. -EBUSY if it is queued already, the kernel's
    /// error (-ESRCH: the task exits) if it refuses.
    #[inline(always)]
    pub(crate) fn queue(&self, task: CurrentTask, nmi: bool) -> core::result::Result<(), i32> {
        let raw = ARef::into_raw(task.get()).as_ptr().cast::<ffi::task_struct>();
        // INVARIANT: the reference is stored in `task`, and only if no queueing holds it.
        if self.task.compare_exchange(null_mut(), raw, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            // SAFETY: the reference of into_raw just above, not stored.
            drop(unsafe { TaskRef::from_raw(NonNull::new_unchecked(raw.cast::<Task>())) });
            return Err(EBUSY.to_errno());
        }
        // SAFETY: `head` is not queued (we stored the task above and it was null: type
        // invariant) and lives as long as the module's state, which outlives every task work
        // (unload takes them back or waits for them).
        let ret = unsafe { ffi::ud_task_work_add(self.head(), nmi) };
        if ret != 0 {
            // Not queued: the reference goes (current holds its own: a plain decrement).
            drop(self.take_reference());
            return Err(ret);
        }
        Ok(())
    }

    /// The queued work starts (called from the kernel's task work, which dequeued `head`):
    /// it takes the reference, which it drops when it finishes. `None` when unload took the
    /// reference already ([`TaskWork::cancel`] lost the race with this run).
    #[inline]
    pub(crate) fn begin_run(&self) -> Option<impl Drop> {
        self.take_reference()
    }

    /// Unload: takes back the queued work, if it has not started (`task_work_cancel()`).
    /// Process context. True when the work will not run.
    pub(crate) fn cancel(&self) -> bool {
        // Take the reference first: then the task stays valid for task_work_cancel() even
        // if the work runs and finishes meanwhile (it then finds no reference to drop).
        let Some(reference) = self.take_reference() else { return false };
        let task = core::ptr::from_ref::<Task>(&reference).cast_mut().cast::<ffi::task_struct>();
        // SAFETY: we hold a reference on the task (above); process context.
        let cancelled = unsafe { ffi::ud_task_work_cancel(task, self.head()) };
        drop(reference);
        cancelled
    }

    #[inline]
    fn take_reference(&self) -> Option<TaskRef> {
        // INVARIANT: whoever swaps the task out owns its reference.
        let task = NonNull::new(self.task.swap(null_mut(), Ordering::AcqRel))?;
        // SAFETY: a pointer of ARef::into_raw (type invariant), whose reference is ours now.
        Some(unsafe { TaskRef::from_raw(task.cast::<Task>()) })
    }
}

// --- The current task's user space -----------------------------------------------------------

/// What a walk of the current task's user stack starts from: its saved user `ip`, `sp` and
/// `bp`, the top of its main thread's stack (its initial stack pointer: above it lie the
/// arguments and environment; `u64::MAX` without an mm), the end of the user address space,
/// module parameter `unwinder` (an `ffi::ud_unwinder_mode`), whether it still has an mm
/// (false once `exit_mm()` ran). Task context.
pub(crate) fn current_walk_start() -> ffi::ud_walk_start {
    let mut out = core::mem::MaybeUninit::<ffi::ud_walk_start>::uninit();
    // SAFETY: ud_current_walk_start() reads current's saved user registers, its mm's
    // start_stack, a constant and a module parameter, and writes every field of `out`.
    unsafe {
        ffi::ud_current_walk_start(out.as_mut_ptr());
        out.assume_init()
    }
}

/// The saved user registers of the current task, by DWARF register number.
pub(crate) fn current_user_regs_dwarf() -> [u64; ffi::UD_USER_REGS as usize] {
    // (Not zeroed first: the shim writes every register, and the walk starts with a
    // `memset` less.)
    let mut out = core::mem::MaybeUninit::<[u64; ffi::UD_USER_REGS as usize]>::uninit();
    // SAFETY: `out` has room for the UD_USER_REGS registers, and ud_current_user_regs_dwarf()
    // writes all of them (its initializer names each one).
    unsafe {
        ffi::ud_current_user_regs_dwarf(out.as_mut_ptr().cast());
        out.assume_init()
    }
}

/// The stamp of the current task's address space, `(exec_id, seq)`: two walks that read
/// the same stamp see the same mappings. None if there is no mm or it cannot be stamped.
pub(crate) fn current_maps_stamp() -> Option<(u64, u64)> {
    let (mut exec_id, mut seq) = (0, 0);
    // SAFETY: reads current's mm and task fields into two locals.
    unsafe { ffi::ud_current_maps_stamp(&mut exec_id, &mut seq) }.then_some((exec_id, seq))
}

/// Reads `out.len()` words of the current task's user memory at `addr`, in one
/// user-access section: how many were read before a fault. Task context (may fault).
#[inline]
pub(crate) fn read_user_words(addr: u64, out: &mut [u64]) -> usize {
    // SAFETY: `out` is valid for `out.len()` words of writes; user_access_begin() validates
    // the user range.
    unsafe { ffi::ud_read_user_words(addr, out.as_mut_ptr(), out.len() as _) as usize }
}

/// `copy_from_user()` of `out.len()` bytes at `addr`: whether all were read. Task context.
#[inline]
pub(crate) fn copy_from_user(out: &mut [u8], addr: u64) -> bool {
    // SAFETY: `out` is valid for `out.len()` bytes of writes; copy_from_user() validates the
    // user range.
    unsafe { ffi::ud_copy_from_user(out.as_mut_ptr().cast(), addr, out.len() as _) }
}

/// A mapping of the current task, with a reference on its file if one was asked for
/// (dropped with it).
///
/// # Invariants
///
/// `0.file` is null or a file reference taken by `ud_current_vma()`, owned by this value.
pub(crate) struct Vma(ffi::ud_vma);

impl Vma {
    /// The mapping holding `addr` (takes the mmap lock: task context).
    pub(crate) fn of(addr: u64, want_file: bool) -> Option<Self> {
        let mut vma = ffi::ud_vma { start: 0, end: 0, file_offset: 0, key: 0, file: null_mut(), exec: false };
        // SAFETY: `vma` is valid for writing.
        // INVARIANT: ud_current_vma() takes a reference on the file it stores.
        unsafe { ffi::ud_current_vma(addr, &mut vma, want_file) }.then_some(Self(vma))
    }

    pub(crate) fn start(&self) -> u64 {
        self.0.start
    }

    pub(crate) fn end(&self) -> u64 {
        self.0.end
    }

    /// Offset in the file of `start` (`vm_pgoff` in bytes).
    pub(crate) fn file_offset(&self) -> u64 {
        self.0.file_offset
    }

    /// The keyed identity of the mapped file, `UD_VDSO_KEY`, or 0 (anonymous).
    pub(crate) fn key(&self) -> u64 {
        self.0.key
    }

    /// VM_EXEC.
    pub(crate) fn exec(&self) -> bool {
        self.0.exec
    }

    /// Reads `buf.len()` bytes of the mapped file from offset `pos`: how many were read (0
    /// without a file reference, or past its end).
    pub(crate) fn read_file(&self, pos: u64, buf: &mut [u8]) -> usize {
        if self.0.file.is_null() {
            return 0;
        }
        // SAFETY: `file` is referenced (type invariant); `buf` is valid for writing.
        let n = unsafe { ffi::ud_file_read(self.0.file, pos, buf.as_mut_ptr().cast(), buf.len() as _) };
        usize::try_from(n).unwrap_or(0).min(buf.len())
    }
}

impl Drop for Vma {
    fn drop(&mut self) {
        if !self.0.file.is_null() {
            // SAFETY: the reference ud_current_vma() took (type invariant).
            unsafe { ffi::ud_file_put(self.0.file) };
        }
    }
}

// --- Registered works -----------------------------------------------------------------------

/// A client's `struct unwind_work`.
///
/// # Invariants
///
/// `0` points to a `struct unwind_work` that stays valid from `unwind_deferred_init()` until
/// `unwind_deferred_cancel()` returned (the API's contract with its callers).
#[derive(Clone, Copy)]
pub(crate) struct WorkPtr(NonNull<ffi::unwind_work>);

impl WorkPtr {
    /// # Safety
    ///
    /// `work` points to a `struct unwind_work` that stays valid until its cancel returns.
    pub(crate) unsafe fn new(work: NonNull<ffi::unwind_work>) -> Self {
        // INVARIANT: guaranteed by the caller.
        Self(work)
    }

    /// Sets up the work with its callback and bit (-1: none).
    pub(crate) fn init(self, func: ffi::unwind_callback_fn, bit: i32) {
        // SAFETY: valid (type invariant); init and cancel of one work do not run concurrently
        // (the API's contract), and the registry mutex orders them against other works.
        unsafe { ffi::ud_work_init(self.0.as_ptr(), func, bit) }
    }

    /// The work's bit (-1: cancelled or not initialised; 0: never initialised).
    pub(crate) fn bit(self) -> i32 {
        // SAFETY: valid (type invariant).
        unsafe { ffi::ud_work_bit(self.0.as_ptr()) }
    }

    pub(crate) fn set_bit(self, bit: i32) {
        // SAFETY: valid (type invariant); the bit is an int that requests read with
        // READ_ONCE().
        unsafe { ffi::ud_work_set_bit(self.0.as_ptr(), bit) }
    }
}

/// The registered works by bit, read under SRCU by the task works that call them back.
///
/// # Invariants
///
/// A non-null entry is the [`WorkPtr`] of a registered work. It stays valid while a reader
/// that found it is in its [`SrcuReadGuard`] section: [`WorkTable::retire`] nulls the entry
/// and waits for those sections before it returns, and so before the work's cancel can.
pub(crate) struct WorkTable([AtomicPtr<ffi::unwind_work>; usize::BITS as usize]);

impl WorkTable {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicPtr::new(null_mut()) }; usize::BITS as usize])
    }

    /// `work` owns `bit` from now on.
    pub(crate) fn install(&self, bit: u32, work: WorkPtr) {
        if let Some(slot) = self.0.get(bit as usize) {
            // INVARIANT: `work` is being registered and valid until its cancel returns,
            // which retires it first.
            slot.store(work.0.as_ptr(), Ordering::Release);
        }
    }

    /// Whether `work` owns `bit`.
    pub(crate) fn owns(&self, bit: u32, work: WorkPtr) -> bool {
        self.0.get(bit as usize).is_some_and(|slot| slot.load(Ordering::Relaxed) == work.0.as_ptr())
    }

    /// Nobody owns `bit` any more: its entry is nulled, `meanwhile` runs, and then the wait
    /// for SRCU readers, after which no callback of its last owner runs (may sleep). (The
    /// caller's steps go between the two, so that one wait serves them too.)
    pub(crate) fn retire(&self, bit: u32, meanwhile: impl FnOnce()) {
        if let Some(slot) = self.0.get(bit as usize) {
            slot.store(null_mut(), Ordering::Release);
        }
        meanwhile();
        synchronize_srcu();
    }

    /// Calls back the owner of `bit`, if any, with `stack` and `cookie` (and `known`, the
    /// task's known mappings, for the module's own callbacks): whether one was.
    pub(crate) fn call(
        &self,
        bit: u32,
        _srcu: &SrcuReadGuard,
        stack: &mut [u64],
        cookie: u64,
        known: Option<&mut KnownMappings>,
    ) -> bool {
        let Some(work) = self.0.get(bit as usize).map(|slot| slot.load(Ordering::Acquire)) else {
            return false;
        };
        if work.is_null() {
            return false;
        }
        let known = known.map_or(null_mut(), |known| core::ptr::from_mut(known).cast());
        // SAFETY: a registered work, valid while our SRCU section lasts (type invariant);
        // `stack` is valid for reading during the call (the callback must not keep it, as
        // the API documents). Callbacks take `unsigned long *`: u64 on 64-bit. `known` is
        // null or ours alone for the call (borrowed mutably), which is what
        // src/ftrace/stack.c uses it as (ud_rs_resolve_known(), ud_rs_resolve_stack()).
        unsafe { ffi::ud_work_call(work, stack.as_mut_ptr().cast(), stack.len() as u32, cookie, known) };
        true
    }

    /// Number of registered works.
    pub(crate) fn registered(&self) -> u64 {
        self.0.iter().filter(|w| !w.load(Ordering::Relaxed).is_null()).count() as u64
    }
}

// --- The tracer's stack resolver --------------------------------------------------------------

/// The context src/ftrace/stack.c resolves a stack in: with its mmap lock held in
/// `ud_rs_resolve_stack()` (which alone calls [`StackContext::lookup`] and
/// [`StackContext::file_run`]), without it in `ud_rs_resolve_known()` (which only calls
/// [`StackContext::files_use`]).
///
/// # Invariants
///
/// `ctx` is the `ctx` of a running `ud_rs_resolve_stack()` or `ud_rs_resolve_known()` call,
/// valid during it (the value does not outlive that call: it borrows `'a`). `file` is 0 or
/// the `vm_file` of the mapping the last [`StackContext::lookup`] returned (pinned by the
/// mapping: the mmap lock is held where lookups are made).
pub(crate) struct StackContext<'a> {
    ctx: NonNull<c_void>,
    file: usize,
    _call: PhantomData<&'a mut c_void>,
}

impl StackContext<'_> {
    /// # Safety
    ///
    /// `ctx` is what `ud_stack_lookup()`, `ud_stack_file_run()` and `ud_stack_files_use()`
    /// expect, valid for `'a`; [`Self::lookup`] and [`Self::file_run`] are called only while
    /// the context's mmap lock is held.
    pub(crate) unsafe fn new(ctx: NonNull<c_void>) -> Self {
        // INVARIANT: guaranteed by the caller; no file yet.
        Self { ctx, file: 0, _call: PhantomData }
    }

    /// The mapping holding `addr`.
    #[inline]
    pub(crate) fn lookup(&mut self, addr: u64) -> Option<ffi::ud_mapping> {
        let mut m = ffi::ud_mapping { start: 0, end: 0, pgoff: 0, file: null_mut() };
        // SAFETY: a valid context (type invariant); `m` is valid for writing.
        let found = unsafe { ffi::ud_stack_lookup(self.ctx.as_ptr(), addr, &mut m) };
        // INVARIANT: the file of the mapping just returned.
        self.file = if found { m.file as usize } else { 0 };
        found.then_some(m)
    }

    /// Counts the uses of the files of `hashes` (a stack resolved from the task's known
    /// mappings) in the instance, if none of them needs an announcement: whether it did.
    #[inline]
    pub(crate) fn files_use(&mut self, hashes: &[u32]) -> bool {
        // SAFETY: a valid context (type invariant); `hashes` is valid for reading its
        // length of u32s during the call.
        unsafe { ffi::ud_stack_files_use(self.ctx.as_ptr(), hashes.as_ptr(), hashes.len() as u32) }
    }

    /// The tracer's hash of `file` for the stack's frames in it (announcing the file to the
    /// instance if needed; the resolver asks once per stack and file). `file` is the file of
    /// the mapping the last [`Self::lookup`] returned; any other value gets hash 0 and is not
    /// looked at.
    #[inline]
    pub(crate) fn file_run(&mut self, file: usize) -> u32 {
        if file == 0 || file != self.file {
            return 0;
        }
        // SAFETY: a valid context; `file` is the pinned file of the last mapping (type
        // invariant).
        unsafe { ffi::ud_stack_file_run(self.ctx.as_ptr(), file as *mut c_void) }
    }
}
