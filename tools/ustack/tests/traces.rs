// SPDX-License-Identifier: GPL-2.0
//! Fixture traces in both text forms: parsing, the correlation rules, the robustness
//! counters, and the command line end to end on the bundled demo program.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use ustack::correlate::{Frame, Sample, StackState};
use ustack::parse::Kind;
use ustack::Engine;

/// The examples of Documentation/trace-events.rst, as `cat trace` shows them.
const RST_TRACEFS: &str = "\
# tracer: nop
#
  sleep-123   [001] .....  10.000050: file_cache: hash=0xa1b2c3d4 path=/usr/bin/demo build_id=4f2a0c
  sleep-123   [001] .....  10.000090: sys_enter_nanosleep: NR 35 (7ffd, 0)
  sleep-123   [001] .....  10.000100: user_unwind_cookie: cookie=0x300000002
  sleep-123   [001] .....  10.000200: user_unwind_stack: cookie=0x300000002 nr=3
   => 0x0000000000001139 [a1b2c3d4]
   => 0x0000000000029d90 [5e6f7081]
   => 0x00007ffd1234a000 [anon]
";

/// The same as `trace-cmd report` prints it.
const RST_TRACECMD: &str = "\
cpus=2
           sleep-123   [001]    10.000050: file_cache:           hash=0xa1b2c3d4 path=/usr/bin/demo build_id=4f2a0c
           sleep-123   [001]    10.000090: sys_enter_nanosleep:  NR 35 (7ffd, 0)
           sleep-123   [001]    10.000100: user_unwind_cookie:   cookie=0x300000002
           sleep-123   [001]    10.000200: user_unwind_stack:    cookie=0x300000002 nr=3 offsets={0x1139,0x29d90,0x7ffd1234a000} hashes={0xa1b2c3d4,0x5e6f7081,0x0}
";

/// The same as trace-cmd 3.1's libtraceevent prints `__print_array`: decimal, spaces.
const RST_TRACECMD_DECIMAL: &str = "\
cpus=2
           sleep-123   [001]    10.000050: file_cache:           hash=0xa1b2c3d4 path=/usr/bin/demo build_id=4f2a0c
           sleep-123   [001]    10.000090: sys_enter_nanosleep:  NR 35 (7ffd, 0)
           sleep-123   [001]    10.000100: user_unwind_cookie:   cookie=0x300000002
           sleep-123   [001]    10.000200: user_unwind_stack:    cookie=0x300000002 nr=3 offsets=4409 171408 140724908892160 hashes=2712847316 1584361601 0
";

fn ok_frames(s: &Sample) -> Vec<Frame> {
    match &s.stack {
        StackState::Ok(st) => st.frames.clone(),
        other => panic!("no stack for {}: {other:?}", s.event.text),
    }
}

#[test]
fn rst_examples_both_forms() {
    for text in [RST_TRACEFS, RST_TRACECMD, RST_TRACECMD_DECIMAL] {
        let (samples, e) = Engine::run_text(text);
        assert_eq!(samples.len(), 1, "{text}");
        let s = &samples[0];
        assert_eq!(
            (s.event.comm.as_str(), s.event.pid, s.event.name.as_str()),
            ("sleep", 123, "sys_enter_nanosleep")
        );
        assert_eq!(s.event.ts, "10.000090");
        assert_eq!(
            ok_frames(s),
            vec![
                Frame::File {
                    offset: 0x1139,
                    file: 0
                },
                Frame::UnknownHash {
                    offset: 0x29d90,
                    hash: 0x5e6f7081
                },
                Frame::Anon(0x7ffd1234a000),
            ]
        );
        assert_eq!(e.files()[0].path, "/usr/bin/demo");
        assert_eq!(e.files()[0].build_id, "4f2a0c");
        assert_eq!(e.stats.frames_unknown_hash, 1);
        assert_eq!(e.stats.frames_anon, 1);
        assert_eq!(e.stats.malformed, 0);
        assert_eq!(e.stats.events_with_stack, 1);
    }
}

