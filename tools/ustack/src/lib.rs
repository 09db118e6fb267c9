// SPDX-License-Identifier: GPL-2.0
//! `ustack`: turn deferred user stack trace events (`ftrace:user_unwind_cookie`,
//! `ftrace:user_unwind_stack`, `ftrace:file_cache`; system `unwind` in earlier versions)
//! into symbolized stacks.
//!
//! Layers: [`parse`] (text → records), [`correlate`] (records → samples with stacks),
//! [`symbolize`] (file offset → function/line), [`output`] (listing, folded, SVG) and
//! [`input`] (files, stdin, trace.dat through `trace-cmd report`).

pub mod correlate;
pub mod input;
pub mod output;
pub mod parse;
mod reader;
pub mod stats;
pub mod symbolize;

use correlate::{Correlator, Sample};
use parse::{Parser, Record};
use stats::Stats;

/// Which events to keep (applied after correlation, so filtering never breaks matching).
#[derive(Debug, Default, Clone)]
pub struct Filter {
    pub pids: Vec<u32>,
    pub comms: Vec<String>,
    /// Event names, with or without the system (`syscalls:sys_enter_getppid`).
    pub events: Vec<String>,
    /// Buffer names (trace-cmd report of a trace.dat with several instances).
    pub instances: Vec<String>,
}

impl Filter {
    pub fn matches(&self, r: &Record) -> bool {
        (self.instances.is_empty() || self.instances.contains(&r.instance))
            && (self.pids.is_empty() || self.pids.contains(&r.pid))
            && (self.comms.is_empty() || self.comms.contains(&r.comm))
            && (self.events.is_empty()
                || self.events.iter().any(|e| {
                    let e = e.rsplit(':').next().unwrap_or(e);
                    e == r.name || (r.name.is_empty() && e == "function")
                }))
    }
}

/// Parser + correlator: lines in, samples out.
#[derive(Debug, Default)]
pub struct Engine {
    parser: Parser,
    corr: Correlator,
    recs: Vec<Record>,
    pub stats: Stats,
}

impl Engine {
    pub fn new() -> Self {
        Self::default()
    }

    /// See [`Correlator::keep_orphans`].
    pub fn keep_orphans(&mut self, on: bool) {
        self.corr.keep_orphans = on;
    }

    pub fn files(&self) -> &[correlate::FileEntry] {
        self.corr.files()
    }

    /// The file table and the counters, borrowed together (for symbolizing output).
    pub fn parts(&mut self) -> (&[correlate::FileEntry], &mut Stats) {
        (self.corr.files(), &mut self.stats)
    }

    /// Feed one input line; complete samples are appended to `out`.
    pub fn feed_line(&mut self, line: &str, out: &mut Vec<Sample>) {
        self.parser.feed(line, &mut self.stats, &mut self.recs);
        for r in self.recs.drain(..) {
            self.corr.feed(r, &mut self.stats, out);
        }
    }

    /// End of input.
    pub fn finish(&mut self, out: &mut Vec<Sample>) {
        self.parser.finish(&mut self.stats, &mut self.recs);
        for r in self.recs.drain(..) {
            self.corr.feed(r, &mut self.stats, out);
        }
        self.corr.finish(&mut self.stats, out);
    }

    /// Convenience: run a whole text through the engine.
    pub fn run_text(text: &str) -> (Vec<Sample>, Engine) {
        let mut e = Engine::new();
        let mut out = Vec::new();
        for l in text.lines() {
            e.feed_line(l, &mut out);
        }
        e.finish(&mut out);
        (out, e)
    }
}
