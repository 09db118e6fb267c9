// SPDX-License-Identifier: GPL-2.0
//! `ustack` command line.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

use ustack::correlate::Sample;
use ustack::input::Input;
use ustack::output::{write_listing, Folded};
use ustack::symbolize::Symbolizer;
use ustack::{Engine, Filter};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// perf-script-like: the event line, then one line per frame
    Listing,
    /// folded stacks: `comm;outer;...;inner count` (flame graph input)
    Folded,
    /// flame graph SVG (inferno)
    Svg,
}

/// Symbolize deferred user stacks recorded by the unwind trace events.
///
/// INPUT is text from tracefs `trace`/`trace_pipe`, `trace-cmd report` output, or a
/// trace.dat (converted with `trace-cmd report -i`); `-` reads stdin.
#[derive(Debug, Parser)]
#[command(name = "ustack", version)]
struct Cli {
    /// Trace to read (`-` for stdin)
    #[arg(default_value = "-")]
    input: String,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Listing)]
    format: Format,
    /// Write the output to FILE instead of stdout
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Prefix every recorded file path with DIR (the traced system's root)
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Refuse files named by the trace that are larger than SIZE bytes (suffix K, M or G
    /// for KiB, MiB, GiB)
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = parse_size)]
    max_file_size: u64,
    /// Only events of this pid (repeatable)
    #[arg(long, value_name = "PID")]
    pid: Vec<u32>,
    /// Only events of this command name (repeatable)
    #[arg(long, value_name = "COMM")]
    comm: Vec<String>,
    /// Only events with this name, `system:` prefix optional (repeatable)
    #[arg(long, value_name = "NAME")]
    event: Vec<String>,
    /// Only events of this trace-cmd buffer (instance) name (repeatable)
    #[arg(long, value_name = "NAME")]
    instance: Vec<String>,
    /// Also show stacks whose cookie was lost (as samples of user_unwind_stack itself)
    #[arg(long)]
    orphans: bool,
    /// Always print the summary of counters on stderr
    #[arg(long)]
    stats: bool,
    /// Never print the summary
    #[arg(short, long, conflicts_with = "stats")]
    quiet: bool,
    /// Flame graph title
    #[arg(long, default_value = "User stacks")]
    title: String,
    /// Program used to read trace.dat files
    #[arg(long, default_value = "trace-cmd", value_name = "PROG")]
    trace_cmd: String,
}

fn run(cli: Cli) -> Result<(), String> {
    let filter = Filter {
        pids: cli.pid.clone(),
        comms: cli.comm.clone(),
        events: cli.event.clone(),
        instances: cli.instance.clone(),
    };
    let mut input = Input::open(&cli.input, &cli.trace_cmd)?;
    let out: Box<dyn Write> = match &cli.output {
        Some(p) => Box::new(File::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => Box::new(io::stdout().lock()),
    };
    let mut out = BufWriter::new(out);
    let mut engine = Engine::new();
    engine.keep_orphans(cli.orphans);
    let mut sym = Symbolizer::new(cli.sysroot.clone());
    sym.max_file_size = cli.max_file_size;
    let mut folded = Folded::default();
    let mut samples: Vec<Sample> = Vec::new();
    let (mut buf, mut line) = (Vec::new(), String::new());
    let werr = |e: io::Error| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            EPIPE.to_string()
        } else {
            format!("writing output: {e}")
        }
    };
    // follow trace_pipe (or a pipe on stdin) line by line
    let live = cli.input == "-" || cli.input.ends_with("trace_pipe");

    let mut emit =
        |samples: &mut Vec<Sample>, engine: &mut Engine, out: &mut BufWriter<Box<dyn Write>>| {
            for s in samples.drain(..) {
                if !filter.matches(&s.event) {
                    continue;
                }
                let (files, stats) = engine.parts();
                match cli.format {
                    Format::Listing => write_listing(out, &s, files, &mut sym, stats)?,
                    Format::Folded | Format::Svg => folded.add(&s, files, &mut sym, stats),
                }
            }
            Ok::<(), io::Error>(())
        };

    let mut read_err = None;
    loop {
        match input.read_line(&mut buf, &mut line) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                // a broken pipe or truncated file: keep what we have
                read_err = Some(e);
                break;
            }
        }
        engine.feed_line(&line, &mut samples);
        if !samples.is_empty() {
            emit(&mut samples, &mut engine, &mut out).map_err(werr)?;
            if cli.format == Format::Listing && live {
                out.flush().map_err(werr)?;
            }
        }
    }
    engine.finish(&mut samples);
    emit(&mut samples, &mut engine, &mut out).map_err(werr)?;
    match cli.format {
        Format::Listing => {}
        Format::Folded => folded.write(&mut out).map_err(werr)?,
        Format::Svg => folded.write_svg(&mut out, &cli.title).map_err(werr)?,
    }
    out.flush().map_err(werr)?;
    let closed = input.close();
    if cli.stats || (!cli.quiet && engine.stats.has_problems()) {
        eprint!("{}", engine.stats);
    }
    if let Some(e) = read_err {
        return Err(e);
    }
    closed
}

/// `123`, `64K`, `512M`, `2G` (binary multiples) → bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 10),
        Some((i, 'M' | 'm')) => (&s[..i], 20),
        Some((i, 'G' | 'g')) => (&s[..i], 30),
        _ => (s, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}': expected a number of bytes, with K, M or G"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("'{s}': too large"))
}

/// Output closed early (`ustack ... | head`): not an error.
const EPIPE: &str = "EPIPE";

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e == EPIPE => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ustack: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(
            parse_size("2G"),
            Ok(ustack::symbolize::DEFAULT_MAX_FILE_SIZE)
        );
        assert!(parse_size("").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1T").is_err());
        assert!(parse_size("99999999999G").is_err());
    }
}
