// SPDX-License-Identifier: GPL-2.0
//! File offset → function, source line and inlined frames.
//!
//! Uses `object` to read the ELF program headers and the GNU build-id, and `addr2line`
//! (on `gimli`) for DWARF line tables and inlined subroutines, with the ELF symbol table
//! (or the dynamic one) as fallback. Names are demangled (Rust and C++).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use addr2line::Loader;
use object::{Object, ObjectSegment};

use crate::correlate::{FileEntry, FileId};
use crate::stats::Stats;

/// One function level of a symbolized address (inlined levels come first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymFrame {
    pub function: Option<String>,
    /// Offset from the function symbol's start (outermost level only).
    pub offset: Option<u64>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub inlined: bool,
}

/// Why a frame could not be symbolized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymError {
    FileNotFound,
    FileDeleted,
    BuildIdMismatch,
    NotElf,
    /// The offset is in no PT_LOAD segment of the file.
    NoSegment,
    /// No symbol or debug information covers the address.
    NoSymbol,
}

impl fmt::Display for SymError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SymError::FileNotFound => "file not found",
            SymError::FileDeleted => "file deleted",
            SymError::BuildIdMismatch => "build-id mismatch",
            SymError::NotElf => "not an ELF file",
            SymError::NoSegment => "offset outside PT_LOAD",
            SymError::NoSymbol => "no symbol",
        })
    }
}

pub type SymResult = Result<Rc<Vec<SymFrame>>, SymError>;

struct Segment {
    offset: u64,
    filesz: u64,
    vaddr: u64,
}

/// An ELF file that passed the build-id check.
pub struct ElfInfo {
    segments: Vec<Segment>,
    loader: Option<Loader>,
    /// Separate debug file (`/usr/lib/debug/.build-id/...`) when the file has no DWARF.
    debug: Option<Loader>,
}

impl ElfInfo {
    /// Load `path`: program headers, build-id check, DWARF/symbol loader.
    /// `expected` is the recorded build-id (lower-case hex, may be empty).
    pub fn open(
        path: &Path,
        expected: &str,
        sysroot: Option<&Path>,
    ) -> Result<(Self, bool), SymError> {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SymError::FileNotFound)
            }
            Err(_) => return Err(SymError::NotElf),
        };
        let obj = object::File::parse(&*data).map_err(|_| SymError::NotElf)?;
        let found = match obj.build_id() {
            Ok(Some(id)) => hex(id),
            _ => String::new(),
        };
        let verified = !expected.is_empty();
        if verified && !found.eq_ignore_ascii_case(expected) {
            return Err(SymError::BuildIdMismatch);
        }
        let segments = elf_load_segments(&obj);
        let has_dwarf = obj.section_by_name(".debug_info").is_some();
        let debug = if !has_dwarf && !found.is_empty() && found.len() > 2 {
            let rel = format!(
                "usr/lib/debug/.build-id/{}/{}.debug",
                &found[..2],
                &found[2..]
            );
            let p = match sysroot {
                Some(r) => r.join(&rel),
                None => Path::new("/").join(&rel),
            };
            if p.exists() {
                Loader::new(&p).ok()
            } else {
                None
            }
        } else {
            None
        };
        drop(obj);
        let loader = Loader::new(path).ok();
        Ok((
            ElfInfo {
                segments,
                loader,
                debug,
            },
            verified,
        ))
    }

    /// File offset → virtual address (link-time, as in the symbol table and DWARF).
    pub fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| off >= s.offset && off - s.offset < s.filesz)
            .map(|s| s.vaddr.wrapping_add(off - s.offset))
    }

    /// Symbolize a file offset. `is_return` selects `addr - 1` for the lookup (a return
    /// address points after the call).
    pub fn symbolize(&self, off: u64, is_return: bool) -> Result<Vec<SymFrame>, SymError> {
        let vaddr = self.offset_to_vaddr(off).ok_or(SymError::NoSegment)?;
        let probe = if is_return {
            vaddr.saturating_sub(1)
        } else {
            vaddr
        };
        let mut out = Vec::new();
        let dwarf = self.debug.as_ref().or(self.loader.as_ref());
        if let Some(l) = dwarf {
            if let Ok(mut it) = l.find_frames(probe) {
                while let Ok(Some(f)) = it.next() {
                    let function = f
                        .function
                        .as_ref()
                        .and_then(|n| n.demangle().ok())
                        .map(|s| s.into_owned());
                    let (file, line) = match &f.location {
                        Some(loc) => (loc.file.map(str::to_string), loc.line),
                        None => (None, None),
                    };
                    out.push(SymFrame {
                        function,
                        offset: None,
                        file,
                        line,
                        inlined: true,
                    });
                }
            }
        }
        let sym = self
            .loader
            .as_ref()
            .and_then(|l| {
                l.find_symbol_info(probe)
                    .map(|s| (s.name().to_string(), s.address()))
            })
            .or_else(|| {
                self.debug.as_ref().and_then(|l| {
                    l.find_symbol_info(probe)
                        .map(|s| (s.name().to_string(), s.address()))
                })
            });
        if out.is_empty() {
            if sym.is_none() {
                return Err(SymError::NoSymbol);
            }
            out.push(SymFrame {
                function: None,
                offset: None,
                file: None,
                line: None,
                inlined: true,
            });
        }
        if let Some(last) = out.last_mut() {
            last.inlined = false;
            if let Some((name, addr)) = &sym {
                if last.function.is_none() {
                    last.function = Some(addr2line::demangle_auto(name.into(), None).into_owned());
                }
                last.offset = vaddr.checked_sub(*addr);
            }
        }
        Ok(out)
    }
}

