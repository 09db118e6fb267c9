// SPDX-License-Identifier: GPL-2.0
//! Symbolization against ELF files built by the test: with and without DWARF, with and
//! without build-id, PIE and non-PIE, a shared library (also stripped) and C++.

mod common;

use common::*;
use std::path::Path;
use ustack::correlate::FileEntry;
use ustack::stats::Stats;
use ustack::symbolize::{SymError, SymFrame, Symbolizer};

const PROG: &str = r#"
#define NOINLINE __attribute__((noinline))
volatile int sink;
NOINLINE int ut_leaf(int x)
{ /* ENTRY:ut_leaf */
	sink += x;
	return x * 3;
}
NOINLINE void ut_touch(int x)
{
	sink = x;
}
NOINLINE int ut_middle(int x)
{ /* ENTRY:ut_middle */
	int r = ut_leaf(x + 1); /* CALL:ut_middle->ut_leaf */
	ut_touch(r); /* CALL:ut_middle->ut_touch */
	sink = 2;
	return r + 1;
}
static inline __attribute__((always_inline)) int ut_inlined(int x)
{
	return ut_leaf(x) + 5; /* CALL:ut_inlined->ut_leaf */
}
NOINLINE int ut_outer(int x)
{ /* ENTRY:ut_outer */
	int a = ut_middle(x); /* CALL:ut_outer->ut_middle */
	int b = ut_inlined(a); /* CALL:ut_outer->ut_inlined */
	return a + b;
}
int main(int argc, char **argv)
{
	(void)argv;
	return ut_outer(argc); /* CALL:main->ut_outer */
}
"#;

const LIB: &str = r#"
#define NOINLINE __attribute__((noinline))
volatile int lib_sink;
NOINLINE int lib_helper(int x)
{ /* ENTRY:lib_helper */
	lib_sink += x;
	return x + 11;
}
NOINLINE int lib_entry(int x)
{ /* ENTRY:lib_entry */
	return lib_helper(x) * 2; /* CALL:lib_entry->lib_helper */
}
"#;

const CXX: &str = r#"
namespace ns {
struct Widget {
	__attribute__((noinline)) int frob(int x);
};
int Widget::frob(int x)
{ /* ENTRY:frob */
	return x * 7;
}
}
int main(int argc, char **) { ns::Widget w; return w.frob(argc); }
"#;

fn entry(bin: &Path, build_id: &str) -> FileEntry {
    FileEntry {
        path: bin.to_string_lossy().into_owned(),
        build_id: build_id.into(),
        deleted: false,
    }
}

fn sym(bin: &Path, build_id: &str, off: u64, is_return: bool) -> Result<Vec<SymFrame>, SymError> {
    let mut s = Symbolizer::new(None);
    let mut st = Stats::default();
    s.symbolize(0, &entry(bin, build_id), off, is_return, &mut st)
        .map(|v| (*v).clone())
}

fn file_name(f: &SymFrame) -> Option<&str> {
    f.file.as_deref().map(|p| p.rsplit('/').next().unwrap_or(p))
}

