// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_core::file_cache::{FileCache, REMINDER_EVERY};
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
    // Find two hashes sharing a slot.
    let a = 5u32;
    let slot = |h: u32| (h as usize).wrapping_mul(0x9e37_79b9) >> 24 & 255;
    let b = (6u32..).find(|&h| slot(h) == slot(a)).unwrap();
    assert!(c.use_hash(a));
    assert!(c.use_hash(b));
    assert!(c.use_hash(a), "a was evicted by b: must be announced again");
}
