// SPDX-License-Identifier: GPL-2.0
//! Text parser for the `unwind` trace events.
//!
//! Accepts both the tracefs `trace`/`trace_pipe` text form (multi-line stacks) and the
//! `trace-cmd report` form (one line per event, arrays printed by `__print_array`), as
//! described in `Documentation/trace-events.rst`. The parser never panics on input: lines
//! that cannot be understood are counted in [`Stats`] and skipped.

use crate::stats::Stats;

/// Frame tag for anonymous memory (raw virtual address).
pub const HASH_ANON: u32 = 0;
/// Frame tag for an address that no mapping covers (raw virtual address).
pub const HASH_NOMAP: u32 = 0xffff_ffff;

/// One frame as recorded: a file offset (or a raw address) and the file hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawFrame {
    pub offset: u64,
    pub hash: u32,
}

/// What an event line carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `user_unwind_cookie: cookie=...`
    Cookie(u64),
    /// `user_unwind_stack: cookie=... nr=...` and its frames (innermost first).
    Stack {
        cookie: u64,
        frames: Vec<RawFrame>,
        /// Fewer frames than announced by `nr=` (cut-off trace, malformed frame lines).
        truncated: bool,
    },
    /// `file_cache: hash=... path=... build_id=...`
    FileCache {
        hash: u32,
        path: String,
        build_id: String,
        deleted: bool,
    },
    /// The `<stack trace>` / `<user stack trace>` pseudo events of ftrace: they belong to
    /// the event before them and never get a cookie of their own.
    Attachment,
    /// Any other event: a candidate for a cookie.
    Other,
}

/// One parsed event (header fields plus what the body says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// 1-based input line number of the event line.
    pub line_no: usize,
    /// The event line as read (trailing white space removed).
    pub text: String,
    /// Buffer name that `trace-cmd report` puts before each line of a trace.dat with
    /// several instances (`foo: comm-pid [cpu] ...`); empty otherwise.
    pub instance: String,
    pub comm: String,
    pub pid: u32,
    pub cpu: u32,
    /// Timestamp exactly as printed (seconds with a fraction, or a counter).
    pub ts: String,
    /// Event name without the system (`user_unwind_cookie`, `sys_enter_getppid`, ...).
    pub name: String,
    pub kind: Kind,
}

/// The common header of an event line: `comm-pid [cpu] flags ts: name: body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    pub instance: &'a str,
    pub comm: &'a str,
    pub pid: u32,
    pub cpu: u32,
    pub ts: &'a str,
    pub name: &'a str,
    pub body: &'a str,
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_timestamp(tok: &str) -> Option<&str> {
    let t = tok.strip_suffix(':')?;
    if t.is_empty() || t.bytes().filter(|&b| b == b'.').count() > 1 {
        return None;
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') && t.bytes().any(|b| b.is_ascii_digit()) {
        Some(t)
    } else {
        None
    }
}

/// Latency-format flag columns (`.....`, `d..1.`, `dNh2.`): short, no colon, no brackets.
fn is_flags(tok: &str) -> bool {
    (1..=8).contains(&tok.len())
        && tok
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'+' || b == b'!')
}

/// Split `comm-pid` (with an optional `(tgid)` column after it) into comm and pid. The
/// pid is after the last '-'; comm may contain spaces and dashes.
fn split_task(prefix: &str) -> Option<(&str, u32)> {
    let mut p = prefix.trim_end();
    if p.ends_with(')') {
        // record-tgid column: "comm-pid (  tgid)" or "(-------)"
        let open = p.rfind('(')?;
        p = p[..open].trim_end();
    }
    let (comm, pid) = p.rsplit_once('-')?;
    if !is_digits(pid) {
        return None;
    }
    let pid = pid.parse().ok()?;
    Some((comm.trim_start(), pid))
}

