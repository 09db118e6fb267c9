// SPDX-License-Identifier: GPL-2.0
//! The `DW_EH_PE_*` pointer encodings of `.eh_frame` and `.eh_frame_hdr` (LSB, Linux
//! Standard Base Core Specification, "DWARF Extensions").
//!
//! An encoding byte is a format (low nibble: the size and signedness of the stored value)
//! and an application (bits 4–6: what the value is relative to); bit 7 (`indirect`) means
//! the value is the address of the pointer, which this unwinder never needs and does not
//! follow. `0xff` (`omit`) means no value.

use super::memory::{Cursor, UnwindMemory};
use super::{unsupported, Error, Unsupported};

/// The value is stored as an 8-byte absolute pointer.
pub const DW_EH_PE_ABSPTR: u8 = 0x00;
/// Unsigned LEB128.
pub const DW_EH_PE_ULEB128: u8 = 0x01;
/// Unsigned 2 bytes.
pub const DW_EH_PE_UDATA2: u8 = 0x02;
/// Unsigned 4 bytes.
pub const DW_EH_PE_UDATA4: u8 = 0x03;
/// Unsigned 8 bytes.
pub const DW_EH_PE_UDATA8: u8 = 0x04;
/// Signed LEB128.
pub const DW_EH_PE_SLEB128: u8 = 0x09;
/// Signed 2 bytes.
pub const DW_EH_PE_SDATA2: u8 = 0x0a;
/// Signed 4 bytes.
pub const DW_EH_PE_SDATA4: u8 = 0x0b;
/// Signed 8 bytes.
pub const DW_EH_PE_SDATA8: u8 = 0x0c;
/// Relative to the address of the value itself.
pub const DW_EH_PE_PCREL: u8 = 0x10;
/// Relative to the start of `.text` (not used on x86-64; unsupported).
pub const DW_EH_PE_TEXTREL: u8 = 0x20;
/// Relative to the data base: the start of `.eh_frame_hdr` in that section.
pub const DW_EH_PE_DATAREL: u8 = 0x30;
/// Relative to the start of the function (unsupported).
pub const DW_EH_PE_FUNCREL: u8 = 0x40;
/// Aligned to the pointer size (unsupported).
pub const DW_EH_PE_ALIGNED: u8 = 0x50;
/// The value is the address of the pointer (unsupported).
pub const DW_EH_PE_INDIRECT: u8 = 0x80;
/// No value.
pub const DW_EH_PE_OMIT: u8 = 0xff;

/// Reads a value in the format of `enc` (its low nibble) without applying anything. Any
/// application bits are ignored (the caller checked or does not care).
pub(crate) fn read_format<M: UnwindMemory>(cur: &mut Cursor<'_, M>, enc: u8) -> Result<u64, Error> {
    Ok(match enc & 0x0f {
        DW_EH_PE_ABSPTR | DW_EH_PE_UDATA8 | DW_EH_PE_SDATA8 => cur.u64()?,
        DW_EH_PE_ULEB128 => cur.uleb()?,
        DW_EH_PE_UDATA2 => u64::from(cur.u16()?),
        DW_EH_PE_UDATA4 => u64::from(cur.u32()?),
        DW_EH_PE_SLEB128 => cur.sleb()? as u64,
        DW_EH_PE_SDATA2 => cur.u16()? as i16 as i64 as u64,
        DW_EH_PE_SDATA4 => cur.u32()? as i32 as i64 as u64,
        _ => return Err(unsupported(Unsupported::Encoding)),
    })
}

/// Whether `enc` (not `omit`) is an encoding [`read_encoded`] can read.
pub(crate) fn check_encoding(enc: u8, has_data_base: bool) -> Result<(), Error> {
    let format_ok = matches!(
        enc & 0x0f,
        DW_EH_PE_ABSPTR
            | DW_EH_PE_ULEB128
            | DW_EH_PE_UDATA2
            | DW_EH_PE_UDATA4
            | DW_EH_PE_UDATA8
            | DW_EH_PE_SLEB128
            | DW_EH_PE_SDATA2
            | DW_EH_PE_SDATA4
            | DW_EH_PE_SDATA8
    );
    let application_ok = match enc & 0xf0 {
        0 | DW_EH_PE_PCREL => true,
        DW_EH_PE_DATAREL => has_data_base,
        _ => false,
    };
    if format_ok && application_ok {
        Ok(())
    } else {
        Err(unsupported(Unsupported::Encoding))
    }
}

/// Reads a pointer encoded with `enc` (not `omit`): `pcrel` is relative to the address of
/// the value, `datarel` to `data_base` (the start of `.eh_frame_hdr`; `None` outside it).
/// `indirect`, `textrel`, `funcrel` and `aligned` are unsupported.
pub(crate) fn read_encoded<M: UnwindMemory>(
    cur: &mut Cursor<'_, M>,
    enc: u8,
    data_base: Option<u64>,
) -> Result<u64, Error> {
    check_encoding(enc, data_base.is_some())?;
    let field = cur.pos();
    let value = read_format(cur, enc)?;
    Ok(match enc & 0x70 {
        DW_EH_PE_PCREL => field.wrapping_add(value),
        DW_EH_PE_DATAREL => data_base.unwrap_or(0).wrapping_add(value),
        _ => value,
    })
}
