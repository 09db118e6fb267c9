// SPDX-License-Identifier: GPL-2.0
//! The per-file summaries: the bias of an executable mapping agrees with `ElfInfo::bias`
//! on real files (every executable segment, at every page it maps), and the bounded table
//! finds what it kept, keeps a set's files until one more comes, and ignores key 0.
#![cfg(not(loom))]

use unwind_logic::cfi::elf;
use unwind_logic::cfi::modules::{find, keep, set_of, ModuleSlot, ModuleSummary, MODULE_WAYS};

const PAGE: u64 = 4096;
const FILES: &[&str] = &[
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/ld-linux-x86-64.so.2",
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/bin/python3.11",
    "/usr/bin/perl",
    "/bin/ls",
];

#[test]
fn executable_mappings_get_the_bias_of_elfinfo() {
    let mut checked = 0;
    for path in FILES {
        let Ok(bytes) = std::fs::read(path) else {
            println!("skipping {path}: not readable");
            continue;
        };
        let len = elf::headers_len(&bytes).expect("headers") as usize;
        let info = elf::parse(&bytes[..len]).expect("parse");
        let summary = ModuleSummary::from_elf(&info, PAGE);
        assert_eq!(
            summary.has_unwind_info(),
            info.eh_frame_hdr.is_some(),
            "{path}"
        );
        for (i, load) in info.loads().iter().enumerate() {
            if !info.is_exec(i) || load.filesz == 0 {
                continue;
            }
            // Every page of the segment, mapped at two different bases.
            let first = load.offset & !(PAGE - 1);
            for base in [0x5555_5555_4000u64, 0x7f00_1234_0000] {
                let mut off = first;
                while off < load.offset + load.filesz {
                    let vma_start = base + off;
                    let want = info.bias(vma_start, off, true, PAGE);
                    let got = summary.module(7, vma_start, off).map(|m| m.bias);
                    assert_eq!(got, want, "{path}: offset {off:#x}");
                    if let Some(m) = summary.module(7, vma_start, off) {
                        assert_eq!(m.eh_frame_hdr, info.eh_frame_hdr.unwrap());
                        assert_eq!(m.id, 7);
                    }
                    checked += 1;
                    off += PAGE;
                }
            }
        }
        // A mapping of no executable segment: no answer.
        let past = info
            .loads()
            .iter()
            .map(|l| l.offset + l.filesz)
            .max()
            .unwrap()
            + PAGE;
        assert_eq!(
            summary.module(7, 0x1000_0000, past & !(PAGE - 1)),
            None,
            "{path}"
        );
    }
    assert!(checked > 100, "only {checked} mappings checked");
}

#[test]
fn the_table_keeps_finds_and_replaces() {
    let mut slots = vec![ModuleSlot::default(); 8];
    let a = ModuleSummary::default();
    let bytes = std::fs::read("/bin/ls").expect("/bin/ls");
    let len = elf::headers_len(&bytes).unwrap() as usize;
    let b = ModuleSummary::from_elf(&elf::parse(&bytes[..len]).unwrap(), PAGE);
    assert_eq!(find(&slots, 42), None);
    keep(&mut slots, 42, &b);
    assert_eq!(find(&slots, 42), Some(b));
    // Key 0 is "empty": never kept, never found.
    keep(&mut slots, 0, &a);
    assert_eq!(find(&slots, 0), None);
    // A set keeps MODULE_WAYS files (the files of one program that share a set do not
    // evict each other); one more replaces the oldest. (A table of one set: 4 slots.)
    let mut set = vec![ModuleSlot::default(); MODULE_WAYS];
    for key in 1..=MODULE_WAYS as u64 {
        keep(&mut set, key, &b);
    }
    assert!((1..=MODULE_WAYS as u64).all(|key| find(&set, key) == Some(b)));
    // Kept again, a file keeps its place (and its age): no other file is evicted.
    keep(&mut set, 2, &a);
    assert_eq!(find(&set, 2), Some(a));
    assert!((1..=MODULE_WAYS as u64).all(|key| find(&set, key).is_some()));
    let newest = MODULE_WAYS as u64 + 1;
    keep(&mut set, newest, &b);
    assert_eq!(find(&set, 1), None, "the oldest file goes");
    assert_eq!(find(&set, 2), Some(a));
    assert!((3..=newest).all(|key| find(&set, key) == Some(b)));
    // In a larger table, MODULE_WAYS - 1 other files of 42's set leave it there; one more
    // makes it go (the oldest); files of other sets never do.
    let mates: Vec<u64> = (1..)
        .filter(|&k| k != 42 && set_of(8, k) == set_of(8, 42))
        .take(MODULE_WAYS)
        .collect();
    let strangers = (1..)
        .filter(|&k| set_of(8, k) != set_of(8, 42))
        .take(2 * MODULE_WAYS);
    for k in strangers {
        keep(&mut slots, k, &a);
    }
    assert_eq!(find(&slots, 42), Some(b));
    for &m in &mates[..MODULE_WAYS - 1] {
        keep(&mut slots, m, &a);
    }
    assert_eq!(
        find(&slots, 42),
        Some(b),
        "42 and {} others of its set",
        MODULE_WAYS - 1
    );
    keep(&mut slots, mates[MODULE_WAYS - 1], &a);
    assert_eq!(
        find(&slots, 42),
        None,
        "one more in its set: the oldest, 42, goes"
    );
    assert!(mates.iter().all(|&m| find(&slots, m) == Some(a)));
    // An empty table keeps nothing.
    keep(&mut [], 5, &a);
    assert_eq!(find(&[], 5), None);
}
