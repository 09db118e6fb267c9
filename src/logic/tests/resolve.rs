// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_logic::file_id::{HASH_ANON, HASH_NO_MAPPING};
use unwind_logic::resolve::{
    fill, resolve_known, resolve_runs, AddressSpace, KnownFiles, KnownMappings, Mapping, Run,
    RunStore, KNOWN_FILES, KNOWN_MAPPINGS, RECENT,
};
use unwind_logic::task_maps::Stamp;

const SHIFT: u32 = 12;
const BIN: usize = 0xb1;
const LIBC: usize = 0x1c;

/// A table of mappings; counts lookups and file runs.
struct Space {
    maps: Vec<Mapping>,
    lookups: usize,
    runs: Vec<usize>,
}

impl Space {
    fn new() -> Self {
        let map = |start, end, pgoff, file| Mapping {
            start,
            end,
            pgoff,
            file,
        };
        Space {
            maps: vec![
                map(0x40_0000, 0x40_1000, 0, BIN),         // ELF header page
                map(0x40_1000, 0x40_9000, 1, BIN),         // program text
                map(0x7f00_0000, 0x7f01_0000, 0x28, LIBC), // libc text
                map(0x7f10_0000, 0x7f11_0000, 0, 0),       // JIT code
            ],
            lookups: 0,
            runs: Vec::new(),
        }
    }
}

impl AddressSpace for Space {
    fn lookup(&mut self, addr: u64) -> Option<Mapping> {
        self.lookups += 1;
        self.maps
            .iter()
            .copied()
            .find(|m| m.start <= addr && addr < m.end)
    }
    fn file_run(&mut self, file: usize) -> u32 {
        self.runs.push(file);
        file as u32 * 0x100
    }
}

/// Runs in a vector, with room for at most `cap`.
struct Runs {
    v: Vec<Run>,
    cap: usize,
}

impl RunStore for Runs {
    fn push(&mut self, run: Run) -> bool {
        if self.v.len() == self.cap {
            return false;
        }
        self.v.push(run);
        true
    }
}

/// The record of `frames` (as `(offset, hash)` per frame), as the module writes it: runs,
/// then the event's arrays filled from them (the arrays are bytes, unaligned in the event).
fn resolve(space: &mut impl AddressSpace, frames: &[u64]) -> Vec<(u64, u32)> {
    let mut runs = Runs {
        v: Vec::new(),
        cap: frames.len(),
    };
    assert_eq!(resolve_runs(space, SHIFT, frames, &mut runs), frames.len());
    assert!(runs.v.iter().all(|r| r.len > 0), "no empty run");
    let covered: usize = runs.v.iter().map(|r| r.len as usize).sum();
    assert_eq!(covered, frames.len(), "the runs cover the stack");
    record(frames, &runs.v)
}

/// The record of `frames` from runs that cover them: the event's arrays filled from them.
fn record(frames: &[u64], runs: &[Run]) -> Vec<(u64, u32)> {
    let mut offsets = vec![[0xaa; 8]; frames.len()];
    let mut hashes = vec![[0xaa; 4]; frames.len()];
    assert_eq!(
        fill(frames, runs.iter().copied(), &mut offsets, &mut hashes),
        frames.len()
    );
    offsets
        .into_iter()
        .map(u64::from_ne_bytes)
        .zip(hashes.into_iter().map(u32::from_ne_bytes))
        .collect()
}

fn run(space: &mut Space, frames: &[u64]) -> Vec<(u64, u32)> {
    resolve(space, frames)
}

