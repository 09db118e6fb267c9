// SPDX-License-Identifier: GPL-2.0
//! The tracer's build-id cache policy (src/logic/build_id_cache.rs).

use unwind_logic::build_id_cache::{
    set_of, BuildIdCache, FileKey, BUILD_ID_CACHE_SLOTS, BUILD_ID_SIZE_MAX, BUILD_ID_WAYS,
};

fn key(sb: u64, ino: u64, sec: i64) -> FileKey {
    FileKey {
        sb,
        ino,
        ctime_sec: sec,
        ctime_nsec: 7,
    }
}

#[test]
fn a_file_is_read_once_while_it_stays() {
    let mut cache = BuildIdCache::new();
    let mut out = [0u8; BUILD_ID_SIZE_MAX];
    let k = key(0xffff_8880_0000_1000, 42, 100);
    assert_eq!(cache.lookup(&k, &mut out), None, "empty cache");
    cache.store(&k, &[1, 2, 3, 4]);
    assert_eq!(cache.lookup(&k, &mut out), Some(4));
    assert_eq!(&out[..4], &[1, 2, 3, 4]);
}

#[test]
fn a_file_without_build_id_is_remembered_as_such() {
    let mut cache = BuildIdCache::new();
    let mut out = [9u8; BUILD_ID_SIZE_MAX];
    let k = key(1, 2, 3);
    cache.store(&k, &[]);
    assert_eq!(cache.lookup(&k, &mut out), Some(0));
    // Too long to be a build-id: kept as none, never truncated.
    let long = key(1, 5, 3);
    cache.store(&long, &[0xaa; BUILD_ID_SIZE_MAX + 1]);
    assert_eq!(cache.lookup(&long, &mut out), Some(0));
}

#[test]
fn a_rewritten_file_or_another_file_is_read_again() {
    let mut cache = BuildIdCache::new();
    let mut out = [0u8; BUILD_ID_SIZE_MAX];
    let k = key(1, 2, 3);
    cache.store(&k, &[5; 20]);
    // Written in place (ctime changed), another super block, another inode, same slot or not.
    for other in [
        FileKey { ctime_nsec: 8, ..k },
        FileKey { ctime_sec: 4, ..k },
        FileKey { sb: 9, ..k },
        FileKey { ino: 3, ..k },
    ] {
        assert_eq!(cache.lookup(&other, &mut out), None, "{other:?}");
    }
    assert_eq!(cache.lookup(&k, &mut out), Some(20));
}

#[test]
fn bounded_files_evict_each_other() {
    let mut cache = BuildIdCache::new();
    let mut out = [0u8; BUILD_ID_SIZE_MAX];
    // Far more files than slots: every lookup after is either the file's own id or a miss,
    // never another file's.
    let files: Vec<FileKey> = (0..4 * BUILD_ID_CACHE_SLOTS as u64)
        .map(|i| key(0x1000, i, 1))
        .collect();
    for (i, k) in files.iter().enumerate() {
        cache.store(k, &[i as u8; 8]);
    }
    let mut hits = 0;
    for (i, k) in files.iter().enumerate() {
        if let Some(len) = cache.lookup(k, &mut out) {
            assert_eq!(&out[..len], &[i as u8; 8]);
            hits += 1;
        }
    }
    assert!(
        hits <= BUILD_ID_CACHE_SLOTS,
        "{hits} hits from {BUILD_ID_CACHE_SLOTS} slots"
    );
    assert!(hits >= BUILD_ID_CACHE_SLOTS / 2, "only {hits} files kept");
}

#[test]
fn files_of_one_set_stay_together_and_the_oldest_goes() {
    let mut cache = BuildIdCache::new();
    let mut out = [0u8; BUILD_ID_SIZE_MAX];
    // WAYS + 1 files of one set (found by their keys, as a boot's super block would make
    // them): the first WAYS all stay, and the next replaces the oldest, not another.
    let first = key(0xffff_8880_0400_0000, 1, 1);
    let files: Vec<FileKey> = (1..)
        .map(|ino| key(first.sb, ino, 1))
        .filter(|k| set_of(k) == set_of(&first))
        .take(BUILD_ID_WAYS + 1)
        .collect();
    for (i, k) in files[..BUILD_ID_WAYS].iter().enumerate() {
        cache.store(k, &[i as u8 + 1; 4]);
    }
    for (i, k) in files[..BUILD_ID_WAYS].iter().enumerate() {
        assert_eq!(cache.lookup(k, &mut out), Some(4), "file {i} of a full set");
        assert_eq!(out[0], i as u8 + 1);
    }
    // Stored again (a second reader missed it meanwhile): kept once, in place.
    cache.store(&files[1], &[2; 4]);
    cache.store(&files[BUILD_ID_WAYS], &[9; 4]);
    assert_eq!(
        cache.lookup(&files[0], &mut out),
        None,
        "the oldest replaced"
    );
    for (i, k) in files[1..].iter().enumerate() {
        assert!(cache.lookup(k, &mut out).is_some(), "file {} kept", i + 1);
    }
    assert_eq!(out[0], 9);
}

/// The module allocates the cache zeroed in place (`sys::zeroed_box`; `BuildIdCache::new()` as
/// a value went through a 4 KiB stack frame): all-zero bytes must be an empty cache, one that
/// knows no file, not even the all-zero key, and fills as a new one does.
#[test]
fn a_zeroed_cache_is_empty() {
    // SAFETY: all-zero bytes are a value of BuildIdCache (its documentation; this test).
    let mut zeroed: Box<BuildIdCache> = unsafe { Box::new_zeroed().assume_init() };
    let mut new = BuildIdCache::new();
    let mut out = [0u8; BUILD_ID_SIZE_MAX];
    for k in [
        FileKey::default(),
        key(1, 2, 3),
        key(0xffff_8880_0000_1000, 42, 100),
    ] {
        assert_eq!(zeroed.lookup(&k, &mut out), None, "{k:?} in a zeroed cache");
    }
    for ino in 0..(2 * BUILD_ID_CACHE_SLOTS as u64) {
        let k = key(7, ino, 1);
        zeroed.store(&k, &[ino as u8; 4]);
        new.store(&k, &[ino as u8; 4]);
    }
    for ino in 0..(2 * BUILD_ID_CACHE_SLOTS as u64) {
        let k = key(7, ino, 1);
        let mut out = [0u8; BUILD_ID_SIZE_MAX];
        let mut out_new = [0u8; BUILD_ID_SIZE_MAX];
        assert_eq!(
            zeroed.lookup(&k, &mut out),
            new.lookup(&k, &mut out_new),
            "{k:?}"
        );
        assert_eq!(out, out_new);
    }
}
