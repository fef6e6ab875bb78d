//! One output stream of a program: its bytes kept up to a cap, the rest counted, and each line
//! sent as a `progress` event while it runs. Fed chunks as they are read, so a line without
//! an end (a megabyte with no newline) never grows past the cap in memory.

use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::env::ToolContext;

/// Longest line sent in one `progress` event; longer lines are cut there.
const MAX_PROGRESS_LINE: usize = 1000;
/// How much one read takes from a pipe.
pub(crate) const CHUNK: usize = 16 * 1024;

/// One stream's captured bytes, how many were dropped past the cap, and the line being read.
pub(crate) struct Capture<'c> {
    name: &'static str,
    cap: usize,
    ctx: &'c ToolContext,
    bytes: Vec<u8>,
    dropped: u64,
    /// The start of the line not yet ended, up to [`MAX_PROGRESS_LINE`] bytes.
    line: Vec<u8>,
    /// Whether the line not yet ended began within the cap (only those are sent as progress).
    line_kept: bool,
}

impl<'c> Capture<'c> {
    /// A capture of the stream `name` (`stdout`, `stderr`) keeping up to `cap` bytes.
    pub(crate) fn new(name: &'static str, cap: usize, ctx: &'c ToolContext) -> Self {
        Self {
            name,
            cap,
            ctx,
            bytes: Vec::new(),
            dropped: 0,
            line: Vec::new(),
            line_kept: true,
        }
    }

    /// Take the next bytes of the stream.
    pub(crate) fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let end = memchr::memchr(b'\n', data).map_or(data.len(), |i| i + 1);
            let (part, rest) = data.split_at(end);
            let ended = part.ends_with(b"\n");
            data = rest;
            let room = self.cap.saturating_sub(self.bytes.len());
            let kept = part.len().min(room);
            if self.line.is_empty() && self.line_kept {
                self.line_kept = room > 0;
            }
            self.bytes.extend_from_slice(&part[..kept]);
            self.dropped += (part.len() - kept) as u64;
            let want = MAX_PROGRESS_LINE.saturating_sub(self.line.len());
            self.line.extend_from_slice(&part[..part.len().min(want)]);
            if ended {
                self.end_line();
            }
        }
    }

    /// The stream ended: send the last line if it had no newline.
    pub(crate) fn finish(&mut self) {
        if !self.line.is_empty() {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        if self.line_kept {
            let text = String::from_utf8_lossy(&self.line);
            self.ctx.progress(
                json!({"stream": self.name, "line": text.trim_end_matches(['\n', '\r'])}),
            );
        }
        self.line.clear();
        self.line_kept = true;
    }

    /// This capture holding bytes already captured elsewhere (a sandbox's), and how many
    /// were dropped.
    pub(crate) fn with(mut self, bytes: Vec<u8>, dropped: u64) -> Self {
        self.bytes = bytes;
        self.dropped = dropped;
        self
    }

    /// Whether bytes were dropped past the cap.
    pub(crate) fn truncated(&self) -> bool {
        self.dropped > 0
    }

    /// The kept bytes as they came, and how many were dropped past the cap.
    pub(crate) fn into_parts(self) -> (Vec<u8>, u64) {
        (self.bytes, self.dropped)
    }

    /// The kept bytes as text (invalid UTF-8 replaced), then a marker naming the cap and how
    /// much was dropped.
    pub(crate) fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.dropped > 0 {
            if !text.ends_with('\n') && !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!(
                "[... output truncated at the {} limit: {} more bytes]\n",
                super::limits::bytes(self.cap as u64),
                self.dropped
            ));
        }
        text
    }
}

/// Read `stream`, if there is one, to its end into `capture`.
pub(crate) async fn read_to_end(stream: Option<impl AsyncRead + Unpin>, capture: &mut Capture<'_>) {
    let Some(mut stream) = stream else {
        return;
    };
    let mut buf = vec![0u8; CHUNK];
    // Until its end, or an error reading it.
    while let Ok(n @ 1..) = stream.read(&mut buf).await {
        capture.push(&buf[..n]);
    }
    capture.finish();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio_util::sync::CancellationToken;

    fn collecting() -> (ToolContext, Arc<Mutex<Vec<serde_json::Value>>>) {
        let lines: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
        let sink = Arc::clone(&lines);
        let ctx = ToolContext::new(
            "s",
            "c",
            CancellationToken::new(),
            Some(Arc::new(move |v| sink.lock().unwrap().push(v))),
        );
        (ctx, lines)
    }

    #[test]
    fn lines_split_across_chunks_are_one_progress_event() {
        let (ctx, lines) = collecting();
        let mut c = Capture::new("stdout", 1000, &ctx);
        c.push(b"hel");
        c.push(b"lo\nwor");
        c.push(b"ld\nlast");
        c.finish();
        assert_eq!(c.text(), "hello\nworld\nlast");
        let got: Vec<String> = lines
            .lock()
            .unwrap()
            .iter()
            .map(|v| v["line"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(got, ["hello", "world", "last"]);
    }

    #[test]
    fn past_the_cap_bytes_are_counted_and_lines_not_sent() {
        let (ctx, lines) = collecting();
        let mut c = Capture::new("stderr", 8, &ctx);
        c.push(b"abcdef\nghijkl\nmnop\n");
        c.finish();
        assert!(c.truncated());
        assert_eq!(
            c.text(),
            "abcdef\ng\n[... output truncated at the 8 B limit: 11 more bytes]\n"
        );
        // The line that began within the cap is sent whole; the one after it is not.
        assert_eq!(lines.lock().unwrap().len(), 2);
    }
}
