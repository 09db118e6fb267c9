// SPDX-License-Identifier: GPL-2.0
//! DWARF CFI (`.eh_frame`) unwinding of an x86-64 user stack: no `std`, no allocation, no
//! `unsafe`, no panics.
//!
//! Everything here runs in the kernel, in task context, on data that belongs to the traced
//! (possibly hostile) program: the `.eh_frame_hdr` search table, the CIEs and FDEs, the CFA
//! programs, the DWARF expressions and the stack itself are all untrusted. Every read goes
//! through [`UnwindMemory`] (the module: `copy_from_user`), every loop has a documented
//! constant bound, every arithmetic operation on untrusted data is wrapping or checked, and
//! a walk reads at most a budget of bytes.
//!
//! The pieces, one concept per file:
//!
//! * [`memory`]: the memory trait, [`ReadAhead`], the windowed, budgeted reader a walk
//!   reads through, and the [`memory::StackWindow`] a walk reads the stack through.
//! * [`elf`]: the ELF headers of a mapped file: its `PT_LOAD`s, its `PT_GNU_EH_FRAME`, and
//!   the load bias of a mapping (what a per-file cache stores).
//! * [`encoding`]: the `DW_EH_PE_*` pointer encodings.
//! * [`eh_frame_hdr`]: the binary search of `.eh_frame_hdr` for the FDE of a PC.
//! * [`eh_frame`]: CIE and FDE parsing.
//! * [`row`]: the rules of one row of the CFI table, self-contained `Copy` data.
//! * [`interp`]: the CFA program interpreter that computes the row of a PC.
//! * [`expr`]: the DWARF expression evaluator.
//! * [`regs`]: DWARF register numbers and the register set of a frame.
//! * [`step`]: applying a row to the registers of a frame (one frame up).
//! * [`compact`]: the compact form nearly every row has, and its fast step.
//! * [`cache`]: the caller-owned row cache.
//! * [`shared_rows`]: the row table all CPUs share, behind the per-CPU row caches.
//! * [`unwinder`]: the walk driver, with the frame-pointer fallback.

pub mod cache;
pub mod compact;
pub mod eh_frame;
pub mod eh_frame_hdr;
pub mod elf;
pub mod encoding;
pub mod expr;
pub mod interp;
pub mod memory;
pub mod modules;
pub mod regs;
pub mod row;
pub mod shared_rows;
pub mod step;
pub mod unwinder;

// The API in one place (the module uses a part of it: no warning for the rest).
#[allow(unused_imports)]
pub use cache::{HotRows, Layered, RowCache, RowStore, HOT_ROWS, ROW_CACHE_ENTRIES};
#[allow(unused_imports)]
pub use compact::CompactRow;
#[allow(unused_imports)]
pub use elf::{ElfError, ElfInfo};
#[allow(unused_imports)]
pub use memory::{ReadAhead, StackWindow, UnwindMemory};
#[allow(unused_imports)]
pub use regs::Regs;
#[allow(unused_imports)]
pub use row::Row;
#[allow(unused_imports)]
pub use shared_rows::{SharedRows, SharedSlot, SHARED_ROW_ENTRIES};
#[allow(unused_imports)]
pub use unwinder::{
    walk, walk_in, Located, Lookup, Mode, ModuleInfo, RecentAnswers, Stop, UnwindInfoSource,
    Unwinder, WalkParams, WalkResult, WalkStats,
};

/// Why a piece of unwind information, an expression or a frame was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Reading the traced process's memory failed.
    Fault,
    /// The walk's byte budget ([`memory::MAX_BYTES_PER_WALK`]) is spent.
    Budget,
    /// No FDE covers the PC (a gap in the table, or a PC outside every FDE).
    NotFound,
    /// The data is inconsistent: see [`Invalid`].
    Invalid(Invalid),
    /// The data is valid DWARF that this unwinder does not handle: see [`Unsupported`].
    Unsupported(Unsupported),
}

/// The kinds of [`Error::Invalid`] (and of [`Stop::Invalid`]): the stack or the unwind
/// information is wrong, or the walk went somewhere it must not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// An address (IP, CFA, a read) is zero or not below the end of user space.
    Address,
    /// A return address lies in no mapping.
    Unmapped,
    /// The stack pointer did not grow from one frame to the next (outside a signal frame):
    /// a loop or a corrupted stack.
    NotIncreasing,
    /// The frame pointer is not a frame record (misaligned, or below the stack pointer).
    FramePointer,
    /// More than [`unwinder::MAX_SIGNAL_FRAMES`] signal frames on one stack.
    SignalFrames,
    /// A rule needs the value of a register that is not known in this frame.
    UnknownRegister,
    /// Malformed unwind information: a bad length, CIE id, version, truncated entry, an
    /// instruction in a context where it is not allowed, a location that goes backwards.
    Malformed,
    /// A DWARF expression popped an empty stack or divided by zero.
    Expression,
}