/// Checks of a binary built from PROG with DWARF.
fn check_prog_dwarf(bin: &Path, bid: &str) {
    // function entry (frame 0: not a return address)
    for f in ["ut_leaf", "ut_middle", "ut_outer"] {
        let r = sym(bin, bid, sym_offset(bin, f), false).unwrap();
        assert_eq!(r.len(), 1, "{f}: {r:?}");
        assert_eq!(r[0].function.as_deref(), Some(f));
        assert_eq!(r[0].offset, Some(0));
        assert_eq!(r[0].line, Some(line_of(PROG, &format!("ENTRY:{f}"))), "{f}");
        assert_eq!(file_name(&r[0]), Some("prog.c"));
        assert!(!r[0].inlined);
    }
    // return address in ut_middle after the call to ut_leaf: line of the call
    let ra = return_addrs(bin, "ut_middle", "ut_leaf")[0];
    let off = vaddr_to_offset(bin, ra);
    let r = sym(bin, bid, off, true).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].function.as_deref(), Some("ut_middle"));
    assert_eq!(r[0].line, Some(line_of(PROG, "CALL:ut_middle->ut_leaf")));
    assert_eq!(r[0].offset, Some(ra - nm_addr(bin, "ut_middle")));
    // a call that ends its line: only addr - 1 gives the line of the call
    let ra = return_addrs(bin, "ut_middle", "ut_touch")[0];
    let r = sym(bin, bid, vaddr_to_offset(bin, ra), true).unwrap();
    assert_eq!(r[0].function.as_deref(), Some("ut_middle"));
    assert_eq!(r[0].line, Some(line_of(PROG, "CALL:ut_middle->ut_touch")));
    let r0 = sym(bin, bid, vaddr_to_offset(bin, ra), false).unwrap();
    assert_ne!(
        r0[0].line,
        Some(line_of(PROG, "CALL:ut_middle->ut_touch")),
        "frame 0 is not moved back"
    );
    let ra = return_addrs(bin, "ut_middle", "ut_leaf")[0];
    let off = vaddr_to_offset(bin, ra);
    // the same address symbolized as frame 0 must not be moved back by one
    let r0 = sym(bin, bid, off, false).unwrap();
    assert_eq!(r0[0].offset, Some(ra - nm_addr(bin, "ut_middle")));
    // inlined: the call to ut_leaf from ut_inlined, inlined into ut_outer
    let ra = return_addrs(bin, "ut_outer", "ut_leaf")[0];
    let r = sym(bin, bid, vaddr_to_offset(bin, ra), true).unwrap();
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0].function.as_deref(), Some("ut_inlined"));
    assert!(r[0].inlined);
    assert_eq!(r[0].line, Some(line_of(PROG, "CALL:ut_inlined->ut_leaf")));
    assert_eq!(r[1].function.as_deref(), Some("ut_outer"));
    assert!(!r[1].inlined);
    assert_eq!(r[1].line, Some(line_of(PROG, "CALL:ut_outer->ut_inlined")));
    assert_eq!(r[1].offset, Some(ra - nm_addr(bin, "ut_outer")));
}

#[test]
fn pie_with_dwarf_and_build_id() {
    let d = tmpdir("pie");
    let bin = build(
        &d,
        "cc",
        "prog",
        "c",
        PROG,
        &["-O0", "-g", "-Wl,--build-id"],
    );
    let bid = build_id(&bin);
    assert_eq!(bid.len(), 40, "sha1 build-id expected");
    check_prog_dwarf(&bin, &bid);
}

#[test]
fn non_pie_offsets_differ_from_addresses() {
    let d = tmpdir("nopie");
    let bin = build(
        &d,
        "cc",
        "prog",
        "c",
        PROG,
        &["-O0", "-g", "-no-pie", "-Wl,--build-id"],
    );
    let a = nm_addr(&bin, "ut_leaf");
    let off = sym_offset(&bin, "ut_leaf");
    assert_ne!(
        a, off,
        "non-PIE: vaddr and file offset must differ for this test to mean anything"
    );
    check_prog_dwarf(&bin, &build_id(&bin));
    // the virtual address used as an offset must not give ut_leaf
    let r = sym(&bin, &build_id(&bin), a, false);
    assert!(r.is_err() || r.unwrap()[0].function.as_deref() != Some("ut_leaf"));
}