#[test]
fn header_variants() {
    let text = "\
 my comm-with-dash-77 (     77) [1] d..1. 5.000001: sys_enter_getppid: NR 110 ()
 my comm-with-dash-77 (     77) [1] d..1. 5.000002: unwind:user_unwind_cookie: cookie=0x10
 my comm-with-dash-77 (     77) [1] d..1. 5.000003: user_unwind_stack: cookie=0x10 nr=1 offsets={ 4409 } hashes={ 0xffffffff }
";
    let (samples, e) = Engine::run_text(text);
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].event.comm, "my comm-with-dash");
    assert_eq!(samples[0].event.pid, 77);
    assert_eq!(samples[0].event.cpu, 1);
    assert_eq!(ok_frames(&samples[0]), vec![Frame::NoMap(4409)]);
    assert_eq!(e.stats.malformed, 0);
}

#[test]
fn both_event_systems() {
    // Events of system `ftrace` (this version) and `unwind` (earlier ones), with and
    // without the system prefix, give the same stacks.
    for system in ["", "ftrace:", "unwind:"] {
        let text = format!(
            "\
            demo-5     [001]    10.000090: sys_enter_getppid:    NR 110 ()
            demo-5     [001]    10.000100: {system}user_unwind_cookie:   cookie=0x7
            demo-5     [001]    10.000150: {system}file_cache:   hash=0x00000001 path=/usr/bin/demo build_id=4f2a
            demo-5     [001]    10.000200: {system}user_unwind_stack:    cookie=0x7 nr=1 offsets={{ 4409 }} hashes={{ 0x1 }}
"
        );
        let (samples, e) = Engine::run_text(&text);
        assert_eq!(samples.len(), 1, "{system}");
        assert_eq!(e.stats.cookies, 1, "{system}");
        assert_eq!(e.stats.events_with_stack, 1, "{system}");
        assert_eq!(e.files().len(), 1, "{system}");
        assert!(!e.stats.has_problems(), "{system}: {}", e.stats);
    }
}

#[test]
fn trace_cmd_instance_prefix() {
    // trace-cmd report of a trace.dat with two buffers prefixes each line with the
    // buffer name; cookies and stacks are matched per buffer
    let text = "\
      foo:            demo-5     [001]    10.000090: sys_enter_getppid:    NR 110 ()
      bar:            demo-5     [001]    10.000091: sys_enter_getppid:    NR 110 ()
      foo:            demo-5     [001]    10.000100: user_unwind_cookie:   cookie=0x7
      bar:            demo-5     [001]    10.000101: user_unwind_cookie:   cookie=0x7
      bar:            demo-5     [001]    10.000200: user_unwind_stack:    cookie=0x7 nr=1 offsets={0x2} hashes={0x0}
      foo:            demo-5     [001]    10.000201: user_unwind_stack:    cookie=0x7 nr=1 offsets={0x1} hashes={0x0}
";
    let (samples, e) = Engine::run_text(text);
    assert_eq!(samples.len(), 2);
    for s in &samples {
        assert_eq!(s.event.comm, "demo");
        let want = if s.event.instance == "foo" { 1 } else { 2 };
        assert_eq!(
            ok_frames(s),
            vec![Frame::Anon(want)],
            "{}",
            s.event.instance
        );
    }
    assert!(!e.stats.has_problems(), "{}", e.stats);
    let (ok, out, _) = ustack(&["-f", "folded", "--instance", "bar"], text);
    assert!(ok);
    assert_eq!(out, "demo;[anon] 1\n");
}