#[test]
fn a_run_of_frames_in_one_mapping_costs_one_lookup_and_one_hash() {
    // 70 frames in the program, then 3 in libc: a deep recursion.
    let mut frames: Vec<u64> = (0..70).map(|i| 0x40_2000 + i * 0x10).collect();
    frames.extend([0x7f00_1000, 0x7f00_2000, 0x7f00_0010]);
    let mut space = Space::new();
    let got = run(&mut space, &frames);
    assert_eq!(space.lookups, 2);
    assert_eq!(space.runs, vec![BIN, LIBC]);
    // (addr - start) + (pgoff << PAGE_SHIFT)
    assert_eq!(got[0], (0x2000 - 0x1000 + 0x1000, BIN as u32 * 0x100));
    assert_eq!(got[69], (0x2000 + 69 * 0x10, BIN as u32 * 0x100));
    assert_eq!(got[70], (0x1000 + 0x28000, LIBC as u32 * 0x100));
    assert_eq!(got[72], (0x10 + 0x28000, LIBC as u32 * 0x100));
}

#[test]
fn anonymous_and_unmapped_frames_keep_their_address() {
    let mut space = Space::new();
    let got = run(&mut space, &[0x7f10_0040, 0x1234, 0x40_2000]);
    assert_eq!(got[0], (0x7f10_0040, HASH_ANON));
    assert_eq!(got[1], (0x1234, HASH_NO_MAPPING));
    assert_eq!(got[2], (0x2000, BIN as u32 * 0x100));
    assert_eq!(
        space.runs,
        vec![BIN],
        "no file run for anonymous or unmapped frames"
    );
}

#[test]
fn one_file_in_two_mappings_is_hashed_once_and_so_is_a_file_the_stack_comes_back_to() {
    let mut space = Space::new();
    // Header page then text of the program (two mappings, one file): one run, two lookups.
    let got = run(&mut space, &[0x40_0100, 0x40_1100, 0x40_1200]);
    assert_eq!((space.lookups, space.runs.clone()), (2, vec![BIN]));
    assert_eq!(got[0].0, 0x100);
    assert_eq!(got[1].0, 0x1100);
    // program, libc, program, JIT, program: each mapping looked up once, each file hashed
    // once (the mappings met last are kept for the rest of the stack).
    let mut space = Space::new();
    run(
        &mut space,
        &[0x40_2000, 0x7f00_1000, 0x40_2000, 0x7f10_0000, 0x40_2000],
    );
    assert_eq!(space.runs, vec![BIN, LIBC]);
    assert_eq!(space.lookups, 3);
}

#[test]
fn a_lookup_that_answers_a_mapping_not_containing_the_address_is_not_trusted() {
    struct Liar;
    impl AddressSpace for Liar {
        fn lookup(&mut self, _: u64) -> Option<Mapping> {
            Some(Mapping {
                start: 0x1000,
                end: 0x2000,
                pgoff: 0,
                file: BIN,
            })
        }
        fn file_run(&mut self, _: usize) -> u32 {
            7
        }
    }
    let got = resolve(&mut Liar, &[0x5000, 0x1800]);
    assert_eq!(got, [(0x5000, HASH_NO_MAPPING), (0x800, 7)]);
}

/// The rule, frame by frame: each frame resolved in the mapping that holds it; a file hashed
/// the first time the stack meets it.
fn reference(space: &Space, frames: &[u64]) -> (Vec<(u64, u32)>, Vec<usize>) {
    let mut out = Vec::new();
    let mut runs = Vec::new();
    for &addr in frames {
        let m = space
            .maps
            .iter()
            .copied()
            .find(|m| m.start <= addr && addr < m.end);
        match m {
            None => out.push((addr, HASH_NO_MAPPING)),
            Some(m) if m.file == 0 => out.push((addr, HASH_ANON)),
            Some(m) => {
                if !runs.contains(&m.file) {
                    runs.push(m.file);
                }
                out.push((addr - m.start + (m.pgoff << SHIFT), m.file as u32 * 0x100));
            }
        }
    }
    (out, runs)
}

fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// Where random stacks have their frames, over [`Space::new`]'s mappings: addresses in each
/// mapping, between them, in none (`0x50_0000..0x50_1000`), and across the end of the
/// program text.
const PLACES: [(u64, u64); 6] = [
    (0x40_0000, 0x1000),
    (0x40_1000, 0x8000),
    (0x7f00_0000, 0x1_0000),
    (0x7f10_0000, 0x1_0000),
    (0x50_0000, 0x1000),
    (0x40_8ff8, 0x10),
];

