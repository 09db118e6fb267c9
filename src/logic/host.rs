// SPDX-License-Identifier: GPL-2.0
//! Host build of the module's pure logic, for `cargo test` and the loom model checks.
//!
//! The kernel module includes the very same files with `#[path = "logic/mod.rs"] mod logic;`:
//! nothing here may depend on `std` or on the kernel crate.
#![no_std]

#[path = "mod.rs"]
mod logic;
pub use logic::*;
