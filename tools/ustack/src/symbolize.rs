// SPDX-License-Identifier: GPL-2.0
//! File offset → function, source line and inlined frames.
//!
//! Uses `object` to read the ELF program headers and the GNU build-id, and `addr2line`
//! (on `gimli`) for DWARF line tables and inlined subroutines, with the ELF symbol table
//! (or the dynamic one) as fallback. Names are demangled (Rust and C++).
//!
//! The paths come from the trace, which is untrusted: every file is read once, through
//! [`read_regular_file`] (regular files only, bounded), and the symbol tables and DWARF
//! are built from that copy. addr2line's `Loader` is not used since it opens (and maps)
//! the file, its `.dwp` and its `.dwo` files by path itself.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use addr2line::gimli::{self, Reader as _};
use addr2line::{Context, FrameIter, LookupContinuation as _, LookupResult, SplitDwarfLoad};
use object::read::{SymbolMap, SymbolMapEntry};
use object::{Object, ObjectSection, ObjectSegment};

use crate::correlate::{FileEntry, FileId};
use crate::reader::RcReader;
use crate::stats::Stats;

/// Largest file read (`--max-file-size`). The ELF files of big programs with full debug
/// information reach a few hundred MB; a trace naming anything larger is not followed.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 2 << 30;

// `O_NONBLOCK` (opening a FIFO does not wait for a writer) and `O_NOCTTY` (opening a
// terminal does not make it the controlling one). The crate does not depend on `libc`:
// these are the values of Linux's asm-generic fcntl.h, which x86-64 and the other
// architectures listed use (alpha, mips, parisc and sparc have others).
#[cfg(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "aarch64",
        target_arch = "arm",
        target_arch = "riscv64",
        target_arch = "riscv32",
        target_arch = "powerpc64",
        target_arch = "powerpc",
        target_arch = "s390x",
        target_arch = "loongarch64"
    )
))]
mod oflags {
    pub const O_NONBLOCK: i32 = 0o4000;
    pub const O_NOCTTY: i32 = 0o400;
}
#[cfg(not(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "aarch64",
        target_arch = "arm",
        target_arch = "riscv64",
        target_arch = "riscv32",
        target_arch = "powerpc64",
        target_arch = "powerpc",
        target_arch = "s390x",
        target_arch = "loongarch64"
    )
)))]
compile_error!("ustack: set O_NONBLOCK and O_NOCTTY of this target in symbolize.rs");

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

/// Why a file that exists was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A FIFO, device, socket or directory (symlinks are followed).
    NotRegular,
    /// Larger than the bound ([`Symbolizer::max_file_size`]).
    TooLarge,
    /// Opening or reading it failed (permissions, I/O error).
    Unreadable,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::NotRegular => "not a regular file",
            Refusal::TooLarge => "file too large",
            Refusal::Unreadable => "file unreadable",
        })
    }
}

/// Why a frame could not be symbolized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymError {
    FileNotFound,
    FileDeleted,
    /// The file exists but was not read (see [`read_regular_file`]).
    Refused(Refusal),
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
            SymError::Refused(r) => return r.fmt(f),
            SymError::BuildIdMismatch => "build-id mismatch",
            SymError::NotElf => "not an ELF file",
            SymError::NoSegment => "offset outside PT_LOAD",
            SymError::NoSymbol => "no symbol",
        })
    }
}

pub type SymResult = Result<Rc<Vec<SymFrame>>, SymError>;

/// Read the file at `path` (a path from the trace: untrusted) if it is a regular file
/// (symlinks followed) of at most `max_size` bytes.
///
/// The path is looked at with stat() first, so that no device, FIFO or socket is opened
/// at all in the normal case (opening some devices has effects). That check is only a
/// filter: the file is then opened with `O_NONBLOCK | O_NOCTTY` (a FIFO put there in the
/// meantime cannot block the open) and the check that counts is made with fstat() on the
/// opened file. The read is bounded as well, since a file can grow after fstat() or hold
/// more than its size says (procfs).
pub fn read_regular_file(path: &Path, max_size: u64) -> Result<Vec<u8>, SymError> {
    check_metadata(&std::fs::metadata(path).map_err(open_error)?, max_size)?;
    let (f, len) = open_regular(path, max_size)?;
    read_bounded(f, len, max_size)
}

