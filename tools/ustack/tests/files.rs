// SPDX-License-Identifier: GPL-2.0
//! The paths of `file_cache` events are untrusted: only regular files (symlinks followed)
//! up to the size bound are read. A device, a FIFO without a writer, a directory or an
//! oversized file is refused and counted, promptly and without reading it; its frames stay
//! unsymbolized as those of a missing file do.
//!
//! Every case runs under a 10 s guard (a thread, or a child process that is killed), so a
//! blocking open fails the test instead of hanging it; the end-to-end test also kills the
//! tool if its memory grows past 512 MB.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};
use ustack::correlate::FileEntry;
use ustack::stats::Stats;
use ustack::symbolize::{Refusal, SymError, SymFrame, Symbolizer, DEFAULT_MAX_FILE_SIZE};

const PROG: &str = r#"
volatile int sink;
__attribute__((noinline)) int ut_leaf(int x)
{
	sink += x;
	return x * 3;
}
int main(int argc, char **argv)
{
	(void)argv;
	return ut_leaf(argc);
}
"#;

const GUARD: Duration = Duration::from_secs(10);

/// Run `f` on a thread; fail if it does not finish within [`GUARD`].
fn guarded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(GUARD) {
        Ok(v) => v,
        Err(RecvTimeoutError::Timeout) => panic!("{what}: still running after {GUARD:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// Symbolize `off` in the file at `path` (no build-id recorded), with the size bound `max`
/// (default if None), under the guard.
fn sym(path: &Path, off: u64, max: Option<u64>) -> (Result<Vec<SymFrame>, SymError>, Stats) {
    let path = path.to_path_buf();
    guarded(&format!("symbolizing {}", path.display()), move || {
        let mut s = Symbolizer::new(None);
        if let Some(m) = max {
            s.max_file_size = m;
        }
        let mut st = Stats::default();
        let e = FileEntry {
            path: path.to_string_lossy().into_owned(),
            build_id: String::new(),
            deleted: false,
        };
        let r = s.symbolize(0, &e, off, false, &mut st);
        (r.map(|v| (*v).clone()), st)
    })
}

fn refused(st: &Stats) -> (u64, u64, u64) {
    (
        st.files_refused_not_regular,
        st.files_refused_too_large,
        st.files_refused_unreadable,
    )
}

/// Check that `path` is refused as not a regular file, and counted as such only.
fn assert_not_regular(path: &Path) {
    // a small bound: even without the type check nothing near /dev/zero's size is read
    let (r, st) = sym(path, 0x1000, Some(1 << 20));
    assert_eq!(
        r,
        Err(SymError::Refused(Refusal::NotRegular)),
        "{}",
        path.display()
    );
    assert_eq!(refused(&st), (1, 0, 0), "{}: {st}", path.display());
    assert_eq!(st.files_refused(), 1);
    assert_eq!(st.files_not_found + st.files_not_elf, 0, "{st}");
    assert!(st.has_problems());
    let summary = st.to_string();
    assert!(
        summary
            .lines()
            .any(|l| l.starts_with("  files refused ") && l.ends_with(" 1 (not a regular file 1)")),
        "{summary}"
    );
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(ok.success());
}

fn prog(tag: &str) -> (PathBuf, PathBuf, u64) {
    let d = tmpdir(tag);
    let bin = build(&d, "cc", "prog", "c", PROG, &["-O0", "-g"]);
    let off = sym_offset(&bin, "ut_leaf");
    (d, bin, off)
}

#[test]
fn dev_zero_is_refused() {
    assert_not_regular(Path::new("/dev/zero"));
    let d = tmpdir("zero");
    let link = d.join("libzero.so");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    assert_not_regular(&link);
}

#[test]
fn fifo_without_writer_does_not_block() {
    let d = tmpdir("fifo");
    let fifo = d.join("prog");
    mkfifo(&fifo);
    assert_not_regular(&fifo);
    let link = d.join("link");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    assert_not_regular(&link);
}

#[test]
fn directory_is_refused() {
    assert_not_regular(&tmpdir("dir"));
}

#[test]
fn unreadable_file_is_refused() {
    // a regular file, but reading it fails (EIO at address 0), even as root
    let (r, st) = sym(Path::new("/proc/self/mem"), 0x1000, None);
    assert_eq!(r, Err(SymError::Refused(Refusal::Unreadable)));
    assert_eq!(refused(&st), (0, 0, 1), "{st}");
    assert!(st.to_string().contains(" 1 (unreadable 1)"), "{st}");
}

#[test]
fn symlink_to_elf_file_is_followed() {
    let (d, bin, off) = prog("symlink");
    let link = d.join("link-to-prog");
    std::os::unix::fs::symlink(&bin, &link).unwrap();
    for p in [&bin, &link] {
        let (r, st) = sym(p, off, None);
        let r = r.unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(r[0].function.as_deref(), Some("ut_leaf"), "{}", p.display());
        assert_eq!(r[0].offset, Some(0));
        assert_eq!(st.files_refused(), 0, "{st}");
        assert_eq!(st.files_unverified, 1);
    }
}

#[test]
fn file_over_the_bound_is_refused() {
    let (d, bin, off) = prog("big");
    let size = std::fs::metadata(&bin).unwrap().len();
    // the bound is inclusive
    let (r, st) = sym(&bin, off, Some(size));
    assert_eq!(r.unwrap()[0].function.as_deref(), Some("ut_leaf"));
    assert_eq!(st.files_refused(), 0);
    let (r, st) = sym(&bin, off, Some(size - 1));
    assert_eq!(r, Err(SymError::Refused(Refusal::TooLarge)));
    assert_eq!(refused(&st), (0, 1, 0), "{st}");
    assert!(st.to_string().contains(" 1 (too large 1)"), "{st}");
    // the ELF file followed by a sparse hole (nothing is written): refused by the size
    // fstat() gives, read if the bound allows
    let big = d.join("big");
    std::fs::copy(&bin, &big).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
    f.set_len((1 << 20) + 1).unwrap();
    drop(f);
    let (r, st) = sym(&big, off, Some(1 << 20));
    assert_eq!(r, Err(SymError::Refused(Refusal::TooLarge)));
    assert_eq!(refused(&st), (0, 1, 0), "{st}");
    let (r, st) = sym(&big, off, Some((1 << 20) + 1));
    assert_eq!(r.unwrap()[0].function.as_deref(), Some("ut_leaf"));
    assert_eq!(st.files_refused(), 0);
    // one byte over the default bound
    assert_eq!(Symbolizer::new(None).max_file_size, DEFAULT_MAX_FILE_SIZE);
    let f = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
    f.set_len(DEFAULT_MAX_FILE_SIZE + 1).unwrap();
    drop(f);
    let (r, st) = sym(&big, off, None);
    // (sparse, but a copy of target/ that does not know would write it out)
    std::fs::remove_file(&big).unwrap();
    assert_eq!(r, Err(SymError::Refused(Refusal::TooLarge)));
    assert_eq!(refused(&st), (0, 1, 0), "{st}");
}

#[test]
fn refused_file_is_counted_once() {
    // like a missing file: the file is opened once, every frame of it is unsymbolized
    let d = tmpdir("once");
    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let (rs, st) = guarded("symbolizing a FIFO twice", move || {
        let mut s = Symbolizer::new(None);
        let mut st = Stats::default();
        let e = FileEntry {
            path: fifo.to_string_lossy().into_owned(),
            build_id: "ab".repeat(20),
            deleted: false,
        };
        let rs: Vec<_> = [0x10, 0x20, 0x10]
            .iter()
            .map(|&o| s.symbolize(3, &e, o, true, &mut st).map(|_| ()))
            .collect();
        (rs, st)
    });
    assert!(rs
        .iter()
        .all(|r| *r == Err(SymError::Refused(Refusal::NotRegular))));
    assert_eq!(refused(&st), (1, 0, 0), "{st}");
}

#[test]
fn separate_debug_file_is_checked_too() {
    // /usr/lib/debug/.build-id/xx/yyyy.debug below the sysroot: used when it is a regular
    // file; a FIFO in its place is refused (counted) and the symbol table is used
    let root = tmpdir("debugfile");
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    let bin = build(
        &root.join("usr/bin"),
        "cc",
        "prog",
        "c",
        PROG,
        &["-O0", "-g", "-Wl,--build-id"],
    );
    let bid = build_id(&bin);
    let off = sym_offset(&bin, "ut_leaf");
    let dbg_dir = root.join(format!("usr/lib/debug/.build-id/{}", &bid[..2]));
    std::fs::create_dir_all(&dbg_dir).unwrap();
    let dbg = dbg_dir.join(format!("{}.debug", &bid[2..]));
    let run = |cmd: &str, args: &[&Path]| {
        let ok = Command::new(cmd).args(args).status().unwrap();
        assert!(ok.success(), "{cmd}");
    };
    run("objcopy", &[Path::new("--only-keep-debug"), &bin, &dbg]);
    run("strip", &[Path::new("--strip-debug"), &bin]);
    assert_eq!(build_id(&bin), bid);
    let sym_root = |root: PathBuf, bid: String| {
        guarded("symbolizing with a debug file", move || {
            let mut s = Symbolizer::new(Some(root));
            let mut st = Stats::default();
            let e = FileEntry {
                path: "/usr/bin/prog".into(),
                build_id: bid,
                deleted: false,
            };
            let r = s.symbolize(0, &e, off, false, &mut st);
            (r.map(|v| (*v).clone()), st)
        })
    };
    let (r, st) = sym_root(root.clone(), bid.clone());
    let r = r.unwrap();
    assert_eq!(r[0].function.as_deref(), Some("ut_leaf"));
    assert!(r[0].line.is_some(), "line from the debug file: {r:?}");
    assert_eq!(st.files_refused(), 0);
    std::fs::remove_file(&dbg).unwrap();
    mkfifo(&dbg);
    let (r, st) = sym_root(root.clone(), bid.clone());
    let r = r.unwrap();
    assert_eq!(r[0].function.as_deref(), Some("ut_leaf"));
    assert_eq!(r[0].line, None, "{r:?}");
    assert_eq!(refused(&st), (1, 0, 0), "{st}");
}

/// Run the ustack binary on `trace` (stdin) with `args`; kill it and fail if it runs for
/// longer than [`GUARD`] or its resident memory passes 512 MB.
fn ustack_guarded(args: &[&str], trace: &str) -> (bool, String, String) {
    use std::io::{Read, Write};
    let mut child = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut i = child.stdin.take().unwrap();
    let data = trace.as_bytes().to_vec();
    let w = std::thread::spawn(move || {
        let _ = i.write_all(&data);
    });
    let mut o = child.stdout.take().unwrap();
    let ro = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = o.read_to_string(&mut s);
        s
    });
    let mut e = child.stderr.take().unwrap();
    let re = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = e.read_to_string(&mut s);
        s
    });
    let status = format!("/proc/{}/status", child.id());
    let t = Instant::now();
    let mut max_rss_kb = 0u64;
    let code = loop {
        if let Some(c) = child.try_wait().unwrap() {
            break c;
        }
        let rss_kb = std::fs::read_to_string(&status)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0);
        max_rss_kb = max_rss_kb.max(rss_kb);
        if t.elapsed() > GUARD || rss_kb > 512 << 10 {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "ustack {args:?} killed after {:?}, resident {} MB",
                t.elapsed(),
                max_rss_kb >> 10
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    w.join().unwrap();
    (code.success(), ro.join().unwrap(), re.join().unwrap())
}