impl Invalid {
    /// Every kind, in [`Invalid::index`] order.
    pub const ALL: [Invalid; 8] = [
        Invalid::Address,
        Invalid::Unmapped,
        Invalid::NotIncreasing,
        Invalid::FramePointer,
        Invalid::SignalFrames,
        Invalid::UnknownRegister,
        Invalid::Malformed,
        Invalid::Expression,
    ];

    /// A dense index in `0..Invalid::ALL.len()` (for counters).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short name (for debugfs).
    pub const fn name(self) -> &'static str {
        match self {
            Invalid::Address => "address",
            Invalid::Unmapped => "unmapped",
            Invalid::NotIncreasing => "not_increasing",
            Invalid::FramePointer => "frame_pointer",
            Invalid::SignalFrames => "signal_frames",
            Invalid::UnknownRegister => "unknown_register",
            Invalid::Malformed => "malformed",
            Invalid::Expression => "expression",
        }
    }
}

/// The kinds of [`Error::Unsupported`]: valid unwind information outside what this
/// unwinder implements (or beyond one of its bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    /// `.eh_frame_hdr` version other than 1.
    HdrVersion,
    /// A search table encoding other than `DW_EH_PE_datarel | DW_EH_PE_sdata4`, or no table.
    TableEncoding,
    /// A pointer encoding that is not handled (`indirect`, `textrel`, `funcrel`, `aligned`,
    /// `datarel` outside `.eh_frame_hdr`, an unknown format).
    Encoding,
    /// More than [`eh_frame_hdr::MAX_FDE_COUNT`] FDEs.
    FdeCount,
    /// A CIE version other than 1, 3 or 4 (or a version 4 CIE with other than 8-byte
    /// addresses or with segments).
    CieVersion,
    /// An augmentation string that is not handled (no `z`, too long, or an unknown letter
    /// before `R`).
    Augmentation,
    /// A return address column other than 16 (`%rip`).
    ReturnAddressRegister,
    /// A CFA instruction that is not handled (`DW_CFA_MIPS_advance_loc8`, other vendor
    /// instructions).
    Instruction,
    /// The CFA or the return address depends on a register that is not tracked (above 16),
    /// or an expression reads one.
    Register,
    /// An offset that does not fit the row's 32 bits.
    Offset,
    /// More than [`interp::MAX_CFA_INSTRUCTIONS`] CFA instructions to reach the PC.
    TooManyInstructions,
    /// `DW_CFA_remember_state` nested deeper than [`interp::REMEMBER_DEPTH`].
    RememberDepth,
    /// An expression longer than [`row::MAX_EXPR_LEN`] bytes.
    ExpressionLength,
    /// A row's expressions exceed [`row::ROW_EXPR_BYTES`] bytes.
    ExpressionPool,
    /// A DWARF operation that is not handled.
    ExpressionOp,
    /// An expression deeper than [`expr::MAX_EXPR_STACK`] values.
    ExpressionStack,
    /// An expression of more than [`expr::MAX_EXPR_OPS`] operations.
    ExpressionOps,
}

impl Unsupported {
    /// Every kind, in [`Unsupported::index`] order.
    pub const ALL: [Unsupported; 17] = [
        Unsupported::HdrVersion,
        Unsupported::TableEncoding,
        Unsupported::Encoding,
        Unsupported::FdeCount,
        Unsupported::CieVersion,
        Unsupported::Augmentation,
        Unsupported::ReturnAddressRegister,
        Unsupported::Instruction,
        Unsupported::Register,
        Unsupported::Offset,
        Unsupported::TooManyInstructions,
        Unsupported::RememberDepth,
        Unsupported::ExpressionLength,
        Unsupported::ExpressionPool,
        Unsupported::ExpressionOp,
        Unsupported::ExpressionStack,
        Unsupported::ExpressionOps,
    ];

    /// A dense index in `0..Unsupported::ALL.len()` (for counters).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short name (for debugfs).
    pub const fn name(self) -> &'static str {
        match self {
            Unsupported::HdrVersion => "hdr_version",
            Unsupported::TableEncoding => "table_encoding",
            Unsupported::Encoding => "encoding",
            Unsupported::FdeCount => "fde_count",
            Unsupported::CieVersion => "cie_version",
            Unsupported::Augmentation => "augmentation",
            Unsupported::ReturnAddressRegister => "return_address_register",
            Unsupported::Instruction => "instruction",
            Unsupported::Register => "register",
            Unsupported::Offset => "offset",
            Unsupported::TooManyInstructions => "too_many_instructions",
            Unsupported::RememberDepth => "remember_depth",
            Unsupported::ExpressionLength => "expression_length",
            Unsupported::ExpressionPool => "expression_pool",
            Unsupported::ExpressionOp => "expression_op",
            Unsupported::ExpressionStack => "expression_stack",
            Unsupported::ExpressionOps => "expression_ops",
        }
    }
}

/// Shorthand for the errors of malformed data.
pub(crate) const MALFORMED: Error = Error::Invalid(Invalid::Malformed);

/// Shorthand for an unsupported feature.
pub(crate) const fn unsupported(what: Unsupported) -> Error {
    Error::Unsupported(what)
}
