// SPDX-License-Identifier: GPL-2.0
//! The user-stack walk of one kernel entry, and its per-task cache.
//!
//! Runs in the task work (task context, may fault and sleep). Module parameter `unwinder`
//! picks the walk:
//!
//! * `auto` (default): DWARF CFI (`.eh_frame`, found through `.eh_frame_hdr`) where it
//!   covers the code, the frame-pointer chain where it does not, in one walk
//!   ([`crate::logic::cfi`]);
//! * `cfi`: CFI only;
//! * `fp`: the frame-pointer walk of [`crate::logic::walker`].
//!
//! The unwind information is read through the task's own mappings (`copy_from_user()`,
//! faulting pages in), as the stack is: what runs is what is read, the vDSO needs no
//! special case, and no file lock is taken while reading. Only the ELF headers of a file
//! are read from the file (once per file: the per-file summaries below), because nothing
//! tells where in the address space the file's first page is mapped.
//!
//! The result is cached so that every callback of the entry (and every later task work run
//! of the same entry) sees the same array; the cache is invalidated when the entry ends (at
//! the end of its last task work).

#![deny(unsafe_code)]

use kernel::prelude::*;
use kernel::sync::Mutex;

use crate::ffi;
use crate::logic::cfi::{
    self, elf, modules, HotRows, Layered, Located, Lookup, Mode, ModuleInfo, RecentAnswers, Regs,
    Row, RowCache, RowStore, SharedRows, SharedSlot, StackWindow, UnwindInfoSource, UnwindMemory,
    WalkParams, SHARED_ROW_ENTRIES,
};
use crate::logic::task_maps::{Stamp, TaskMaps};
use crate::logic::walker::{self, UserRegs, Windowed, WordReader};
use crate::stats::{add_unwinder, CpuBlock, Counter, UnwinderCounter};
use crate::sys::{self, PerCpu, Vma};

/// Frames kept per stack.
pub(crate) const MAX_ENTRIES: usize = ffi::UD_MAX_STACK_ENTRIES as usize;

/// Files whose summaries are kept (in sets of [`modules::MODULE_WAYS`]; about 8 KiB).
const MODULE_SLOTS: usize = 64;
/// The most of a file's head read for its ELF and program headers, and the most read for
/// program headers elsewhere in the file (73 of them).
const MAX_HEADERS: usize = 4096;

/// One task's cached stack, and its recent mappings (two allocations per task, at its first
/// walk: the stack's entries, 4 KiB, apart, so that the rest, hot rows first, has an 8 KiB
/// kmalloc bucket of its own).
///
/// # Invariants
///
/// `entries` has [`MAX_ENTRIES`] elements; `nr <= MAX_ENTRIES`.
#[repr(C)]
pub(crate) struct StackCache {
    /// Whether `entries[..nr]` holds this entry's stack.
    filled: usize,
    nr: usize,
    entries: KVec<u64>,
    /// Where the unwind information of the task's recent mappings is (see [`TaskMaps`]).
    maps: TaskMaps,
    /// The last walk's answers of where the unwind information is, which the next walk
    /// starts with: they hold while `maps` keeps its stamp (kept only by walks that read
    /// one).
    recent: RecentAnswers,
    /// The rows of the code the task runs most (in front of the per-CPU row caches, which
    /// each lookup must reach with preemption off).
    hot: HotRows,
    /// The stack window of the task's walks: kept here so that a walk does not zero a new
    /// one on the stack of the task work (512 bytes, 256 for a frame-pointer walk) each
    /// time.
    window: WalkWindow,
}

/// The stack window of the unwinder the task's last walk ran (one at a time: the cache has
/// no room for both; a change of `unwinder` builds the other one).
enum WalkWindow {
    Cfi(StackWindow),
    Fp(Windowed<CurrentUserMemory>),
}

