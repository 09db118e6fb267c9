// SPDX-License-Identifier: GPL-2.0
//! Whether a cookie reserved in a ring buffer landed right after a given event: how the
//! tracer finds the instance of an event written in a kprobe handler (src/ftrace/cookie.c,
//! "an ftrace export", has the whole story).
//!
//! The export sees the event's data but not its buffer, so it reserves the cookie in each
//! instance with the option and keeps it only where it follows the event:
//!
//! * on the event's own sub-buffer: sub-buffers are not shared between buffers, so this is
//!   the event's buffer;
//! * at the start of a sub-buffer, just after its header: the event's buffer if the event's
//!   sub-buffer was padded to make room, that is if the word at the event's end has *just*
//!   turned into a padding header (memory of the event's buffer, which no other buffer's
//!   reservation writes); undecided if that word cannot be read (the event ends at a page
//!   boundary, where the memory may end) or was a padding header already (an earlier lap);
//! * anywhere else: another buffer.

/// `RINGBUF_TYPE_PADDING` of `enum ring_buffer_type` (include/linux/ring_buffer.h; the C
/// side asserts it is the same).
pub const RINGBUF_TYPE_PADDING: u32 = 29;

/// The `type_len` of a `struct ring_buffer_event` header: its low 5 bits.
const TYPE_LEN_MASK: u32 = 0x1f;

/// Where a reservation is with respect to an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Follows {
    /// In another buffer, or elsewhere in the event's: the cookie must be discarded.
    NotAfter = 0,
    /// Right after the event, in its buffer.
    After = 1,
    /// Cannot be told: not written (and counted).
    Unsure = 2,
}

/// A reservation and the event it should follow. Addresses are kernel virtual addresses of
/// ring-buffer memory; only their arithmetic is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The buffer's sub-buffer size (a power of two; sub-buffers are aligned to it).
    pub subbuf_size: u64,
    /// The size of a sub-buffer's header (the first event starts after it).
    pub subbuf_header: u64,
    /// The event's data.
    pub entry: u64,
    /// The reserved cookie's `struct ring_buffer_event`.
    pub reserved: u64,
    /// The word at the event's end before the reservation and after it, if that word lies
    /// inside the event's page (see the module documentation).
    pub end_word: Option<(u32, u32)>,
}

impl Placement {
    /// Whether the reservation follows the event.
    pub fn follows(&self) -> Follows {
        // A size that is not a power of two is no sub-buffer: nothing can be decided.
        if !self.subbuf_size.is_power_of_two() {
            return Follows::Unsure;
        }
        let mask = !(self.subbuf_size - 1);
        let subbuf = self.reserved & mask;
        if subbuf == self.entry & mask {
            return Follows::After;
        }
        if self.reserved != subbuf.wrapping_add(self.subbuf_header) {
            return Follows::NotAfter;
        }
        match self.end_word {
            None => Follows::Unsure,
            Some((_, after)) if after & TYPE_LEN_MASK != RINGBUF_TYPE_PADDING => Follows::NotAfter,
            Some((before, after)) if before != after => Follows::After,
            Some(_) => Follows::Unsure,
        }
    }
}
