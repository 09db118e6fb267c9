// SPDX-License-Identifier: GPL-2.0
//! Test helpers: build C programs with cc, find symbol addresses with `nm`, program
//! headers with `readelf`, call sites with `objdump`, and write traces in both text forms.
//! Expected offsets are always computed from the built ELF, never hard-coded.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory for one test.
pub fn tmpdir(tag: &str) -> PathBuf {
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ustack-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compile `src` (written as `name.c`/`name.cc`) in `dir` with `compiler` and `flags`.
pub fn build(
    dir: &Path,
    compiler: &str,
    name: &str,
    ext: &str,
    src: &str,
    flags: &[&str],
) -> PathBuf {
    let srcp = dir.join(format!("{name}.{ext}"));
    std::fs::write(&srcp, src).unwrap();
    let out = dir.join(name);
    run(Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&srcp));
    out
}

/// Line number (1-based) of the line of `src` containing `marker`.
pub fn line_of(src: &str, marker: &str) -> u32 {
    let hits: Vec<_> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker))
        .collect();
    assert_eq!(hits.len(), 1, "marker {marker} must occur once");
    hits[0].0 as u32 + 1
}

/// Symbol address from `nm` (defined text symbols).
pub fn nm_addr(bin: &Path, sym: &str) -> u64 {
    let out = run(Command::new("nm").arg(bin));
    let out = if out.trim().is_empty() || !out.contains(sym) {
        run(Command::new("nm").arg("-D").arg(bin))
    } else {
        out
    };
    for l in out.lines() {
        let f: Vec<_> = l.split_whitespace().collect();
        if f.len() == 3 && f[2] == sym && (f[1] == "T" || f[1] == "t") {
            return u64::from_str_radix(f[0], 16).unwrap();
        }
    }
    panic!("{sym} not in nm output of {}", bin.display());
}

/// PT_LOAD headers from `readelf -lW`: (offset, vaddr, filesz).
pub fn loads(bin: &Path) -> Vec<(u64, u64, u64)> {
    let out = run(Command::new("readelf").arg("-lW").arg(bin));
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    out.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            (hex(f[1]), hex(f[2]), hex(f[4]))
        })
        .collect()
}

/// Virtual address → file offset through the program headers.
pub fn vaddr_to_offset(bin: &Path, vaddr: u64) -> u64 {
    for (off, va, sz) in loads(bin) {
        if vaddr >= va && vaddr < va + sz {
            return vaddr - va + off;
        }
    }
    panic!("0x{vaddr:x} not in a PT_LOAD of {}", bin.display());
}

/// File offset of symbol `sym`.
pub fn sym_offset(bin: &Path, sym: &str) -> u64 {
    vaddr_to_offset(bin, nm_addr(bin, sym))
}

/// Return addresses (vaddr of the instruction after the call) of calls to `callee`
/// inside function `caller`, from `objdump -d`.
pub fn return_addrs(bin: &Path, caller: &str, callee: &str) -> Vec<u64> {
    let out = run(Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-w"])
        .arg(bin));
    let mut in_fn = false;
    let mut want_next = false;
    let mut res = Vec::new();
    for l in out.lines() {
        if l.ends_with(">:") {
            in_fn = l.contains(&format!("<{caller}>:"));
            continue;
        }
        let Some((addr, insn)) = l.split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        if want_next {
            res.push(addr);
            want_next = false;
        }
        if in_fn && insn.contains("call") && insn.contains(&format!("<{callee}")) {
            want_next = true;
        }
    }
    assert!(
        !res.is_empty(),
        "no call {caller} -> {callee} in {}",
        bin.display()
    );
    res
}

/// Address of the instruction after the first `mnemonic` in function `func`.
pub fn addr_after_insn(bin: &Path, func: &str, mnemonic: &str) -> u64 {
    let out = run(Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-w"])
        .arg(bin));
    let mut in_fn = false;
    let mut want_next = false;
    for l in out.lines() {
        if l.ends_with(">:") {
            in_fn = l.contains(&format!("<{func}>:"));
            continue;
        }
        let Some((addr, insn)) = l.split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        if want_next {
            return addr;
        }
        if in_fn && insn.split_whitespace().next() == Some(mnemonic) {
            want_next = true;
        }
    }
    panic!("no {mnemonic} in {func} of {}", bin.display());
}

