// SPDX-License-Identifier: GPL-2.0
//! End-to-end unwinding of real stacks on the host.
//!
//! A test program built here (`-O2 -fomit-frame-pointer`) snapshots its own registers (an
//! assembly function `capture`, whose first instruction is the snapshot's IP), its stack
//! (from the stack pointer to the top of the stack), its `/proc/self/maps`, its vDSO, the
//! addresses of its functions and the load addresses `dl_iterate_phdr` reports. The test
//! then unwinds the snapshot with memory = the stack + the mapped files, as the kernel
//! would, and checks the frames go through the program's call chain (through libc's
//! `qsort`, or through a signal handler and glibc's `__restore_rt`) to `main`, libc's start
//! code and `_start`; it also checks the load bias the ELF code computes for every mapping
//! against `dl_iterate_phdr`.
#![cfg(not(loom))]

mod cfi_common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use cfi_common::*;
use object::{Object, ObjectSymbol};
use unwind_logic::cfi::elf;
use unwind_logic::cfi::regs::{RA, RSP};
use unwind_logic::cfi::{
    walk, walk_in, ElfInfo, HotRows, Layered, Located, Lookup, Mode, ModuleInfo, Regs, RowCache,
    RowStore, Stop, UnwindInfoSource, Unwinder, WalkParams,
};

const PROG_C: &str = r#"
#define _GNU_SOURCE
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

unsigned long snap[17];
static const char *out_dir;
static int dumped;

void capture(void);
__asm__(
    ".text\n"
    ".globl capture\n"
    ".type capture,@function\n"
    "capture:\n"
    ".cfi_startproc\n"
    "movq %rax, snap+0(%rip)\n"
    "movq %rdx, snap+8(%rip)\n"
    "movq %rcx, snap+16(%rip)\n"
    "movq %rbx, snap+24(%rip)\n"
    "movq %rsi, snap+32(%rip)\n"
    "movq %rdi, snap+40(%rip)\n"
    "movq %rbp, snap+48(%rip)\n"
    "movq %rsp, snap+56(%rip)\n"
    "movq %r8, snap+64(%rip)\n"
    "movq %r9, snap+72(%rip)\n"
    "movq %r10, snap+80(%rip)\n"
    "movq %r11, snap+88(%rip)\n"
    "movq %r12, snap+96(%rip)\n"
    "movq %r13, snap+104(%rip)\n"
    "movq %r14, snap+112(%rip)\n"
    "movq %r15, snap+120(%rip)\n"
    "leaq capture(%rip), %rax\n"
    "movq %rax, snap+128(%rip)\n"
    "subq $8, %rsp\n"
    ".cfi_adjust_cfa_offset 8\n"
    "call dump_snapshot\n"
    "addq $8, %rsp\n"
    ".cfi_adjust_cfa_offset -8\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size capture, .-capture\n");

static FILE *open_out(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) abort();
    return f;
}

static int obj_cb(struct dl_phdr_info *info, size_t size, void *data) {
    fprintf((FILE *)data, "obj %lx %s\n", (unsigned long)info->dlpi_addr,
            info->dlpi_name[0] ? info->dlpi_name : "<main>");
    return 0;
}

int cmp(const void *a, const void *b);
int level1(int n), level2(int n), sig_level1(void), main(int, char **);
void spin(void), handler(int);

void dump_snapshot(void) {
    FILE *in = fopen("/proc/self/maps", "r"), *out = open_out("maps");
    char line[4096];
    unsigned long stack_end = 0, vdso_lo = 0, vdso_hi = 0;
    while (fgets(line, sizeof line, in)) {
        fputs(line, out);
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
        if (lo <= snap[7] && snap[7] < hi) stack_end = hi;
        if (strstr(line, "[vdso]")) { vdso_lo = lo; vdso_hi = hi; }
    }
    fclose(in);
    fclose(out);
    out = open_out("stack");
    unsigned long base = snap[7];
    fwrite(snap, 8, 17, out);
    fwrite(&base, 8, 1, out);
    fwrite((void *)base, 1, stack_end - base, out);
    fclose(out);
    if (vdso_lo) {
        out = open_out("vdso");
        fwrite(&vdso_lo, 8, 1, out);
        fwrite((void *)vdso_lo, 1, vdso_hi - vdso_lo, out);
        fclose(out);
    }
    out = open_out("info");
    fprintf(out, "sym capture %lx\n", (unsigned long)capture);
    fprintf(out, "sym cmp %lx\n", (unsigned long)cmp);
    fprintf(out, "sym level1 %lx\n", (unsigned long)level1);
    fprintf(out, "sym level2 %lx\n", (unsigned long)level2);
    fprintf(out, "sym main %lx\n", (unsigned long)main);
    fprintf(out, "sym handler %lx\n", (unsigned long)handler);
    fprintf(out, "sym spin %lx\n", (unsigned long)spin);
    fprintf(out, "sym sig_level1 %lx\n", (unsigned long)sig_level1);
    dl_iterate_phdr(obj_cb, out);
    fclose(out);
    dumped = 1;
}

