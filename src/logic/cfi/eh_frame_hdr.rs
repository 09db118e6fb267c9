// SPDX-License-Identifier: GPL-2.0
//! `.eh_frame_hdr`: the sorted table of (function start, FDE address) pairs that the linker
//! emits (`--eh-frame-hdr`) and the binary search for the FDE of a PC.
//!
//! Layout (version 1): `version: u8, eh_frame_ptr_enc: u8, fde_count_enc: u8,
//! table_enc: u8, eh_frame_ptr, fde_count, table[fde_count]`. Every linker emits the table
//! as `DW_EH_PE_datarel | DW_EH_PE_sdata4` (4-byte offsets from the start of
//! `.eh_frame_hdr`); only that encoding is searchable.

use super::encoding::{read_encoded, DW_EH_PE_DATAREL, DW_EH_PE_OMIT, DW_EH_PE_SDATA4};
use super::memory::{Cursor, UnwindMemory};
use super::{unsupported, Error, Unsupported, MALFORMED};

/// The only searchable table encoding: `DW_EH_PE_datarel | DW_EH_PE_sdata4`.
pub const TABLE_ENCODING: u8 = DW_EH_PE_DATAREL | DW_EH_PE_SDATA4;
/// Most FDEs a table may have (libxul has about 2^18): the search takes at most
/// [`MAX_SEARCH_STEPS`] probes.
pub const MAX_FDE_COUNT: u64 = 1 << 24;
/// Bytes per table entry.
pub const ENTRY_BYTES: u64 = 8;
/// Entries read at once when the search has narrowed to this many (one 64-byte read instead
/// of three probes).
pub const SEARCH_TAIL: u64 = 8;
/// Probes of the binary search before the tail read, at most (log2(MAX_FDE_COUNT /
/// SEARCH_TAIL) = 21 suffice; a hostile table gets no more).
pub const MAX_SEARCH_STEPS: u32 = 24;
/// Bytes of a header at most: 4 bytes, then two values of up to 10 bytes (LEB128).
const MAX_HEADER_BYTES: u64 = 24;

/// A parsed `.eh_frame_hdr` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EhFrameHdr {
    /// Runtime address of `.eh_frame_hdr` (the `datarel` base).
    pub hdr: u64,
    /// Runtime address of `.eh_frame`.
    pub eh_frame: u64,
    /// Entries in the table.
    pub fde_count: u64,
    /// Runtime address of the first table entry.
    pub table: u64,
}

/// Parses the header of the `.eh_frame_hdr` at runtime address `hdr`, `len` bytes long
/// (its `PT_GNU_EH_FRAME` size; 0 if unknown: then the table is not bounds-checked against
/// it, only against [`MAX_FDE_COUNT`]).
pub fn parse<M: UnwindMemory>(mem: &mut M, hdr: u64, len: u64) -> Result<EhFrameHdr, Error> {
    let limit = if len == 0 {
        MAX_HEADER_BYTES
    } else {
        len.min(MAX_HEADER_BYTES)
    };
    let mut cur = Cursor::new(mem, hdr, hdr.checked_add(limit).ok_or(MALFORMED)?);
    let mut head = [0u8; 4];
    cur.bytes(&mut head)?;
    let [version, eh_frame_enc, count_enc, table_enc] = head;
    if version != 1 {
        return Err(unsupported(Unsupported::HdrVersion));
    }
    if eh_frame_enc == DW_EH_PE_OMIT {
        return Err(unsupported(Unsupported::Encoding));
    }
    let eh_frame = read_encoded(&mut cur, eh_frame_enc, Some(hdr))?;
    if count_enc == DW_EH_PE_OMIT || table_enc != TABLE_ENCODING {
        return Err(unsupported(Unsupported::TableEncoding));
    }
    let fde_count = read_encoded(&mut cur, count_enc, Some(hdr))?;
    if fde_count > MAX_FDE_COUNT {
        return Err(unsupported(Unsupported::FdeCount));
    }
    let table = cur.pos();
    if len != 0 {
        // The table must lie inside the section.
        let table_end = table
            .checked_add(fde_count.wrapping_mul(ENTRY_BYTES))
            .ok_or(MALFORMED)?;
        if table_end > hdr.checked_add(len).ok_or(MALFORMED)? {
            return Err(MALFORMED);
        }
    }
    Ok(EhFrameHdr {
        hdr,
        eh_frame,
        fde_count,
        table,
    })
}

impl EhFrameHdr {
    /// The address of entry `i`.
    fn entry_addr(&self, i: u64) -> Result<u64, Error> {
        self.table
            .checked_add(i.wrapping_mul(ENTRY_BYTES))
            .ok_or(MALFORMED)
    }

    /// A `datarel` `sdata4` value as an address.
    fn datarel(&self, bytes: [u8; 4]) -> u64 {
        self.hdr
            .wrapping_add(i32::from_le_bytes(bytes) as i64 as u64)
    }

    /// The function start of entry `i` (one 4-byte probe).
    fn start_of<M: UnwindMemory>(&self, mem: &mut M, i: u64) -> Result<u64, Error> {
        let mut b = [0u8; 4];
        if !mem.read_probe(self.entry_addr(i)?, &mut b) {
            return Err(Error::Fault);
        }
        Ok(self.datarel(b))
    }

    /// The address of the FDE of the last function that starts at or before `pc`, or
    /// [`Error::NotFound`] if none does. The FDE may still not cover `pc` (a gap between
    /// functions): the caller checks.
    ///
    /// At most [`MAX_SEARCH_STEPS`] 4-byte probes and one read of up to [`SEARCH_TAIL`]
    /// entries. An unsorted (hostile) table yields some entry or `NotFound`, never more work.
    pub fn find_fde<M: UnwindMemory>(&self, mem: &mut M, pc: u64) -> Result<u64, Error> {
        if self.fde_count == 0 || self.fde_count > MAX_FDE_COUNT {
            return Err(Error::NotFound);
        }
        if self.start_of(mem, 0)? > pc {
            return Err(Error::NotFound);
        }
        // Invariant of the search: start(lo) <= pc, and the answer is in lo..hi.
        let mut lo = 0u64;
        let mut hi = self.fde_count;
        for _ in 0..MAX_SEARCH_STEPS {
            let width = hi.wrapping_sub(lo);
            if width <= SEARCH_TAIL {
                break;
            }
            let mid = lo.wrapping_add(width >> 1);
            if self.start_of(mem, mid)? <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // The tail: at most SEARCH_TAIL entries, one read.
        let n = hi.wrapping_sub(lo).min(SEARCH_TAIL) as usize;
        let mut buf = [0u8; (SEARCH_TAIL * ENTRY_BYTES) as usize];
        let bytes = buf
            .get_mut(..n.wrapping_mul(ENTRY_BYTES as usize))
            .ok_or(MALFORMED)?;
        if !mem.read_probe(self.entry_addr(lo)?, bytes) {
            return Err(Error::Fault);
        }
        let mut found = None;
        for entry in bytes.chunks_exact(ENTRY_BYTES as usize) {
            let (start, fde) = match entry {
                [a, b, c, d, e, f, g, h] => ([*a, *b, *c, *d], [*e, *f, *g, *h]),
                _ => break,
            };
            if self.datarel(start) <= pc {
                found = Some(self.datarel(fde));
            } else {
                break;
            }
        }
        found.ok_or(Error::NotFound)
    }
}