#[test]
fn no_build_id_is_unverified_but_symbolized() {
    let d = tmpdir("nobid");
    let bin = build(
        &d,
        "cc",
        "prog",
        "c",
        PROG,
        &["-O0", "-g", "-Wl,--build-id=none"],
    );
    assert_eq!(build_id(&bin), "");
    check_prog_dwarf(&bin, "");
    let mut s = Symbolizer::new(None);
    let mut st = Stats::default();
    s.symbolize(
        0,
        &entry(&bin, ""),
        sym_offset(&bin, "ut_leaf"),
        false,
        &mut st,
    )
    .unwrap();
    assert_eq!(st.files_unverified, 1);
    // a recorded build-id the file does not have: mismatch, no guess
    let r = sym(
        &bin,
        "0123456789abcdef0123456789abcdef01234567",
        sym_offset(&bin, "ut_leaf"),
        false,
    );
    assert_eq!(r, Err(SymError::BuildIdMismatch));
}

#[test]
fn build_id_mismatch_and_missing_file() {
    let d = tmpdir("mismatch");
    let bin = build(
        &d,
        "cc",
        "prog",
        "c",
        PROG,
        &["-O0", "-g", "-Wl,--build-id"],
    );
    let off = sym_offset(&bin, "ut_leaf");
    let mut wrong = build_id(&bin);
    let last = if wrong.ends_with('0') { "1" } else { "0" };
    wrong.replace_range(39..40, last);
    assert_eq!(
        sym(&bin, &wrong, off, false),
        Err(SymError::BuildIdMismatch)
    );
    // upper-case recorded id still matches
    assert!(sym(&bin, &build_id(&bin).to_uppercase(), off, false).is_ok());
    let gone = d.join("does-not-exist");
    assert_eq!(sym(&gone, "", off, false), Err(SymError::FileNotFound));
    // deleted, no build-id to prove it is the same file: refuse
    let mut s = Symbolizer::new(None);
    let mut st = Stats::default();
    let e = FileEntry {
        path: bin.to_string_lossy().into(),
        build_id: String::new(),
        deleted: true,
    };
    assert_eq!(
        s.symbolize(0, &e, off, false, &mut st).map(|_| ()),
        Err(SymError::FileDeleted)
    );
    // deleted but the build-id proves it: symbolize
    let e = FileEntry {
        path: bin.to_string_lossy().into(),
        build_id: build_id(&bin),
        deleted: true,
    };
    assert!(s.symbolize(1, &e, off, false, &mut st).is_ok());
    // not an ELF file
    let txt = d.join("prog.c");
    assert_eq!(sym(&txt, "", 0, false), Err(SymError::NotElf));
}

#[test]
fn no_debug_info_uses_symbol_table() {
    let d = tmpdir("nodebug");
    let bin = build(&d, "cc", "prog", "c", PROG, &["-O0", "-Wl,--build-id"]);
    let bid = build_id(&bin);
    for f in ["ut_leaf", "ut_middle", "ut_outer"] {
        let r = sym(&bin, &bid, sym_offset(&bin, f), false).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].function.as_deref(), Some(f));
        assert_eq!(r[0].offset, Some(0));
        assert_eq!(r[0].line, None);
        assert_eq!(r[0].file, None);
    }
    let ra = return_addrs(&bin, "ut_middle", "ut_leaf")[0];
    let r = sym(&bin, &bid, vaddr_to_offset(&bin, ra), true).unwrap();
    assert_eq!(r[0].function.as_deref(), Some("ut_middle"));
    assert_eq!(r[0].offset, Some(ra - nm_addr(&bin, "ut_middle")));
}

