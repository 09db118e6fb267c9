// SPDX-License-Identifier: GPL-2.0
//! x86-64 frame-pointer walk of a user stack, over any [`UserMemory`].
//!
//! With frame pointers, every frame starts with `push %rbp; mov %rsp, %rbp`, so at `fp`
//! lies the caller's frame pointer and at `fp + 8` the return address into the caller.
//! User memory is untrusted: every step is validated and the walk stops cleanly, keeping
//! what it has, on a fault or on anything that does not look like a frame chain.

/// Reads user memory. The module's implementation faults pages in (task context).
pub trait UserMemory {
    /// The frame record at the 8-byte aligned `fp`: `[next fp, return address]`, or `None`
    /// if either word cannot be read. The walker reads one record per frame, so a reader
    /// fetches both words at once (the module: one user-access section).
    fn read_frame(&mut self, fp: u64) -> Option<[u64; 2]>;
}

/// The user registers saved at kernel entry that the walk starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (`%rbp`).
    pub fp: u64,
}

/// Why a walk stopped (for counters and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The chain ended normally (a zero frame pointer or return address).
    End,
    /// The output is full.
    Full,
    /// Reading a frame faulted.
    Fault,
    /// The chain is not a valid frame chain (misaligned, not increasing, out of bounds).
    Invalid,
}

/// Walks the frame chain from `regs`, writing the user IP then each return address into
/// `out`, innermost first. Returns how many entries were written and why it stopped.
///
/// `user_end` is the end of the user address space: frames must lie below it.
pub fn walk(
    mem: &mut impl UserMemory,
    regs: UserRegs,
    user_end: u64,
    out: &mut [u64],
) -> (usize, Stop) {
    if out.is_empty() {
        return (0, Stop::Full);
    }
    if regs.ip == 0 || regs.ip >= user_end {
        return (0, Stop::Invalid);
    }
    out[0] = regs.ip;
    let mut n = 1;
    let mut fp = regs.fp;
    loop {
        if fp == 0 {
            return (n, Stop::End);
        }
        // The frame record must be aligned, on the stack (at or above the stack pointer),
        // and inside user space.
        if fp % 8 != 0 || fp < regs.sp || fp >= user_end - 16 {
            return (n, Stop::Invalid);
        }
        if n == out.len() {
            return (n, Stop::Full);
        }
        let Some([next_fp, ret]) = mem.read_frame(fp) else {
            return (n, Stop::Fault);
        };
        if ret == 0 {
            return (n, Stop::End);
        }
        if ret >= user_end {
            return (n, Stop::Invalid);
        }
        out[n] = ret;
        n += 1;
        // Frames grow down, so callers' frames are at strictly higher addresses: this also
        // guarantees termination on a corrupted (cyclic) chain.
        if next_fp != 0 && next_fp <= fp {
            return (n, Stop::Invalid);
        }
        fp = next_fp;
    }
}