impl WalkWindow {
    /// Runs `walk` with the window of a CFI (or `auto`) walk, built in place of the other
    /// kind if that is there (a change of `unwinder`: the first walk after it).
    fn cfi<T>(&mut self, walk: impl FnOnce(&mut StackWindow) -> T) -> T {
        if let WalkWindow::Cfi(window) = self {
            return walk(window);
        }
        let mut window = StackWindow::new();
        let result = walk(&mut window);
        *self = WalkWindow::Cfi(window);
        result
    }

    /// Runs `walk` with the window of a frame-pointer walk, likewise.
    fn fp<T>(&mut self, walk: impl FnOnce(&mut Windowed<CurrentUserMemory>) -> T) -> T {
        if let WalkWindow::Fp(window) = self {
            return walk(window);
        }
        let mut window = Windowed::new(CurrentUserMemory, kernel::page::PAGE_SIZE as u64);
        let result = walk(&mut window);
        *self = WalkWindow::Fp(window);
        result
    }
}

// A kmalloc bucket of 8 KiB at most.
const _: () = assert!(core::mem::size_of::<StackCache>() <= 8192);

impl StackCache {
    /// An empty cache, built in place (it is too large for the stack of a task work).
    pub(crate) fn new_boxed() -> Option<KBox<Self>> {
        let mut entries = KVec::with_capacity(MAX_ENTRIES, GFP_KERNEL).ok()?;
        entries.extend_with(MAX_ENTRIES, 0, GFP_KERNEL).ok()?;
        // (Written into the allocation: the hot rows, over 5 KiB, through no copy on the
        // stack; the task work's frame is 1 KiB or so.)
        KBox::init(
            // INVARIANT: MAX_ENTRIES entries, none of them taken.
            init!(StackCache {
                filled: 0,
                nr: 0,
                entries,
                maps: TaskMaps::new(),
                recent: RecentAnswers::new(),
                // (Zeroed in place, then made empty: `HotRows::new()` here went through the
                // stack, a 5,176-byte frame in the task work, objdump.)
                hot <- sys::zeroed_then(HotRows::reset),
                window: WalkWindow::Cfi(StackWindow::new()),
            }),
            GFP_KERNEL,
        )
        .ok()
    }

    /// Start of a new kernel entry: the cached stack is stale.
    pub(crate) fn invalidate(&mut self) {
        self.filled = 0;
    }
}

/// What the unwinder keeps across walks: the rows of the CFI tables met so far (per CPU,
/// and behind those in one table all CPUs share), and the summaries of the files met so far.
pub(crate) struct UnwindCaches {
    rows: PerCpu<RowCache>,
    shared_rows: SharedRows<KVVec<SharedSlot>>,
    modules: Pin<KBox<Mutex<KVec<modules::ModuleSlot>>>>,
}

// One row cache per CPU, from alloc_percpu(), which refuses more than PCPU_MIN_UNIT_SIZE.
const _: () = assert!(core::mem::size_of::<RowCache>() <= 32 * 1024);

impl UnwindCaches {
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MODULE_SLOTS, GFP_KERNEL)?;
        slots.extend_with(MODULE_SLOTS, modules::ModuleSlot::default(), GFP_KERNEL)?;
        let modules = KBox::pin_init(kernel::new_mutex!(slots, "unwind_deferred_modules"), GFP_KERNEL)?;
        // (384 KiB: kvmalloc'd, vmalloc when no contiguous memory is free.)
        let mut shared = KVVec::with_capacity(SHARED_ROW_ENTRIES, GFP_KERNEL)?;
        for _ in 0..SHARED_ROW_ENTRIES {
            shared.push(SharedSlot::new(), GFP_KERNEL)?;
        }
        // Zeroed: an empty RowCache per CPU.
        Ok(Self { rows: PerCpu::new()?, shared_rows: SharedRows::new(shared), modules })
    }
}

/// This CPU's row cache, one access at a time (a walk may sleep between two; the row
/// caches are never used from interrupts), then the table all CPUs share, and how many
/// lookups reached each.
struct PerCpuRows<'a> {
    rows: &'a PerCpu<RowCache>,
    all: &'a SharedRows<KVVec<SharedSlot>>,
    lookups: u32,
    from_all: u32,
}

