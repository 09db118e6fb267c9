// SPDX-License-Identifier: GPL-2.0
//! Model checks of the per-task state machine with loom (every interleaving, every allowed
//! memory ordering outcome). Run with:
//!
//!   RUSTFLAGS="--cfg loom" cargo test -p unwind-logic --release --test loom
//!
//! Threads stand for the contexts of one task (task-context request, NMI request, task
//! work) and for a canceller on another CPU. Thread interleavings include every nesting, so
//! what holds here holds for IRQ/NMI nesting on one CPU.
#![cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use unwind_logic::request_state::{Request, RequestState};

/// Task work "queue": counts queued task works (task_work_add).
struct World {
    state: RequestState,
    queued: AtomicUsize,
    /// Per bit: how many times its callback ran, and the cookie it saw.
    calls: [AtomicUsize; 4],
    seen_cookie: [AtomicUsize; 4],
    counter: AtomicUsize,
}

impl World {
    fn new() -> Self {
        Self {
            state: RequestState::new(),
            queued: AtomicUsize::new(0),
            calls: Default::default(),
            seen_cookie: Default::default(),
            counter: AtomicUsize::new(0),
        }
    }

    /// unwind_deferred_request(): returns (result, cookie).
    fn request(&self, bit: u32) -> (i32, u64) {
        let (outcome, cookie) = self.state.request(bit, || {
            (self.counter.fetch_add(2, Ordering::Relaxed) as u64 + 3) << 32 | 1
        });
        match outcome {
            Request::QueueTaskWork => {
                self.queued.fetch_add(1, Ordering::AcqRel);
                (0, cookie)
            }
            Request::Queued => (0, cookie),
            Request::Already => (1, cookie),
        }
    }

    /// One run of the task work, if one is queued.
    fn run_task_work(&self) -> bool {
        if self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| q.checked_sub(1))
            .is_err()
        {
            return false;
        }
        let bits = self.state.take_pending();
        let cookie = self.state.current_cookie();
        for b in 1..4u32 {
            if bits & (1 << b) != 0 {
                self.calls[b as usize].fetch_add(1, Ordering::AcqRel);
                self.seen_cookie[b as usize].store(cookie as usize, Ordering::Release);
                self.state.complete(b);
            }
        }
        true
    }

    fn drain(&self) {
        while self.run_task_work() {}
    }
}

/// A task-context request and an NMI request (another work) in one entry, with the task
/// work possibly running in between: each work is called back exactly once, with the cookie
/// its request returned, and nothing stays queued.
#[test]
fn request_vs_nmi_request_vs_task_work() {
    loom::model(|| {
        let w = Arc::new(World::new());
        let w1 = w.clone();
        let task = thread::spawn(move || w1.request(1));
        let w2 = w.clone();
        let nmi = thread::spawn(move || w2.request(2));
        let w3 = w.clone();
        let tw = thread::spawn(move || {
            w3.run_task_work();
        });
        let (r1, c1) = task.join().unwrap();
        let (r2, c2) = nmi.join().unwrap();
        tw.join().unwrap();
        w.drain();
        assert_eq!((r1, r2), (0, 0));
        assert_eq!(c1, c2, "one cookie per entry");
        assert_ne!(c1, 0);
        for b in [1usize, 2] {
            assert_eq!(
                w.calls[b].load(Ordering::Acquire),
                1,
                "work {b} called once"
            );
            assert_eq!(w.seen_cookie[b].load(Ordering::Acquire) as u64, c1);
        }
        assert_eq!(
            w.calls[3].load(Ordering::Acquire),
            0,
            "no callback without request"
        );
        assert!(!w.state.is_pending());
    });
}

/// The same work requested twice (task context and NMI) while the task work runs: one
/// callback; the second request returns 1 unless it came first.
#[test]
fn same_work_twice_is_called_once() {
    loom::model(|| {
        let w = Arc::new(World::new());
        let w1 = w.clone();
        let a = thread::spawn(move || w1.request(1).0);
        let w2 = w.clone();
        let b = thread::spawn(move || w2.request(1).0);
        let w3 = w.clone();
        let tw = thread::spawn(move || {
            w3.run_task_work();
        });
        let ra = a.join().unwrap();
        let rb = b.join().unwrap();
        tw.join().unwrap();
        w.drain();
        assert_eq!(ra + rb, 1, "exactly one request queued it");
        assert_eq!(w.calls[1].load(Ordering::Acquire), 1);
    });
}

