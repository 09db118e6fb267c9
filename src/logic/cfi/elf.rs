// SPDX-License-Identifier: GPL-2.0
//! The ELF headers of a mapped file: what unwinding needs from them, once per file.
//!
//! From an ELF64 little-endian x86-64 file (`ET_EXEC` or `ET_DYN`: the ELF header and the
//! program headers; the module reads the first page, and the program headers apart when
//! they are not in it, or the vDSO image), the `PT_LOAD` segments and `PT_GNU_EH_FRAME`
//! (`.eh_frame_hdr`). The [`ElfInfo`] summary is what a per-file cache stores; with one
//! mapping of the file, [`ElfInfo::bias`] gives the load bias (runtime address minus
//! link-time address) of the whole file.

use super::unwinder::ModuleInfo;

/// Most `PT_LOAD` segments kept (a file usually has 2 to 5).
pub const MAX_LOADS: usize = 16;
/// `p_type` of a loadable segment.
pub const PT_LOAD: u32 = 1;
/// `p_flags` bit of an executable segment.
pub const PF_X: u32 = 1;
/// `p_type` of `.eh_frame_hdr`.
pub const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
/// Size of the ELF64 header.
pub const EHDR_SIZE: usize = 64;
/// Size of an ELF64 program header.
pub const PHDR_SIZE: usize = 56;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const EM_X86_64: u16 = 62;
/// `e_phnum` escape: the count is elsewhere (unsupported).
const PN_XNUM: u16 = 0xffff;

/// Why ELF headers were rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfError {
    /// The bytes end before the headers do ([`headers_len`] tells how many are needed).
    Truncated,
    /// No ELF magic, or not ELF version 1.
    NotElf,
    /// Not ELF64 little-endian.
    Class,
    /// Not x86-64.
    Machine,
    /// Neither `ET_EXEC` nor `ET_DYN`.
    Type,
    /// A program header size other than 56, or `PN_XNUM` program headers.
    ProgramHeaders,
    /// More than [`MAX_LOADS`] `PT_LOAD` segments.
    TooManyLoads,
}

/// A `PT_LOAD` segment: the file range `offset..offset + filesz` is mapped at `vaddr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Load {
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
}

/// What unwinding needs from a file's headers.
///
/// # Invariants
///
/// `nr_loads <= MAX_LOADS`; `loads[..nr_loads]` are the `PT_LOAD`s in header order; bit
/// `i` of `exec_mask` is set iff `loads[i]` has `PF_X`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfInfo {
    /// `e_type`: `ET_EXEC` (2) or `ET_DYN` (3).
    pub elf_type: u16,
    /// Link-time address of `.eh_frame_hdr` (`PT_GNU_EH_FRAME`'s `p_vaddr`), if any.
    pub eh_frame_hdr: Option<u64>,
    /// Its size (`p_memsz`).
    pub eh_frame_hdr_len: u64,
    nr_loads: u8,
    exec_mask: u16,
    loads: [Load; MAX_LOADS],
}

const _: () = assert!(MAX_LOADS <= 16, "exec_mask has 16 bits");

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Checks the ELF header; returns `(e_phoff, e_phnum)`.
fn check_header(bytes: &[u8]) -> Result<(u64, u16), ElfError> {
    let ident = bytes.get(..16).ok_or(ElfError::Truncated)?;
    if ident.get(..4) != Some(b"\x7fELF".as_slice()) || ident.get(6) != Some(&1) {
        return Err(ElfError::NotElf);
    }
    // EI_CLASS = ELFCLASS64, EI_DATA = ELFDATA2LSB.
    if ident.get(4) != Some(&2) || ident.get(5) != Some(&1) {
        return Err(ElfError::Class);
    }
    if bytes.len() < EHDR_SIZE {
        return Err(ElfError::Truncated);
    }
    let e_type = u16_at(bytes, 16).ok_or(ElfError::Truncated)?;
    if u16_at(bytes, 18) != Some(EM_X86_64) {
        return Err(ElfError::Machine);
    }
    if e_type != ET_EXEC && e_type != ET_DYN {
        return Err(ElfError::Type);
    }
    let phoff = u64_at(bytes, 32).ok_or(ElfError::Truncated)?;
    let phentsize = u16_at(bytes, 54).ok_or(ElfError::Truncated)?;
    let phnum = u16_at(bytes, 56).ok_or(ElfError::Truncated)?;
    if usize::from(phentsize) != PHDR_SIZE || phnum == PN_XNUM {
        return Err(ElfError::ProgramHeaders);
    }
    Ok((phoff, phnum))
}

