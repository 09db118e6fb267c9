// SPDX-License-Identifier: GPL-2.0
//! Parsing what is written to `options/userstacktrace_delay`.

/// The value of a write to a boolean tracefs option: exactly `0` or `1`, optionally
/// followed by one newline (what `echo` writes). Anything else is rejected (-EINVAL).
pub fn parse_bool_option(input: &[u8]) -> Option<bool> {
    let digits = match input {
        [rest @ .., b'\n'] => rest,
        all => all,
    };
    match digits {
        b"0" => Some(false),
        b"1" => Some(true),
        _ => None,
    }
}

/// The option's name, in `options/` and in `trace_options`.
pub const OPTION_NAME: &[u8] = b"userstacktrace_delay";

/// What one token written to an instance's `trace_options` does to the option, read the
/// way the kernel's `trace_set_options()` reads its tokens: white space around it ignored,
/// a `no` prefix clears the option. `Some(value)` for `userstacktrace_delay` (true) and
/// `nouserstacktrace_delay` (false); `None` for any other token, which is the kernel's to
/// handle.
pub fn parse_trace_option(token: &[u8]) -> Option<bool> {
    // The kernel's isspace(): space, \t, \n, \v, \f, \r.
    let is_space = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = token
        .iter()
        .position(|c| !is_space(c))
        .unwrap_or(token.len());
    let end = token
        .iter()
        .rposition(|c| !is_space(c))
        .map_or(start, |i| i + 1);
    let word = token.get(start..end).unwrap_or_default();
    match word.strip_prefix(b"no") {
        Some(name) if name == OPTION_NAME => Some(false),
        _ => (word == OPTION_NAME).then_some(true),
    }
}