#[test]
fn cli_refuses_devices_fifos_directories_and_big_files() {
    // frame offsets 4 bytes into ut_leaf: inside it for the return addresses too
    let (d, bin, off) = prog("cli");
    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let link = d.join("link-to-prog");
    std::os::unix::fs::symlink(&bin, &link).unwrap();
    let big = d.join("big");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(DEFAULT_MAX_FILE_SIZE + 1).unwrap();
    drop(f);
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let files = [
        (1, "/dev/zero".to_string()),
        (2, path(&fifo)),
        (3, path(&d)),
        (4, path(&link)),
        (5, path(&big)),
        (6, path(&bin)),
    ];
    let mut evs: Vec<Ev> = files
        .iter()
        .map(|(h, p)| Ev::File {
            hash: *h,
            path: p.clone(),
            build_id: String::new(),
        })
        .collect();
    evs.push(Ev::Event {
        comm: "prog",
        pid: 7,
        name: "sys_enter_getppid",
        body: "NR 110 ()",
    });
    evs.push(Ev::Cookie {
        comm: "prog",
        pid: 7,
        cookie: 1,
    });
    evs.push(Ev::Stack {
        comm: "prog",
        pid: 7,
        cookie: 1,
        frames: files.iter().map(|(h, _)| (off + 4, *h)).collect(),
    });
    let text = render(&evs, Form::TraceCmd);
    let (ok, out, err) = ustack_guarded(&["--stats"], &text);
    assert!(ok, "{err}");
    let lines: Vec<_> = out.lines().skip(1).filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), files.len(), "{out}");
    for (i, why) in [
        (0, "not a regular file"),
        (1, "not a regular file"),
        (2, "not a regular file"),
        (4, "file too large"),
    ] {
        assert_eq!(
            lines[i],
            format!("    0x{:x} [{}] [{why}]", off + 4, files[i].1),
            "{out}"
        );
    }
    for i in [3, 5] {
        assert!(
            lines[i].starts_with("    ut_leaf+0x4 (")
                && lines[i].ends_with(&format!("[{}]", files[i].1)),
            "{out}"
        );
    }
    let row = err
        .lines()
        .find(|l| l.starts_with("  files refused "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        row.ends_with(" 4 (not a regular file 3, too large 1)"),
        "{row}"
    );
    // without --stats the summary still comes: refusals are problems
    let (ok, _, err) = ustack_guarded(&[], &text);
    assert!(ok && err.contains("files refused"), "{err}");
    // --max-file-size below the ELF file's size: it is refused too
    let small = (std::fs::metadata(&bin).unwrap().len() - 1).to_string();
    let (ok, out, err) = ustack_guarded(&["--stats", "--max-file-size", &small], &text);
    assert!(ok, "{err}");
    assert_eq!(out.matches("[file too large]").count(), 3, "{out}");
    assert!(
        err.contains(" 6 (not a regular file 3, too large 3)"),
        "{err}"
    );
    let (ok, _, err) = ustack_guarded(&["--max-file-size", "2X"], &text);
    assert!(!ok && err.contains("--max-file-size"), "{err}");
    std::fs::remove_file(&big).unwrap();
}