/// How many bytes from the start of the file hold the ELF header and the program headers
/// (read that many, then call [`parse`]). Needs the first [`EHDR_SIZE`] bytes.
pub fn headers_len(bytes: &[u8]) -> Result<u64, ElfError> {
    let (phoff, table) = program_headers(bytes)?;
    // (program_headers() checked that the sum does not overflow.)
    Ok((phoff + table).max(EHDR_SIZE as u64))
}

/// Where the program headers are in the file: `(e_phoff, length)`, from the ELF header
/// (the first [`EHDR_SIZE`] bytes). Linkers put them right after the ELF header, but
/// tools that rewrite a file add a new table elsewhere: BOLT at a new segment tens of MiB
/// in (rustc's `librustc_driver`), `patchelf` at the end. A reader holding only the
/// file's first bytes reads the table there and calls [`parse_split`].
pub fn program_headers(bytes: &[u8]) -> Result<(u64, u64), ElfError> {
    let (phoff, phnum) = check_header(bytes)?;
    let table = u64::from(phnum).wrapping_mul(PHDR_SIZE as u64);
    phoff.checked_add(table).ok_or(ElfError::ProgramHeaders)?;
    Ok((phoff, table))
}

/// Parses the ELF and program headers at the start of `bytes`. The loop runs once per
/// program header: at most `e_phnum` (a `u16`), and only over headers inside `bytes`.
pub fn parse(bytes: &[u8]) -> Result<ElfInfo, ElfError> {
    let (phoff, phnum) = check_header(bytes)?;
    let phoff = usize::try_from(phoff).map_err(|_| ElfError::Truncated)?;
    let table_len = usize::from(phnum).wrapping_mul(PHDR_SIZE);
    let table_end = phoff.checked_add(table_len).ok_or(ElfError::Truncated)?;
    let table = bytes.get(phoff..table_end).ok_or(ElfError::Truncated)?;
    parse_table(bytes, phnum, table)
}

/// Parses the ELF header at the start of `header` with its program headers read apart,
/// into `table` (all of them: [`program_headers`]'s length from its `e_phoff`).
pub fn parse_split(header: &[u8], table: &[u8]) -> Result<ElfInfo, ElfError> {
    let (_, phnum) = check_header(header)?;
    parse_table(header, phnum, table)
}

/// The summary from a checked ELF header and its `phnum` program headers in `table`.
fn parse_table(header: &[u8], phnum: u16, table: &[u8]) -> Result<ElfInfo, ElfError> {
    if table.len() != usize::from(phnum).wrapping_mul(PHDR_SIZE) {
        return Err(ElfError::Truncated);
    }
    let e_type = u16_at(header, 16).ok_or(ElfError::Truncated)?;
    let mut info = ElfInfo {
        elf_type: e_type,
        eh_frame_hdr: None,
        eh_frame_hdr_len: 0,
        nr_loads: 0,
        exec_mask: 0,
        loads: [Load::default(); MAX_LOADS],
    };
    for ph in table.chunks_exact(PHDR_SIZE) {
        let p_type = u32_at(ph, 0).ok_or(ElfError::Truncated)?;
        let flags = u32_at(ph, 4).ok_or(ElfError::Truncated)?;
        let offset = u64_at(ph, 8).ok_or(ElfError::Truncated)?;
        let vaddr = u64_at(ph, 16).ok_or(ElfError::Truncated)?;
        let filesz = u64_at(ph, 32).ok_or(ElfError::Truncated)?;
        let memsz = u64_at(ph, 40).ok_or(ElfError::Truncated)?;
        match p_type {
            PT_LOAD => {
                let slot = info
                    .loads
                    .get_mut(usize::from(info.nr_loads))
                    .ok_or(ElfError::TooManyLoads)?;
                *slot = Load {
                    offset,
                    vaddr,
                    filesz,
                };
                if flags & PF_X != 0 {
                    info.exec_mask |= 1 << info.nr_loads;
                }
                // INVARIANT: the slot existed, so nr_loads < MAX_LOADS.
                info.nr_loads += 1;
            }
            PT_GNU_EH_FRAME if info.eh_frame_hdr.is_none() => {
                info.eh_frame_hdr = Some(vaddr);
                info.eh_frame_hdr_len = memsz;
            }
            _ => {}
        }
    }
    Ok(info)
}

