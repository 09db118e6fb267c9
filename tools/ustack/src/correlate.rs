// SPDX-License-Identifier: GPL-2.0
//! Correlation of events, cookies, stacks and file_cache records.
//!
//! The rules (Documentation/trace-events.rst, "The rule for readers"):
//!
//! * an event is followed by its `user_unwind_cookie` from the same task; events of one
//!   task that wait for a cookie are matched last-in first-out, so an interrupt event that
//!   nests between an event and its cookie gets the right one;
//! * a task has at most one cookie waiting for a stack; the stack is the next
//!   `user_unwind_stack` of the same pid (and instance) with the same cookie, and serves every event that
//!   carried the cookie;
//! * a frame's file is the one named by the most recent `file_cache` with that hash seen
//!   before the stack (input order is timestamp order in both text forms).
//!
//! Everything that does not match is counted in [`Stats`] and the run goes on.

use std::collections::HashMap;
use std::rc::Rc;

use crate::parse::{Kind, RawFrame, Record, HASH_ANON, HASH_NOMAP};
use crate::stats::Stats;

pub type FileId = usize;

/// A file as named by `file_cache`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileEntry {
    pub path: String,
    /// Lower-case hex, empty when the writer had none.
    pub build_id: String,
    pub deleted: bool,
}

