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
//! * [`sys`]: the safe edge, every call into C and all raw memory, each wrapped once.
//! * [`c_boundary`]: load and unload, and the Rust functions C calls (type-checked against
//!   their C declarations). With [`sys`], the only files with `unsafe`.
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
mod sys;
mod task_slots;
mod unwind;

use c_boundary::UnwindDeferred;

module! {
    type: UnwindDeferred,
    name: "unwind_deferred",
    description: "Deferred user-space stack unwinding and its ftrace integration",
    license: "GPL",
}
