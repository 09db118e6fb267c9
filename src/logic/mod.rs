// SPDX-License-Identifier: GPL-2.0
//! Pure logic of deferred user-stack unwinding: no `std`, no kernel crate, no allocation.
//!
//! Everything that can be stated without touching a `task_struct` lives here, so that it is
//! compiled into the module *and* exercised by host `cargo test` (and loom, with `--cfg loom`).
//! It has no `unsafe`, and the lint keeps it so (in the module and on the host).

#![deny(unsafe_code)]

pub mod build_id_cache;
pub mod cfi;
pub mod cookie;
pub mod cookie_placement;
pub mod file_cache;
pub mod file_id;
pub mod option;
pub mod request_state;
pub mod resolve;
pub mod slot_index;
pub mod sync;
pub mod task_maps;
pub mod walker;
pub mod work_bits;
