// SPDX-License-Identifier: GPL-2.0
//! The tracer's cache of recently read build-ids (src/ftrace/stack.c).
//!
//! A `file_cache` event carries the file's GNU build-id, read from its ELF notes. Reminders,
//! and other processes mapping the same file, would read the notes again; on a network or
//! 9p file system each read is a round trip. So the last build-ids read are kept, keyed by
//! the file's super block and inode number (not by the `struct inode`: 9p without a cache
//! gives each open its own inode), and its ctime, so that a file rewritten in place, or a
//! reused inode number, is read again. Internal only: the trace never shows these numbers.
//! Bounded: [`BUILD_ID_CACHE_SLOTS`] entries in sets of [`BUILD_ID_WAYS`], the oldest of a
//! set replaced. (Direct-mapped, two files of one traced program shared a slot at some
//! boots, the super block's address being part of the key: every reset of the trace then
//! read both again at the program's next stack, a file read in the traced task's return to
//! user space, which under the VM's 9p stalled it for milliseconds.)

/// Entries of the cache.
pub const BUILD_ID_CACHE_SLOTS: usize = 64;
/// Entries of a set: a file's build-id may be kept in any of its set's.
pub const BUILD_ID_WAYS: usize = 4;
const _: () = assert!((BUILD_ID_CACHE_SLOTS / BUILD_ID_WAYS).is_power_of_two());
/// The longest build-id kept (the kernel's `BUILD_ID_SIZE_MAX`).
pub const BUILD_ID_SIZE_MAX: usize = 20;

/// What identifies a file's contents here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileKey {
    /// The super block (an address, only compared).
    pub sb: u64,
    pub ino: u64,
    pub ctime_sec: i64,
    pub ctime_nsec: u32,
}

/// One entry. Integers and a `bool` only, and all-zero bytes are [`EMPTY`]: the module
/// allocates the cache (4 KiB) zeroed in place, not built as a value on the stack. So
/// "empty" is a flag, not an `Option` (whose layout does not say which bytes are `None`).
#[derive(Clone, Copy)]
struct Entry {
    /// Whether `key`, `len` and `id` hold a file's build-id.
    used: bool,
    key: FileKey,
    /// 0: the file has no build-id.
    len: u8,
    id: [u8; BUILD_ID_SIZE_MAX],
}

const EMPTY: Entry = Entry {
    used: false,
    key: FileKey {
        sb: 0,
        ino: 0,
        ctime_sec: 0,
        ctime_nsec: 0,
    },
    len: 0,
    id: [0; BUILD_ID_SIZE_MAX],
};

/// The cache (the caller serialises its use). All-zero bytes are an empty cache (see
/// [`Entry`]).
pub struct BuildIdCache {
    entries: [Entry; BUILD_ID_CACHE_SLOTS],
}

impl Default for BuildIdCache {
    fn default() -> Self {
        Self::new()
    }
}

impl BuildIdCache {
    /// An empty cache.
    pub const fn new() -> Self {
        Self {
            entries: [EMPTY; BUILD_ID_CACHE_SLOTS],
        }
    }

    /// The range of the entries of `key`'s set.
    fn set_range(key: &FileKey) -> core::ops::Range<usize> {
        let first = set_of(key) * BUILD_ID_WAYS;
        first..first + BUILD_ID_WAYS
    }

    /// The build-id kept for `key`, copied into `out`: its length (0: the file has none),
    /// or `None` if the file must be read.
    pub fn lookup(&self, key: &FileKey, out: &mut [u8; BUILD_ID_SIZE_MAX]) -> Option<usize> {
        let entry = self
            .entries
            .get(Self::set_range(key))?
            .iter()
            .find(|entry| entry.used && entry.key == *key)?;
        let len = usize::from(entry.len).min(BUILD_ID_SIZE_MAX);
        out[..len].copy_from_slice(&entry.id[..len]);
        Some(len)
    }

    /// Keeps `id` (empty: the file has no build-id) as the build-id of `key`: in its own
    /// entry if it has one, else in an empty one of its set, else in place of the set's
    /// oldest (a set keeps its files in the order they came, empty entries last). An id
    /// longer than [`BUILD_ID_SIZE_MAX`] is kept as none.
    pub fn store(&mut self, key: &FileKey, id: &[u8]) {
        let Some(set) = self.entries.get_mut(Self::set_range(key)) else {
            return;
        };
        let at = match set
            .iter()
            .position(|entry| !entry.used || entry.key == *key)
        {
            Some(at) => at,
            None => {
                set.rotate_left(1);
                BUILD_ID_WAYS - 1
            }
        };
        let Some(entry) = set.get_mut(at) else {
            return;
        };
        let id = if id.len() <= BUILD_ID_SIZE_MAX {
            id
        } else {
            &[]
        };
        entry.used = true;
        entry.key = *key;
        entry.len = id.len() as u8;
        entry.id[..id.len()].copy_from_slice(id);
    }
}

/// The set of `key` (exposed for tests): the kernel's `hash_64()` of super block and inode
/// number.
pub fn set_of(key: &FileKey) -> usize {
    const GOLDEN_RATIO_64: u64 = 0x61c8_8646_80b5_83eb;
    let bits = (BUILD_ID_CACHE_SLOTS / BUILD_ID_WAYS).trailing_zeros();
    ((key.sb ^ key.ino).wrapping_mul(GOLDEN_RATIO_64) >> (64 - bits)) as usize
}
