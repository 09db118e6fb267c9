// SPDX-License-Identifier: GPL-2.0
//! Symbolization throughput. Ignored by default; run with
//!
//!   cargo test --release -p ustack --test bench -- --ignored --nocapture
//!
//! (`USTACK_BENCH_FRAMES` overrides the number of frames, default 1e6.)

mod common;

use common::*;
use std::time::Instant;
use ustack::correlate::FileEntry;
use ustack::output::Folded;
use ustack::stats::Stats;
use ustack::symbolize::Symbolizer;
use ustack::Engine;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn frames_wanted() -> usize {
    std::env::var("USTACK_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// File offsets of every instruction-ish position in the text of `bin`: the function
/// starts from nm plus a spread of offsets inside each function.
fn text_offsets(bin: &std::path::Path) -> Vec<u64> {
    let segs = loads(bin);
    let vaddr_to_offset = |_: &std::path::Path, a: u64| conv(&segs, a);
    let out = std::process::Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(bin)
        .output()
        .unwrap();
    let mut v = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<_> = l.split_whitespace().collect();
        if f.len() == 4 && (f[2] == "T" || f[2] == "t") {
            let a = u64::from_str_radix(f[0], 16).unwrap();
            let sz = u64::from_str_radix(f[1], 16).unwrap();
            for k in 0..sz.min(64) {
                v.push(vaddr_to_offset(bin, a + k));
            }
        }
    }
    assert!(!v.is_empty());
    v
}

#[test]
#[ignore]
fn bench_symbolize() {
    let n = frames_wanted();
    let d = tmpdir("bench");
    let src = include_str!("../demo/demo.c");
    let bin = build(
        &d,
        "cc",
        "demo",
        "c",
        src,
        &["-O1", "-g", "-fno-inline", "-Wl,--build-id"],
    );
    let bid = build_id(&bin);
    let offs = text_offsets(&bin);

    // 1. end to end: trace-cmd text with n frames (20 per stack) through parse,
    //    correlation, symbolization (with the address cache) and folding
    let per = 20;
    let stacks = n.div_ceil(per);
    let mut text = String::with_capacity(stacks * 400);
    text.push_str(&format!(
        " demo-1 [0] 1.0: file_cache: hash=0x00000abc path={} build_id={bid}\n",
        bin.display()
    ));
    let mut r = Rng(7);
    for i in 0..stacks {
        let o: Vec<String> = (0..per)
            .map(|_| format!("0x{:x}", offs[(r.next() % offs.len() as u64) as usize]))
            .collect();
        let h = vec!["0xabc"; per];
        text.push_str(&format!(
            " demo-1 [0] 2.{i:06}: sys_enter_getppid: NR 110 ()\n"
        ));
        text.push_str(&format!(
            " demo-1 [0] 2.{i:06}: user_unwind_cookie: cookie=0x{:x}\n",
            i + 1
        ));
        text.push_str(&format!(
            " demo-1 [0] 2.{i:06}: user_unwind_stack: cookie=0x{:x} nr={per} offsets={{{}}} hashes={{{}}}\n",
            i + 1,
            o.join(","),
            h.join(",")
        ));
    }
    let t = Instant::now();
    let mut e = Engine::new();
    let mut samples = Vec::new();
    let mut sym = Symbolizer::new(None);
    let mut folded = Folded::default();
    for l in text.lines() {
        e.feed_line(l, &mut samples);
        let (files, stats) = e.parts();
        for s in samples.drain(..) {
            folded.add(&s, files, &mut sym, stats);
        }
    }
    e.finish(&mut samples);
    let dt = t.elapsed().as_secs_f64();
    let frames = e.stats.frames;
    assert_eq!(frames as usize, stacks * per);
    // a few return addresses at the very start of _start have nothing before them
    assert!(
        e.stats.frames_symbolized as f64 > 0.99 * frames as f64,
        "{}",
        e.stats
    );
    println!(
        "end-to-end (parse+correlate+symbolize+fold, cached): {frames} frames in {dt:.3} s = {:.0} frames/s ({} distinct offsets)",
        frames as f64 / dt,
        offs.len()
    );

    // 2. raw lookups without the address cache: DWARF file and a DWARF-less libc
    let mut st = Stats::default();
    let mut cases = vec![(bin.clone(), bid.clone())];
    let libc = std::path::PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6");
    if libc.exists() {
        cases.push((libc.clone(), build_id(&libc)));
    }
    for (path, bid) in cases {
        let offs = text_offsets_or_dyn(&path);
        let entry = FileEntry {
            path: path.to_string_lossy().into(),
            build_id: bid,
            deleted: false,
        };
        let mut sym = Symbolizer::new(None);
        sym.use_cache = false;
        let m = n.min(1_000_000);
        let t = Instant::now();
        let mut ok = 0u64;
        for i in 0..m {
            let o = offs[(r.next() % offs.len() as u64) as usize];
            if sym.symbolize(0, &entry, o, i % 2 == 1, &mut st).is_ok() {
                ok += 1;
            }
        }
        let dt = t.elapsed().as_secs_f64();
        println!(
            "uncached lookups in {}: {m} frames in {dt:.3} s = {:.0} frames/s ({ok} symbolized)",
            path.display(),
            m as f64 / dt
        );
        assert!(ok > 0);
    }
}

fn text_offsets_or_dyn(bin: &std::path::Path) -> Vec<u64> {
    let out = std::process::Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(bin)
        .output()
        .unwrap();
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.contains(" T "))
    {
        return text_offsets(bin);
    }
    let segs = loads(bin);
    let vaddr_to_offset = |_: &std::path::Path, a: u64| conv(&segs, a);
    let out = std::process::Command::new("nm")
        .args(["-D", "-S", "--defined-only"])
        .arg(bin)
        .output()
        .unwrap();
    let mut v = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<_> = l.split_whitespace().collect();
        if f.len() == 4 && (f[2] == "T" || f[2] == "t") {
            let a = u64::from_str_radix(f[0], 16).unwrap();
            let sz = u64::from_str_radix(f[1], 16).unwrap();
            for k in (0..sz).step_by(7).take(64) {
                v.push(vaddr_to_offset(bin, a + k));
            }
        }
    }
    v
}

fn conv(segs: &[(u64, u64, u64)], a: u64) -> u64 {
    for &(off, va, sz) in segs {
        if a >= va && a < va + sz {
            return a - va + off;
        }
    }
    panic!("0x{a:x} not in PT_LOAD");
}