int cmp(const void *a, const void *b) {
    if (!dumped) capture();
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) int level2(int n) {
    int *arr = __builtin_alloca(n * sizeof(int));
    for (int i = 0; i < n; i++) arr[i] = (i * 7919) % n;
    qsort(arr, n, sizeof(int), cmp);
    int s = 0;
    for (int i = 0; i < n; i++) s += arr[i] * i;
    return s;
}

__attribute__((noinline)) int level1(int n) {
    int r = level2(n + 1);
    return r * 3 + 1;
}

static volatile sig_atomic_t fired;

__attribute__((noinline)) void handler(int sig) {
    capture();
    fired = 1;
}

__attribute__((noinline)) void spin(void) {
    while (!fired) __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) int sig_level1(void) {
    spin();
    return fired + 1;
}

int main(int argc, char **argv) {
    out_dir = argv[1];
    if (argc > 2 && !strcmp(argv[2], "signal")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sigaction(SIGALRM, &sa, 0);
        struct itimerval it = {{0, 0}, {0, 2000}};
        setitimer(ITIMER_REAL, &it, 0);
        printf("%d\n", sig_level1());
    } else {
        printf("%d\n", level1(argc + 30));
    }
    return 0;
}
"#;

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone)]
struct Map {
    lo: u64,
    hi: u64,
    offset: u64,
    exec: bool,
    path: String,
}

fn parse_maps(text: &str) -> Vec<Map> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (lo, hi) = f.next()?.split_once('-')?;
            let perms = f.next()?;
            let offset = u64::from_str_radix(f.next()?, 16).ok()?;
            let _dev = f.next()?;
            let _inode = f.next()?;
            let path = f.collect::<Vec<_>>().join(" ");
            Some(Map {
                lo: u64::from_str_radix(lo, 16).ok()?,
                hi: u64::from_str_radix(hi, 16).ok()?,
                offset,
                exec: perms.contains('x'),
                path,
            })
        })
        .collect()
}

/// The ELF summary of a file, from its first page (more if the headers need it).
fn elf_info(path: &str) -> Option<ElfInfo> {
    let data = std::fs::read(path).ok()?;
    let head = &data[..data.len().min(4096)];
    let need = elf::headers_len(head).ok()? as usize;
    elf::parse(&data[..need.max(head.len()).min(data.len())]).ok()
}

/// The kernel's side, for a snapshot: the VMA of a PC and its file's cached ELF summary.
struct Snapshot {
    maps: Vec<Map>,
    infos: HashMap<String, Option<ElfInfo>>,
    regs: [u64; 17],
    mem: SegMem,
    syms: HashMap<String, u64>,
    objs: Vec<(u64, String)>,
    vdso: Option<(u64, Vec<u8>)>,
}

impl UnwindInfoSource for Snapshot {
    fn find(&mut self, pc: u64) -> Located {
        match self.maps.iter().find(|m| m.lo <= pc && pc < m.hi) {
            Some(m) => {
                let (start, end) = (m.lo, m.hi);
                Located {
                    start,
                    end,
                    lookup: self.lookup(pc),
                }
            }
            None => Located::at(pc, Lookup::Unmapped),
        }
    }
}

impl Snapshot {
    /// Where the unwind information of `pc` is.
    fn lookup(&mut self, pc: u64) -> Lookup {
        let Some(m) = self.maps.iter().find(|m| m.lo <= pc && pc < m.hi) else {
            return Lookup::Unmapped;
        };
        if !m.path.starts_with('/') {
            return Lookup::NoInfo;
        }
        let m = m.clone();
        let info = *self
            .infos
            .entry(m.path.clone())
            .or_insert_with(|| elf_info(&m.path));
        let Some(info) = info else {
            return Lookup::NoInfo;
        };
        // The VMA of a PC is executable: its bias is never ambiguous.
        let bias = info
            .bias(m.lo, m.offset, m.exec, PAGE)
            .expect("no segment maps the VMA");
        // The file's name, not its path (which holds the test's pid): a deterministic key.
        let id = m
            .path
            .rsplit('/')
            .next()
            .unwrap()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        info.module(id, bias).map_or(Lookup::NoInfo, Lookup::Module)
    }
}

