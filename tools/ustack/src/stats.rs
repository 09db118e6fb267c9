// SPDX-License-Identifier: GPL-2.0
//! Robustness counters: everything that did not go to plan is counted here and reported
//! in the summary instead of stopping the run.

use std::fmt;

use crate::symbolize::Refusal;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    // parser
    pub lines: u64,
    pub ignored_lines: u64,
    pub malformed: u64,
    pub orphan_frame_lines: u64,
    pub truncated_stacks: u64,
    pub lost_reported: u64,
    /// `[UNKNOWN EVENT]` lines: trace-cmd had no format for them.
    pub undecoded_events: u64,
    // events
    pub events: u64,
    pub cookies: u64,
    pub stacks: u64,
    pub file_cache: u64,
    // correlation
    pub events_with_stack: u64,
    pub events_without_cookie: u64,
    pub cookies_without_event: u64,
    pub cookies_without_stack: u64,
    pub stacks_without_cookie: u64,
    pub hash_reused: u64,
    // frames
    pub frames: u64,
    pub frames_anon: u64,
    pub frames_nomap: u64,
    pub frames_unknown_hash: u64,
    // symbolization (per distinct file / per output frame)
    pub files_not_found: u64,
    pub files_build_id_mismatch: u64,
    pub files_unverified: u64,
    /// Neither an ELF file nor another format `object` reads.
    pub files_not_elf: u64,
    /// Files refused by [`read_regular_file`](crate::symbolize::read_regular_file), by
    /// reason.
    pub files_refused_not_regular: u64,
    pub files_refused_too_large: u64,
    pub files_refused_unreadable: u64,
    pub frames_symbolized: u64,
    pub frames_unsymbolized: u64,
}

impl Stats {
    /// True if anything went wrong (worth a summary even without `--stats`).
    pub fn has_problems(&self) -> bool {
        self.malformed
            + self.orphan_frame_lines
            + self.truncated_stacks
            + self.lost_reported
            + self.undecoded_events
            + self.cookies_without_event
            + self.cookies_without_stack
            + self.stacks_without_cookie
            + self.hash_reused
            + self.frames_unknown_hash
            + self.files_not_found
            + self.files_build_id_mismatch
            + self.files_not_elf
            + self.files_refused()
            > 0
    }

    /// Files not read, all reasons.
    pub fn files_refused(&self) -> u64 {
        self.files_refused_not_regular
            + self.files_refused_too_large
            + self.files_refused_unreadable
    }

    /// Count one refused file.
    pub fn count_refusal(&mut self, why: Refusal) {
        match why {
            Refusal::NotRegular => self.files_refused_not_regular += 1,
            Refusal::TooLarge => self.files_refused_too_large += 1,
            Refusal::Unreadable => self.files_refused_unreadable += 1,
        }
    }

    /// `(not a regular file 1, too large 1)`: the non-zero refusal reasons.
    fn refusal_reasons(&self) -> String {
        let parts: Vec<String> = [
            ("not a regular file", self.files_refused_not_regular),
            ("too large", self.files_refused_too_large),
            ("unreadable", self.files_refused_unreadable),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{what} {n}"))
        .collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: &[(&str, u64)] = &[
            ("lines read", self.lines),
            (
                "lines ignored (comments, headers, other formats)",
                self.ignored_lines,
            ),
            ("malformed lines", self.malformed),
            (
                "frame lines without a stack header",
                self.orphan_frame_lines,
            ),
            ("truncated stacks", self.truncated_stacks),
            ("events lost (reported by the tracer)", self.lost_reported),
            (
                "events trace-cmd could not decode (no format)",
                self.undecoded_events,
            ),
            ("events", self.events),
            ("user_unwind_cookie events", self.cookies),
            ("user_unwind_stack events", self.stacks),
            ("file_cache events", self.file_cache),
            ("events with a user stack", self.events_with_stack),
            ("events without a cookie", self.events_without_cookie),
            ("cookies without an event", self.cookies_without_event),
            ("cookies without a stack", self.cookies_without_stack),
            ("stacks without a cookie", self.stacks_without_cookie),
            ("hashes reused for another file", self.hash_reused),
            ("frames", self.frames),
            ("frames in anonymous memory", self.frames_anon),
            ("frames outside any mapping", self.frames_nomap),
            (
                "frames with a hash without file_cache",
                self.frames_unknown_hash,
            ),
            ("files not found", self.files_not_found),
            (
                "files with a build-id mismatch",
                self.files_build_id_mismatch,
            ),
            (
                "files without a recorded build-id (unverified)",
                self.files_unverified,
            ),
            ("files refused", self.files_refused()),
            ("files not ELF", self.files_not_elf),
            ("output frames symbolized", self.frames_symbolized),
            ("output frames not symbolized", self.frames_unsymbolized),
        ];
        writeln!(f, "ustack summary:")?;
        for (name, v) in rows {
            let more = if *name == "files refused" {
                self.refusal_reasons()
            } else {
                String::new()
            };
            writeln!(f, "  {name:<50} {v:>10}{more}")?;
        }
        if self.undecoded_events > 0 {
            writeln!(
                f,
                "ustack: trace-cmd could not decode {} events: if they are unwind events \
                 of a module version that put them in system `unwind`, record with `-e \
                 unwind` (trace-cmd saves the formats of `ftrace` and of the systems named \
                 with -e only)",
                self.undecoded_events
            )?;
        }
        Ok(())
    }
}
