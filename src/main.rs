// SPDX-License-Identifier: GPL-2.0
//! Deferred user-space stack unwinding for Linux 6.12, as a loadable module.
//!
//! Module map (one concept each):
//! * [`logic`]: the pure logic, shared verbatim with host `cargo test` (src/logic/).
//! * [`registry`]: registered works, bits, SRCU.
//! * [`task_slots`]: the per-task side table.
//! * [`deferred`]: request, task work, end of the entry, task lifetime.
//! * [`unwind`]: the user-stack walk and its per-entry cache.
//! * [`stats`]: debugfs counters.
//! * [`ftrace`]: decisions of the ftrace integration (the tracer is C: src/ftrace/).
//! * [`c_boundary`]: the Rust functions C calls, type-checked against their C declarations.
//! * `src/shim.c`, `src/hooks.c`, `src/ftrace/`: the C the Rust side cannot do in 6.12.

use kernel::prelude::*;

#[allow(dead_code, non_camel_case_types, non_upper_case_globals, missing_docs, unreachable_pub)]
mod ffi {
    include!("generated/shim_bindings.rs");
}

#[path = "logic/mod.rs"]
#[allow(dead_code, unreachable_pub)]
mod logic;

mod c_boundary;
mod deferred;
mod ftrace;
mod registry;
mod stats;
mod task_slots;
mod unwind;

module! {
    type: UnwindDeferred,
    name: "unwind_deferred",
    description: "Deferred user-space stack unwinding and its ftrace integration",
    license: "GPL",
}

struct UnwindDeferred;

impl kernel::Module for UnwindDeferred {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // The Rust state must exist before the C hooks (which call into it) are live.
        deferred::publish()?;
        // SAFETY: called once, after the state is published.
        let ret = unsafe { ffi::ud_c_init() };
        if ret != 0 {
            deferred::retract();
            return Err(Error::from_errno(ret));
        }
        // The tracer is the API's first client: it comes after the core is complete.
        // SAFETY: called once, after ud_c_init() succeeded.
        let ret = unsafe { ffi::ud_ftrace_init() };
        if ret != 0 {
            // SAFETY: undoes the successful ud_c_init() above; the tracer left nothing.
            unsafe { ffi::ud_c_exit() };
            deferred::retract();
            return Err(Error::from_errno(ret));
        }
        // SAFETY: only reads the hook table, which both set-ups have filled.
        unsafe { ffi::ud_hooks_report() };
        // SAFETY: `ud_version` returns a pointer to a static NUL-terminated string.
        let version = unsafe { CStr::from_char_ptr(ffi::ud_version()) };
        pr_info!("version {} loaded\n", version);
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
        deferred::retract();
        pr_info!("unloaded\n");
    }
}