/// Parse the header of an event line. Returns `None` for anything that is not an event
/// line (comments, trace-cmd preamble, frame lines, garbage).
pub fn parse_header(line: &str) -> Option<Header<'_>> {
    let mut search = 0;
    while let Some(rel) = line.get(search..)?.find('[') {
        let open = search + rel;
        search = open + 1;
        let Some(close_rel) = line[open..].find(']') else {
            break;
        };
        let close = open + close_rel;
        let cpu_s = line[open + 1..close].trim();
        if !is_digits(cpu_s) || cpu_s.len() > 6 {
            continue;
        }
        let Some((comm, pid)) = split_task(&line[..open]) else {
            continue;
        };
        // trace-cmd report with several buffers: "instance: comm-pid [cpu] ..."
        let (instance, comm) = match comm.split_once(": ") {
            Some((i, c)) if !i.is_empty() && !i.contains(char::is_whitespace) => {
                (i, c.trim_start())
            }
            _ => ("", comm),
        };
        let Ok(cpu) = cpu_s.parse::<u32>() else {
            continue;
        };
        // after "[cpu]": optional flags, then "ts:"
        let rest = &line[close + 1..];
        let mut it = rest.split_whitespace();
        let mut ts = None;
        for _ in 0..2 {
            let Some(tok) = it.next() else { break };
            if let Some(t) = is_timestamp(tok) {
                ts = Some(t);
                break;
            }
            if !is_flags(tok) {
                break;
            }
        }
        let Some(ts) = ts else { continue };
        // body: text after the timestamp token
        let ts_pos = match rest.find(&format!("{ts}:")) {
            Some(p) => p + ts.len() + 1,
            None => continue,
        };
        let after = rest[ts_pos..].trim_start();
        let (name, body) = match after.split_once(char::is_whitespace) {
            Some((n, b)) => (n, b.trim()),
            None => (after, ""),
        };
        let (name, body) = match name.strip_suffix(':') {
            Some(n) => (n, body),
            // function tracer ("func <-parent") and other name-less formats
            None => ("", after.trim_end()),
        };
        // "ftrace:user_unwind_cookie" style (system prefix: ftrace, or unwind in earlier
        // versions of the module) is accepted too
        let name = name.rsplit(':').next().unwrap_or(name);
        return Some(Header {
            instance,
            comm,
            pid,
            cpu,
            ts,
            name,
            body,
        });
    }
    None
}

/// Parse an unsigned number: `0x` prefix means hex, otherwise decimal.
pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() || h.len() > 16 {
            return None;
        }
        u64::from_str_radix(h, 16).ok()
    } else {
        if !is_digits(s) {
            return None;
        }
        s.parse().ok()
    }
}

/// Find `key=value` in an event body. The key must start a word. The value ends at white
/// space, except for `{...}` and `ARRAY[...]` values which end at their closing bracket, and
/// for a space-separated list of numbers (how trace-cmd's libtraceevent prints
/// `__print_array`: `offsets=4455 4675 160330`), which runs up to the next `key=` word.
pub fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("{key}=");
    let mut from = 0;
    while let Some(rel) = body.get(from..)?.find(&pat) {
        let at = from + rel;
        from = at + pat.len();
        if at > 0 && !body[..at].ends_with(char::is_whitespace) {
            continue;
        }
        let v = &body[at + pat.len()..];
        let end = if v.starts_with('{') {
            v.find('}').map(|e| e + 1)?
        } else if v.starts_with("ARRAY[") {
            v.find(']').map(|e| e + 1)?
        } else {
            let mut end = v.find(char::is_whitespace).unwrap_or(v.len());
            if v[..end].parse::<u64>().is_ok() || end == 0 {
                // A list of numbers: extend over the following numeric words.
                loop {
                    let rest = &v[end..];
                    let word_start = end + (rest.len() - rest.trim_start().len());
                    let word_len = v[word_start..]
                        .find(char::is_whitespace)
                        .unwrap_or(v.len() - word_start);
                    let word = &v[word_start..word_start + word_len];
                    if word.is_empty() || word.contains('=') || parse_num(word).is_none() {
                        break;
                    }
                    end = word_start + word_len;
                }
            }
            end
        };
        return Some(&v[..end]);
    }
    None
}