#[test]
fn raw_array_form() {
    // trace-cmd without the print format prints dynamic arrays as bytes
    let text = "\
 a-1 [0] 1.0: ev: x
 a-1 [0] 1.1: user_unwind_cookie: cookie=0x5
 a-1 [0] 1.2: user_unwind_stack: cookie=0x5 nr=1 offsets=ARRAY[39, 11, 00, 00, 00, 00, 00, 00] hashes=ARRAY[d4, c3, b2, a1]
 a-1 [0] 1.3: file_cache: hash=0xa1b2c3d4 path=/x build_id=
";
    let (samples, _) = Engine::run_text(text);
    assert_eq!(
        ok_frames(&samples[0]),
        vec![Frame::UnknownHash {
            offset: 0x1139,
            hash: 0xa1b2c3d4
        }]
    );
}

#[test]
fn one_cookie_serves_several_events() {
    let text = "\
 t-5 [0] 1.0: a: 1
 t-5 [0] 1.1: user_unwind_cookie: cookie=0x9
 t-5 [0] 1.2: b: 2
 t-5 [0] 1.3: user_unwind_cookie: cookie=0x9
 t-5 [0] 1.4: user_unwind_stack: cookie=0x9 nr=1 offsets={0x1} hashes={0x0}
";
    let (samples, e) = Engine::run_text(text);
    let names: Vec<_> = samples.iter().map(|s| s.event.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(samples.iter().all(|s| ok_frames(s) == vec![Frame::Anon(1)]));
    assert_eq!(e.stats.events_with_stack, 2);
    assert_eq!(
        e.stats.cookies_without_stack + e.stats.stacks_without_cookie,
        0
    );
}

#[test]
fn nested_event_before_cookie_is_lifo() {
    // an interrupt event lands between the syscall event and its cookie
    let text = "\
 t-5 [0] 1.0: outer: 1
 t-5 [0] 1.1: irq: 2
 t-5 [0] 1.2: user_unwind_cookie: cookie=0x9
 t-5 [0] 1.3: user_unwind_cookie: cookie=0x9
 t-5 [0] 1.4: user_unwind_stack: cookie=0x9 nr=0 offsets={} hashes={}
";
    let (samples, e) = Engine::run_text(text);
    assert_eq!(samples.len(), 2);
    assert!(samples.iter().all(|s| matches!(s.stack, StackState::Ok(_))));
    assert_eq!(e.stats.events_without_cookie, 0);
}

#[test]
fn interleaved_tasks() {
    let text = "\
 a-1 [0] 1.0: ev: a
 b-2 [1] 1.0: ev: b
 b-2 [1] 1.1: user_unwind_cookie: cookie=0x22
 a-1 [0] 1.1: user_unwind_cookie: cookie=0x11
 a-1 [0] 1.2: user_unwind_stack: cookie=0x11 nr=1 offsets={0x1} hashes={0x0}
 b-2 [1] 1.2: user_unwind_stack: cookie=0x22 nr=1 offsets={0x2} hashes={0x0}
";
    let (samples, _) = Engine::run_text(text);
    assert_eq!(samples.len(), 2);
    for s in &samples {
        let want = if s.event.pid == 1 { 1 } else { 2 };
        assert_eq!(ok_frames(s), vec![Frame::Anon(want)]);
    }
}

#[test]
fn undecoded_events_point_at_dash_e_unwind() {
    // trace-cmd report of a trace.dat recorded without `-e unwind` by an earlier version
    // (events in system `unwind`, whose formats trace-cmd saves only when named).
    let text = "\
cpus=2
            demo-91    [000]    12.000100: sys_enter_getppid:    
[UNKNOWN EVENT][UNKNOWN EVENT] (NULL):               [UNKNOWN EVENT]
[UNKNOWN EVENT][UNKNOWN EVENT] (NULL):               [UNKNOWN EVENT]
";
    let (_, e) = Engine::run_text(text);
    assert_eq!(e.stats.undecoded_events, 2);
    assert_eq!(e.stats.cookies, 0);
    assert!(e.stats.has_problems());
    assert!(e.stats.to_string().contains("record with `-e unwind`"));
}

#[test]
fn lost_events_are_counted() {
    let text = "\
 t-5 [0] 1.0: e1: lost cookie
 t-5 [0] 1.1: user_unwind_stack: cookie=0x1 nr=0 offsets={} hashes={}
 t-5 [0] 2.0: e2: lost stack
 t-5 [0] 2.1: user_unwind_cookie: cookie=0x2
 t-5 [0] 3.0: e3: ok
 t-5 [0] 3.1: user_unwind_cookie: cookie=0x3
 t-5 [0] 3.2: user_unwind_stack: cookie=0x3 nr=1 offsets={0x10} hashes={0x0}
 u-6 [0] 4.0: user_unwind_cookie: cookie=0x4
 u-6 [0] 4.1: user_unwind_stack: cookie=0x5 nr=0 offsets={} hashes={}
 v-7 [0] 5.0: e5: trace ends before the stack
 v-7 [0] 5.1: user_unwind_cookie: cookie=0x6
CPU:1 [LOST 42 EVENTS]
";
    let (samples, e) = Engine::run_text(text);
    let st: Vec<_> = samples
        .iter()
        .map(|s| (s.event.name.as_str(), &s.stack))
        .collect();
    assert!(
        matches!(
            st[..],
            [
                ("e1", StackState::NoCookie),
                ("e2", StackState::NoStack(2)),
                ("e3", StackState::Ok(_)),
                ("e5", StackState::NoStack(6)),
            ]
        ),
        "{st:?}"
    );
    assert_eq!(e.stats.events_without_cookie, 1);
    assert_eq!(e.stats.cookies_without_event, 1); // cookie 0x4
    assert_eq!(e.stats.cookies_without_stack, 3); // 0x2, 0x4, 0x6
    assert_eq!(e.stats.stacks_without_cookie, 2); // 0x1, 0x5
    assert_eq!(e.stats.lost_reported, 42);
    assert!(e.stats.has_problems());
}

#[test]
fn most_recent_file_cache_wins() {
    for form in [Form::Tracefs, Form::TraceCmd] {
        let evs = vec![
            Ev::File {
                hash: 0x1234,
                path: "/a".into(),
                build_id: "aa".into(),
            },
            Ev::Event {
                comm: "t",
                pid: 9,
                name: "e1",
                body: "x",
            },
            Ev::Cookie {
                comm: "t",
                pid: 9,
                cookie: 1,
            },
            Ev::Stack {
                comm: "t",
                pid: 9,
                cookie: 1,
                frames: vec![(0x10, 0x1234)],
            },
            Ev::File {
                hash: 0x1234,
                path: "/b with space".into(),
                build_id: "".into(),
            },
            Ev::Event {
                comm: "t",
                pid: 9,
                name: "e2",
                body: "x",
            },
            Ev::Cookie {
                comm: "t",
                pid: 9,
                cookie: 2,
            },
            Ev::Stack {
                comm: "t",
                pid: 9,
                cookie: 2,
                frames: vec![(0x10, 0x1234)],
            },
            // a reminder of the same mapping is no reuse
            Ev::File {
                hash: 0x1234,
                path: "/b with space".into(),
                build_id: "".into(),
            },
        ];
        let (samples, e) = Engine::run_text(&render(&evs, form));
        assert_eq!(samples.len(), 2);
        let path_of = |s: &Sample| match ok_frames(s)[0] {
            Frame::File { file, .. } => e.files()[file].path.clone(),
            f => panic!("{f:?}"),
        };
        assert_eq!(path_of(&samples[0]), "/a");
        assert_eq!(path_of(&samples[1]), "/b with space");
        assert_eq!(e.stats.hash_reused, 1, "{form:?}");
        assert_eq!(e.stats.file_cache, 3);
    }
}

#[test]
fn orphan_stacks_on_request() {
    let text = "\
 t-5 [0] 1.1: user_unwind_stack: cookie=0x1 nr=1 offsets={0x10} hashes={0x0}
";
    let (samples, e) = Engine::run_text(text);
    assert!(samples.is_empty());
    assert_eq!(e.stats.stacks_without_cookie, 1);
    let (ok, out, _) = ustack(&["-q"], text);
    assert!(ok && out.is_empty(), "{out}");
    let (ok, out, _) = ustack(&["-q", "--orphans"], text);
    assert!(ok);
    assert_eq!(out, "t-5 [0] 1.1: user_unwind_stack: cookie=0x1 nr=1 offsets={0x10} hashes={0x0}\n    0x0000000000000010 [anon]\n\n");
    let (_, out, _) = ustack(
        &[
            "-q",
            "--orphans",
            "-f",
            "folded",
            "--event",
            "user_unwind_stack",
        ],
        text,
    );
    assert_eq!(out, "t;[anon] 1\n");
}

/// Runs `text`, whose first stack shows two frames (`[anon] 0x10`, `[nomap] 0x20`) of more:
/// that stack is those frames, counted as truncated.
fn run_two_frames_of_more(text: &str) -> (Vec<Sample>, Engine) {
    let (samples, e) = Engine::run_text(text);
    assert_eq!(
        ok_frames(&samples[0]),
        vec![Frame::Anon(0x10), Frame::NoMap(0x20)]
    );
    match &samples[0].stack {
        StackState::Ok(s) => assert!(s.truncated),
        _ => unreachable!(),
    }
    assert_eq!(e.stats.truncated_stacks, 1);
    (samples, e)
}

#[test]
fn truncated_multiline_stack() {
    run_two_frames_of_more(
        "\
 t-5 [0] 1.0: e: x
 t-5 [0] 1.1: user_unwind_cookie: cookie=0x3
 t-5 [0] 1.2: user_unwind_stack: cookie=0x3 nr=3
  => 0x0000000000000010 [anon]
  => 0x0000000000000020 [nomap]",
    );
}

#[test]
fn stack_text_with_more_frames_in_the_record() {
    // The module's text of a stack deeper than 224 frames: the first frames, then how
    // many more the record holds. The stack is the frames shown, counted as truncated, and
    // the line is neither malformed nor taken for the next event.
    let (samples, e) = run_two_frames_of_more(
        "\
 t-5 [0] 1.0: e: x
 t-5 [0] 1.1: user_unwind_cookie: cookie=0x3
 t-5 [0] 1.2: user_unwind_stack: cookie=0x3 nr=4
  => 0x0000000000000010 [anon]
  => 0x0000000000000020 [nomap]
  (2 more frames, in the binary record only)
 t-5 [0] 1.3: e: y",
    );
    assert_eq!(e.stats.malformed, 0);
    assert_eq!(samples.len(), 2);
}

#[test]
fn kernel_stack_lines_are_not_ours() {
    // ftrace's own <stack trace> after an event: its frames must not be taken as ours,
    // and the pseudo event gets no cookie
    let text = "\
 t-5 [0] 1.0: e: x
 t-5 [0] 1.0: <stack trace>
 => __x64_sys_getppid+0x10/0x20
 => do_syscall_64+0x5d/0x170
 t-5 [0] 1.1: user_unwind_cookie: cookie=0x3
 t-5 [0] 1.2: user_unwind_stack: cookie=0x3 nr=1
 => 0x0000000000000010 [anon]
";
    let (samples, e) = Engine::run_text(text);
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].event.name, "e");
    assert_eq!(ok_frames(&samples[0]), vec![Frame::Anon(0x10)]);
    assert_eq!(e.stats.malformed, 0);
    assert_eq!(e.stats.events_without_cookie, 0);
}