fn load_snapshot(dir: &Path) -> Snapshot {
    let maps = parse_maps(&std::fs::read_to_string(dir.join("maps")).unwrap());
    let stack = std::fs::read(dir.join("stack")).unwrap();
    let word = |i: usize| u64::from_le_bytes(stack[i * 8..i * 8 + 8].try_into().unwrap());
    let regs: [u64; 17] = std::array::from_fn(word);
    let base = word(17);
    let mut mem = SegMem::default();
    mem.add(base, stack[18 * 8..].to_vec());
    for m in &maps {
        if !m.path.starts_with('/') {
            continue;
        }
        let Ok(data) = std::fs::read(&m.path) else {
            continue;
        };
        let start = (m.offset as usize).min(data.len());
        let end = (m.offset + (m.hi - m.lo)).min(data.len() as u64) as usize;
        let mut bytes = data[start..end].to_vec();
        bytes.resize((m.hi - m.lo) as usize, 0);
        mem.add(m.lo, bytes);
    }
    let mut syms = HashMap::new();
    let mut objs = Vec::new();
    for line in std::fs::read_to_string(dir.join("info")).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["sym", name, addr] => {
                syms.insert(name.to_string(), u64::from_str_radix(addr, 16).unwrap());
            }
            ["obj", addr, name] => {
                objs.push((u64::from_str_radix(addr, 16).unwrap(), name.to_string()))
            }
            _ => {}
        }
    }
    let vdso = std::fs::read(dir.join("vdso")).ok().map(|v| {
        (
            u64::from_le_bytes(v[..8].try_into().unwrap()),
            v[8..].to_vec(),
        )
    });
    Snapshot {
        maps,
        infos: HashMap::new(),
        regs,
        mem,
        syms,
        objs,
        vdso,
    }
}

/// Names the function an address is in: the test program's symbols (from its symbol
/// table), libc's exported ones, else the file's name.
struct Symbolizer {
    /// (start, end, name)
    ranges: Vec<(u64, u64, String)>,
}

impl Symbolizer {
    fn new(snap: &Snapshot, exe: &Path) -> Symbolizer {
        let mut ranges = Vec::new();
        let mut add_file = |path: &Path, bias: u64, dynamic: bool| {
            let data = std::fs::read(path).unwrap();
            let file = object::File::parse(&*data).unwrap();
            let syms: Vec<_> = if dynamic {
                file.dynamic_symbols().collect()
            } else {
                file.symbols().collect()
            };
            for s in syms {
                if s.kind() == object::SymbolKind::Text && s.size() > 0 {
                    if let Ok(name) = s.name() {
                        ranges.push((
                            s.address() + bias,
                            s.address() + bias + s.size(),
                            name.to_string(),
                        ));
                    }
                }
            }
        };
        let exe_bias = bias_of(snap, exe.to_str().unwrap());
        add_file(exe, exe_bias, false);
        let libc = snap
            .maps
            .iter()
            .find(|m| m.path.contains("libc.so.6"))
            .unwrap()
            .path
            .clone();
        add_file(Path::new(&libc), bias_of(snap, &libc), true);
        Symbolizer { ranges }
    }

    fn name(&self, snap: &Snapshot, pc: u64) -> String {
        // The smallest symbol holding pc (aliases: any of them).
        if let Some(r) = self
            .ranges
            .iter()
            .filter(|r| r.0 <= pc && pc < r.1)
            .min_by_key(|r| r.1 - r.0)
        {
            return r.2.clone();
        }
        match snap.maps.iter().find(|m| m.lo <= pc && pc < m.hi) {
            Some(m) => format!("?@{}", m.path.rsplit('/').next().unwrap()),
            None => "?".into(),
        }
    }
}

/// The bias of the file at `path` from its first mapping, by the code under test.
fn bias_of(snap: &Snapshot, path: &str) -> u64 {
    let m = snap.maps.iter().find(|m| m.path == path && m.exec).unwrap();
    elf_info(path)
        .unwrap()
        .bias(m.lo, m.offset, true, PAGE)
        .unwrap()
}

fn build_prog(dir: &Path) -> Option<PathBuf> {
    compile(
        dir,
        "prog",
        PROG_C,
        false,
        &["-O2", "-fomit-frame-pointer", "-g0"],
    )
}

fn run_prog(prog: &Path, dir: &Path, mode: &str) -> bool {
    let out = Command::new(prog).arg(dir).arg(mode).output().unwrap();
    if !out.status.success() {
        println!("note: the test program failed: {out:?}");
    }
    out.status.success()
}

