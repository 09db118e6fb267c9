// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_logic::cookie;

#[test]
fn cookie_is_never_zero_and_encodes_cpu() {
    for cpu in [0u32, 1, 7, 8191] {
        for counter in [0u32, 1, 3, u32::MAX] {
            let c = cookie::make(cpu, counter);
            assert_ne!(c, 0);
            assert_eq!(cookie::cpu(c), Some(cpu));
            assert_eq!(cookie::counter(c), counter);
        }
    }
    assert_eq!(cookie::cpu(0), None);
}

#[test]
fn counter_stays_odd_and_advances() {
    let mut c = 0u32;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..10_000 {
        c = cookie::next_counter(c);
        assert_eq!(c & 1, 1);
        assert!(seen.insert(c), "counter repeated before wrapping");
    }
    assert_eq!(
        cookie::next_counter(u32::MAX),
        1,
        "wraps to the first odd value"
    );
}

#[test]
fn cookies_differ_across_cpus_and_entries() {
    let a = cookie::make(0, cookie::next_counter(0));
    let b = cookie::make(1, cookie::next_counter(0));
    let c = cookie::make(0, cookie::next_counter(cookie::next_counter(0)));
    assert!(a != b && a != c && b != c);
}
