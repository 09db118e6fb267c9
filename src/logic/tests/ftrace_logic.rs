// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_logic::file_cache::{set_of, FileCache, REMINDER_EVERY, WAYS};
use unwind_logic::option::{parse_bool_option, parse_trace_option};

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

mod cookie_placement {
    use unwind_logic::cookie_placement::{Follows, Placement, RINGBUF_TYPE_PADDING};

    const SUBBUF: u64 = 4096;
    const HEADER: u64 = 16;
    const BASE: u64 = 0xffff_8880_0100_0000;

    fn at(entry: u64, reserved: u64, end_word: Option<(u32, u32)>) -> Follows {
        Placement {
            subbuf_size: SUBBUF,
            subbuf_header: HEADER,
            entry,
            reserved,
            end_word,
        }
        .follows()
    }

    /// A padding header with some length bits above type_len.
    const PAD: u32 = RINGBUF_TYPE_PADDING | (7 << 5);

    #[test]
    fn same_subbuffer_is_the_events_buffer() {
        assert_eq!(at(BASE + 100, BASE + 140, None), Follows::After);
        assert_eq!(
            at(BASE + 100, BASE + SUBBUF - 8, Some((0, 0))),
            Follows::After
        );
    }

    #[test]
    fn elsewhere_in_another_subbuffer_is_not() {
        // Another buffer's sub-buffer, past its first event.
        assert_eq!(
            at(BASE + 100, BASE + 5 * SUBBUF + 64, Some((0, PAD))),
            Follows::NotAfter
        );
        // Its very start (before the header) is no reservation after a header either.
        assert_eq!(
            at(BASE + 100, BASE + 5 * SUBBUF, Some((0, PAD))),
            Follows::NotAfter
        );
    }

    #[test]
    fn start_of_a_subbuffer_needs_a_fresh_padding_header_at_the_events_end() {
        let next = BASE + 9 * SUBBUF + HEADER;
        // The event's sub-buffer was just padded: the cookie went to the next sub-buffer.
        assert_eq!(
            at(BASE + 100, next, Some((0x1234_5678, PAD))),
            Follows::After
        );
        // No padding at the event's end: another buffer's first event.
        assert_eq!(at(BASE + 100, next, Some((0, 5))), Follows::NotAfter);
        assert_eq!(at(BASE + 100, next, Some((PAD, 0))), Follows::NotAfter);
        // Padding there from an earlier lap: cannot tell.
        assert_eq!(at(BASE + 100, next, Some((PAD, PAD))), Follows::Unsure);
        // The event ends at a page boundary: the word cannot be read.
        assert_eq!(at(BASE + 100, next, None), Follows::Unsure);
    }

    #[test]
    fn a_size_that_is_not_a_power_of_two_decides_nothing() {
        for size in [0, 3000, 4097] {
            let p = Placement {
                subbuf_size: size,
                subbuf_header: HEADER,
                entry: BASE + 100,
                reserved: BASE + 140,
                end_word: Some((0, PAD)),
            };
            assert_eq!(p.follows(), Follows::Unsure, "size {size}");
        }
    }
}

#[test]
fn trace_options_tokens_are_read_as_the_kernel_reads_them() {
    assert_eq!(parse_trace_option(b"userstacktrace_delay"), Some(true));
    assert_eq!(parse_trace_option(b"nouserstacktrace_delay"), Some(false));
    // White space around the token, as trace_set_options() strips it.
    assert_eq!(parse_trace_option(b"  userstacktrace_delay\n"), Some(true));
    assert_eq!(
        parse_trace_option(b"\tnouserstacktrace_delay \x0b\x0c\r"),
        Some(false)
    );
    // Other options, prefixes, extensions and spacing inside the token are not ours.
    for other in [
        &b"userstacktrace"[..],
        b"nouserstacktrace",
        b"userstacktrace_delayx",
        b"userstacktrace_dela",
        b"no userstacktrace_delay",
        b"nonouserstacktrace_delay",
        b"NOuserstacktrace_delay",
        b"userstacktrace_delay=1",
        b"no",
        b"",
        b"   ",
        b"user stacktrace_delay",
    ] {
        assert_eq!(
            parse_trace_option(other),
            None,
            "{:?}",
            String::from_utf8_lossy(other)
        );
    }
}

/// Uses of several hashes at once (a stack resolved from a task's known mappings): either
/// none of them needs a `file_cache` event and all are counted, exactly as one by one, or
/// the cache is left as it was (the files are then found and used one by one).
#[test]
fn uses_at_once_count_as_one_by_one_or_change_nothing() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pool: Vec<u32> = (1..=12).map(|k| k * 0x0101_0101).collect();
    let mut cache = FileCache::new();
    let (mut quiet, mut loud) = (0, 0);
    for _ in 0..20_000 {
        let n = (next() % 5) as usize;
        let hashes: Vec<u32> = (0..n)
            .map(|_| pool[(next() % pool.len() as u64) as usize])
            .collect();
        let before = cache.clone();
        let mut one_by_one = cache.clone();
        let announced = hashes.iter().map(|&h| one_by_one.use_hash(h)).any(|a| a);
        if cache.use_all_unannounced(&hashes) {
            quiet += 1;
            assert!(
                !announced,
                "{hashes:x?}: counted although one needed an event"
            );
            assert_eq!(cache, one_by_one, "{hashes:x?}");
        } else {
            loud += 1;
            assert!(
                announced,
                "{hashes:x?}: refused although none needed an event"
            );
            assert_eq!(cache, before, "{hashes:x?}: changed although refused");
            cache = one_by_one;
        }
    }
    // Both outcomes were exercised (reminders come every REMINDER_EVERY uses).
    assert!(quiet > 1000 && loud > 50, "quiet {quiet} loud {loud}");
}

/// The module allocates the file cache zeroed in place (`sys::zeroed_box`; `FileCache::new()`
/// as a value went through a 2 KiB stack frame): all-zero bytes must be a new cache.
#[test]
fn a_zeroed_file_cache_is_a_new_one() {
    // SAFETY: all-zero bytes are a value of FileCache (integers only; this test).
    let zeroed: Box<FileCache> = unsafe { Box::new_zeroed().assume_init() };
    assert_eq!(*zeroed, FileCache::new());
}
