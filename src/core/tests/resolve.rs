// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_core::file_id::{HASH_ANON, HASH_NO_MAPPING};
use unwind_core::resolve::{resolve, AddressSpace, Mapping};

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

fn run(space: &mut Space, frames: &[u64]) -> Vec<(u64, u32)> {
    let mut offsets = vec![0; frames.len()];
    let mut hashes = vec![0; frames.len()];
    resolve(space, SHIFT, frames, &mut offsets, &mut hashes);
    offsets.into_iter().zip(hashes).collect()
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
fn one_file_in_two_mappings_is_one_run_and_a_file_after_a_gap_a_new_one() {
    let mut space = Space::new();
    // Header page then text of the program (two mappings, one file): one run, two lookups.
    let got = run(&mut space, &[0x40_0100, 0x40_1100, 0x40_1200]);
    assert_eq!((space.lookups, space.runs.clone()), (2, vec![BIN]));
    assert_eq!(got[0].0, 0x100);
    assert_eq!(got[1].0, 0x1100);
    // program, libc, program, JIT, program: four runs of the two files.
    let mut space = Space::new();
    run(
        &mut space,
        &[0x40_2000, 0x7f00_1000, 0x40_2000, 0x7f10_0000, 0x40_2000],
    );
    assert_eq!(space.runs, vec![BIN, LIBC, BIN, BIN]);
    assert_eq!(space.lookups, 5);
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
    let (mut offsets, mut hashes) = ([0u64; 2], [0u32; 2]);
    resolve(
        &mut Liar,
        SHIFT,
        &[0x5000, 0x1800],
        &mut offsets,
        &mut hashes,
    );
    assert_eq!((offsets, hashes), ([0x5000, 0x800], [HASH_NO_MAPPING, 7]));
}