#[test]
fn malformed_lines_are_counted() {
    let text = "\
 t-5 [0] 1.0: user_unwind_cookie: cookie=zz
 t-5 [0] 1.1: user_unwind_stack: cookie=0x1 nr=2 offsets={0x1,0x2} hashes={0x0}
 t-5 [0] 1.2: user_unwind_stack: cookie=0x1 nr=1 offsets={0x1,bad} hashes={0x0}
 t-5 [0] 1.3: file_cache: hash=0x1 path= build_id=
 t-5 [0] 1.4: file_cache: hash=0x1 path=/x build_id=xyz
garbage user_unwind_stack: cookie=
 t-5 [0] 1.5: user_unwind_stack: cookie=0x2 nr=2
 => 0x10 [zzz]
 => 0x20 [anon]
";
    let (_, e) = Engine::run_text(text);
    // cookie=zz, length mismatch, bad element, empty path, bad build-id, garbage, bad frame tag
    assert_eq!(e.stats.malformed, 7, "{}", e.stats);
    assert_eq!(e.stats.stacks, 2);
}

#[test]
fn record_kinds() {
    let mut p = ustack::parse::Parser::new();
    let mut st = ustack::stats::Stats::default();
    let mut out = Vec::new();
    for l in RST_TRACEFS.lines() {
        p.feed(l, &mut st, &mut out);
    }
    p.finish(&mut st, &mut out);
    let kinds: Vec<_> = out.iter().map(|r| &r.kind).collect();
    assert!(matches!(
        kinds[0],
        Kind::FileCache {
            hash: 0xa1b2c3d4,
            ..
        }
    ));
    assert!(matches!(kinds[1], Kind::Other));
    assert!(matches!(kinds[2], Kind::Cookie(0x300000002)));
    assert!(matches!(
        kinds[3],
        Kind::Stack {
            cookie: 0x300000002,
            truncated: false,
            ..
        }
    ));
    assert_eq!(out[3].line_no, 6);
}

