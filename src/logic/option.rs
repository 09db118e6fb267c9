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