/// Parse an array value: `{0x1139,0x29d90}` (`__print_array`), or `ARRAY[39, 11, ...]`
/// (libtraceevent's raw byte dump of a dynamic array, little endian, `elem` bytes each).
pub fn parse_array(v: &str, elem: usize) -> Option<Vec<u64>> {
    let v = v.trim();
    if let Some(inner) = v.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        let inner = inner.trim();
        if inner.is_empty() {
            return Some(Vec::new());
        }
        return inner.split(',').map(parse_num).collect();
    }
    if v.is_empty() {
        return Some(Vec::new());
    }
    if !v.contains(['[', '{', ',']) {
        // libtraceevent's `__print_array`: decimal (or hex) numbers separated by spaces.
        return v.split_whitespace().map(parse_num).collect();
    }
    if let Some(inner) = v.strip_prefix("ARRAY[").and_then(|s| s.strip_suffix(']')) {
        let inner = inner.trim();
        let bytes: Option<Vec<u8>> = if inner.is_empty() {
            Some(Vec::new())
        } else {
            inner
                .split(',')
                .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).ok())
                .collect()
        };
        let bytes = bytes?;
        if elem == 0 || bytes.len() % elem != 0 {
            return None;
        }
        return Some(
            bytes
                .chunks(elem)
                .map(|c| {
                    c.iter()
                        .rev()
                        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
                })
                .collect(),
        );
    }
    None
}