/// Open `path` without blocking and return it with its size if the opened file is a
/// regular file of at most `max_size` bytes.
fn open_regular(path: &Path, max_size: u64) -> Result<(File, u64), SymError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(oflags::O_NONBLOCK | oflags::O_NOCTTY)
        .open(path)
        .map_err(open_error)?;
    let meta = f
        .metadata()
        .map_err(|_| SymError::Refused(Refusal::Unreadable))?;
    check_metadata(&meta, max_size)?;
    Ok((f, meta.len()))
}

fn check_metadata(meta: &Metadata, max_size: u64) -> Result<(), SymError> {
    if !meta.file_type().is_file() {
        Err(SymError::Refused(Refusal::NotRegular))
    } else if meta.len() > max_size {
        Err(SymError::Refused(Refusal::TooLarge))
    } else {
        Ok(())
    }
}

fn open_error(e: std::io::Error) -> SymError {
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => SymError::FileNotFound,
        _ => SymError::Refused(Refusal::Unreadable),
    }
}

/// Read at most `max_size` bytes of `f` (`len` is its size from fstat()); more is refused.
fn read_bounded(f: File, len: u64, max_size: u64) -> Result<Vec<u8>, SymError> {
    let mut data = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|n| data.try_reserve_exact(n).ok())
        .ok_or(SymError::Refused(Refusal::TooLarge))?;
    f.take(max_size.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|_| SymError::Refused(Refusal::Unreadable))?;
    if data.len() as u64 > max_size {
        return Err(SymError::Refused(Refusal::TooLarge));
    }
    Ok(data)
}

struct Segment {
    offset: u64,
    filesz: u64,
    vaddr: u64,
}

/// A symbol table entry that owns its name.
struct Sym {
    address: u64,
    size: u64,
    name: Box<str>,
}

impl SymbolMapEntry for Sym {
    fn address(&self) -> u64 {
        self.address
    }
    fn size(&self) -> u64 {
        self.size
    }
}

/// The DWARF of one file, with the DWARF package (`FILE.dwp`) next to it if any.
struct Dwarf {
    ctx: Context<RcReader>,
    dwp: Option<gimli::DwarfPackage<RcReader>>,
}

/// What is looked up in one ELF file: its symbol table and its DWARF.
struct Tables {
    symbols: SymbolMap<Sym>,
    dwarf: Option<Dwarf>,
}

impl Tables {
    /// `dwp` is the path of the DWARF package to try.
    fn new(obj: &object::File<'_>, dwp: Option<&Path>, max_size: u64) -> Self {
        let symbols = SymbolMap::new(
            obj.symbol_map()
                .symbols()
                .iter()
                .map(|s| Sym {
                    address: s.address(),
                    size: s.size(),
                    name: s.name().into(),
                })
                .collect(),
        );
        let dwarf = (|| {
            let endian = endian(obj);
            let mut dwarf =
                gimli::Dwarf::load(|id| section(obj, Some(id.name()), endian, max_size)).ok()?;
            dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
            let ctx = Context::from_dwarf(dwarf).ok()?;
            let dwp = dwp.and_then(|p| load_dwp(p, max_size));
            Some(Dwarf { ctx, dwp })
        })();
        Tables { symbols, dwarf }
    }

    fn symbol(&self, probe: u64) -> Option<(&str, u64)> {
        self.symbols
            .containing(probe)
            .map(|s| (&*s.name, s.address))
    }
}

fn endian(obj: &object::File<'_>) -> gimli::RunTimeEndian {
    if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    }
}

