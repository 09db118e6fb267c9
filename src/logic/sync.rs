// SPDX-License-Identifier: GPL-2.0
//! Atomics: `core`'s in the module and in normal tests, loom's under `--cfg loom` so that the
//! model checker sees every access.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub use core::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