/// Parse a tracefs frame line: ` => 0x0000000000001139 [a1b2c3d4]` (or `[anon]`,
/// `[nomap]`). Returns `None` if the line is not a frame line at all, `Some(None)` for a
/// frame line in some other format (e.g. a kernel `<stack trace>` frame).
pub fn parse_frame_line(line: &str) -> Option<Option<RawFrame>> {
    let rest = line.trim_start().strip_prefix("=>")?;
    let mut it = rest.split_whitespace();
    let addr = it.next();
    let tag = it.next();
    let frame = (|| {
        let addr = addr?;
        let offset = match addr.strip_prefix("0x") {
            Some(h) if !h.is_empty() && h.len() <= 16 => u64::from_str_radix(h, 16).ok()?,
            _ => return None,
        };
        let tag = tag?.strip_prefix('[')?.strip_suffix(']')?;
        let hash = match tag {
            "anon" => HASH_ANON,
            "nomap" => HASH_NOMAP,
            h => {
                let h = h.strip_prefix("0x").unwrap_or(h);
                if h.is_empty() || h.len() > 8 {
                    return None;
                }
                u32::from_str_radix(h, 16).ok()?
            }
        };
        if it.next().is_some() {
            return None;
        }
        Some(RawFrame { offset, hash })
    })();
    Some(frame)
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Parse the body of a `file_cache` event. The path may contain spaces: it runs from
/// `path=` up to the last ` build_id=`.
pub fn parse_file_cache(body: &str) -> Option<Kind> {
    let hash = parse_num(field(body, "hash")?)?;
    let hash = u32::try_from(hash).ok()?;
    let p = body.find("path=")?;
    if p > 0 && !body[..p].ends_with(char::is_whitespace) {
        return None;
    }
    let after = &body[p + 5..];
    let (path, build_id) = match after.rfind(" build_id=") {
        Some(b) => (&after[..b], after[b + 10..].trim()),
        None => (after.trim_end(), ""),
    };
    if !is_hex(build_id) || build_id.len() % 2 != 0 {
        return None;
    }
    let mut path = path.trim_end();
    let mut deleted = false;
    if let Some(p) = path.strip_suffix(" (deleted)") {
        path = p;
        deleted = true;
    }
    if path.is_empty() {
        return None;
    }
    Some(Kind::FileCache {
        hash,
        path: path.to_string(),
        build_id: build_id.to_ascii_lowercase(),
        deleted,
    })
}

/// A stack header still waiting for its ` => ` lines (tracefs text form).
#[derive(Debug)]
struct Pending {
    rec: Record,
    nr: Option<usize>,
    frames: Vec<RawFrame>,
    bad: bool,
}

/// Maximum frames accepted in one stack (guards memory against garbage `nr=`).
pub const MAX_FRAMES: usize = 4096;

/// Line-by-line parser that assembles multi-line stacks into records.
#[derive(Debug, Default)]
pub struct Parser {
    line_no: usize,
    pending: Option<Pending>,
}

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    fn finish_pending(&mut self, stats: &mut Stats, out: &mut Vec<Record>) {
        if let Some(p) = self.pending.take() {
            let mut rec = p.rec;
            let truncated = p.bad || p.nr.is_some_and(|n| p.frames.len() < n);
            if truncated {
                stats.truncated_stacks += 1;
            }
            if let Kind::Stack { cookie, .. } = rec.kind {
                rec.kind = Kind::Stack {
                    cookie,
                    frames: p.frames,
                    truncated,
                };
            }
            out.push(rec);
        }
    }

    /// Feed one line; complete records are appended to `out`.
    pub fn feed(&mut self, line: &str, stats: &mut Stats, out: &mut Vec<Record>) {
        self.line_no += 1;
        stats.lines += 1;
        let line = line.trim_end_matches(['\n', '\r']);

        if let Some(frame) = parse_frame_line(line) {
            match (&mut self.pending, frame) {
                (Some(p), Some(f)) => {
                    p.frames.push(f);
                    if p.nr.is_some_and(|n| p.frames.len() >= n) || p.frames.len() >= MAX_FRAMES {
                        self.finish_pending(stats, out);
                    }
                }
                (Some(p), None) => {
                    // a frame line of the wrong shape inside one of our stacks
                    stats.malformed += 1;
                    p.bad = true;
                }
                // frames of <stack trace>/<user stack trace>, or ours after their
                // header was lost: nothing to attach them to
                (None, Some(_)) => stats.orphan_frame_lines += 1,
                (None, None) => stats.ignored_lines += 1,
            }
            return;
        }
        // any other line ends a pending multi-line stack
        self.finish_pending(stats, out);

        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            stats.ignored_lines += 1;
            return;
        }
        let Some(h) = parse_header(line) else {
            if let Some(n) = parse_lost(trimmed) {
                stats.lost_reported += n;
                stats.ignored_lines += 1;
            } else if trimmed.contains("user_unwind_") || trimmed.contains("file_cache:") {
                stats.malformed += 1;
            } else if trimmed.contains("[UNKNOWN EVENT]") {
                // trace-cmd report of an event whose format trace.dat lacks
                stats.undecoded_events += 1;
            } else {
                stats.ignored_lines += 1;
            }
            return;
        };
        let kind = match h.name {
            "user_unwind_cookie" => match field(h.body, "cookie").and_then(parse_num) {
                Some(c) => Kind::Cookie(c),
                None => {
                    stats.malformed += 1;
                    return;
                }
            },
            "user_unwind_stack" => {
                let Some(cookie) = field(h.body, "cookie").and_then(parse_num) else {
                    stats.malformed += 1;
                    return;
                };
                let nr = match field(h.body, "nr") {
                    Some(v) => match parse_num(v).and_then(|n| usize::try_from(n).ok()) {
                        Some(n) if n <= MAX_FRAMES => Some(n),
                        _ => {
                            stats.malformed += 1;
                            return;
                        }
                    },
                    None => None,
                };
                let offs = field(h.body, "offsets");
                let hashes = field(h.body, "hashes");
                if offs.is_none() && hashes.is_none() {
                    // tracefs multi-line form: frames follow on " => " lines
                    let rec = make_record(
                        self.line_no,
                        line,
                        &h,
                        Kind::Stack {
                            cookie,
                            frames: Vec::new(),
                            truncated: false,
                        },
                    );
                    self.pending = Some(Pending {
                        rec,
                        nr,
                        frames: Vec::new(),
                        bad: false,
                    });
                    if nr == Some(0) {
                        self.finish_pending(stats, out);
                    }
                    return;
                }
                let offs = offs.and_then(|v| parse_array(v, 8));
                let hashes = hashes.and_then(|v| parse_array(v, 4));
                let (Some(offs), Some(hashes)) = (offs, hashes) else {
                    stats.malformed += 1;
                    return;
                };
                let mut truncated = false;
                if offs.len() != hashes.len()
                    || nr.is_some_and(|n| n != offs.len())
                    || hashes.iter().any(|&h| h > u64::from(u32::MAX))
                {
                    stats.malformed += 1;
                    stats.truncated_stacks += 1;
                    truncated = true;
                }
                let frames = offs
                    .iter()
                    .zip(hashes.iter())
                    .take(MAX_FRAMES)
                    .map(|(&offset, &hash)| RawFrame {
                        offset,
                        hash: hash as u32,
                    })
                    .collect();
                Kind::Stack {
                    cookie,
                    frames,
                    truncated,
                }
            }
            "file_cache" => match parse_file_cache(h.body) {
                Some(k) => k,
                None => {
                    stats.malformed += 1;
                    return;
                }
            },
            "" if h.body.starts_with('<') && h.body.ends_with('>') => Kind::Attachment,
            _ => Kind::Other,
        };
        out.push(make_record(self.line_no, line, &h, kind));
    }

    /// End of input: flush a stack that is still collecting frame lines.
    pub fn finish(&mut self, stats: &mut Stats, out: &mut Vec<Record>) {
        self.finish_pending(stats, out);
    }
}