/// Unwinds the snapshot in `mode`; returns the frames' names, the stop reason, the IPs.
fn unwind(snap: &mut Snapshot, mode: Mode) -> (Vec<u64>, Stop, unwind_logic::cfi::WalkStats) {
    let regs = Regs::all_known(snap.regs);
    let mut mem = snap.mem.clone();
    let mut cache = RowCache::new();
    let mut out = [0u64; 128];
    let params = WalkParams::new(mode, USER_END, PAGE);
    let r = walk(&mut mem, snap, &mut cache, &regs, &params, &mut out);
    // The walk the unwinder did before rows had a compact form gives the same.
    let (want, want_stop, counts) = reference_walk(&mut mem, snap, &regs, &params, out.len());
    assert_eq!((&out[..r.len], r.stop), (&want[..], want_stop), "{mode:?}");
    assert_eq!(
        [r.stats.cfi_frames, r.stats.fp_frames, r.stats.signal_frames],
        counts
    );
    (out[..r.len].to_vec(), r.stop, r.stats)
}

/// Checks every mapping of every object `dl_iterate_phdr` reported gives its load address
/// as the bias, and the vDSO's headers give its own.
fn check_biases(snap: &Snapshot, exe: &Path) -> usize {
    let mut checked = 0;
    for (addr, name) in &snap.objs {
        let path = if name == "<main>" {
            exe.to_path_buf()
        } else if name.starts_with('/') {
            PathBuf::from(name)
        } else {
            // The vDSO: its ELF image is in memory, mapped without a file.
            let (lo, image) = snap.vdso.as_ref().expect("no vdso dump");
            let info = elf::parse(image).unwrap();
            assert_eq!(info.bias(*lo, 0, true, PAGE), Some(*addr), "vdso");
            assert!(info.eh_frame_hdr.is_some());
            checked += 1;
            continue;
        };
        let canon = std::fs::canonicalize(&path).unwrap();
        let info = elf_info(canon.to_str().unwrap()).unwrap();
        let mut n = 0;
        for m in &snap.maps {
            if m.path.starts_with('/')
                && std::fs::canonicalize(&m.path).ok().as_ref() == Some(&canon)
            {
                let bias = info.bias(m.lo, m.offset, m.exec, PAGE);
                // A read-only mapping of a page two segments share is ambiguous (None);
                // an executable one never is.
                if m.exec || bias.is_some() {
                    assert_eq!(
                        bias,
                        Some(*addr),
                        "{name}: mapping {:#x} at offset {:#x}",
                        m.lo,
                        m.offset
                    );
                    n += 1;
                }
            }
        }
        assert!(n > 0, "{name} not in maps");
        checked += n;
    }
    checked
}

/// Position of the first frame named `name` at or after `from`.
fn position(names: &[String], from: usize, name: &str) -> usize {
    names[from..]
        .iter()
        .position(|n| n == name)
        .map(|i| i + from)
        .unwrap_or_else(|| panic!("no {name} after frame {from} in {names:?}"))
}

