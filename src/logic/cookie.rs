// SPDX-License-Identifier: GPL-2.0
//! The context cookie: one 64-bit value per kernel entry of a task, shared by every request
//! made during that entry and passed to every callback for it.
//!
//! As upstream: the low 32 bits are `cpu + 1` (so a cookie is never 0), the high 32 bits a
//! per-CPU counter that is always odd. The counter advances only when a task of that CPU
//! needs a new cookie, so cookies are unique per CPU until the counter wraps (2^31 entries
//! that requested an unwind on one CPU).

/// Next value of a CPU's counter after `prev`: advances by 2 and stays odd.
pub const fn next_counter(prev: u32) -> u32 {
    prev.wrapping_add(2) | 1
}

/// The cookie for counter value `counter` on CPU `cpu`.
pub const fn make(cpu: u32, counter: u32) -> u64 {
    ((counter as u64) << 32) | (cpu as u64 + 1)
}

/// The CPU that allocated `cookie`, if it is a valid cookie.
pub const fn cpu(cookie: u64) -> Option<u32> {
    match cookie as u32 {
        0 => None,
        low => Some(low - 1),
    }
}

/// The counter half of `cookie`.
pub const fn counter(cookie: u64) -> u32 {
    (cookie >> 32) as u32
}