fn make_record(line_no: usize, line: &str, h: &Header<'_>, kind: Kind) -> Record {
    Record {
        line_no,
        text: line.trim().to_string(),
        instance: h.instance.to_string(),
        comm: h.comm.to_string(),
        pid: h.pid,
        cpu: h.cpu,
        ts: h.ts.to_string(),
        name: h.name.to_string(),
        kind,
    }
}

/// `CPU:1 [LOST 32 EVENTS]` (tracefs and trace-cmd) → 32.
fn parse_lost(line: &str) -> Option<u64> {
    let i = line.find("[LOST ")?;
    let rest = &line[i + 6..];
    let n = rest.split_whitespace().next()?;
    n.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_tracefs() {
        let h = parse_header(
            "  sleep-123   [001] .....  10.000100: user_unwind_cookie: cookie=0x300000002",
        )
        .unwrap();
        assert_eq!(
            (h.comm, h.pid, h.cpu, h.ts, h.name),
            ("sleep", 123, 1, "10.000100", "user_unwind_cookie")
        );
        assert_eq!(h.body, "cookie=0x300000002");
    }

    #[test]
    fn header_odd_comm() {
        let h = parse_header("my-we ird [1] comm-42 [3] d..1. 5.5: sys_enter: NR 110").unwrap();
        assert_eq!((h.comm, h.pid, h.cpu), ("my-we ird [1] comm", 42, 3));
        let h =
            parse_header("  <...>-7 (   7) [000] 1.0: file_cache: hash=0x1 path=/a b build_id=")
                .unwrap();
        assert_eq!((h.comm, h.pid, h.name), ("<...>", 7, "file_cache"));
        let h = parse_header("bash-5 [000] 123456: do_sys_open <-foo").unwrap();
        assert_eq!((h.name, h.body), ("", "do_sys_open <-foo"));
    }

    #[test]
    fn arrays() {
        assert_eq!(
            parse_array("{0x1139,0x29d90}", 8),
            Some(vec![0x1139, 0x29d90])
        );
        assert_eq!(parse_array("{}", 8), Some(vec![]));
        assert_eq!(parse_array("{ 1, 2 }", 8), Some(vec![1, 2]));
        assert_eq!(parse_array("ARRAY[39, 11, 00, 00]", 4), Some(vec![0x1139]));
        assert_eq!(parse_array("{0x1,zz}", 8), None);
    }

    #[test]
    fn file_cache_spaces() {
        let k =
            parse_file_cache("hash=0xa1b2c3d4 path=/tmp/my dir/a (deleted) build_id=ABcd").unwrap();
        assert_eq!(
            k,
            Kind::FileCache {
                hash: 0xa1b2c3d4,
                path: "/tmp/my dir/a".into(),
                build_id: "abcd".into(),
                deleted: true
            }
        );
    }
}
