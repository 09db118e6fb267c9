// SPDX-License-Identifier: GPL-2.0
//! `.eh_frame` entries: CIEs (Common Information Entries) and FDEs (Frame Description
//! Entries), read through [`UnwindMemory`] at their runtime addresses.
//!
//! Entry: `length: u32` (`0xffffffff`: a `u64` extended length follows; 0: the section
//! terminator), then `id: u32` (0 in a CIE; in an FDE, the distance back from this field to
//! its CIE). CIE: `version, augmentation string, [address size, segment size (v4)],
//! code_alignment_factor (uleb), data_alignment_factor (sleb), return address register
//! (byte in v1, uleb after), [augmentation data ('z')], initial instructions`. FDE:
//! `pc_begin, pc_range, [augmentation data ('z')], instructions`.

use super::encoding::{check_encoding, read_encoded, read_format, DW_EH_PE_ABSPTR};
use super::memory::{Cursor, UnwindMemory};
use super::regs::RA;
use super::{unsupported, Error, Unsupported, MALFORMED};

/// Longest entry accepted (no real CIE or FDE comes near; the largest in a distribution's
/// libraries are a few KiB): bounds any arithmetic on a hostile length.
pub const MAX_ENTRY_LEN: u64 = 1 << 20;
/// Longest augmentation string accepted, without its NUL (`zPLRSBG` is 7).
pub const MAX_AUGMENTATION_LEN: usize = 8;

/// A parsed CIE: what its FDEs need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cie {
    /// Runtime address of the entry (its length field).
    pub addr: u64,
    /// Version (1, 3 or 4).
    pub version: u8,
    /// Code alignment factor: the unit of `DW_CFA_advance_loc*`.
    pub code_align: u64,
    /// Data alignment factor: the unit of factored offsets.
    pub data_align: i64,
    /// Return address column (always 16 here).
    pub ra_reg: u64,
    /// Encoding of the FDEs' addresses (`R`; `DW_EH_PE_absptr` without it).
    pub fde_encoding: u8,
    /// Whether the CIE has augmentation data (`z`), so its FDEs do too.
    pub has_augmentation_data: bool,
    /// Whether its FDEs describe signal frames (`S`).
    pub signal: bool,
    /// Runtime address of the initial instructions.
    pub instructions: u64,
    /// Runtime address of the end of the entry.
    pub end: u64,
}

/// A parsed FDE and its CIE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fde {
    /// Runtime address of the entry (its length field).
    pub addr: u64,
    /// First PC covered.
    pub pc_begin: u64,
    /// First PC after the covered range.
    pub pc_end: u64,
    /// Runtime address of the CFA instructions.
    pub instructions: u64,
    /// Runtime address of the end of the entry.
    pub end: u64,
    /// The CIE.
    pub cie: Cie,
}

impl Fde {
    /// Whether `pc` is in `pc_begin..pc_end`.
    pub fn covers(&self, pc: u64) -> bool {
        self.pc_begin <= pc && pc < self.pc_end
    }
}

/// Reads the length of the entry at `addr`: returns its content's start and end.
fn entry_bounds<M: UnwindMemory>(mem: &mut M, addr: u64) -> Result<(u64, u64), Error> {
    let mut cur = Cursor::new(mem, addr, addr.checked_add(12).ok_or(MALFORMED)?);
    let len = match cur.u32()? {
        // The terminator (or an empty entry): not a CIE or FDE.
        0 => return Err(MALFORMED),
        0xffff_ffff => cur.u64()?,
        len => u64::from(len),
    };
    if len > MAX_ENTRY_LEN {
        return Err(MALFORMED);
    }
    let start = cur.pos();
    let end = start.checked_add(len).ok_or(MALFORMED)?;
    Ok((start, end))
}