#[test]
fn unwinds_through_qsort_to_start() {
    let dir = temp_dir("e2e-qsort");
    let Some(prog) = build_prog(&dir) else { return };
    if !run_prog(&prog, &dir, "normal") {
        return;
    }
    let mut snap = load_snapshot(&dir);
    let biases = check_biases(&snap, &prog);
    let syms = Symbolizer::new(&snap, &prog);
    assert_eq!(syms.name(&snap, snap.syms["main"]), "main");
    for mode in [Mode::Auto, Mode::Cfi] {
        let (ips, stop, stats) = unwind(&mut snap, mode);
        let names: Vec<String> = ips
            .iter()
            .enumerate()
            .map(|(i, &ip)| syms.name(&snap, if i == 0 { ip } else { ip - 1 }))
            .collect();
        println!("{mode:?}: {names:?} {stop:?} {stats:?}; {biases} mappings' biases checked");
        assert_eq!(stop, Stop::End, "{names:?}");
        assert_eq!(names[0], "capture");
        assert_eq!(names[1], "cmp");
        let l2 = position(&names, 2, "level2");
        assert!(names[2..l2]
            .iter()
            .all(|n| n.starts_with('?') || n.contains("qsort")));
        assert!(
            names[2..l2].iter().any(|n| n.contains("qsort")),
            "{names:?}"
        );
        assert_eq!(names[l2 + 1], "level1");
        assert_eq!(names[l2 + 2], "main");
        // __libc_start_call_main (not exported), __libc_start_main, _start.
        assert_eq!(names[l2 + 3], "?@libc.so.6");
        assert_eq!(names[l2 + 4], "__libc_start_main");
        assert_eq!(names[l2 + 5], "_start");
        assert_eq!(names.len(), l2 + 6);
        assert_eq!(stats.cfi_frames as usize, names.len() - 1);
        assert_eq!(stats.fp_frames, 0);
    }
    // A warm row cache: one lookup per frame, only stack reads.
    let regs = Regs::all_known(snap.regs);
    let mut cache = RowCache::new();
    let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
    let mut out = [0u64; 128];
    let mut mem = snap.mem.clone();
    let cold = walk(&mut mem, &mut snap, &mut cache, &regs, &params, &mut out);
    let warm = walk(&mut mem, &mut snap, &mut cache, &regs, &params, &mut out);
    println!("cold {:?}\nwarm {:?}", cold.stats, warm.stats);
    assert_eq!(warm.stats.cache_misses, 0);
    // One lookup per frame, the last one (`_start`, whose row ends the stack) included.
    assert_eq!(warm.stats.cache_hits as usize, warm.len);
    assert!(
        warm.stats.read_calls as f64 <= warm.len as f64 * WARM_READS_PER_FRAME,
        "{:?}",
        warm.stats
    );
    assert!(cold.stats.read_calls > warm.stats.read_calls);
    // A task's hot rows in front of the shared cache (what the module does): the same
    // stack, cold and warm; warm, every row comes from the hot rows alone.
    let mut hot = HotRows::new();
    let mut shared = RowCache::new();
    let mut out2 = [0u64; 128];
    for round in 0..3 {
        let mut layered = Layered {
            hot: &mut hot,
            shared: &mut shared,
        };
        let r = walk(&mut mem, &mut snap, &mut layered, &regs, &params, &mut out2);
        assert_eq!((r.len, r.stop), (warm.len, warm.stop), "round {round}");
        assert_eq!(out2[..r.len], out[..warm.len], "round {round}");
    }
    let mut empty = RowCache::new();
    let mut hot_only = Layered {
        hot: &mut hot,
        shared: &mut empty,
    };
    let r = walk(
        &mut mem,
        &mut snap,
        &mut hot_only,
        &regs,
        &params,
        &mut out2,
    );
    assert_eq!(out2[..r.len], out[..warm.len]);
    assert_eq!(
        r.stats.cache_misses, 0,
        "every row from the task's hot rows"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unwinds_through_signal_frame() {
    let dir = temp_dir("e2e-signal");
    let Some(prog) = build_prog(&dir) else { return };
    if !run_prog(&prog, &dir, "signal") {
        return;
    }
    let mut snap = load_snapshot(&dir);
    let syms = Symbolizer::new(&snap, &prog);
    for mode in [Mode::Auto, Mode::Cfi] {
        let (ips, stop, stats) = unwind(&mut snap, mode);
        // The frame after the signal frame is exact: no "- 1".
        let mut names = Vec::new();
        let mut exact = true;
        for &ip in &ips {
            names.push(syms.name(&snap, if exact { ip } else { ip - 1 }));
            exact = names.last().unwrap() == "?@libc.so.6" && names.len() == 3;
        }
        println!("{mode:?}: {names:?} {stop:?} {stats:?}");
        assert_eq!(stop, Stop::End, "{names:?}");
        assert_eq!(names[0], "capture");
        assert_eq!(names[1], "handler");
        // __restore_rt (not exported).
        assert_eq!(names[2], "?@libc.so.6");
        assert_eq!(names[3], "spin");
        assert_eq!(names[4], "sig_level1");
        assert_eq!(names[5], "main");
        assert_eq!(names[6], "?@libc.so.6");
        assert_eq!(names[7], "__libc_start_main");
        assert_eq!(names[8], "_start");
        assert_eq!(names.len(), 9);
        assert_eq!(stats.signal_frames, 1);
    }
    // The unwinder one frame at a time: the stack pointer grows except across the signal
    // frame, and after it every register was restored from the signal context.
    let regs = Regs::all_known(snap.regs);
    let mut cache = RowCache::new();
    let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
    let mut mem = snap.mem.clone();
    let mut window = unwind_logic::cfi::StackWindow::new();
    let mut recent = unwind_logic::cfi::RecentAnswers::new();
    let mut u = Unwinder::new(
        &mut mem,
        &mut snap,
        &mut cache,
        &mut window,
        &mut recent,
        regs,
        &params,
    );
    let mut sp = regs.get(RSP).unwrap();
    let mut n = 0;
    while let Ok(f) = u.next_frame() {
        assert!(f.signal || f.sp > sp);
        if f.signal {
            assert_eq!(
                u.regs().known_mask(),
                (1 << 17) - 1,
                "all registers restored"
            );
            assert_eq!(u.regs().get(RA), Some(f.ip));
        }
        sp = f.sp;
        n += 1;
    }
    assert_eq!(n, 8);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The frame-pointer mode is the old walker: on `-fomit-frame-pointer` code it does not get
/// far, and Auto never needs it where CFI exists.
#[test]
fn fp_mode_is_the_frame_pointer_walk() {
    let dir = temp_dir("e2e-fp");
    let Some(prog) = build_prog(&dir) else { return };
    if !run_prog(&prog, &dir, "normal") {
        return;
    }
    let mut snap = load_snapshot(&dir);
    let (ips, stop, _) = unwind(&mut snap, Mode::Fp);
    let regs = snap.regs;
    let mut mem = snap.mem.clone();
    struct Frames<'a>(&'a mut SegMem);
    impl unwind_logic::walker::UserMemory for Frames<'_> {
        fn read_frame(&mut self, fp: u64) -> Option<[u64; 2]> {
            let s = self.0.slice(fp, 16)?;
            Some([
                u64::from_le_bytes(s[..8].try_into().unwrap()),
                u64::from_le_bytes(s[8..].try_into().unwrap()),
            ])
        }
    }
    let mut out = [0u64; 128];
    let (n, old_stop) = unwind_logic::walker::walk(
        &mut Frames(&mut mem),
        unwind_logic::walker::UserRegs {
            ip: regs[16],
            sp: regs[7],
            fp: regs[6],
        },
        USER_END,
        &mut out,
    );
    assert_eq!(ips, out[..n].to_vec());
    println!("fp: {} frames, {stop:?} (walker: {old_stop:?})", ips.len());
    let _ = std::fs::remove_dir_all(&dir);
    let _: Option<ModuleInfo> = None;
}

// ---------------------------------------------------------------------------------------
// Warm-walk cost (host benchmark, run under callgrind) and its reader-call bound.

/// The snapshot's memory as sorted segments: a reader as cheap as the host allows, that
/// counts its calls (the kernel's `copy_from_user` costs far more per call).
struct BenchMem {
    segs: Vec<(u64, Vec<u8>)>,
    calls: u64,
    bytes: u64,
}

impl BenchMem {
    fn new(mem: &SegMem) -> BenchMem {
        BenchMem {
            segs: mem.segs.iter().map(|(a, d)| (*a, d.clone())).collect(),
            calls: 0,
            bytes: 0,
        }
    }
}

impl unwind_logic::cfi::UnwindMemory for BenchMem {
    #[inline(never)]
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        self.calls += 1;
        self.bytes += out.len() as u64;
        let i = self.segs.partition_point(|s| s.0 <= addr);
        let Some((base, data)) = i.checked_sub(1).and_then(|i| self.segs.get(i)) else {
            return false;
        };
        let off = (addr - base) as usize;
        match off
            .checked_add(out.len())
            .and_then(|end| data.get(off..end))
        {
            Some(s) => {
                out.copy_from_slice(s);
                true
            }
            None => false,
        }
    }
}

