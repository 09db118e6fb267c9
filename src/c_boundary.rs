// SPDX-License-Identifier: GPL-2.0
//! The functions C calls in Rust (`ud_rs_*`), checked against their C declarations.
//!
//! rust-bindings/shim.h declares them for the C side; bindgen turns those declarations into
//! `ffi::ud_rs_*`. Each line below makes the compiler unify the type of the declaration
//! with the type of the Rust definition: a parameter or return type that differs between
//! the two does not build. (Never called: only type-checked.)

use crate::ffi;
use crate::{deferred, ftrace, stats};

/// Compiles only if both arguments have one type.
fn same<T>(_: T, _: T) {}

#[allow(dead_code)]
fn rust_functions_match_their_c_declarations() {
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_task_work, deferred::ud_rs_task_work);
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_task_free, deferred::ud_rs_task_free);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_init_work, deferred::ud_rs_init_work);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_request, deferred::ud_rs_request);
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_cancel, deferred::ud_rs_cancel);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_stats, deferred::ud_rs_stats);
    same::<unsafe extern "C" fn(_, _) -> _>(ffi::ud_rs_unwinder_stats, stats::ud_rs_unwinder_stats);
    same::<unsafe extern "C" fn(_, _) -> _>(
        ffi::ud_rs_parse_bool_option,
        ftrace::ud_rs_parse_bool_option,
    );
    same::<unsafe extern "C" fn(_) -> _>(ffi::ud_rs_fold_file_hash, ftrace::ud_rs_fold_file_hash);
    same::<unsafe extern "C" fn(_, _, _, _, _, _, _) -> _>(
        ffi::ud_rs_cookie_follows_event,
        ftrace::ud_rs_cookie_follows_event,
    );
    same::<unsafe extern "C" fn(_, _, _, _, _)>(
        ffi::ud_rs_resolve_stack,
        ftrace::ud_rs_resolve_stack,
    );
    same::<unsafe extern "C" fn() -> _>(ffi::ud_rs_file_cache_new, ftrace::ud_rs_file_cache_new);
    same::<unsafe extern "C" fn(_)>(ffi::ud_rs_file_cache_free, ftrace::ud_rs_file_cache_free);
    same::<unsafe extern "C" fn(_, _, _) -> _>(
        ffi::ud_rs_file_cache_use,
        ftrace::ud_rs_file_cache_use,
    );
}