impl RowStore for PerCpuRows<'_> {
    fn lookup(&mut self, module: u64, rel_pc: u64) -> Option<cfi::CompactRow> {
        self.lookups = self.lookups.saturating_add(1);
        if let Some(row) = self.rows.with(|cache| cache.lookup(module, rel_pc)) {
            return Some(row);
        }
        // (Lock-free, preemption on: see shared_rows.rs.) Kept on this CPU too, where the
        // next lookup finds it without atomics.
        let row = self.all.lookup(module, rel_pc)?;
        self.from_all = self.from_all.saturating_add(1);
        self.rows.with(|cache| cache.insert_compact(module, rel_pc, row));
        Some(row)
    }

    fn lookup_full(&mut self, module: u64, rel_pc: u64, out: &mut Row) -> bool {
        self.rows.with(|cache| cache.lookup_full(module, rel_pc, out))
    }

    fn store(&mut self, module: u64, rel_pc: u64, row: &Row) {
        self.rows.with(|cache| cache.store(module, rel_pc, row));
        // (Rows without a compact form, rare, stay per CPU.)
        if let Some(compact) = cfi::CompactRow::from_row(row) {
            self.all.store(module, rel_pc, &compact);
        }
    }
}

/// The current task's user memory, faulting pages in (task context: the task work).
struct CurrentUserMemory;

impl WordReader for CurrentUserMemory {
    fn read_words(&mut self, addr: u64, out: &mut [u64]) -> usize {
        sys::read_user_words(addr, out)
    }
}

impl UnwindMemory for CurrentUserMemory {
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        sys::copy_from_user(out, addr)
    }
}

/// Where the unwind information of each PC of the current task is: the mapping of the PC,
/// then its file's summary (read once per file). Answers are kept in the task's
/// [`TaskMaps`] (across kernel entries, while the address space does not change); the walk
/// keeps the last one.
struct TaskModules<'a> {
    caches: &'a UnwindCaches,
    /// The task's cache of mappings, if its address space could be stamped.
    maps: Option<&'a mut TaskMaps>,
    /// Answers from `maps`, and looked up (counted once the walk ends).
    maps_cached: u32,
    maps_looked_up: u32,
}

impl TaskModules<'_> {
    /// The summary of the file (or vDSO) `key` of the mapping that holds `pc`, from the
    /// table or read from its head.
    fn summary(&self, key: u64, pc: u64) -> Option<modules::ModuleSummary> {
        if let Some(summary) = modules::find(&self.caches.modules.lock(), key) {
            return Some(summary);
        }
        // Look the mapping up again, with a reference on its file this time (rare: once
        // per file while it stays in the table); it must still be the same file.
        let vma = Vma::of(pc, true).filter(|vma| vma.key() == key)?;
        let mut head = KVec::with_capacity(MAX_HEADERS, GFP_KERNEL).ok()?;
        head.extend_with(MAX_HEADERS, 0u8, GFP_KERNEL).ok()?;
        let vdso = key == ffi::UD_VDSO_KEY as u64;
        let len = if vdso {
            // The vDSO has no file: its image is its mapping, from its first page.
            let len = (vma.end() - vma.start()).min(MAX_HEADERS as u64) as usize;
            let read = head.get_mut(..len).is_some_and(|buf| CurrentUserMemory.read(vma.start(), buf));
            if read {
                len
            } else {
                0
            }
        } else {
            vma.read_file(0, &mut head)
        };
        let page = kernel::page::PAGE_SIZE as u64;
        let parsed = head
            .get(..len)
            .and_then(|bytes| {
                let (phoff, table_len) = elf::program_headers(bytes).ok()?;
                if phoff.checked_add(table_len)? <= len as u64 {
                    return elf::parse(bytes).ok();
                }
                // The program headers are not in the head: a rewritten file (BOLT puts
                // them in a new segment, patchelf at the end). Read them where they are,
                // as many bytes as the head at most. (The vDSO is the kernel's own image,
                // headers first.)
                let table_len = usize::try_from(table_len).ok().filter(|&n| n <= MAX_HEADERS && !vdso)?;
                let mut table = KVec::with_capacity(table_len, GFP_KERNEL).ok()?;
                table.extend_with(table_len, 0u8, GFP_KERNEL).ok()?;
                if vma.read_file(phoff, &mut table) != table_len {
                    return None;
                }
                add_unwinder(UnwinderCounter::modules_headers_apart, 1);
                elf::parse_split(bytes, &table).ok()
            })
            .map(|info| modules::ModuleSummary::from_elf(&info, page));
        add_unwinder(UnwinderCounter::modules_read, 1);
        // A file whose headers cannot be used is kept as one without unwind information.
        let summary = parsed.unwrap_or_else(|| {
            add_unwinder(UnwinderCounter::modules_unreadable, 1);
            modules::ModuleSummary::default()
        });
        modules::keep(&mut self.caches.modules.lock(), key, &summary);
        Some(summary)
    }

    fn look_up(&self, pc: u64) -> (u64, u64, Lookup) {
        let Some(vma) = Vma::of(pc, false) else {
            // No mapping: the answer holds for this address only.
            return (pc, pc.wrapping_add(1), Lookup::Unmapped);
        };
        let (start, end, key) = (vma.start(), vma.end(), vma.key());
        // Code without a file (JIT, anonymous memory) or outside an executable mapping has
        // no unwind information here: the frame-pointer chain may still know the caller.
        if !vma.exec() || key == 0 {
            return (start, end, Lookup::NoInfo);
        }
        let module: Option<ModuleInfo> = self
            .summary(key, pc)
            .and_then(|s| s.module(key, start, vma.file_offset()));
        (start, end, module.map_or(Lookup::NoInfo, Lookup::Module))
    }
}