// ---- end to end on the demo program ----

const DEMO_SRC: &str = include_str!("../demo/demo.c");
const DEMO_FLAGS: &[&str] = &[
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    "-mno-omit-leaf-frame-pointer",
    "-fno-inline",
    "-Wl,--build-id",
];
const CHAIN: &[&str] = &[
    "demo_syscall3",
    "demo_sys_getppid",
    "demo_leaf_compute",
    "demo_level_a2",
    "demo_level_a1",
    "parse_config",
    "demo_run",
    "main",
];

struct Demo {
    bin: PathBuf,
    bid: String,
    /// (offset, function, is_return) innermost first
    frames: Vec<(u64, &'static str)>,
}

fn demo() -> Demo {
    let d = tmpdir("demo");
    let bin = build(&d, "cc", "demo", "c", DEMO_SRC, DEMO_FLAGS);
    let bid = build_id(&bin);
    let mut frames = vec![(
        vaddr_to_offset(&bin, addr_after_insn(&bin, "demo_syscall3", "syscall")),
        CHAIN[0],
    )];
    for w in CHAIN.windows(2) {
        let ra = return_addrs(&bin, w[1], w[0])[0];
        frames.push((vaddr_to_offset(&bin, ra), w[1]));
    }
    Demo { bin, bid, frames }
}

fn demo_trace(dm: &Demo, form: Form, n: usize) -> String {
    const H: u32 = 0x5eed_0001;
    const LIBC: u32 = 0x5eed_0002;
    let mut evs = vec![
        Ev::File {
            hash: H,
            path: dm.bin.to_string_lossy().into(),
            build_id: dm.bid.clone(),
        },
        Ev::File {
            hash: LIBC,
            path: "/nonexistent/libc.so.6".into(),
            build_id: "ab".into(),
        },
    ];
    let mut frames: Vec<(u64, u32)> = dm.frames.iter().map(|&(o, _)| (o, H)).collect();
    frames.push((0x29d90, LIBC));
    for i in 0..n {
        let pid = if i % 2 == 0 { 100 } else { 200 };
        let comm = if pid == 100 { "demo" } else { "demo two" };
        evs.push(Ev::Event {
            comm,
            pid,
            name: "sys_enter_getppid",
            body: "NR 110 ()",
        });
        evs.push(Ev::Cookie {
            comm,
            pid,
            cookie: 0x1000 + i as u64,
        });
        evs.push(Ev::Stack {
            comm,
            pid,
            cookie: 0x1000 + i as u64,
            frames: frames.clone(),
        });
    }
    render(&evs, form)
}

#[test]
fn cli_listing_both_forms() {
    let dm = demo();
    let path = dm.bin.to_string_lossy().into_owned();
    for form in [Form::Tracefs, Form::TraceCmd] {
        let (ok, out, err) = ustack(&["--pid", "100"], &demo_trace(&dm, form, 4));
        assert!(ok, "{err}");
        let blocks: Vec<_> = out.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
        assert_eq!(blocks.len(), 2, "{out}");
        let lines: Vec<_> = blocks[0].lines().collect();
        assert!(lines[0].contains("demo-100") && lines[0].contains("sys_enter_getppid: NR 110 ()"));
        assert_eq!(lines.len(), 1 + CHAIN.len() + 1, "{out}");
        for (i, (l, &(off, f))) in lines[1..].iter().zip(dm.frames.iter()).enumerate() {
            let _ = off;
            assert!(l.starts_with(&format!("    {f}+0x")), "frame {i}: {l}");
            assert!(l.contains("demo.c:"), "frame {i}: {l}");
            assert!(l.ends_with(&format!("[{path}]")), "frame {i}: {l}");
        }
        // the exact source line of a call site
        let want = line_of(DEMO_SRC, "x = parse_config(x);");
        assert!(
            lines[1 + 6].contains(&format!("demo.c:{want})")),
            "{}",
            lines[7]
        );
        assert_eq!(
            lines.last().copied(),
            Some("    0x29d90 [/nonexistent/libc.so.6] [file not found]")
        );
        assert!(err.contains("files not found"), "summary on stderr: {err}");
    }
}

#[test]
fn cli_folded_filters_and_svg() {
    let dm = demo();
    let text = demo_trace(&dm, Form::TraceCmd, 6);
    let inner: Vec<_> = CHAIN.iter().rev().copied().collect();
    let stack = format!("[libc.so.6];{}", inner.join(";"));
    let (ok, out, _) = ustack(&["-f", "folded", "-q"], &text);
    assert!(ok);
    assert_eq!(out, format!("demo two;{stack} 3\ndemo;{stack} 3\n"));
    let (_, out, _) = ustack(&["-f", "folded", "--comm", "demo two"], &text);
    assert_eq!(out, format!("demo two;{stack} 3\n"));
    let (_, out, _) = ustack(
        &[
            "-f",
            "folded",
            "--event",
            "syscalls:sys_enter_getppid",
            "--pid",
            "100",
        ],
        &text,
    );
    assert_eq!(out, format!("demo;{stack} 3\n"));
    let (_, out, _) = ustack(&["-f", "folded", "--event", "sched_switch"], &text);
    assert_eq!(out, "");
    let (ok, out, err) = ustack(&["-f", "svg", "--title", "demo graph"], &text);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("<?xml") && out.contains("<svg"),
        "{}",
        &out[..100.min(out.len())]
    );
    assert!(out.contains("demo_leaf_compute") && out.contains("demo graph"));
    let (ok, out, err) = ustack(&["-f", "svg"], "");
    assert!(ok && out.contains("<svg"), "{err}");
}