impl ElfInfo {
    /// The `PT_LOAD` segments, in header order.
    pub fn loads(&self) -> &[Load] {
        self.loads.get(..usize::from(self.nr_loads)).unwrap_or(&[])
    }

    /// Whether the `i`th `PT_LOAD` is executable (`PF_X`).
    pub fn is_exec(&self, i: usize) -> bool {
        i < usize::from(self.nr_loads) && self.exec_mask.checked_shr(i as u32).unwrap_or(0) & 1 != 0
    }

    /// The load bias of the file, from one of its mappings: the mapping starts at
    /// `vma_start`, maps the file from `vma_file_offset` (`vm_pgoff * page_size`), and is
    /// executable or not (`vma_exec`, `VM_EXEC`). For the vDSO (mapped without a file), pass
    /// its start, 0 and `true`.
    ///
    /// The loaders (the kernel's `binfmt_elf`, `ld.so`) map each `PT_LOAD` from its
    /// page-aligned file offset (`p_offset & !(page_size - 1)`) at its page-aligned address
    /// (the page size, not `p_align`, is the unit: a 2 MiB `p_align` only moves the base),
    /// so the mapping belongs to a segment whose page-aligned file range holds
    /// `vma_file_offset` and whose `PF_X` matches `vma_exec`; then `bias = vma_start -
    /// vma_file_offset - (p_vaddr - p_offset)`.
    ///
    /// Two segments can share a file page (when the linker does not page-align them in the
    /// file: the read-only data and the RELRO segment of a usual `-z separate-code` layout
    /// often do), and nothing in one read-only mapping tells which one it maps. Such a
    /// mapping gives `None` unless the candidates agree or one of them starts at that very
    /// page (a mapping of the later segment starts there). An executable mapping, the one a
    /// PC is in, is never ambiguous in practice: use that one.
    ///
    /// `None` also if no segment maps that offset or `page_size` is not a power of two.
    /// The loop runs over at most [`MAX_LOADS`] segments.
    pub fn bias(
        &self,
        vma_start: u64,
        vma_file_offset: u64,
        vma_exec: bool,
        page_size: u64,
    ) -> Option<u64> {
        if !page_size.is_power_of_two() {
            return None;
        }
        let mask = !page_size.wrapping_sub(1);
        let bias_of = |load: &Load| {
            vma_start
                .wrapping_sub(vma_file_offset)
                .wrapping_sub(load.vaddr.wrapping_sub(load.offset))
        };
        // (bias, whether it is unique) among all candidates, and among those starting at
        // the mapping's page.
        let mut any: Option<(u64, bool)> = None;
        let mut at_page: Option<(u64, bool)> = None;
        for (i, load) in self.loads().iter().enumerate() {
            let start = load.offset & mask;
            let Some(end) = load.offset.checked_add(load.filesz) else {
                continue;
            };
            let exec = self.is_exec(i);
            if load.filesz == 0
                || exec != vma_exec
                || vma_file_offset < start
                || vma_file_offset >= end
            {
                continue;
            }
            let bias = bias_of(load);
            let merge = |acc: Option<(u64, bool)>| match acc {
                None => Some((bias, true)),
                Some((b, unique)) => Some((b, unique && b == bias)),
            };
            any = merge(any);
            if start == vma_file_offset {
                at_page = merge(at_page);
            }
        }
        match (any?, at_page) {
            ((bias, true), _) => Some(bias),
            (_, Some((bias, true))) => Some(bias),
            _ => None,
        }
    }

    /// The [`ModuleInfo`] of the file loaded with `bias`, under cache id `id`; `None`
    /// without `.eh_frame_hdr`.
    pub fn module(&self, id: u64, bias: u64) -> Option<ModuleInfo> {
        Some(ModuleInfo {
            id,
            bias,
            eh_frame_hdr: self.eh_frame_hdr?,
            eh_frame_hdr_len: self.eh_frame_hdr_len,
        })
    }
}