impl UnwindInfoSource for TaskModules<'_> {
    fn find(&mut self, pc: u64) -> Located {
        if let Some((start, end, lookup)) = self.maps.as_mut().and_then(|maps| maps.find(pc)) {
            self.maps_cached = self.maps_cached.saturating_add(1);
            return Located { start, end, lookup };
        }
        self.maps_looked_up = self.maps_looked_up.saturating_add(1);
        let (start, end, lookup) = self.look_up(pc);
        // (An address in no mapping is not kept: it is a broken walk, not a mapping.)
        if lookup != Lookup::Unmapped {
            if let Some(maps) = self.maps.as_mut() {
                maps.keep(start, end, lookup);
            }
        }
        Located { start, end, lookup }
    }
}

/// The frame-pointer walk of the current task's user stack into `out`. Kept out of line:
/// its loop is the hot path of `unwinder=fp`, and compiled inside the caller it came out
/// a few instructions a frame longer.
#[inline(never)]
fn walk_current_fp(
    out: &mut [u64],
    start: &ffi::ud_walk_start,
    window: &mut Windowed<CurrentUserMemory>,
) -> usize {
    let regs = UserRegs { ip: start.ip, sp: start.sp, fp: start.bp };
    // What an earlier walk read is stale: this walk reads its own.
    window.begin(start.stack_top);
    walker::walk(window, regs, start.user_end, out).0
}