/// The GNU build-id of `bin` (lower-case hex) from `readelf -n`, or "" if none.
pub fn build_id(bin: &Path) -> String {
    let out = run(Command::new("readelf").arg("-n").arg(bin));
    out.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Build ID: ")
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default()
}

/// A synthetic trace: events, cookies, stacks and file_cache records.
pub enum Ev<'a> {
    Event {
        comm: &'a str,
        pid: u32,
        name: &'a str,
        body: &'a str,
    },
    Cookie {
        comm: &'a str,
        pid: u32,
        cookie: u64,
    },
    Stack {
        comm: &'a str,
        pid: u32,
        cookie: u64,
        frames: Vec<(u64, u32)>,
    },
    File {
        hash: u32,
        path: String,
        build_id: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Form {
    /// `cat trace`: latency flags, multi-line stacks
    Tracefs,
    /// `trace-cmd report`: single-line stacks with __print_array arrays
    TraceCmd,
}

fn tag(h: u32) -> String {
    match h {
        0 => "anon".into(),
        0xffff_ffff => "nomap".into(),
        h => format!("{h:08x}"),
    }
}

/// Render events as trace text.
pub fn render(evs: &[Ev<'_>], form: Form) -> String {
    let mut s = String::new();
    if form == Form::Tracefs {
        s.push_str("# tracer: nop\n#\n# entries-in-buffer/entries-written: 9/9   #P:2\n#\n");
    } else {
        s.push_str("cpus=2\n");
    }
    for (i, e) in evs.iter().enumerate() {
        let ts = format!("{}.{:06}", 100 + i / 1000, i % 1000 * 100);
        let hdr = |comm: &str, pid: u32| match form {
            Form::Tracefs => format!("{comm:>16}-{pid:<7} [001] ..... {ts:>12}: "),
            Form::TraceCmd => format!("{comm:>16}-{pid:<5} [1] {ts}: "),
        };
        match e {
            Ev::Event {
                comm,
                pid,
                name,
                body,
            } => {
                s += &format!("{}{name}: {body}\n", hdr(comm, *pid));
            }
            Ev::Cookie { comm, pid, cookie } => {
                s += &format!(
                    "{}user_unwind_cookie: cookie=0x{cookie:x}\n",
                    hdr(comm, *pid)
                );
            }
            Ev::Stack {
                comm,
                pid,
                cookie,
                frames,
            } => match form {
                Form::Tracefs => {
                    s += &format!(
                        "{}user_unwind_stack: cookie=0x{cookie:x} nr={}\n",
                        hdr(comm, *pid),
                        frames.len()
                    );
                    for (o, h) in frames {
                        s += &format!(" => 0x{o:016x} [{}]\n", tag(*h));
                    }
                }
                Form::TraceCmd => {
                    let o: Vec<_> = frames.iter().map(|(o, _)| format!("0x{o:x}")).collect();
                    let h: Vec<_> = frames.iter().map(|(_, h)| format!("0x{h:x}")).collect();
                    s += &format!(
                        "{}user_unwind_stack:    cookie=0x{cookie:x} nr={} offsets={{{}}} hashes={{{}}}\n",
                        hdr(comm, *pid),
                        frames.len(),
                        o.join(","),
                        h.join(",")
                    );
                }
            },
            Ev::File {
                hash,
                path,
                build_id,
            } => {
                s += &format!(
                    "{}file_cache: hash=0x{hash:08x} path={path} build_id={build_id}\n",
                    hdr("demo", 1)
                );
            }
        }
    }
    s
}

/// Run the ustack binary with `args` and `stdin`; returns (status ok, stdout, stderr).
pub fn ustack(args: &[&str], stdin: &str) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut i = child.stdin.take().unwrap();
    let data = stdin.as_bytes().to_vec();
    let w = std::thread::spawn(move || {
        let _ = i.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    w.join().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