/// The module's source: the answer for each mapping precomputed (the walk keeps the last
/// one, with its range).
struct BenchSource {
    ranges: Vec<(u64, u64, Lookup)>,
}

impl BenchSource {
    fn new(snap: &mut Snapshot) -> BenchSource {
        let maps = snap.maps.clone();
        let ranges = maps
            .iter()
            .map(|m| {
                let answer = if m.exec {
                    snap.lookup(m.lo)
                } else {
                    Lookup::NoInfo
                };
                (m.lo, m.hi, answer)
            })
            .collect();
        BenchSource { ranges }
    }
}

impl UnwindInfoSource for BenchSource {
    #[inline(never)]
    fn find(&mut self, pc: u64) -> Located {
        match self.ranges.iter().find(|r| r.0 <= pc && pc < r.1) {
            Some(&(start, end, lookup)) => Located { start, end, lookup },
            None => Located::at(pc, Lookup::Unmapped),
        }
    }
}

/// `n` warm walks (the function callgrind's `--toggle-collect` names).
#[inline(never)]
fn bench_warm_walks<C: RowStore>(
    mem: &mut BenchMem,
    source: &mut BenchSource,
    cache: &mut C,
    regs: &Regs,
    n: usize,
) -> usize {
    let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
    let mut out = [0u64; 128];
    let mut frames = 0;
    for _ in 0..n {
        let r = walk(mem, source, cache, regs, &params, &mut out);
        frames += r.len;
        std::hint::black_box(&out);
    }
    frames
}

