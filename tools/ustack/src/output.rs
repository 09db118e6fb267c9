// SPDX-License-Identifier: GPL-2.0
//! Output formats: a perf-script-like listing, folded stacks and a flame graph SVG.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::correlate::{FileEntry, Frame, Sample, StackState};
use crate::stats::Stats;
use crate::symbolize::{SymFrame, SymResult, Symbolizer};

/// One output line of a symbolized stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Sym {
        sym: SymFrame,
        path: String,
    },
    Unresolved {
        offset: u64,
        path: String,
        why: String,
    },
    Anon(u64),
    NoMap(u64),
    UnknownHash {
        offset: u64,
        hash: u32,
    },
}

impl Line {
    /// The listing form: `function+0xoff (file:line) [path]`.
    pub fn listing(&self) -> String {
        match self {
            Line::Sym { sym, path } => {
                let mut s = sym.function.clone().unwrap_or_else(|| "??".into());
                if let Some(o) = sym.offset {
                    s.push_str(&format!("+0x{o:x}"));
                }
                if let Some(f) = &sym.file {
                    match sym.line {
                        Some(l) => s.push_str(&format!(" ({f}:{l})")),
                        None => s.push_str(&format!(" ({f})")),
                    }
                }
                s.push_str(&format!(" [{path}]"));
                if sym.inlined {
                    s.push_str(" (inlined)");
                }
                s
            }
            Line::Unresolved { offset, path, why } => format!("0x{offset:x} [{path}] [{why}]"),
            Line::Anon(a) => format!("0x{a:016x} [anon]"),
            Line::NoMap(a) => format!("0x{a:016x} [nomap]"),
            Line::UnknownHash { offset, hash } => {
                format!("0x{offset:x} [hash {hash:08x}: no file_cache]")
            }
        }
    }

    /// The name used in folded stacks (no ';', no trailing count-like text).
    pub fn folded(&self) -> String {
        let s = match self {
            Line::Sym { sym, path } => match &sym.function {
                Some(f) => f.clone(),
                None => format!("[{}]", basename(path)),
            },
            Line::Unresolved { path, .. } => format!("[{}]", basename(path)),
            Line::Anon(_) => "[anon]".into(),
            Line::NoMap(_) | Line::UnknownHash { .. } => "[unknown]".into(),
        };
        s.replace(';', ":").replace('\n', " ")
    }
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Symbolize a whole stack into output lines, innermost first.
pub fn symbolize_frames(
    frames: &[Frame],
    files: &[FileEntry],
    sym: &mut Symbolizer,
    stats: &mut Stats,
) -> Vec<Line> {
    let mut out = Vec::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        match *f {
            Frame::File { offset, file } => {
                let Some(entry) = files.get(file) else {
                    out.push(Line::UnknownHash { offset, hash: 0 });
                    continue;
                };
                let r: SymResult = sym.symbolize(file, entry, offset, i > 0, stats);
                match r {
                    Ok(levels) => {
                        stats.frames_symbolized += 1;
                        for l in levels.iter() {
                            out.push(Line::Sym {
                                sym: l.clone(),
                                path: entry.path.clone(),
                            });
                        }
                    }
                    Err(e) => {
                        stats.frames_unsymbolized += 1;
                        out.push(Line::Unresolved {
                            offset,
                            path: entry.path.clone(),
                            why: e.to_string(),
                        });
                    }
                }
            }
            Frame::Anon(a) => {
                stats.frames_unsymbolized += 1;
                out.push(Line::Anon(a))
            }
            Frame::NoMap(a) => {
                stats.frames_unsymbolized += 1;
                out.push(Line::NoMap(a))
            }
            Frame::UnknownHash { offset, hash } => {
                stats.frames_unsymbolized += 1;
                out.push(Line::UnknownHash { offset, hash })
            }
        }
    }
    out
}

/// Write one sample in the listing format.
pub fn write_listing<W: Write>(
    w: &mut W,
    s: &Sample,
    files: &[FileEntry],
    sym: &mut Symbolizer,
    stats: &mut Stats,
) -> io::Result<()> {
    writeln!(w, "{}", s.event.text)?;
    match &s.stack {
        StackState::Ok(st) => {
            for l in symbolize_frames(&st.frames, files, sym, stats) {
                writeln!(w, "    {}", l.listing())?;
            }
            if st.frames.is_empty() {
                writeln!(w, "    [empty user stack]")?;
            }
            if st.truncated {
                writeln!(w, "    [truncated]")?;
            }
        }
        StackState::NoCookie => writeln!(w, "    [no user stack: no cookie]")?,
        StackState::NoStack(c) => writeln!(w, "    [no user stack: cookie 0x{c:x} has no stack]")?,
    }
    writeln!(w)
}

/// Aggregates samples into folded stacks (`comm;outer;...;inner count`).
#[derive(Debug, Default)]
pub struct Folded {
    pub stacks: BTreeMap<String, u64>,
}

impl Folded {
    pub fn add(
        &mut self,
        s: &Sample,
        files: &[FileEntry],
        sym: &mut Symbolizer,
        stats: &mut Stats,
    ) {
        let StackState::Ok(st) = &s.stack else { return };
        let lines = symbolize_frames(&st.frames, files, sym, stats);
        let mut key = s.event.comm.replace(';', ":");
        if key.is_empty() {
            key.push_str("[unknown]");
        }
        for l in lines.iter().rev() {
            key.push(';');
            key.push_str(&l.folded());
        }
        *self.stacks.entry(key).or_insert(0) += 1;
    }

    pub fn lines(&self) -> Vec<String> {
        self.stacks
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect()
    }

    pub fn write<W: Write>(&self, w: &mut W) -> io::Result<()> {
        for l in self.lines() {
            writeln!(w, "{l}")?;
        }
        Ok(())
    }

    /// Render a flame graph with inferno.
    pub fn write_svg<W: Write>(&self, w: W, title: &str) -> io::Result<()> {
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        opts.count_name = "events".to_string();
        let lines = self.lines();
        if lines.is_empty() {
            // inferno refuses empty input; draw an empty graph's worth of nothing instead
            opts.subtitle = Some("no stacks".into());
            return inferno::flamegraph::from_lines(
                &mut opts,
                ["[no stacks] 1"].iter().copied(),
                w,
            )
            .map_err(io::Error::other);
        }
        inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), w)
            .map_err(io::Error::other)
    }
}