/// A random stack of `len` frames in runs over `places` (start, size).
fn random_stack(next: &mut impl FnMut() -> u64, places: &[(u64, u64)], len: usize) -> Vec<u64> {
    let mut frames = Vec::new();
    while frames.len() < len {
        let (start, size) = places[(next() % places.len() as u64) as usize];
        // Runs of frames in one place, as real stacks have.
        for _ in 0..1 + next() % 6 {
            frames.push(start + next() % size);
        }
    }
    frames.truncate(len);
    frames
}

#[test]
fn random_stacks_resolve_as_frame_by_frame_with_one_lookup_per_mapping() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let places = PLACES;
    for _ in 0..2000 {
        let len = (next() % 40) as usize;
        let frames = random_stack(&mut next, &places, len);
        let mut space = Space::new();
        let got = run(&mut space, &frames);
        let (want, want_runs) = reference(&Space::new(), &frames);
        assert_eq!(got, want, "frames {frames:x?}");
        assert_eq!(space.runs, want_runs, "frames {frames:x?}");
        // The four mappings fit the resolver's recent ones: one lookup per mapping met, and
        // one per frame in no mapping (nothing to keep).
        let maps = Space::new().maps;
        let in_map = |m: &Mapping| frames.iter().any(|&a| m.start <= a && a < m.end);
        let unmapped = frames
            .iter()
            .filter(|&&a| !maps.iter().any(|m| m.start <= a && a < m.end))
            .count();
        assert_eq!(
            space.lookups,
            maps.iter().filter(|m| in_map(m)).count() + unmapped,
            "frames {frames:x?}"
        );
    }
}

/// `n` mappings of 32 KiB, 1 MiB apart, each of a file of its own (0x100, 0x101, ...).
fn one_file_each(n: u64) -> Vec<Mapping> {
    (0..n)
        .map(|k| Mapping {
            start: 0x10_0000 * (k + 1),
            end: 0x10_0000 * (k + 1) + 0x8000,
            pgoff: k,
            file: 0x100 + k as usize,
        })
        .collect()
}

#[test]
fn more_files_than_the_resolver_keeps_still_resolve_exactly() {
    // Seven files, one mapping each: the oldest leaves the recent ones and is looked up and
    // hashed again when the stack comes back to it.
    let maps = one_file_each(7);
    let places: Vec<(u64, u64)> = maps.iter().map(|m| (m.start, 0x8000)).collect();
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let len = (next() % 60) as usize;
        let frames = random_stack(&mut next, &places, len);
        let mut space = Space {
            maps: maps.clone(),
            lookups: 0,
            runs: Vec::new(),
        };
        let got = run(&mut space, &frames);
        let (want, want_runs) = reference(&space, &frames);
        assert_eq!(got, want, "frames {frames:x?}");
        // Each file at least once, and never more often than the stack changes file.
        let changes = frames
            .windows(2)
            .filter(|w| w[0] >> 20 != w[1] >> 20)
            .count()
            + usize::from(!frames.is_empty());
        assert!(space.runs.len() >= want_runs.len(), "frames {frames:x?}");
        assert!(space.runs.len() <= changes, "frames {frames:x?}");
        assert_eq!(
            space.lookups,
            space.runs.len(),
            "one lookup per file met anew"
        );
        // Exactly: the resolver keeps the last RECENT mappings it looked up, the oldest
        // replaced first (a frame in a kept mapping does not make it younger).
        let mut kept: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
        let mut lookups = 0;
        for &a in &frames {
            let start = a & !0xf_ffff;
            if !kept.contains(&start) {
                lookups += 1;
                if kept.len() == RECENT {
                    kept.pop_front();
                }
                kept.push_back(start);
            }
        }
        assert_eq!(space.lookups, lookups, "frames {frames:x?}");
    }
}

