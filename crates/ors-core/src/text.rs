//! Text a peer sent, as error messages show it: on one line and cut short, so a request with a
//! 9 MiB field cannot make an answer (or a log line) of 9 MiB.

use std::fmt;

/// At most `max` characters of `text`, trimmed, on one line (control characters as spaces); a
/// cut is marked `...`.
///
/// ```
/// use ors_core::text::preview;
/// assert_eq!(preview(" a\nb ", 10), "a b");
/// assert_eq!(preview("abcdef", 3), "abc...");
/// ```
pub fn preview(text: &str, max: usize) -> String {
    let text = text.trim();
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push_str("...");
    }
    out
}

/// The characters of a value an error echoes, at most.
pub const ECHOED_CHARS: usize = 100;

/// A value a client sent, echoed in an error: whole when short, else its first
/// [`ECHOED_CHARS`] characters and its size.
///
/// ```
/// use ors_core::text::Echo;
/// assert_eq!(Echo("codex").to_string(), "codex");
/// let long = "x".repeat(10_000);
/// assert_eq!(Echo(&long).to_string(), format!("{}... (10000 bytes)", "x".repeat(100)));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Echo<'a>(pub &'a str);

impl fmt::Display for Echo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = preview(self.0, ECHOED_CHARS);
        if self.0.chars().nth(ECHOED_CHARS).is_none() {
            return f.write_str(&shown);
        }
        write!(f, "{shown} ({} bytes)", self.0.len())
    }
}