/// A frame after the hash was looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frame {
    File { offset: u64, file: FileId },
    Anon(u64),
    NoMap(u64),
    UnknownHash { offset: u64, hash: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub cookie: u64,
    /// Innermost first (frame 0 is the user IP at kernel entry).
    pub frames: Vec<Frame>,
    pub truncated: bool,
    pub line_no: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackState {
    Ok(Rc<Stack>),
    /// No cookie followed the event (kernel thread, or the cookie event was lost).
    NoCookie,
    /// The cookie came, its stack never did (lost, or the trace ends first).
    NoStack(u64),
}

/// An event with whatever stack could be found for it.
#[derive(Debug, Clone)]
pub struct Sample {
    pub event: Record,
    pub stack: StackState,
}

/// Events of one task waiting for a cookie are bounded (memory guard for tasks that
/// never get cookies, e.g. kernel threads).
pub const MAX_WAITING: usize = 64;

/// A task within one buffer: (instance, pid). Cookies and stacks are written per
/// instance, so tasks of different instances are matched separately.
type Task = (String, u32);

fn task(r: &Record) -> Task {
    (r.instance.clone(), r.pid)
}

#[derive(Debug, Default)]
pub struct Correlator {
    files: Vec<FileEntry>,
    file_ids: HashMap<FileEntry, FileId>,
    by_hash: HashMap<u32, FileId>,
    waiting_cookie: HashMap<Task, Vec<Record>>,
    waiting_stack: HashMap<Task, (u64, Vec<Record>)>,
    /// Also emit stacks whose cookie (and so event) was lost, as samples of the
    /// `user_unwind_stack` event itself.
    pub keep_orphans: bool,
}

impl Correlator {
    pub fn new() -> Self {
        Self::default()
    }

    /// All files seen so far, indexed by [`FileId`].
    pub fn files(&self) -> &[FileEntry] {
        &self.files
    }

    fn intern(&mut self, e: FileEntry) -> FileId {
        if let Some(&id) = self.file_ids.get(&e) {
            return id;
        }
        let id = self.files.len();
        self.files.push(e.clone());
        self.file_ids.insert(e, id);
        id
    }

    fn resolve(&self, f: RawFrame, stats: &mut Stats) -> Frame {
        stats.frames += 1;
        match f.hash {
            HASH_ANON => {
                stats.frames_anon += 1;
                Frame::Anon(f.offset)
            }
            HASH_NOMAP => {
                stats.frames_nomap += 1;
                Frame::NoMap(f.offset)
            }
            h => match self.by_hash.get(&h) {
                Some(&file) => Frame::File {
                    offset: f.offset,
                    file,
                },
                None => {
                    stats.frames_unknown_hash += 1;
                    Frame::UnknownHash {
                        offset: f.offset,
                        hash: h,
                    }
                }
            },
        }
    }

    fn flush_no_stack(cookie: u64, evs: Vec<Record>, stats: &mut Stats, out: &mut Vec<Sample>) {
        stats.cookies_without_stack += 1;
        out.extend(evs.into_iter().map(|event| Sample {
            event,
            stack: StackState::NoStack(cookie),
        }));
    }

    fn flush_no_cookie(evs: Vec<Record>, stats: &mut Stats, out: &mut Vec<Sample>) {
        stats.events_without_cookie += evs.len() as u64;
        out.extend(evs.into_iter().map(|event| Sample {
            event,
            stack: StackState::NoCookie,
        }));
    }

    /// Feed one record; samples that are complete (or known to be lost) are appended.
    pub fn feed(&mut self, rec: Record, stats: &mut Stats, out: &mut Vec<Sample>) {
        match &rec.kind {
            Kind::Other => {
                stats.events += 1;
                let w = self.waiting_cookie.entry(task(&rec)).or_default();
                w.push(rec);
                if w.len() > MAX_WAITING {
                    let old = w.remove(0);
                    Self::flush_no_cookie(vec![old], stats, out);
                }
            }
            Kind::Attachment => {}
            &Kind::Cookie(cookie) => {
                stats.cookies += 1;
                let ev = self.waiting_cookie.get_mut(&task(&rec)).and_then(Vec::pop);
                if ev.is_none() {
                    stats.cookies_without_event += 1;
                }
                let pid = task(&rec);
                match self.waiting_stack.remove(&pid) {
                    Some((c, mut evs)) if c == cookie => {
                        evs.extend(ev);
                        self.waiting_stack.insert(pid, (c, evs));
                    }
                    prev => {
                        if let Some((c, evs)) = prev {
                            Self::flush_no_stack(c, evs, stats, out);
                        }
                        self.waiting_stack
                            .insert(pid, (cookie, ev.into_iter().collect()));
                    }
                }
            }
            Kind::Stack {
                cookie,
                frames,
                truncated,
            } => {
                stats.stacks += 1;
                let stack = Rc::new(Stack {
                    cookie: *cookie,
                    frames: frames.iter().map(|&f| self.resolve(f, stats)).collect(),
                    truncated: *truncated,
                    line_no: rec.line_no,
                });
                match self.waiting_stack.remove(&task(&rec)) {
                    Some((c, evs)) if c == *cookie => {
                        stats.events_with_stack += evs.len() as u64;
                        out.extend(evs.into_iter().map(|event| Sample {
                            event,
                            stack: StackState::Ok(Rc::clone(&stack)),
                        }));
                    }
                    other => {
                        stats.stacks_without_cookie += 1;
                        if let Some((c, evs)) = other {
                            Self::flush_no_stack(c, evs, stats, out);
                        }
                        if self.keep_orphans {
                            let mut event = rec.clone();
                            event.kind = Kind::Other;
                            out.push(Sample {
                                event,
                                stack: StackState::Ok(Rc::clone(&stack)),
                            });
                        }
                    }
                }
                // the task is back in user space: nothing that waits can get a cookie now
                if let Some(evs) = self.waiting_cookie.remove(&task(&rec)) {
                    Self::flush_no_cookie(evs, stats, out);
                }
            }
            Kind::FileCache {
                hash,
                path,
                build_id,
                deleted,
            } => {
                stats.file_cache += 1;
                let hash = *hash;
                let entry = FileEntry {
                    path: path.clone(),
                    build_id: build_id.clone(),
                    deleted: *deleted,
                };
                let id = self.intern(entry);
                if let Some(&old) = self.by_hash.get(&hash) {
                    let (a, b) = (&self.files[old], &self.files[id]);
                    if a.path != b.path || a.build_id != b.build_id {
                        stats.hash_reused += 1;
                    }
                }
                self.by_hash.insert(hash, id);
            }
        }
    }

    /// End of input: whatever still waits is reported as lost, in input order.
    pub fn finish(&mut self, stats: &mut Stats, out: &mut Vec<Sample>) {
        let mut rest = Vec::new();
        for (_, evs) in self.waiting_cookie.drain() {
            Self::flush_no_cookie(evs, stats, &mut rest);
        }
        for (_, (c, evs)) in self.waiting_stack.drain() {
            Self::flush_no_stack(c, evs, stats, &mut rest);
        }
        rest.sort_by_key(|s| s.event.line_no);
        out.extend(rest);
    }
}