#[test]
fn a_deep_stack_is_a_few_runs_and_neighbouring_mappings_of_a_file_make_one() {
    // 70 frames in the program's text, 3 in libc: two runs.
    let mut frames: Vec<u64> = (0..70).map(|i| 0x40_2000 + i * 0x10).collect();
    frames.extend([0x7f00_1000, 0x7f00_2000, 0x7f00_0010]);
    let mut runs = Runs {
        v: Vec::new(),
        cap: 8,
    };
    assert_eq!(
        resolve_runs(&mut Space::new(), SHIFT, &frames, &mut runs),
        73
    );
    assert_eq!(
        runs.v,
        [
            Run {
                bias: 0u64.wrapping_sub(0x40_0000),
                len: 70,
                hash: BIN as u32 * 0x100
            },
            Run {
                bias: 0x28000u64.wrapping_sub(0x7f00_0000),
                len: 3,
                hash: LIBC as u32 * 0x100
            },
        ]
    );
    // The program's header page and its text follow each other in the file: one run.
    let mut runs = Runs {
        v: Vec::new(),
        cap: 8,
    };
    resolve_runs(
        &mut Space::new(),
        SHIFT,
        &[0x40_0100, 0x40_1100, 0x1234, 0x1238, 0x7f10_0000],
        &mut runs,
    );
    let shape: Vec<(u32, u32)> = runs.v.iter().map(|r| (r.len, r.hash)).collect();
    assert_eq!(
        shape,
        [
            (2, BIN as u32 * 0x100),
            (2, HASH_NO_MAPPING),
            (1, HASH_ANON)
        ]
    );
}

#[test]
fn out_of_room_the_runs_cover_a_prefix_resolved_exactly_and_fill_writes_only_it() {
    let mut next = xorshift(0x1234_5678_9abc_def1);
    let places = [
        (0x40_1000, 0x8000),
        (0x7f00_0000, 0x1_0000),
        (0x7f10_0000, 0x1_0000),
        (0x50_0000, 0x1000),
    ];
    for _ in 0..2000 {
        let len = (next() % 40) as usize;
        let frames = random_stack(&mut next, &places, len);
        let (want, _) = reference(&Space::new(), &frames);
        let cap = (next() % 6) as usize;
        let mut runs = Runs { v: Vec::new(), cap };
        let covered = resolve_runs(&mut Space::new(), SHIFT, &frames, &mut runs);
        assert!(runs.v.len() <= cap);
        assert_eq!(
            covered,
            runs.v.iter().map(|r| r.len as usize).sum::<usize>(),
            "frames {frames:x?}"
        );
        assert!(covered == frames.len() || runs.v.len() == cap);
        // Room for one more frame than covered: fill stops where the runs end and leaves
        // the rest alone.
        let room = (covered + 1).min(frames.len());
        let mut offsets = vec![[0xaa; 8]; room];
        let mut hashes = vec![[0xaa; 4]; room];
        assert_eq!(
            fill(&frames, runs.v.clone(), &mut offsets, &mut hashes),
            covered.min(room)
        );
        for i in 0..room {
            let got = (
                u64::from_ne_bytes(offsets[i]),
                u32::from_ne_bytes(hashes[i]),
            );
            if i < covered {
                assert_eq!(got, want[i], "frame {i} of {frames:x?}");
            } else {
                assert_eq!(got, (0xaaaa_aaaa_aaaa_aaaa, 0xaaaa_aaaa), "frame {i}");
            }
        }
    }
}

const STAMP: Stamp = Stamp {
    exec_id: 3,
    seq: 42,
};

/// Resolves `frames` from `known` at `stamp`: the record and the hashes of the files met.
fn from_known(
    known: &KnownMappings,
    stamp: Stamp,
    frames: &[u64],
) -> Option<(Vec<(u64, u32)>, Vec<u32>)> {
    let mut runs = Runs {
        v: Vec::new(),
        cap: frames.len(),
    };
    let mut files = KnownFiles::new();
    let covered = resolve_known(known, stamp, SHIFT, frames, &mut runs, &mut files)?;
    assert_eq!(covered, frames.len());
    Some((record(frames, &runs.v), files.hashes().to_vec()))
}

