// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_core::file_cache::{set_of, FileCache, REMINDER_EVERY, WAYS};
use unwind_core::option::parse_bool_option;

#[test]
fn option_accepts_exactly_zero_and_one() {
    assert_eq!(parse_bool_option(b"0"), Some(false));
    assert_eq!(parse_bool_option(b"1"), Some(true));
    assert_eq!(parse_bool_option(b"0\n"), Some(false));
    assert_eq!(parse_bool_option(b"1\n"), Some(true));
    for bad in [
        &b""[..],
        b"\n",
        b"2",
        b"10",
        b"01",
        b"y",
        b"on",
        b"1\n\n",
        b" 1",
        b"1 ",
        b"true",
        b"-1",
    ] {
        assert_eq!(parse_bool_option(bad), None, "{:?}", bad);
    }
}

#[test]
fn first_use_announces_then_every_reminder_period() {
    let mut c = FileCache::new();
    assert!(c.use_hash(0x1234));
    let mut announced = 0;
    for _ in 0..(3 * REMINDER_EVERY) {
        if c.use_hash(0x1234) {
            announced += 1;
        }
    }
    assert_eq!(announced, 3, "one reminder per {REMINDER_EVERY} uses");
}

#[test]
fn reset_generation_announces_again() {
    let mut c = FileCache::new();
    c.sync_generation(1);
    assert!(c.use_hash(7));
    assert!(!c.use_hash(7));
    c.sync_generation(1);
    assert!(!c.use_hash(7), "same generation keeps the cache");
    c.sync_generation(2);
    assert!(c.use_hash(7), "reset: announce again");
}

#[test]
fn evicted_hash_is_announced_again() {
    let mut c = FileCache::new();
    // WAYS + 1 hashes sharing a set: the first is evicted by the last.
    let same_set: Vec<u32> = (1u32..)
        .filter(|&h| set_of(h) == set_of(5))
        .take(WAYS + 1)
        .collect();
    for &h in &same_set {
        assert!(c.use_hash(h));
    }
    assert!(
        c.use_hash(same_set[0]),
        "evicted by the fifth hash of its set: must be announced again"
    );
}

#[test]
fn hashes_sharing_a_set_do_not_evict_each_other() {
    let mut c = FileCache::new();
    let a = 5u32;
    let b = (6u32..).find(|&h| set_of(h) == set_of(a)).unwrap();
    assert!(c.use_hash(a));
    assert!(c.use_hash(b));
    for _ in 0..10 {
        assert!(
            !c.use_hash(a),
            "a program and its libc alternate without re-announcing"
        );
        assert!(!c.use_hash(b));
    }
}