fn elf_load_segments(obj: &object::File<'_>) -> Vec<Segment> {
    // object's segments() iterates PT_LOAD program headers for ELF
    obj.segments()
        .map(|s| {
            let (offset, filesz) = s.file_range();
            Segment {
                offset,
                filesz,
                vaddr: s.address(),
            }
        })
        .filter(|s| s.filesz > 0)
        .collect()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Caches loaded files (by [`FileId`]) and symbolized addresses.
pub struct Symbolizer {
    sysroot: Option<PathBuf>,
    files: HashMap<FileId, Result<Rc<ElfInfo>, SymError>>,
    cache: HashMap<(FileId, u64, bool), SymResult>,
    /// Turn off the address cache (benchmarks of the raw lookup speed).
    pub use_cache: bool,
}

impl Symbolizer {
    pub fn new(sysroot: Option<PathBuf>) -> Self {
        Symbolizer {
            sysroot,
            files: HashMap::new(),
            cache: HashMap::new(),
            use_cache: true,
        }
    }

    /// The path on this machine for a path recorded in the trace.
    pub fn host_path(&self, recorded: &str) -> PathBuf {
        match &self.sysroot {
            Some(r) => r.join(recorded.trim_start_matches('/')),
            None => PathBuf::from(recorded),
        }
    }

    fn file(
        &mut self,
        id: FileId,
        entry: &FileEntry,
        stats: &mut Stats,
    ) -> Result<Rc<ElfInfo>, SymError> {
        if let Some(r) = self.files.get(&id) {
            return r.clone();
        }
        let path = self.host_path(&entry.path);
        let r = match ElfInfo::open(&path, &entry.build_id, self.sysroot.as_deref()) {
            Ok((info, verified)) => {
                if !verified {
                    if entry.deleted {
                        // the path now names some other file: without a build-id we
                        // cannot tell it is the one that was mapped
                        stats.files_not_found += 1;
                        Err(SymError::FileDeleted)
                    } else {
                        stats.files_unverified += 1;
                        Ok(Rc::new(info))
                    }
                } else {
                    Ok(Rc::new(info))
                }
            }
            Err(e) => {
                match e {
                    SymError::FileNotFound if entry.deleted => {
                        stats.files_not_found += 1;
                        return self.remember(id, Err(SymError::FileDeleted));
                    }
                    SymError::FileNotFound => stats.files_not_found += 1,
                    SymError::BuildIdMismatch => stats.files_build_id_mismatch += 1,
                    _ => stats.files_unreadable += 1,
                }
                Err(e)
            }
        };
        self.remember(id, r)
    }

    fn remember(
        &mut self,
        id: FileId,
        r: Result<Rc<ElfInfo>, SymError>,
    ) -> Result<Rc<ElfInfo>, SymError> {
        self.files.insert(id, r.clone());
        r
    }

    /// Symbolize frame `offset` of file `id`. `is_return` is true for every frame but the
    /// first of a stack.
    pub fn symbolize(
        &mut self,
        id: FileId,
        entry: &FileEntry,
        offset: u64,
        is_return: bool,
        stats: &mut Stats,
    ) -> SymResult {
        let key = (id, offset, is_return);
        if self.use_cache {
            if let Some(r) = self.cache.get(&key) {
                return r.clone();
            }
        }
        let r = self
            .file(id, entry, stats)
            .and_then(|f| f.symbolize(offset, is_return).map(Rc::new));
        if self.use_cache {
            self.cache.insert(key, r.clone());
        }
        r
    }
}
