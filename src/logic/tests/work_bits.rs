// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_logic::work_bits::{WorkBits, MAX_WORKS, PENDING};

#[test]
fn allocates_lowest_free_bit_until_busy() {
    let mut bits = WorkBits::new();
    for want in 1..=MAX_WORKS {
        assert_eq!(bits.alloc(), Some(want), "bit 0 is reserved for PENDING");
    }
    assert_eq!(MAX_WORKS, 63);
    assert_eq!(bits.alloc(), None, "all 63 work bits in use: -EBUSY");
    assert!(bits.free(17));
    assert_eq!(bits.alloc(), Some(17), "a freed bit is reused first");
    assert_eq!(bits.in_use(), MAX_WORKS);
}

#[test]
fn refuses_to_free_reserved_or_unallocated_bits() {
    let mut bits = WorkBits::new();
    assert!(!bits.free(PENDING.trailing_zeros()));
    assert!(!bits.free(5));
    assert!(!bits.free(64));
    let b = bits.alloc().unwrap();
    assert!(bits.free(b));
    assert!(!bits.free(b), "double free");
    assert_eq!(bits.in_use(), 0);
}