/// Section `name` of `obj`, decompressed, as a reader of its own (empty if absent). A
/// section that would decompress to more than `max_size` bytes is an error (the DWARF of
/// the file is not used then). Executables and shared objects carry no relocations for
/// their debug sections.
fn section(
    obj: &object::File<'_>,
    name: Option<&str>,
    endian: gimli::RunTimeEndian,
    max_size: u64,
) -> Result<RcReader, gimli::Error> {
    let data: Rc<[u8]> = match name.and_then(|n| obj.section_by_name(n)) {
        Some(s) => {
            let c = s.compressed_data().map_err(|_| gimli::Error::Io)?;
            if c.uncompressed_size > max_size {
                return Err(gimli::Error::Io);
            }
            Rc::from(&*c.decompress().map_err(|_| gimli::Error::Io)?)
        }
        None => Rc::from(&[][..]),
    };
    Ok(RcReader::new(data, endian))
}

fn load_dwp(path: &Path, max_size: u64) -> Option<gimli::DwarfPackage<RcReader>> {
    let data = read_regular_file(path, max_size).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    let endian = endian(&obj);
    let empty = RcReader::new(Rc::from(&[][..]), endian);
    gimli::DwarfPackage::load(|id| section(&obj, id.dwo_name(), endian, max_size), empty).ok()
}

/// `FILE.dwp` for `FILE`, `FILE.so.dwp` for `FILE.so` (where the Loader of addr2line
/// looks).
fn dwp_path(path: &Path) -> PathBuf {
    let mut ext = path.extension().unwrap_or_default().to_os_string();
    if !ext.is_empty() {
        ext.push(".");
    }
    ext.push("dwp");
    path.with_extension(ext)
}

/// An ELF file that passed the build-id check.
pub struct ElfInfo {
    segments: Vec<Segment>,
    main: Tables,
    /// Separate debug file (`/usr/lib/debug/.build-id/...`) when the file has no DWARF.
    debug: Option<Tables>,
    /// Why the separate debug file, which exists, was not read.
    pub debug_refused: Option<Refusal>,
    /// Bound for the split DWARF (`.dwo`) files read on demand.
    max_size: u64,
}