#[test]
fn shared_library_with_and_without_symtab() {
    let d = tmpdir("shlib");
    let so = build(
        &d,
        "cc",
        "libut.so",
        "c",
        LIB,
        &["-O0", "-g", "-shared", "-fPIC", "-Wl,--build-id"],
    );
    let bid = build_id(&so);
    let r = sym(&so, &bid, sym_offset(&so, "lib_helper"), false).unwrap();
    assert_eq!(r[0].function.as_deref(), Some("lib_helper"));
    assert_eq!(r[0].line, Some(line_of(LIB, "ENTRY:lib_helper")));
    let ra = return_addrs(&so, "lib_entry", "lib_helper")[0];
    let r = sym(&so, &bid, vaddr_to_offset(&so, ra), true).unwrap();
    assert_eq!(r[0].function.as_deref(), Some("lib_entry"));
    assert_eq!(r[0].line, Some(line_of(LIB, "CALL:lib_entry->lib_helper")));
    assert_eq!(file_name(&r[0]), Some("libut.so.c"));

    // stripped: only the dynamic symbol table is left
    let stripped = d.join("libstripped.so");
    std::fs::copy(&so, &stripped).unwrap();
    let ok = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg(&stripped)
        .status()
        .unwrap();
    assert!(ok.success());
    assert_eq!(build_id(&stripped), bid, "strip keeps the build-id");
    let off = vaddr_to_offset(&so, ra);
    let r = sym(&stripped, &bid, off, true).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].function.as_deref(), Some("lib_entry"));
    assert_eq!(r[0].line, None);
    assert_eq!(r[0].offset, Some(ra - nm_addr(&so, "lib_entry")));
}

#[test]
fn shared_library_with_high_base() {
    // a library linked at a non-zero base: file offsets and addresses differ
    let d = tmpdir("shbase");
    let so = build(
        &d,
        "cc",
        "libbase.so",
        "c",
        LIB,
        &[
            "-O0",
            "-g",
            "-shared",
            "-fPIC",
            "-Wl,--build-id",
            "-Wl,-Ttext-segment=0x10000000",
        ],
    );
    let a = nm_addr(&so, "lib_helper");
    let off = sym_offset(&so, "lib_helper");
    assert_ne!(a, off);
    let r = sym(&so, &build_id(&so), off, false).unwrap();
    assert_eq!(r[0].function.as_deref(), Some("lib_helper"));
    assert_eq!(r[0].line, Some(line_of(LIB, "ENTRY:lib_helper")));
}

#[test]
fn cxx_names_are_demangled() {
    let d = tmpdir("cxx");
    for (name, flags) in [("cxx_g", &["-O0", "-g"][..]), ("cxx_nog", &["-O0"][..])] {
        let bin = build(&d, "g++", name, "cc", CXX, flags);
        let off = sym_offset(&bin, "_ZN2ns6Widget4frobEi");
        let r = sym(&bin, "", off, false).unwrap();
        assert_eq!(
            r[0].function.as_deref(),
            Some("ns::Widget::frob(int)"),
            "{name}"
        );
        if flags.contains(&"-g") {
            assert_eq!(r[0].line, Some(line_of(CXX, "ENTRY:frob")));
        }
    }
}

#[test]
fn sysroot_prefixes_paths() {
    let d = tmpdir("sysroot");
    std::fs::create_dir_all(d.join("usr/bin")).unwrap();
    let bin = build(
        &d.join("usr/bin"),
        "cc",
        "prog",
        "c",
        PROG,
        &["-O0", "-g", "-Wl,--build-id"],
    );
    let mut s = Symbolizer::new(Some(d.clone()));
    let mut st = Stats::default();
    let e = FileEntry {
        path: "/usr/bin/prog".into(),
        build_id: build_id(&bin),
        deleted: false,
    };
    let r = s
        .symbolize(0, &e, sym_offset(&bin, "ut_leaf"), false, &mut st)
        .unwrap();
    assert_eq!(r[0].function.as_deref(), Some("ut_leaf"));
    let mut s = Symbolizer::new(None);
    assert_eq!(
        s.symbolize(0, &e, 0x1000, false, &mut st).map(|_| ()),
        Err(SymError::FileNotFound),
        "without --sysroot /usr/bin/prog does not exist"
    );
}

#[test]
fn offset_outside_load_segments() {
    let d = tmpdir("noseg");
    let bin = build(&d, "cc", "prog", "c", PROG, &["-O0", "-g"]);
    let size = std::fs::metadata(&bin).unwrap().len();
    assert_eq!(
        sym(&bin, "", size + 0x100000, false),
        Err(SymError::NoSegment)
    );
}