#[test]
fn cli_sysroot_and_build_id_mismatch() {
    let dm = demo();
    let root = dm.bin.parent().unwrap();
    let evs = vec![
        Ev::File {
            hash: 7,
            path: "/demo".into(),
            build_id: dm.bid.clone(),
        },
        Ev::File {
            hash: 8,
            path: "/demo (deleted)".into(),
            build_id: "00".repeat(20),
        },
        Ev::Event {
            comm: "demo",
            pid: 1,
            name: "e",
            body: "x",
        },
        Ev::Cookie {
            comm: "demo",
            pid: 1,
            cookie: 1,
        },
        Ev::Stack {
            comm: "demo",
            pid: 1,
            cookie: 1,
            frames: vec![(dm.frames[1].0, 7), (dm.frames[1].0, 8)],
        },
    ];
    let text = render(&evs, Form::Tracefs);
    let (ok, out, err) = ustack(&["--sysroot", &root.to_string_lossy(), "--stats"], &text);
    assert!(ok);
    let lines: Vec<_> = out.lines().collect();
    assert!(
        lines[1].starts_with("    demo_sys_getppid+0x") && lines[1].ends_with("[/demo]"),
        "{out}"
    );
    let off = dm.frames[1].0;
    assert_eq!(
        lines[2],
        format!("    0x{off:x} [/demo] [build-id mismatch]")
    );
    assert!(err.contains("files with a build-id mismatch"));
    let (_, out, _) = ustack(&["-q"], &text);
    assert!(out.contains("[file not found]"), "without sysroot: {out}");
}

