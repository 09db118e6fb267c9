// SPDX-License-Identifier: GPL-2.0
//! A QEMU TCG plugin that counts how many times each guest instruction runs, and writes the
//! counts to a file when the guest asks (the profiles of `scripts/qprof.tc`).
//!
//! Every translated instruction gets a counter that the translated code itself increments
//! (an inline add, no call), so the counts are exact: unlike sampling under `-icount`, an
//! instruction run with interrupts off is counted like any other. The guest's instruction
//! count (its clock under `-icount`) does not change: the additions are host code.
//!
//! The guest asks for a snapshot by running [`MARK`], a no-op instruction of user space
//! (`tests/progs/qprof-mark.c`): its callback writes every counter that is not zero to
//! `DIR/qprof.N` (lines `ADDRESS COUNT`: hexadecimal address, decimal count; N counts the
//! snapshots from 0) before the instruction completes, so no guest instruction runs while
//! the snapshot is taken. Counters are never reset: the difference of two snapshots is what
//! ran between them (`scripts/qprof-report.py`).
//!
//! Argument: `out=DIR`. QEMU's plugin API version 1 (QEMU 6.0 to 8.1; Debian 12 has 7.2).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use qemu_plugin_sys::*;

/// The plugin API version this plugin is written against (QEMU reads this symbol).
#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

/// The snapshot instruction: `nopl 0x51707266(%rax)` ("fprQ"), which no compiler emits.
pub const MARK: [u8; 7] = [0x0f, 0x1f, 0x80, 0x66, 0x72, 0x70, 0x51];

/// The counter of one translated instruction. Boxed and never freed: the translated code
/// holds its address for as long as the translation may run (QEMU does not tell when a
/// translation is dropped).
struct Counter {
    vaddr: u64,
    count: u64,
}

/// Every counter handed out, in translation order (an address translated again gets a new
/// counter: the report adds them up).
static COUNTERS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static OUT: OnceLock<PathBuf> = OnceLock::new();
static SNAPSHOTS: AtomicU32 = AtomicU32::new(0);

/// User-space addresses end below this one (x86-64's canonical lower half).
const USER_END: u64 = 0x0000_8000_0000_0000;

unsafe extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    // SAFETY: QEMU passes a translation block valid for the duration of this callback.
    let n = unsafe { qemu_plugin_tb_n_insns(tb) };
    let mut counters = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    for i in 0..n {
        // SAFETY: `i` is below the block's instruction count.
        let insn = unsafe { qemu_plugin_tb_get_insn(tb, i) };
        // SAFETY: `insn` is an instruction of this block.
        let vaddr = unsafe { qemu_plugin_insn_vaddr(insn) };
        let counter = Box::into_raw(Box::new(Counter { vaddr, count: 0 }));
        // SAFETY: the counter is never freed, so the translated code may add to it for as
        // long as it runs.
        unsafe {
            qemu_plugin_register_vcpu_insn_exec_inline(
                insn,
                qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
                std::ptr::addr_of_mut!((*counter).count).cast::<c_void>(),
                1,
            );
        }
        counters.push(counter as usize);
        if vaddr < USER_END && is_mark(insn) {
            // SAFETY: a callback with the signature QEMU expects; no register access.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    Some(on_mark),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    std::ptr::null_mut(),
                );
            }
        }
    }
}

/// Whether `insn` is [`MARK`].
fn is_mark(insn: *mut qemu_plugin_insn) -> bool {
    // SAFETY: `insn` is an instruction being translated; its bytes are valid for its size.
    unsafe {
        let size = qemu_plugin_insn_size(insn);
        size == MARK.len()
            && std::slice::from_raw_parts(qemu_plugin_insn_data(insn).cast::<u8>(), size) == MARK
    }
}

unsafe extern "C" fn on_mark(_vcpu: c_uint, _data: *mut c_void) {
    let Some(dir) = OUT.get() else { return };
    let n = SNAPSHOTS.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = snapshot(&dir.join(format!("qprof.{n}"))) {
        eprintln!("qprof: snapshot {n}: {e}");
    }
}

/// Writes every non-zero counter to `path` (from a vCPU callback: no guest instruction runs
/// meanwhile on this vCPU, and under `-icount` none on any).
fn snapshot(path: &PathBuf) -> std::io::Result<()> {
    let counters = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = path.with_extension("tmp");
    let mut out = std::io::BufWriter::new(fs::File::create(&tmp)?);
    for &c in counters.iter() {
        // SAFETY: every entry is a leaked `Counter`.
        let (vaddr, count) = unsafe {
            let c = c as *const Counter;
            (
                (*c).vaddr,
                std::ptr::read_volatile(std::ptr::addr_of!((*c).count)),
            )
        };
        if count != 0 {
            writeln!(out, "{vaddr:x} {count}")?;
        }
    }
    out.flush()?;
    drop(out);
    // Whole or not at all: the guest takes the file as soon as it sees it.
    fs::rename(&tmp, path)
}

/// # Safety
///
/// Called by QEMU with `argc` valid C strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    _info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    for i in 0..usize::try_from(argc).unwrap_or(0) {
        // SAFETY: QEMU passes `argc` valid C strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        if let Some(d) = arg.strip_prefix("out=") {
            let _ = OUT.set(PathBuf::from(d));
        }
    }
    if OUT.get().is_none() {
        eprintln!("qprof: no out=DIR argument");
        return -1;
    }
    // SAFETY: a callback with the signature QEMU expects.
    unsafe { qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate)) };
    0
}
