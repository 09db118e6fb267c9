// SPDX-License-Identifier: GPL-2.0
//! The tracer's build-id cache policy (src/logic/build_id_cache.rs).

use unwind_logic::build_id_cache::{
    BuildIdCache, FileKey, BUILD_ID_CACHE_SLOTS, BUILD_ID_SIZE_MAX,
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