/// Builds and runs the qsort program, loads its snapshot: the memory, a source, the
/// registers. The program runs without address randomization if `setarch` allows (and in
/// a directory whose name does not change), so that its stack lies the same way in every
/// run: the reads of a walk (which never cross a page end) then repeat exactly.
fn bench_setup() -> Option<(PathBuf, BenchMem, BenchSource, Regs)> {
    // The directory is an argument of the program: a name of fixed length.
    let dir = std::env::temp_dir().join(format!("unwind-logic-bench-{:010}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prog = build_prog(&dir)?;
    let fixed = Command::new("setarch")
        .args(["x86_64", "-R"])
        .arg(&prog)
        .arg(&dir)
        .arg("normal")
        .output()
        .is_ok_and(|o| o.status.success());
    if !fixed && !run_prog(&prog, &dir, "normal") {
        return None;
    }
    let mut snap = load_snapshot(&dir);
    let source = BenchSource::new(&mut snap);
    Some((
        dir,
        BenchMem::new(&snap.mem),
        source,
        Regs::all_known(snap.regs),
    ))
}

/// Most reader calls per frame of a warm walk of the qsort snapshot, on average: the
/// stack window serves several frames per call (see the bench).
const WARM_READS_PER_FRAME: f64 = 0.5;

/// A warm walk of the qsort snapshot reads the stack a window at a time: at most
/// [`WARM_READS_PER_FRAME`] reader calls per frame, and nothing but the stack.
#[test]
fn warm_walk_reads_a_window_every_few_frames() {
    let Some((dir, mut mem, mut source, regs)) = bench_setup() else {
        return;
    };
    let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
    let mut cache = RowCache::new();
    let mut out = [0u64; 128];
    let cold = walk(&mut mem, &mut source, &mut cache, &regs, &params, &mut out);
    let calls = mem.calls;
    let warm = walk(&mut mem, &mut source, &mut cache, &regs, &params, &mut out);
    println!("cold {:?}\nwarm {:?}", cold.stats, warm.stats);
    assert_eq!((cold.stop, warm.stop), (Stop::End, Stop::End));
    assert_eq!(cold.len, warm.len);
    assert!(warm.len >= 10, "{warm:?}");
    assert_eq!(warm.stats.cache_misses, 0);
    assert_eq!(u64::from(warm.stats.read_calls), mem.calls - calls);
    let per_frame = f64::from(warm.stats.read_calls) / warm.len as f64;
    assert!(
        per_frame <= WARM_READS_PER_FRAME,
        "{per_frame} reads per frame: {warm:?}"
    );
    // Windows of the stack only (each at most STACK_WINDOW_BYTES).
    let window = unwind_logic::cfi::memory::STACK_WINDOW_BYTES as u64;
    assert!(warm.stats.bytes_read <= u64::from(warm.stats.read_calls) * window);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Counts the questions a walk asks its source.
struct CountingSource<'s, S>(&'s mut S, usize);

impl<S: UnwindInfoSource> UnwindInfoSource for CountingSource<'_, S> {
    fn find(&mut self, pc: u64) -> Located {
        self.1 += 1;
        self.0.find(pc)
    }
}

/// A walk that starts with the answers the last walk of the same address space left
/// (`RecentAnswers`, the module's per task) asks the source nothing for a stack of a few
/// files (the qsort snapshot: the program, the C library, the program again), finds what
/// a walk from no answers finds, and a cleared set asks again.
#[test]
fn recent_answers_carry_over_to_the_next_walk() {
    let Some((dir, mut mem, mut source, regs)) = bench_setup() else {
        return;
    };
    let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
    let mut cache = RowCache::new();
    let mut window = unwind_logic::cfi::StackWindow::new();
    let mut recent = unwind_logic::cfi::RecentAnswers::new();
    let mut walk_counted = |recent: &mut unwind_logic::cfi::RecentAnswers| {
        let mut out = [0u64; 128];
        let mut counting = CountingSource(&mut source, 0);
        let r = walk_in(
            &mut window,
            recent,
            &mut mem,
            &mut counting,
            &mut cache,
            &regs,
            &params,
            &mut out,
        );
        assert_eq!(r.stop, Stop::End, "{r:?}");
        (out[..r.len].to_vec(), counting.1)
    };
    let (first, first_finds) = walk_counted(&mut recent);
    assert!(first.len() >= 10, "{first:x?}");
    assert!(
        first_finds >= 2,
        "the program and the C library: {first_finds}"
    );
    println!(
        "{} frames, {first_finds} questions of the source",
        first.len()
    );
    let (again, again_finds) = walk_counted(&mut recent);
    assert_eq!(again, first);
    assert_eq!(again_finds, 0);
    recent.clear();
    let (cleared, cleared_finds) = walk_counted(&mut recent);
    assert_eq!(cleared, first);
    assert_eq!(cleared_finds, first_finds);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Host cost of a warm walk of the qsort snapshot:
/// `valgrind --tool=callgrind --toggle-collect='*bench_warm_walks*' <this test binary>
/// --ignored --nocapture bench_warm_walk` (`UNWIND_BENCH_WALKS` walks, 10,000 by default),
/// then instructions / (walks x frames).
#[test]
#[ignore]
fn bench_warm_walk() {
    let Some((dir, mut mem, mut source, regs)) = bench_setup() else {
        return;
    };
    let n: usize = std::env::var("UNWIND_BENCH_WALKS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let mut cache = RowCache::new();
    {
        // The frames' stack pointers: how far apart the reads of a walk lie.
        let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
        let mut c = RowCache::new();
        let mut window = unwind_logic::cfi::StackWindow::new();
        let mut recent = unwind_logic::cfi::RecentAnswers::new();
        let mut u = Unwinder::new(
            &mut mem,
            &mut source,
            &mut c,
            &mut window,
            &mut recent,
            regs,
            &params,
        );
        let sp0 = regs.get(RSP).unwrap();
        let mut sps = vec![format!("{sp0:#x}")];
        while let Ok(f) = u.next_frame() {
            sps.push(format!("+{}", f.sp - sp0));
        }
        println!("frames' sp: {}", sps.join(" "));
    }
    mem.calls = 0;
    mem.bytes = 0;
    let first = bench_warm_walks(&mut mem, &mut source, &mut cache, &regs, 1);
    let (calls, bytes) = (mem.calls, mem.bytes);
    let frames = bench_warm_walks(&mut mem, &mut source, &mut cache, &regs, n);
    println!(
        "cold walk: {first} entries, {calls} reads, {bytes} bytes; warm: {n} walks of {} \
         entries, {:.2} reads and {:.1} bytes per walk",
        frames / n.max(1),
        (mem.calls - calls) as f64 / n as f64,
        (mem.bytes - bytes) as f64 / n as f64,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Host cost of warm walks of a snapshot taken elsewhere (`UNWIND_SNAPSHOT`: a directory
/// in the test program's format, e.g. written by `scripts/snapshot.gdb.py` from a stock
/// program stopped at a system call): as [`bench_warm_walk`], under callgrind.
#[test]
#[ignore]
fn bench_snapshot_walk() {
    let Some(dir) = std::env::var_os("UNWIND_SNAPSHOT") else {
        println!("UNWIND_SNAPSHOT is not set");
        return;
    };
    let n: usize = std::env::var("UNWIND_BENCH_WALKS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let mut snap = load_snapshot(Path::new(&dir));
    let mut source = BenchSource::new(&mut snap);
    let mut mem = BenchMem::new(&snap.mem);
    let regs = Regs::all_known(snap.regs);
    // As the module: the task's hot rows in front of a shared cache (whose lookups count).
    let mut hot = HotRows::new();
    let mut cache = Layered {
        hot: &mut hot,
        shared: CountingStore(RowCache::new(), 0),
    };
    let params = WalkParams::new(Mode::Cfi, USER_END, PAGE);
    let mut out = [0u64; 128];
    let cold = walk(&mut mem, &mut source, &mut cache, &regs, &params, &mut out);
    let warm = walk(&mut mem, &mut source, &mut cache, &regs, &params, &mut out);
    println!("cold {cold:?}\nwarm {warm:?}");
    let shared = cache.shared.1;
    let frames = bench_warm_walks(&mut mem, &mut source, &mut cache, &regs, n);
    println!(
        "{n} warm walks of {} entries, {:.2} shared lookups a walk",
        frames / n.max(1),
        (cache.shared.1 - shared) as f64 / n.max(1) as f64
    );
}

/// A row store that counts its compact lookups (those that reach it past the hot rows).
struct CountingStore(RowCache, u64);

impl RowStore for CountingStore {
    fn lookup(&mut self, module: u64, rel_pc: u64) -> Option<unwind_logic::cfi::CompactRow> {
        self.1 += 1;
        self.0.lookup(module, rel_pc)
    }

    fn lookup_full(&mut self, module: u64, rel_pc: u64, out: &mut unwind_logic::cfi::Row) -> bool {
        self.0.lookup_full(module, rel_pc, out)
    }

    fn store(&mut self, module: u64, rel_pc: u64, row: &unwind_logic::cfi::Row) {
        self.0.store(module, rel_pc, row)
    }
}