/// Parses the CIE at runtime address `addr`.
pub fn parse_cie<M: UnwindMemory>(mem: &mut M, addr: u64) -> Result<Cie, Error> {
    let (start, end) = entry_bounds(mem, addr)?;
    let mut cur = Cursor::new(mem, start, end);
    if cur.u32()? != 0 {
        return Err(MALFORMED);
    }
    let version = cur.u8()?;
    if !matches!(version, 1 | 3 | 4) {
        return Err(unsupported(Unsupported::CieVersion));
    }
    // The augmentation string, NUL-terminated.
    let mut aug = [0u8; MAX_AUGMENTATION_LEN];
    let mut aug_len = 0;
    loop {
        let c = cur.u8()?;
        if c == 0 {
            break;
        }
        match aug.get_mut(aug_len) {
            Some(slot) => *slot = c,
            None => return Err(unsupported(Unsupported::Augmentation)),
        }
        aug_len += 1;
    }
    let aug = aug.get(..aug_len).unwrap_or(&[]);
    if version == 4 {
        let address_size = cur.u8()?;
        let segment_size = cur.u8()?;
        if address_size != 8 || segment_size != 0 {
            return Err(unsupported(Unsupported::CieVersion));
        }
    }
    let code_align = cur.uleb()?;
    let data_align = cur.sleb()?;
    let ra_reg = if version == 1 {
        u64::from(cur.u8()?)
    } else {
        cur.uleb()?
    };
    if ra_reg != u64::from(RA) {
        return Err(unsupported(Unsupported::ReturnAddressRegister));
    }
    let mut cie = Cie {
        addr,
        version,
        code_align,
        data_align,
        ra_reg,
        fde_encoding: DW_EH_PE_ABSPTR,
        has_augmentation_data: false,
        signal: false,
        instructions: 0,
        end,
    };
    match aug.split_first() {
        None => {}
        Some((b'z', letters)) => {
            cie.has_augmentation_data = true;
            let data_len = cur.uleb()?;
            let data_end = cur.pos().checked_add(data_len).ok_or(MALFORMED)?;
            if data_end > end {
                return Err(MALFORMED);
            }
            let data_start = cur.pos();
            let mut data = Cursor::new(&mut *cur.mem, data_start, data_end);
            for (i, &letter) in letters.iter().enumerate() {
                match letter {
                    b'R' => {
                        let enc = data.u8()?;
                        check_encoding(enc, false)?;
                        cie.fde_encoding = enc;
                    }
                    b'P' => {
                        // The personality routine: skipped (its pointer may be indirect).
                        let enc = data.u8()?;
                        read_format(&mut data, enc)?;
                    }
                    b'L' => {
                        data.u8()?;
                    }
                    b'S' => cie.signal = true,
                    // No data: AArch64 BTI, MTE tagged frames.
                    b'B' | b'G' => {}
                    _ => {
                        // An unknown letter: its data is skipped with the rest, unless the
                        // FDE encoding comes after it (its position is unknown then).
                        if letters.get(i..).unwrap_or(&[]).contains(&b'R') {
                            return Err(unsupported(Unsupported::Augmentation));
                        }
                        break;
                    }
                }
            }
            cie.instructions = data_end;
            return Ok(cie);
        }
        Some(_) => return Err(unsupported(Unsupported::Augmentation)),
    }
    cie.instructions = cur.pos();
    Ok(cie)
}

/// Parses the FDE at runtime address `addr` and its CIE.
pub fn parse_fde<M: UnwindMemory>(mem: &mut M, addr: u64) -> Result<Fde, Error> {
    let (start, end) = entry_bounds(mem, addr)?;
    let cie_ptr = Cursor::new(&mut *mem, start, end).u32()?;
    if cie_ptr == 0 {
        // A CIE, not an FDE.
        return Err(MALFORMED);
    }
    let cie_addr = start.checked_sub(u64::from(cie_ptr)).ok_or(MALFORMED)?;
    let cie = parse_cie(mem, cie_addr)?;
    let mut cur = Cursor::new(mem, start.wrapping_add(4), end);
    let pc_begin = read_encoded(&mut cur, cie.fde_encoding, None)?;
    let pc_range = read_format(&mut cur, cie.fde_encoding)?;
    let pc_end = pc_begin.checked_add(pc_range).ok_or(MALFORMED)?;
    if cie.has_augmentation_data {
        let len = cur.uleb()?;
        cur.skip(len)?;
    }
    Ok(Fde {
        addr,
        pc_begin,
        pc_end,
        instructions: cur.pos(),
        end,
        cie,
    })
}
