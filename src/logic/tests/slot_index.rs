// SPDX-License-Identifier: GPL-2.0
//! The side table under every nesting of insertions (what IRQ and NMI do on one CPU), with
//! a concurrent release from another CPU at every point: an exhaustive check over the
//! interruption points of the outer insertion.
#![cfg(not(loom))]
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use unwind_logic::slot_index::{Slot, SlotIndex, TableFull, PROBE_WINDOW};

const KEY: usize = 0xffff_8880_0123_4540;

fn slots(n: usize) -> Vec<Slot> {
    (0..n).map(|_| Slot::new()).collect()
}

#[test]
fn insert_find_release() {
    let s = slots(64);
    let live = AtomicUsize::new(0);
    let t = SlotIndex::new(&s, &live).unwrap();
    assert_eq!(live.load(Ordering::Relaxed), 0);
    assert_eq!(t.find(KEY), None);
    let i = t.find_or_insert(KEY).unwrap();
    assert_eq!(t.find(KEY), Some(i));
    assert_eq!(t.find_or_insert(KEY), Ok(i));
    assert_eq!(t.occupancy(), 1);
    assert_eq!(live.load(Ordering::Relaxed), 1);
    assert!(t.release(i, KEY));
    assert!(!t.release(i, KEY));
    assert_eq!(t.occupancy(), 0);
    assert_eq!(
        live.load(Ordering::Relaxed),
        0,
        "the count of owned slots is back to 0"
    );
}

#[test]
fn rejects_bad_sizes() {
    let live = AtomicUsize::new(0);
    assert!(SlotIndex::new(&slots(48), &live).is_none());
    assert!(SlotIndex::new(&slots(16), &live).is_none());
}

#[test]
fn full_window_is_an_error_not_a_crash() {
    let s = slots(PROBE_WINDOW);
    let live = AtomicUsize::new(0);
    let t = SlotIndex::new(&s, &live).unwrap();
    for k in 1..=PROBE_WINDOW {
        t.find_or_insert(k << 6).unwrap();
    }
    assert_eq!(t.find_or_insert(0xdead << 6), Err(TableFull));
    assert_eq!(t.occupancy(), PROBE_WINDOW);
    assert_eq!(
        live.load(Ordering::Relaxed),
        PROBE_WINDOW,
        "a failed insertion counts nothing"
    );
}

#[test]
fn many_short_lived_tasks_leave_table_as_before() {
    let s = slots(4096);
    let live = AtomicUsize::new(0);
    let t = SlotIndex::new(&s, &live).unwrap();
    let keep: Vec<usize> = (1..100).map(|k| k * 0x2c0).collect();
    for &k in &keep {
        t.find_or_insert(k).unwrap();
    }
    let before = t.occupancy();
    for k in 0..100_000usize {
        let key = 0xffff_8880_0000_0000 + k * 0x1c0;
        let i = t.find_or_insert(key).unwrap();
        assert!(t.release(i, key));
    }
    assert_eq!(t.occupancy(), before);
    assert_eq!(live.load(Ordering::Relaxed), before);
    for &k in &keep {
        assert!(t.find(k).is_some());
    }
}

/// Every interruption point of an outer insertion of KEY gets a nested insertion of KEY
/// (an NMI), optionally followed later by a second nested insertion, and optionally a
/// remote release of another slot at some point. Afterwards KEY must own exactly one slot
/// (or, in the documented remote-release case, the canonical one is the one everybody
/// returned), and every context must have got the canonical slot.
#[test]
fn nested_insertions_agree_on_one_slot() {
    let others: Vec<usize> = (1..12).map(|k| KEY + k * 0x40 * 64).collect();
    let mut cases = 0;
    for release_other in [None, Some(0usize), Some(3)] {
        for nmi1_at in 0..40 {
            for nmi2_at in [None, Some(nmi1_at), Some(nmi1_at + 1), Some(nmi1_at + 3)] {
                for release_at in 0..40 {
                    let s = slots(64);
                    let live = AtomicUsize::new(0);
                    let t = SlotIndex::new(&s, &live).unwrap();
                    // Other tasks' slots around KEY's window.
                    for &k in others.iter().take(4) {
                        let _ = t.find_or_insert(k);
                    }
                    let victim = release_other.and_then(|n| {
                        let k = others[n];
                        t.find(k).map(|i| (i, k))
                    });
                    let step = Cell::new(0usize);
                    let nmi_results = std::cell::RefCell::new(Vec::new());
                    let mut hook = || {
                        let now = step.get();
                        step.set(now + 1);
                        // At every step, no owned slot goes uncounted.
                        assert!(
                            live.load(Ordering::Relaxed) >= t.occupancy(),
                            "live below owned"
                        );
                        if now == nmi1_at || Some(now) == nmi2_at {
                            nmi_results
                                .borrow_mut()
                                .push(t.find_or_insert(KEY).unwrap());
                        }
                        if now == release_at {
                            if let Some((i, k)) = victim {
                                t.release(i, k);
                            }
                        }
                    };
                    let outer = t.find_or_insert_with(KEY, &mut hook).unwrap();
                    let canonical = t.find(KEY).unwrap();
                    assert_eq!(outer, canonical, "outer context got a non-canonical slot");
                    assert_eq!(
                        live.load(Ordering::Relaxed),
                        t.occupancy(),
                        "the count of owned slots is exact once every context is done"
                    );
                    let owned: Vec<usize> = t.owned_by(KEY).collect();
                    let nmis = nmi_results.borrow();
                    if victim.is_none() {
                        assert_eq!(owned, vec![canonical], "duplicate slot without a release");
                        for &n in nmis.iter() {
                            assert_eq!(n, canonical, "NMI used another slot");
                        }
                    } else {
                        assert!(owned.contains(&canonical));
                    }
                    cases += 1;
                }
            }
        }
    }
    assert!(cases > 1000);
}

/// The table's cost per lookup, for callgrind:
/// `valgrind --tool=callgrind --toggle-collect='*bench_lookups*' <test binary> --ignored bench_table`.
#[test]
#[ignore]
fn bench_table() {
    let s = slots(4096);
    let live = AtomicUsize::new(0);
    let t = SlotIndex::new(&s, &live).unwrap();
    // task_struct addresses: 8 KiB apart, as the slab hands them out.
    let keys: Vec<usize> = (0..8).map(|i| 0xffff_8880_0400_0000 + i * 0x2400).collect();
    for &k in &keys {
        t.find_or_insert(k).unwrap();
    }
    #[inline(never)]
    fn bench_lookups(t: &SlotIndex<'_>, key: usize, n: usize) -> usize {
        (0..n)
            .map(|_| t.find_or_insert(std::hint::black_box(key)).unwrap())
            .sum()
    }
    println!("{}", bench_lookups(&t, keys[3], 100_000));
}
