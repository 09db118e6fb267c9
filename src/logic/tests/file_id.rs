// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use unwind_logic::file_id::{file_offset, fold_file_hash, HASH_ANON, HASH_NO_MAPPING};

#[test]
fn folded_hash_avoids_reserved_values() {
    assert_ne!(fold_file_hash(0), HASH_ANON);
    assert_ne!(fold_file_hash(0xffff_ffff), HASH_NO_MAPPING);
    assert_ne!(fold_file_hash(0xffff_ffff_0000_0000), HASH_NO_MAPPING);
    assert_eq!(fold_file_hash(0x1234_5678), 0x1234_5678);
    // Both halves matter.
    assert_ne!(fold_file_hash(0x5_0000_0001), fold_file_hash(0x1));
}

#[test]
fn file_offset_is_relative_to_mapping_and_pgoff() {
    // Text mapped at 0x555555554000 from file page 1 (offset 0x1000).
    assert_eq!(
        file_offset(0x5555_5555_5139, 0x5555_5555_5000, 1, 12),
        0x1139
    );
    assert_eq!(
        file_offset(0x7f00_0000_2010, 0x7f00_0000_0000, 0x28, 12),
        0x2a010
    );
}