/// Walks the current task's user stack, from `start`, into `out`: how many entries were
/// written.
fn walk_current(
    start: &ffi::ud_walk_start,
    caches: &UnwindCaches,
    counts: CpuBlock,
    out: &mut [u64],
    maps: &mut TaskMaps,
    recent: &mut RecentAnswers,
    hot: &mut HotRows,
    window: &mut WalkWindow,
) -> usize {
    let page = kernel::page::PAGE_SIZE as u64;
    let mode = match start.unwinder {
        x if x == ffi::ud_unwinder_mode::UD_UNWINDER_CFI as u32 => Mode::Cfi,
        x if x == ffi::ud_unwinder_mode::UD_UNWINDER_FP as u32 => Mode::Fp,
        _ => Mode::Auto,
    };
    if mode == Mode::Fp {
        counts.add_unwinder(UnwinderCounter::walks_fp, 1);
        return window.fp(|window| walk_current_fp(out, start, window));
    }
    let values = sys::current_user_regs_dwarf();
    let params = WalkParams::new(mode, start.user_end, page).with_stack_top(start.stack_top);
    let mut unstamped;
    let (maps, recent) = match sys::current_maps_stamp() {
        Some((exec_id, seq)) => {
            // The last walk's answers hold if the address space has not changed since.
            if !maps.begin(Stamp { exec_id, seq }) {
                recent.clear();
            }
            (Some(maps), recent)
        }
        // (A walk without a stamp, while the mappings change, keeps nothing for the next:
        // it starts from no answers, and leaves the task's as they were.)
        None => {
            unstamped = RecentAnswers::new();
            (None, &mut unstamped)
        }
    };
    let mut modules = TaskModules { caches, maps, maps_cached: 0, maps_looked_up: 0 };
    let mut rows = Layered {
        hot,
        shared: PerCpuRows { rows: &caches.rows, all: &caches.shared_rows, lookups: 0, from_all: 0 },
    };
    let r = window.cfi(|window| {
        cfi::walk_in(
            window,
            recent,
            &mut CurrentUserMemory,
            &mut modules,
            &mut rows,
            &Regs::all_known(values),
            &params,
            out,
        )
    });
    let walks = if mode == Mode::Cfi { UnwinderCounter::walks_cfi } else { UnwinderCounter::walks_auto };
    counts.add_unwinder(walks, 1);
    counts.add_unwinder(UnwinderCounter::frames_cfi, r.stats.cfi_frames.into());
    counts.add_unwinder(UnwinderCounter::frames_fp, r.stats.fp_frames.into());
    counts.add_unwinder(UnwinderCounter::frames_signal, r.stats.signal_frames.into());
    counts.add_unwinder(UnwinderCounter::rows_cached, r.stats.cache_hits.into());
    counts.add_unwinder(UnwinderCounter::rows_computed, r.stats.cache_misses.into());
    counts.add_unwinder(UnwinderCounter::rows_shared, rows.shared.lookups.into());
    counts.add_unwinder(UnwinderCounter::rows_all_cpus, rows.shared.from_all.into());
    counts.add_unwinder(UnwinderCounter::bytes_read, r.stats.bytes_read);
    counts.add_unwinder(UnwinderCounter::reads, r.stats.read_calls.into());
    counts.add_unwinder(UnwinderCounter::maps_cached, modules.maps_cached.into());
    counts.add_unwinder(UnwinderCounter::maps_looked_up, modules.maps_looked_up.into());
    counts.stop(r.stop);
    r.len
}

/// The user stack of the current kernel entry of the current task, from `cache` (walked
/// once per entry and kept there). Empty when the task has no user memory any more (exit)
/// or it has no cache (out of memory).
///
/// Must run in the task's task work (current).
pub(crate) fn current_stack<'a>(
    cache: Option<&'a mut StackCache>,
    caches: &UnwindCaches,
    counts: CpuBlock,
) -> &'a mut [u64] {
    let Some(cache) = cache else { return &mut [] };
    if cache.filled != 0 {
        counts.bump(Counter::unwind_cached);
        // (`nr <= MAX_ENTRIES`, the length of `entries`: see `StackCache`.)
        return cache.entries.get_mut(..cache.nr).unwrap_or_default();
    }
    let start = sys::current_walk_start();
    let nr = if start.has_mm {
        walk_current(
            &start,
            caches,
            counts,
            &mut cache.entries,
            &mut cache.maps,
            &mut cache.recent,
            &mut cache.hot,
            &mut cache.window,
        )
    } else {
        0 // exit_mm() already ran: the task exits with a pending request.
    };
    counts.bump(Counter::unwinds);
    counts.add(Counter::unwind_frames, nr as u64);
    if nr == 0 {
        counts.bump(Counter::unwind_empty);
    }
    // INVARIANT: at most MAX_ENTRIES.
    cache.nr = nr.min(MAX_ENTRIES);
    cache.filled = 1;
    cache.entries.get_mut(..cache.nr).unwrap_or_default()
}
