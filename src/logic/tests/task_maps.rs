// SPDX-License-Identifier: GPL-2.0
//! The per-task cache of mappings: answers kept under one stamp only, the least recently
//! used dropped when full.
#![cfg(not(loom))]

use unwind_logic::cfi::{Lookup, ModuleInfo};
use unwind_logic::task_maps::{Stamp, TaskMaps, TASK_MAPS};

fn module(id: u64) -> Lookup {
    Lookup::Module(ModuleInfo {
        id,
        bias: id << 20,
        eh_frame_hdr: 0x1000,
        eh_frame_hdr_len: 64,
    })
}

fn find(maps: &mut TaskMaps, pc: u64) -> Option<Lookup> {
    maps.find(pc).map(|(start, end, lookup)| {
        assert!(start <= pc && pc < end);
        lookup
    })
}

const S1: Stamp = Stamp {
    exec_id: 1,
    seq: 10,
};

#[test]
fn finds_what_it_kept_under_the_same_stamp() {
    let mut maps = TaskMaps::new();
    maps.begin(S1);
    assert_eq!(find(&mut maps, 0x1000), None);
    maps.keep(0x1000, 0x2000, module(1));
    maps.keep(0x5000, 0x9000, Lookup::NoInfo);
    assert_eq!(find(&mut maps, 0x1000), Some(module(1)));
    assert_eq!(find(&mut maps, 0x1fff), Some(module(1)));
    assert_eq!(find(&mut maps, 0x2000), None);
    assert_eq!(find(&mut maps, 0x8fff), Some(Lookup::NoInfo));
    // The same stamp again (the next kernel entry): still there.
    maps.begin(S1);
    assert_eq!(find(&mut maps, 0x1800), Some(module(1)));
    // An empty or inverted range is not kept.
    maps.keep(0x3000, 0x3000, module(2));
    assert_eq!(find(&mut maps, 0x3000), None);
}

#[test]
fn another_stamp_forgets_everything() {
    for other in [
        Stamp {
            exec_id: 1,
            seq: 12,
        },
        Stamp {
            exec_id: 2,
            seq: 10,
        },
    ] {
        let mut maps = TaskMaps::new();
        assert!(!maps.begin(S1));
        maps.keep(0x1000, 0x2000, module(1));
        // (What begin() says: whether the last walk's answers hold, the walk's own too.)
        assert!(maps.begin(S1));
        assert!(!maps.begin(other));
        assert_eq!(find(&mut maps, 0x1000), None, "{other:?}");
        // And going back does not bring the old answers back.
        assert!(!maps.begin(S1));
        assert_eq!(find(&mut maps, 0x1000), None);
    }
}

#[test]
fn drops_the_least_recently_used() {
    let mut maps = TaskMaps::new();
    maps.begin(S1);
    let range = |i: u64| (0x10000 * (i + 1), 0x10000 * (i + 1) + 0x1000);
    // Kept in order: after these, 0 is the least recently used.
    for i in 0..TASK_MAPS as u64 {
        let (s, e) = range(i);
        maps.keep(s, e, module(i));
    }
    // Used since, 0 is not dropped: 1 is the least recently used now.
    for _ in 0..3 {
        assert_eq!(find(&mut maps, range(0).0), Some(module(0)));
    }
    let (s, e) = range(100);
    maps.keep(s, e, module(100));
    assert_eq!(
        find(&mut maps, range(0).0),
        Some(module(0)),
        "a used one is kept"
    );
    assert_eq!(find(&mut maps, range(100).0), Some(module(100)));
    let dropped: Vec<u64> = (0..TASK_MAPS as u64)
        .filter(|&i| find(&mut maps, range(i).0).is_none())
        .collect();
    assert_eq!(dropped, [1], "the least recently used dropped");
}