#[test]
fn cli_trace_dat_goes_through_trace_cmd() {
    let dm = demo();
    let d = tmpdir("dat");
    let text = demo_trace(&dm, Form::TraceCmd, 2);
    let report = d.join("report.txt");
    std::fs::write(&report, &text).unwrap();
    // a stand-in trace-cmd that checks its arguments and prints the report
    let fake = d.join("fake-trace-cmd");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n[ \"$1\" = report ] && [ \"$2\" = -i ] && [ -f \"$3\" ] || exit 3\ncat '{}'\n",
            report.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&fake)
        .status()
        .unwrap();
    let dat = d.join("trace.dat");
    let mut bytes = b"\x17\x08\x44tracing6\0".to_vec();
    bytes.extend_from_slice(&[0u8; 64]);
    std::fs::write(&dat, &bytes).unwrap();
    let fake_s = fake.to_string_lossy().into_owned();
    let (ok, out, err) = ustack(
        &[
            "-f",
            "folded",
            "--trace-cmd",
            &fake_s,
            &dat.to_string_lossy(),
        ],
        "",
    );
    assert!(ok, "{err}");
    assert!(
        out.starts_with("demo two;[libc.so.6];main;demo_run;parse_config;"),
        "{out}"
    );
    // the same through stdin
    let bin = String::from_utf8_lossy(&bytes).into_owned();
    let _ = bin; // (binary stdin is tested through a file path below)
    let (ok, out, _) = ustack_file_stdin(&["-f", "folded", "--trace-cmd", &fake_s, "-"], &dat);
    assert!(ok);
    assert!(out.contains("demo;[libc.so.6];main;"), "{out}");
    // a failing trace-cmd is an error
    let (ok, _, err) = ustack(
        &[
            "--trace-cmd",
            "/nonexistent/trace-cmd",
            &dat.to_string_lossy(),
        ],
        "",
    );
    assert!(!ok && err.contains("cannot run"), "{err}");
}

fn ustack_file_stdin(args: &[&str], file: &Path) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ustack"))
        .args(args)
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_bad_input_file() {
    let (ok, _, err) = ustack(&["/nonexistent/trace.txt"], "");
    assert!(!ok);
    assert!(err.contains("ustack: /nonexistent/trace.txt"), "{err}");
}

#[test]
fn cli_reads_a_fifo() {
    // trace_pipe cannot seek: the magic check must not need to
    let d = tmpdir("fifo");
    let fifo = d.join("trace_pipe");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let f2 = fifo.clone();
    let w = std::thread::spawn(move || std::fs::write(f2, RST_TRACECMD).unwrap());
    let (ok, out, err) = ustack(&["-q", &fifo.to_string_lossy()], "");
    w.join().unwrap();
    assert!(ok, "{err}");
    assert!(
        out.starts_with("sleep-123   [001]    10.000090: sys_enter_nanosleep:"),
        "{out}"
    );
    assert!(
        out.contains("    0x7ffd1234a000".replace("0x", "0x0000").as_str()),
        "{out}"
    );
}