const RUST_SRC: &str = r#"
#[inline(never)]
pub fn deep_fn(x: u64) -> u64 { x.wrapping_mul(31) ^ 7 } // ENTRY:deep_fn
fn main() {
    std::process::exit(deep_fn(std::env::args().count() as u64) as i32);
}
"#;

#[test]
fn rust_names_are_demangled() {
    let d = tmpdir("rust");
    for (name, dbg) in [("rtest_g", "-Cdebuginfo=2"), ("rtest_nog", "-Cdebuginfo=0")] {
        let src = d.join(format!("{name}.rs"));
        std::fs::write(&src, RUST_SRC).unwrap();
        let bin = d.join(name);
        let ok = std::process::Command::new("rustc")
            .args([
                "--edition=2021",
                "-Copt-level=1",
                dbg,
                "--crate-name",
                "rtest",
                "-o",
            ])
            .arg(&bin)
            .arg(&src)
            .status()
            .unwrap();
        assert!(ok.success());
        let nm = std::process::Command::new("nm").arg(&bin).output().unwrap();
        let nm = String::from_utf8_lossy(&nm.stdout);
        let mangled = nm
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .find(|s| s.contains("rtest") && s.contains("deep_fn"))
            .expect("mangled deep_fn")
            .to_string();
        assert!(
            mangled.starts_with("_ZN") || mangled.starts_with("_R"),
            "{mangled}"
        );
        let r = sym(&bin, "", sym_offset(&bin, &mangled), false).unwrap();
        assert_eq!(
            r.last().unwrap().function.as_deref(),
            Some("rtest::deep_fn"),
            "{name}"
        );
        if dbg.ends_with('2') {
            assert_eq!(
                r.last().unwrap().line,
                Some(line_of(RUST_SRC, "ENTRY:deep_fn"))
            );
        }
    }
}

/// The file is read into memory once (never mapped or reopened by path): compressed
/// debug sections are decompressed from that copy.
#[test]
fn compressed_debug_sections() {
    let d = tmpdir("gz");
    let bin = build(&d, "cc", "prog", "c", PROG, &["-O0", "-g", "-gz=zlib"]);
    let out = std::process::Command::new("readelf")
        .args(["-SW"])
        .arg(&bin)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let info = out.lines().find(|l| l.contains(".debug_info")).unwrap();
    assert!(
        info.split_whitespace().any(|f| f.contains('C')),
        "not compressed: {info}"
    );
    check_prog_dwarf(&bin, "");
}

/// Split DWARF: the inlined frames and function names are in the `.dwo` file, read with
/// the same checks as the file itself (a FIFO in its place neither blocks nor is read).
#[test]
fn split_dwarf_dwo_file() {
    let d = tmpdir("dwo");
    let bin = build(&d, "cc", "prog", "c", PROG, &["-O0", "-g", "-gsplit-dwarf"]);
    let dwo = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "dwo"))
        .expect("cc -gsplit-dwarf wrote no .dwo file");
    check_prog_dwarf(&bin, "");
    // without the .dwo only the line table of the skeleton unit and the symbol table are
    // left: no inlined frame
    let ra = return_addrs(&bin, "ut_outer", "ut_leaf")[0];
    let inlined = |bin: &Path| {
        let bin = bin.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = sym(&bin, "", vaddr_to_offset(&bin, ra), true).unwrap();
            let _ = tx.send(r.iter().filter(|f| f.inlined).count());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("symbolization blocked or failed")
    };
    assert_eq!(inlined(&bin), 1);
    let moved = d.join("moved.dwo");
    std::fs::rename(&dwo, &moved).unwrap();
    assert_eq!(inlined(&bin), 0);
    assert!(std::process::Command::new("mkfifo")
        .arg(&dwo)
        .status()
        .unwrap()
        .success());
    assert_eq!(inlined(&bin), 0);
}
