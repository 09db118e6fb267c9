// SPDX-License-Identifier: GPL-2.0
//! Sequential semantics of one task's state across kernel entries.
#![cfg(not(loom))]
use unwind_logic::request_state::{Request, RequestState};

/// A request with a fixed cookie source.
fn req(s: &RequestState, bit: u32) -> Request {
    s.request(bit, || 0x5_0000_0001).0
}

/// Runs the task work: returns the bits called back.
fn task_work(s: &RequestState) -> Vec<u32> {
    let bits = s.take_pending();
    let called: Vec<u32> = (1..64).filter(|b| bits & (1 << b) != 0).collect();
    for &b in &called {
        s.complete(b);
    }
    called
}

#[test]
fn two_works_one_entry_one_task_work_same_cookie() {
    let s = RequestState::new();
    let (r, c1) = s.request(1, || 0x101);
    assert_eq!(r, Request::QueueTaskWork);
    let (r, c2) = s.request(2, || unreachable!("cookie already assigned"));
    assert_eq!(
        r,
        Request::Queued,
        "second work rides on the queued task work"
    );
    assert_eq!(c1, c2);
    assert_eq!(req(&s, 1), Request::Already);
    assert_eq!(task_work(&s), vec![1, 2]);
    // After the callbacks: asking again returns 1 and queues nothing.
    assert_eq!(req(&s, 1), Request::Already);
    assert_eq!(req(&s, 2), Request::Already);
    assert!(!s.is_pending());
    assert_eq!(s.current_cookie(), c1);
    // Return to user space, next entry: new cookie.
    assert!(s.end_entry());
    assert_eq!(s.current_cookie(), 0);
    let (r, c3) = s.request(1, || 0x999);
    assert_ne!(c3, c1);
    assert_eq!(r, Request::QueueTaskWork);
}

#[test]
fn late_request_from_other_work_runs_only_that_callback() {
    let s = RequestState::new();
    assert_eq!(req(&s, 1), Request::QueueTaskWork);
    assert_eq!(task_work(&s), vec![1]);
    // Event on the way out from another tracer: the task work runs again for it alone.
    assert_eq!(req(&s, 3), Request::QueueTaskWork);
    assert_eq!(task_work(&s), vec![3]);
    // And once more for nobody new: nothing is queued (no livelock).
    assert_eq!(req(&s, 1), Request::Already);
    assert_eq!(req(&s, 3), Request::Already);
    assert!(!s.is_pending());
}

#[test]
fn reset_waits_for_pending_task_work() {
    let s = RequestState::new();
    let (r, c) = s.request(1, || 9);
    assert_eq!(r, Request::QueueTaskWork);
    assert!(!s.end_entry(), "pending task work keeps the entry's state");
    assert_eq!(s.current_cookie(), c);
    assert_eq!(task_work(&s), vec![1]);
    assert!(s.end_entry());
    assert!(!s.is_active());
}

#[test]
fn nothing_requested_nothing_reset() {
    let s = RequestState::new();
    assert!(!s.end_entry());
    assert_eq!(s.take_pending(), 0);
}

#[test]
fn cancel_removes_the_bit_everywhere() {
    let s = RequestState::new();
    assert_eq!(req(&s, 1), Request::QueueTaskWork);
    assert_eq!(req(&s, 2), Request::Queued);
    s.cancel(2);
    assert_eq!(task_work(&s), vec![1], "cancelled work is not called back");
    s.cancel(1);
    assert_eq!(
        req(&s, 1),
        Request::QueueTaskWork,
        "bit reusable after cancel"
    );
}

#[test]
fn aborted_queue_leaves_no_trace() {
    let s = RequestState::new();
    assert_eq!(req(&s, 4), Request::QueueTaskWork);
    s.abort_queue(4);
    assert!(!s.is_pending());
    assert_eq!(req(&s, 4), Request::QueueTaskWork);
}