/// A stack resolved from the mappings its task's earlier stacks looked up is recorded as a
/// resolution with lookups records it, and meets its files as often (the tracer's uses);
/// one that leaves them (a mapping not known, a frame in no mapping) is not resolved from
/// them. Random stacks over the table's mappings, one after another, as a task's stacks.
#[test]
fn stacks_resolved_from_known_mappings_are_recorded_as_with_lookups() {
    let mut next = xorshift(0x1234_5678_9abc_def1);
    let places = PLACES;
    let mut known = KnownMappings::new();
    let (mut hits, mut misses) = (0, 0);
    for _ in 0..3000 {
        let len = 1 + (next() % 30) as usize;
        let frames = random_stack(&mut next, &places, len);
        let (want, want_runs) = reference(&Space::new(), &frames);
        let want_files: Vec<u32> = {
            // The files as the resolver with lookups meets them (per stack, while recent).
            let mut space = Space::new();
            resolve(&mut space, &frames);
            space.runs.iter().map(|&f| f as u32 * 0x100).collect()
        };
        match from_known(&known, STAMP, &frames) {
            Some((got, files)) => {
                hits += 1;
                assert_eq!(got, want, "frames {frames:x?}");
                assert_eq!(files, want_files, "frames {frames:x?}");
                assert!(frames.iter().all(|&a| !(0x50_0000..0x50_1000).contains(&a)));
            }
            None => {
                misses += 1;
                // With lookups, recording: the next stacks may be resolved from them.
                let mut space = Space::new();
                let got = resolve(&mut known.recording(Some(STAMP), &mut space), &frames);
                assert_eq!(got, want, "frames {frames:x?}");
                assert_eq!(space.runs, want_runs);
            }
        }
    }
    assert!(hits > 500 && misses > 100, "hits {hits} misses {misses}");
    // Known under one stamp, not under another; and nothing is kept without a stamp.
    let frames = [0x40_2000, 0x7f00_0100];
    let mut space = Space::new();
    resolve(&mut known.recording(Some(STAMP), &mut space), &frames);
    assert!(from_known(&known, STAMP, &frames).is_some());
    let moved = Stamp {
        seq: STAMP.seq + 2,
        ..STAMP
    };
    assert!(from_known(&known, moved, &frames).is_none());
    let exec = Stamp {
        exec_id: STAMP.exec_id + 1,
        ..STAMP
    };
    assert!(from_known(&known, exec, &frames).is_none());
    resolve(&mut known.recording(None, &mut Space::new()), &frames);
    assert!(from_known(&known, STAMP, &frames).is_none());
    // A new stamp forgets what the old one knew.
    resolve(
        &mut known.recording(Some(STAMP), &mut Space::new()),
        &frames,
    );
    resolve(
        &mut known.recording(Some(moved), &mut Space::new()),
        &[0x40_2000],
    );
    assert!(from_known(&known, moved, &[0x40_2000]).is_some());
    assert!(
        from_known(&known, moved, &frames).is_none(),
        "libc was known under the old stamp only"
    );
}