impl ElfInfo {
    /// Load `path`: program headers, build-id check, DWARF and symbol tables. `expected`
    /// is the recorded build-id (lower-case hex, may be empty). Every file (this one, its
    /// separate debug file, DWARF package and split DWARF files) is read through
    /// [`read_regular_file`] with the bound `max_size`, and only once.
    pub fn open(
        path: &Path,
        expected: &str,
        sysroot: Option<&Path>,
        max_size: u64,
    ) -> Result<(Self, bool), SymError> {
        let data = read_regular_file(path, max_size)?;
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
        let mut debug_refused = None;
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
            match read_regular_file(&p, max_size) {
                Ok(d) => object::File::parse(&*d)
                    .ok()
                    .map(|o| Tables::new(&o, Some(&dwp_path(&p)), max_size)),
                Err(SymError::Refused(r)) => {
                    debug_refused = Some(r);
                    None
                }
                Err(_) => None,
            }
        } else {
            None
        };
        let main = Tables::new(&obj, Some(&dwp_path(path)), max_size);
        Ok((
            ElfInfo {
                segments,
                main,
                debug,
                debug_refused,
                max_size,
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

    /// The frames at `probe`, loading split DWARF (from the package or a `.dwo` file)
    /// when a unit needs it.
    fn find_frames<'a>(&self, d: &'a Dwarf, probe: u64) -> Option<FrameIter<'a, RcReader>> {
        let mut r = d.ctx.find_frames(probe);
        loop {
            match r {
                LookupResult::Output(o) => return o.ok(),
                LookupResult::Load { load, continuation } => {
                    r = continuation.resume(self.load_dwo(d, &load));
                }
            }
        }
    }

    // addr2line wants an `Arc` here; the context, like the rest of the symbolizer, stays
    // on one thread
    #[allow(clippy::arc_with_non_send_sync)]
    fn load_dwo(
        &self,
        d: &Dwarf,
        load: &SplitDwarfLoad<RcReader>,
    ) -> Option<Arc<gimli::Dwarf<RcReader>>> {
        if let Some(cu) = d
            .dwp
            .as_ref()
            .and_then(|p| p.find_cu(load.dwo_id, &load.parent).ok().flatten())
        {
            return Some(Arc::new(cu));
        }
        let mut path = PathBuf::new();
        if let Some(dir) = &load.comp_dir {
            path.push(OsStr::from_bytes(&dir.to_slice().ok()?));
        }
        path.push(OsStr::from_bytes(&load.path.as_ref()?.to_slice().ok()?));
        let data = read_regular_file(&path, self.max_size).ok()?;
        let obj = object::File::parse(&*data).ok()?;
        let endian = endian(&obj);
        let mut dwo =
            gimli::Dwarf::load(|id| section(&obj, id.dwo_name(), endian, self.max_size)).ok()?;
        let header = dwo.units().next().ok()??;
        if dwo.unit(header).ok()?.dwo_id != Some(load.dwo_id) {
            return None;
        }
        dwo.make_dwo(&load.parent);
        Some(Arc::new(dwo))
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
        let dwarf = self
            .debug
            .as_ref()
            .and_then(|t| t.dwarf.as_ref())
            .or(self.main.dwarf.as_ref());
        if let Some(d) = dwarf {
            if let Some(mut it) = self.find_frames(d, probe) {
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
            .main
            .symbol(probe)
            .or_else(|| self.debug.as_ref().and_then(|t| t.symbol(probe)));
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
            if let Some((name, addr)) = sym {
                if last.function.is_none() {
                    last.function = Some(addr2line::demangle_auto(name.into(), None).into_owned());
                }
                last.offset = vaddr.checked_sub(addr);
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
    /// Files larger than this are refused (`--max-file-size`, default
    /// [`DEFAULT_MAX_FILE_SIZE`]).
    pub max_file_size: u64,
}

impl Symbolizer {
    pub fn new(sysroot: Option<PathBuf>) -> Self {
        Symbolizer {
            sysroot,
            files: HashMap::new(),
            cache: HashMap::new(),
            use_cache: true,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
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
        let r = match ElfInfo::open(
            &path,
            &entry.build_id,
            self.sysroot.as_deref(),
            self.max_file_size,
        ) {
            Ok((info, verified)) => {
                if let Some(why) = info.debug_refused {
                    // the frames fall back to the file's own symbol table
                    stats.count_refusal(why);
                }
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
                    SymError::Refused(why) => stats.count_refusal(why),
                    _ => stats.files_not_elf += 1,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ustack-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn open_does_not_block_on_a_fifo() {
        // a FIFO put in place after the stat() filter: open() must not wait for a writer,
        // and fstat() refuses it
        let d = tmp("fifo");
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let (tx, rx) = mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(open_regular(&p, DEFAULT_MAX_FILE_SIZE).map(|(_, len)| len));
        });
        let r = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("open of a FIFO without a writer blocked");
        assert_eq!(r, Err(SymError::Refused(Refusal::NotRegular)));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn read_is_bounded() {
        // a file that grew after fstat(): what is read counts, not the size seen
        let d = tmp("grow");
        let p = d.join("f");
        std::fs::write(&p, [7u8; 20]).unwrap();
        let open = || File::open(&p).unwrap();
        assert_eq!(
            read_bounded(open(), 10, 15),
            Err(SymError::Refused(Refusal::TooLarge))
        );
        assert_eq!(read_bounded(open(), 10, 20), Ok(vec![7u8; 20]));
        assert_eq!(
            read_regular_file(&p, 19),
            Err(SymError::Refused(Refusal::TooLarge))
        );
        assert_eq!(read_regular_file(&p, 20), Ok(vec![7u8; 20]));
        assert_eq!(
            read_regular_file(&d.join("none"), 20),
            Err(SymError::FileNotFound)
        );
        assert_eq!(
            read_regular_file(&p.join("below-a-file"), 20),
            Err(SymError::FileNotFound)
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
