// SPDX-License-Identifier: GPL-2.0
//! Deterministic fuzzing of the parsers, the correlator and the output path: random and
//! mutated lines (seeded xorshift, so a failure is reproducible) must never panic, and
//! every event must come out exactly once.

mod common;

use common::*;
use ustack::correlate::StackState;
use ustack::output::{write_listing, Folded};
use ustack::symbolize::Symbolizer;
use ustack::Engine;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

const TOKENS: &[&str] = &[
    " ",
    "  ",
    "-",
    "--",
    "[",
    "]",
    "[001]",
    "[1]",
    "(",
    ")",
    ":",
    ": ",
    "=>",
    " => ",
    "0x",
    "{",
    "}",
    ",",
    "ARRAY[",
    "cookie=",
    "nr=",
    "offsets=",
    "hashes=",
    "hash=",
    "path=",
    " build_id=",
    "(deleted)",
    "user_unwind_cookie:",
    "user_unwind_stack:",
    "file_cache:",
    "unwind:",
    ".....",
    "d..1.",
    "10.000100:",
    "123",
    "0",
    "18446744073709551615",
    "18446744073709551616",
    "0xffffffffffffffff",
    "0x10000000000000000",
    "0xffffffff",
    "4294967296",
    "[anon]",
    "[nomap]",
    "[a1b2c3d4]",
    "é",
    "€",
    "\u{0}",
    "\t",
    "#",
    "<...>",
    "<stack trace>",
    "CPU:1 [LOST ",
    " EVENTS]",
    "sleep",
    "-123",
    "99999999999",
    "\r",
];

fn mutate(r: &mut Rng, line: &str) -> String {
    let mut s: Vec<char> = line.chars().collect();
    for _ in 0..1 + r.below(4) {
        match r.below(7) {
            0 if !s.is_empty() => {
                let i = r.below(s.len());
                s.remove(i);
            }
            1 => {
                let i = r.below(s.len() + 1);
                let t: Vec<char> = r.pick(TOKENS).chars().collect();
                s.splice(i..i, t);
            }
            2 if !s.is_empty() => {
                let i = r.below(s.len());
                s[i] = char::from_u32(r.below(0x3000) as u32).unwrap_or('?');
            }
            3 => {
                let n = r.below(s.len() + 1);
                s.truncate(n);
            }
            4 if !s.is_empty() => {
                let i = r.below(s.len());
                s[i] = *r.pick(&[
                    '0', '9', 'f', 'x', ' ', '=', ',', '{', '}', '[', ']', '-', ':',
                ]);
            }
            5 if s.len() > 2 => {
                // duplicate a slice
                let a = r.below(s.len());
                let b = (a + r.below(20)).min(s.len());
                let dup: Vec<char> = s[a..b].to_vec();
                s.splice(b..b, dup);
            }
            _ => {}
        }
    }
    s.into_iter().collect()
}

fn random_line(r: &mut Rng) -> String {
    (0..r.below(24)).map(|_| *r.pick(TOKENS)).collect()
}

fn check(lines: &[String], sym: &mut Symbolizer) {
    let mut e = Engine::new();
    let mut samples = Vec::new();
    for l in lines {
        e.feed_line(l, &mut samples);
    }
    e.finish(&mut samples);
    // every event comes out exactly once, whatever happened to its cookie and stack
    assert_eq!(samples.len() as u64, e.stats.events, "{}", e.stats);
    let ok = samples
        .iter()
        .filter(|s| matches!(s.stack, StackState::Ok(_)))
        .count() as u64;
    assert_eq!(ok, e.stats.events_with_stack);
    let no_cookie = samples
        .iter()
        .filter(|s| s.stack == StackState::NoCookie)
        .count() as u64;
    assert_eq!(no_cookie, e.stats.events_without_cookie);
    let mut folded = Folded::default();
    let mut out = Vec::new();
    let (files, stats) = e.parts();
    for s in &samples {
        write_listing(&mut out, s, files, sym, stats).unwrap();
        folded.add(s, files, sym, stats);
    }
    for l in folded.lines() {
        // folded lines always end in " count"
        let (_, n) = l.rsplit_once(' ').unwrap();
        assert!(n.parse::<u64>().is_ok(), "{l}");
    }
}

#[test]
fn fuzz_parsers_and_correlation() {
    let d = tmpdir("fuzz");
    let bin = build(
        &d,
        "cc",
        "demo",
        "c",
        include_str!("../demo/demo.c"),
        &["-O1", "-g", "-Wl,--build-id"],
    );
    let bid = build_id(&bin);
    let text_offset = sym_offset(&bin, "main");
    // seeds: a well-formed trace in both forms naming a real ELF file
    let mut evs = vec![Ev::File {
        hash: 0xabc,
        path: bin.to_string_lossy().into(),
        build_id: bid,
    }];
    for i in 0..6u64 {
        evs.push(Ev::Event {
            comm: "fz",
            pid: 3,
            name: "ev",
            body: "a=1",
        });
        evs.push(Ev::Cookie {
            comm: "fz",
            pid: 3,
            cookie: i + 1,
        });
        evs.push(Ev::Stack {
            comm: "fz",
            pid: 3,
            cookie: i + 1,
            frames: vec![
                (text_offset + i, 0xabc),
                (i * 977, 0xabc),
                (0x7fff0000, 0),
                (1, 0xffffffff),
                (5, 0x999),
            ],
        });
    }
    let mut seeds: Vec<String> = Vec::new();
    for form in [Form::Tracefs, Form::TraceCmd] {
        seeds.extend(render(&evs, form).lines().map(str::to_string));
    }
    let mut sym = Symbolizer::new(None);
    // the unmutated seeds symbolize fine
    check(&seeds, &mut sym);

    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let rounds = 1000;
    for round in 0..rounds {
        let mut lines = Vec::new();
        for _ in 0..60 {
            let l = match r.below(10) {
                0 => random_line(&mut r),
                1 => {
                    let b: Vec<u8> = (0..r.below(80)).map(|_| r.next() as u8).collect();
                    String::from_utf8_lossy(&b).into_owned()
                }
                2..=4 => r.pick(&seeds).clone(),
                _ => {
                    let seed = r.pick(&seeds).clone();
                    mutate(&mut r, &seed)
                }
            };
            lines.push(l);
        }
        let res =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&lines, &mut sym)));
        if res.is_err() {
            panic!("round {round} failed on:\n{}", lines.join("\n"));
        }
    }
}

#[test]
fn fuzz_single_line_parsers() {
    let mut r = Rng(42);
    for _ in 0..20000 {
        let l = if r.below(2) == 0 {
            random_line(&mut r)
        } else {
            mutate(&mut r, "  sleep-123   [001] .....  10.000200: user_unwind_stack: cookie=0x3 nr=2 offsets={0x1139,0x29d90} hashes={0xa1b2c3d4,0x0}")
        };
        let _ = ustack::parse::parse_header(&l);
        let _ = ustack::parse::parse_frame_line(&l);
        let _ = ustack::parse::parse_file_cache(&l);
        let _ = ustack::parse::parse_array(&l, 8);
        let _ = ustack::parse::parse_array(&l, 4);
        if let Some(h) = ustack::parse::parse_header(&l) {
            // fields come from the line itself
            assert!(
                l.contains(h.comm) && l.contains(h.ts) && l.contains(h.name),
                "{l}"
            );
        }
    }
}