/// The bounds: more mappings than are kept, and more file uses in one stack than a
/// resolution from them counts, send the stack to lookups; a file's second mapping looked up
/// in a stack that had hashed the first keeps the file's hash.
#[test]
fn known_mappings_are_bounded_and_a_files_second_mapping_keeps_its_hash() {
    let maps = one_file_each(KNOWN_MAPPINGS as u64 + 2);
    let all: Vec<u64> = maps.iter().map(|m| m.start + 0x10).collect();
    let mut table = Space {
        maps: maps.clone(),
        lookups: 0,
        runs: Vec::new(),
    };
    let mut known = KnownMappings::new();
    resolve(&mut known.recording(Some(STAMP), &mut table), &all);
    assert!(
        from_known(&known, STAMP, &all).is_none(),
        "more mappings than kept"
    );
    let last: Vec<u64> = all[all.len() - KNOWN_MAPPINGS..].to_vec();
    let (got, _) = from_known(&known, STAMP, &last).expect("the last ones are kept");
    assert_eq!(
        got,
        reference(
            &Space {
                maps: maps.clone(),
                lookups: 0,
                runs: Vec::new()
            },
            &last
        )
        .0
    );
    // A stack that alternates between more files than the resolver's recent ones meets a
    // file again at each return: more uses than KNOWN_FILES.
    let few = &last[..RECENT_PLUS_ONE];
    let bouncing: Vec<u64> = few
        .iter()
        .cycle()
        .take(KNOWN_FILES * RECENT_PLUS_ONE)
        .copied()
        .collect();
    assert!(
        from_known(&known, STAMP, &bouncing).is_none(),
        "too many file uses"
    );
    // Two mappings of one file: the second, looked up after the first was hashed in the same
    // stack, keeps the hash (the resolver does not hash it again).
    let two = vec![
        Mapping {
            start: 0x40_0000,
            end: 0x40_1000,
            pgoff: 0,
            file: BIN,
        },
        Mapping {
            start: 0x40_1000,
            end: 0x40_9000,
            pgoff: 1,
            file: BIN,
        },
    ];
    let mut table = Space {
        maps: two.clone(),
        lookups: 0,
        runs: Vec::new(),
    };
    let mut known = KnownMappings::new();
    let frames = [0x40_0100, 0x40_2000];
    resolve(&mut known.recording(Some(STAMP), &mut table), &frames);
    assert_eq!(table.runs, [BIN], "hashed once");
    let (got, files) =
        from_known(&known, STAMP, &frames).expect("both mappings known with the hash");
    assert_eq!(
        got,
        reference(
            &Space {
                maps: two,
                lookups: 0,
                runs: Vec::new()
            },
            &frames
        )
        .0
    );
    assert_eq!(files, [BIN as u32 * 0x100]);
}

const RECENT_PLUS_ONE: usize = unwind_logic::resolve::RECENT + 1;

/// With more mappings in a stack than the resolver's recent ones (eight known: two files of
/// two mappings each, three of one, an anonymous one), a stack resolved from the known
/// mappings is recorded as with lookups and meets its files as often: a file evicted from
/// the recent mappings and met again counts again, a file's second mapping does not.
#[test]
fn known_mappings_beyond_the_recent_ones_meet_files_as_lookups_do() {
    let mut maps = one_file_each(KNOWN_MAPPINGS as u64);
    // Mappings 1 and 2 of one file (its header page and its text), 4 and 5 of another; 7
    // anonymous.
    maps[2].file = maps[1].file;
    maps[5].file = maps[4].file;
    maps[7].file = 0;
    let table = || Space {
        maps: maps.clone(),
        lookups: 0,
        runs: Vec::new(),
    };
    let places: Vec<(u64, u64)> = maps.iter().map(|m| (m.start, m.end - m.start)).collect();
    // Every mapping known: the first stack meets them all.
    let mut known = KnownMappings::new();
    let all: Vec<u64> = maps.iter().map(|m| m.start).collect();
    resolve(&mut known.recording(Some(STAMP), &mut table()), &all);
    let mut next = xorshift(0x0dd0_5eed_cafe_f00d);
    let mut evicted_again = 0;
    for _ in 0..3000 {
        let len = 1 + (next() % 40) as usize;
        let frames = random_stack(&mut next, &places, len);
        let mut space = table();
        let want = resolve(&mut space, &frames);
        let want_files: Vec<u32> = space.runs.iter().map(|&f| f as u32 * 0x100).collect();
        let mut distinct = want_files.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.len() < want_files.len() {
            evicted_again += 1;
        }
        if want_files.len() > KNOWN_FILES {
            assert!(
                from_known(&known, STAMP, &frames).is_none(),
                "frames {frames:x?}"
            );
            continue;
        }
        let (got, files) = from_known(&known, STAMP, &frames).expect("every mapping is known");
        assert_eq!(got, want, "frames {frames:x?}");
        assert_eq!(files, want_files, "frames {frames:x?}");
    }
    assert!(
        evicted_again > 300,
        "stacks that met a file twice: {evicted_again}"
    );
}