/// A request after the callbacks ran, racing with the return-to-user reset: either it is
/// part of the old entry (returns 1, or queues a task work that still runs) or of the new
/// one; the state never loses a queued task work and never calls a work twice per cookie.
#[test]
fn late_request_vs_reset() {
    loom::model(|| {
        let w = Arc::new(World::new());
        let (_, c0) = w.request(1);
        w.drain();
        let w1 = w.clone();
        let nmi = thread::spawn(move || w1.request(2));
        let w2 = w.clone();
        let reset = thread::spawn(move || w2.state.end_entry());
        let (r, c) = nmi.join().unwrap();
        let _ = reset.join().unwrap();
        w.drain();
        assert_eq!(r, 0);
        assert_eq!(
            w.calls[2].load(Ordering::Acquire),
            1,
            "the late request is served"
        );
        assert_eq!(
            w.seen_cookie[2].load(Ordering::Acquire) as u64,
            c,
            "served with the cookie it was given"
        );
        let _ = c0;
        assert!(!w.state.is_pending());
    });
}

/// Cancel on another CPU while a request and the task work run: after cancel returns (and
/// the callbacks it waits for are done, which SRCU does in the module) the bit is clear.
#[test]
fn cancel_clears_bit() {
    loom::model(|| {
        let w = Arc::new(World::new());
        let w1 = w.clone();
        let req = thread::spawn(move || w1.request(1));
        let w2 = w.clone();
        let cancel = thread::spawn(move || w2.state.cancel(1));
        req.join().unwrap();
        cancel.join().unwrap();
        // After cancel, the work's bit can only be set if the request came after it;
        // that is the caller's contract (a cancelled work does not request again).
        w.drain();
        assert!(w.calls[1].load(Ordering::Acquire) <= 1);
        assert!(!w.state.is_pending());
    });
}

/// The row table all CPUs share (src/logic/cfi/shared_rows.rs), one set: two walks on other
/// CPUs store rows (one replaces a key's row with another), a third looks them up. A lookup
/// finds nothing or a row stored whole for its key, never a torn one or another key's.
#[test]
fn shared_rows_never_give_a_torn_row() {
    use unwind_logic::cfi::regs::{RA, RBX, RSP};
    use unwind_logic::cfi::row::{CfaRule, Row, Rule};
    use unwind_logic::cfi::shared_rows::{SharedRows, SharedSlot, SHARED_ROW_WAYS};
    use unwind_logic::cfi::CompactRow;

    fn row(offset: i32, rbx: bool) -> CompactRow {
        let mut r = Row::EMPTY;
        r.rules.cfa = CfaRule::RegOffset { reg: RSP, offset };
        r.rules.regs[RA as usize] = Rule::Offset(-8);
        if rbx {
            r.rules.regs[RBX as usize] = Rule::Offset(-16);
        }
        CompactRow::from_row(&r).unwrap()
    }
    loom::model(|| {
        let (a, b, c) = (row(16, true), row(48, false), row(24, true));
        let t = Arc::new(SharedRows::new(
            (0..SHARED_ROW_WAYS)
                .map(|_| SharedSlot::new())
                .collect::<Vec<_>>(),
        ));
        let t1 = t.clone();
        let w1 = thread::spawn(move || {
            t1.store(1, 0x10, &a);
            t1.store(1, 0x10, &b);
        });
        let t2 = t.clone();
        let w2 = thread::spawn(move || t2.store(1, 0x20, &c));
        for _ in 0..2 {
            if let Some(r) = t.lookup(1, 0x10) {
                assert!(r == a || r == b, "{r:?}");
            }
            if let Some(r) = t.lookup(1, 0x20) {
                assert_eq!(r, c);
            }
        }
        w1.join().unwrap();
        w2.join().unwrap();
        // Once the writers are done, the last row of each key is there (a store that met
        // another writer on its entry may be dropped: then nothing, never an old row).
        if let Some(r) = t.lookup(1, 0x10) {
            assert_eq!(r, b);
        }
    });
}
