// SPDX-License-Identifier: GPL-2.0
//! Input: a text file, stdin (`-`), or a trace.dat (recognized by its magic and turned
//! into text by `trace-cmd report -i FILE`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// First bytes of a trace-cmd trace.dat file.
pub const TRACE_DAT_MAGIC: &[u8] = b"\x17\x08\x44tracing";

pub struct Input {
    pub reader: Box<dyn BufRead>,
    child: Option<Child>,
    tmp: Option<PathBuf>,
    what: String,
}

fn read_prefix<R: Read>(r: &mut R, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

impl Input {
    /// Open `path` (`-` for stdin). `trace_cmd` is the program used for trace.dat files.
    pub fn open(path: &str, trace_cmd: &str) -> Result<Input, String> {
        if path == "-" {
            let mut stdin = io::stdin().lock();
            let prefix = read_prefix(&mut stdin, TRACE_DAT_MAGIC.len())
                .map_err(|e| format!("reading stdin: {e}"))?;
            if prefix == TRACE_DAT_MAGIC {
                // trace-cmd needs a seekable file: spool stdin to a temporary one
                let tmp = std::env::temp_dir().join(format!("ustack-{}.dat", std::process::id()));
                let mut f = File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
                io::copy(&mut Cursor::new(prefix).chain(stdin), &mut f)
                    .map_err(|e| format!("spooling stdin to {}: {e}", tmp.display()))?;
                drop(f);
                let mut inp = Self::trace_cmd(&tmp.to_string_lossy(), trace_cmd)?;
                inp.tmp = Some(tmp);
                return Ok(inp);
            }
            let reader = BufReader::new(Cursor::new(prefix).chain(io::stdin()));
            return Ok(Input {
                reader: Box::new(reader),
                child: None,
                tmp: None,
                what: "stdin".into(),
            });
        }
        let mut f = File::open(path).map_err(|e| format!("{path}: {e}"))?;
        let prefix =
            read_prefix(&mut f, TRACE_DAT_MAGIC.len()).map_err(|e| format!("{path}: {e}"))?;
        if prefix == TRACE_DAT_MAGIC {
            return Self::trace_cmd(path, trace_cmd);
        }
        // no seek: trace_pipe and FIFOs cannot seek back over the peeked bytes
        Ok(Input {
            reader: Box::new(BufReader::with_capacity(
                1 << 16,
                Cursor::new(prefix).chain(f),
            )),
            child: None,
            tmp: None,
            what: path.into(),
        })
    }

    fn trace_cmd(path: &str, trace_cmd: &str) -> Result<Input, String> {
        let mut child = Command::new(trace_cmd)
            .args(["report", "-i", path])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run '{trace_cmd} report -i {path}': {e}"))?;
        let out = child.stdout.take().ok_or("trace-cmd: no stdout")?;
        Ok(Input {
            reader: Box::new(BufReader::new(out)),
            child: Some(child),
            tmp: None,
            what: format!("{trace_cmd} report -i {path}"),
        })
    }

    /// Read one line (lossy UTF-8). `Ok(false)` at end of input.
    pub fn read_line(&mut self, buf: &mut Vec<u8>, line: &mut String) -> Result<bool, String> {
        buf.clear();
        match self.reader.read_until(b'\n', buf) {
            Ok(0) => Ok(false),
            Ok(_) => {
                line.clear();
                line.push_str(&String::from_utf8_lossy(buf));
                Ok(true)
            }
            Err(e) => Err(format!("{}: {e}", self.what)),
        }
    }

    /// Wait for trace-cmd (if any) and clean up.
    pub fn close(mut self) -> Result<(), String> {
        let r = match self.child.take() {
            Some(mut c) => match c.wait() {
                Ok(s) if s.success() => Ok(()),
                Ok(s) => Err(format!("{} failed: {s}", self.what)),
                Err(e) => Err(format!("{}: {e}", self.what)),
            },
            None => Ok(()),
        };
        if let Some(t) = self.tmp.take() {
            let _ = std::fs::remove_file(t);
        }
        r
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        if let Some(t) = self.tmp.take() {
            let _ = std::fs::remove_file(t);
        }
    }
}
