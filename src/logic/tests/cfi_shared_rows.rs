// SPDX-License-Identifier: GPL-2.0
//! The row table all CPUs share (src/logic/cfi/shared_rows.rs), one thread: what it keeps,
//! finds and replaces. Its concurrency is model-checked in tests/loom.rs.
#![cfg(not(loom))]

use unwind_logic::cfi::regs::*;
use unwind_logic::cfi::row::{CfaRule, Row, Rule};
use unwind_logic::cfi::shared_rows::{set_of, SharedRows, SharedSlot, SHARED_ROW_WAYS};
use unwind_logic::cfi::CompactRow;

/// A compact row, different for each `n` (its CFA offset).
fn row(n: u32) -> CompactRow {
    let mut r = Row::EMPTY;
    r.rules.cfa = CfaRule::RegOffset {
        reg: RSP,
        offset: 8 * (n as i32 % 1000 + 1),
    };
    r.rules.regs[RA as usize] = Rule::Offset(-8);
    if n % 2 == 1 {
        r.rules.regs[RBX as usize] = Rule::Offset(-16);
    }
    CompactRow::from_row(&r).unwrap()
}

fn table(entries: usize) -> SharedRows<Vec<SharedSlot>> {
    SharedRows::new((0..entries).map(|_| SharedSlot::new()).collect())
}

#[test]
fn a_row_is_found_under_its_key_only() {
    let t = table(64);
    assert_eq!(t.lookup(5, 0x1000), None, "empty");
    t.store(5, 0x1000, &row(1));
    assert_eq!(t.lookup(5, 0x1000), Some(row(1)));
    assert_eq!(t.lookup(5, 0x1001), None, "another PC");
    assert_eq!(t.lookup(6, 0x1000), None, "another module");
    // Stored again (another CPU computed it too): found, kept once.
    t.store(5, 0x1000, &row(3));
    assert_eq!(t.lookup(5, 0x1000), Some(row(3)));
    // Module 0 is the empty entry's: never kept, never found; marks are not rows.
    t.store(0, 0, &row(2));
    assert_eq!(t.lookup(0, 0), None);
    t.store(7, 0x2000, &CompactRow::FULL);
    t.store(7, 0x2001, &CompactRow::EMPTY);
    assert_eq!(t.lookup(7, 0x2000), None);
    assert_eq!(t.lookup(7, 0x2001), None);
}

#[test]
fn a_full_set_replaces_one_of_its_rows() {
    let t = table(64);
    // WAYS + 1 PCs of one set.
    let pcs: Vec<u64> = (0..)
        .filter(|&pc| set_of(64, 9, pc) == set_of(64, 9, 0))
        .take(SHARED_ROW_WAYS + 1)
        .collect();
    assert_eq!(pcs.len(), SHARED_ROW_WAYS + 1);
    for (i, &pc) in pcs[..SHARED_ROW_WAYS].iter().enumerate() {
        t.store(9, pc, &row(i as u32));
    }
    for (i, &pc) in pcs[..SHARED_ROW_WAYS].iter().enumerate() {
        assert_eq!(
            t.lookup(9, pc),
            Some(row(i as u32)),
            "way {i} of a full set"
        );
    }
    t.store(9, pcs[SHARED_ROW_WAYS], &row(99));
    assert_eq!(t.lookup(9, pcs[SHARED_ROW_WAYS]), Some(row(99)));
    let kept = pcs[..SHARED_ROW_WAYS]
        .iter()
        .filter(|&&pc| t.lookup(9, pc).is_some())
        .count();
    assert_eq!(kept, SHARED_ROW_WAYS - 1, "one row replaced");
}

#[test]
fn many_rows_each_found_as_stored_or_missing() {
    let t = table(1024);
    let n = 4096u64;
    for pc in 0..n {
        t.store(3, pc * 16, &row(pc as u32));
        assert_eq!(t.lookup(3, pc * 16), Some(row(pc as u32)), "just stored");
    }
    let mut hits = 0;
    for pc in 0..n {
        if let Some(r) = t.lookup(3, pc * 16) {
            assert_eq!(r, row(pc as u32));
            hits += 1;
        }
    }
    assert!(hits <= 1024 && hits >= 900, "{hits} of 1024 entries in use");
}

#[test]
fn any_length_works() {
    for len in [0, 1, 3, 4, 5, 12, 100] {
        let t = table(len);
        t.store(1, 8, &row(4));
        let found = t.lookup(1, 8);
        assert_eq!(found.is_some(), len >= SHARED_ROW_WAYS, "{len} entries");
    }
}
