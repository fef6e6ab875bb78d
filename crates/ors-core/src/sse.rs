//! The one Server-Sent-Events codec of ors-rs: the server encodes with it, the client and the
//! conformance runner decode with it.
//!
//! Framing follows the WHATWG `text/event-stream` rules: `event:` and `data:` fields, one
//! space after the colon is optional, lines end in LF, CRLF or CR, a blank line dispatches,
//! lines starting with `:` are comments (keep-alives), and unknown fields are ignored.
//! ORS tool results larger than [`CHUNK_SIZE`] bytes are split into `chunk` events and a
//! final `end` (PROTOCOL_NOTES row `chunking`), always on UTF-8 character boundaries.
//!
//! The decoders are bounded by [`DecodeLimits`] (a line, an event, a reassembled result) and
//! the call decoder checks a stream's order (`task_id` first, nothing after `end`), so a broken
//! or hostile peer gets an error naming what it did, never unbounded memory.

use memchr::memchr2;
use serde_json::Value;

use crate::types::RunToolOutput;

pub use crate::protocol::{
    CHUNK_SIZE, EVENT_CHUNK, EVENT_END, EVENT_ERROR, EVENT_PROGRESS, EVENT_TASK_ID,
};

mod call_stream;
mod decode;

pub use call_stream::{CallEvent, CallStreamDecoder, CallStreamError, NON_FINITE_NOTE};
pub use decode::{DecodeLimits, SseDecoder, SseError, SseEvent, DEFAULT_MAX_RESULT_BYTES};

/// The bytes of a keep-alive comment.
pub const KEEPALIVE: &[u8] = b": ping\n\n";

/// Append one event to `out`. Data with line breaks becomes several `data:` lines (a CR in the
/// data cannot be carried by SSE and arrives as LF). Line breaks in the event name, which would
/// break the framing, become spaces.
pub fn encode_event_into(out: &mut Vec<u8>, event: &str, data: &str) {
    out.reserve(event.len() + data.len() + 16);
    out.extend_from_slice(b"event: ");
    if memchr2(b'\n', b'\r', event.as_bytes()).is_some() {
        out.extend_from_slice(event.replace(['\n', '\r'], " ").as_bytes());
    } else {
        out.extend_from_slice(event.as_bytes());
    }
    out.push(b'\n');
    // Line breaks are found with memchr (vectorised): results are megabytes of JSON.
    let mut rest = data.as_bytes();
    while let Some(i) = memchr2(b'\n', b'\r', rest) {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&rest[..i]);
        out.push(b'\n');
        let crlf = rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n');
        rest = &rest[i + 1 + usize::from(crlf)..];
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(rest);
    out.extend_from_slice(b"\n\n");
}

/// One event as bytes.
pub fn encode_event(event: &str, data: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.len() + data.len() + 16);
    encode_event_into(&mut out, event, data);
    out
}

/// A comment line (ignored by every SSE client); used for keep-alives.
pub fn encode_comment(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 4);
    out.extend_from_slice(b": ");
    out.extend_from_slice(text.replace(['\n', '\r'], " ").as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

/// The `task_id` event.
pub fn encode_task_id(task_id: &str) -> Vec<u8> {
    encode_event(EVENT_TASK_ID, task_id)
}

/// The `error` event for a crashed tool or an unknown task id.
pub fn encode_error(message: &str) -> Vec<u8> {
    encode_event(EVENT_ERROR, message)
}

/// The `progress` event carrying a JSON value.
pub fn encode_progress(progress: &Value) -> Vec<u8> {
    encode_event(EVENT_PROGRESS, &progress.to_string())
}

/// Split `text` into pieces of at most `max` bytes, never inside a UTF-8 character.
/// An empty text gives one empty piece, so a result always has an `end` event.
///
/// A piece after the first does not start with a space or tab when a cut allows it: the
/// reference client strips all leading whitespace from a `data:` value, so such a space would
/// be lost on reassembly. Only a run of blanks longer than `max` forces such a cut.
pub fn split_utf8(text: &str, max: usize) -> Vec<&str> {
    let max = max.max(4); // a piece must hold any one character
    let mut pieces = Vec::with_capacity(text.len() / max + 1);
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let hard_cut = cut;
        let bytes = rest.as_bytes();
        // Back off over blanks (ASCII, so every such position is a char boundary).
        while cut > 0 && matches!(bytes[cut], b' ' | b'\t') {
            cut -= 1;
            while cut > 0 && !rest.is_char_boundary(cut) {
                cut -= 1;
            }
        }
        let cut = if cut == 0 { hard_cut } else { cut };
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    pieces.push(rest);
    pieces
}

/// A result's JSON text as `chunk` events and a final `end`, each at most [`CHUNK_SIZE`] bytes.
pub fn encode_result_json(json: &str) -> Vec<u8> {
    let pieces = split_utf8(json, CHUNK_SIZE);
    let mut out = Vec::with_capacity(json.len() + pieces.len() * 24);
    let last = pieces.len() - 1;
    for (i, piece) in pieces.iter().enumerate() {
        let name = if i == last { EVENT_END } else { EVENT_CHUNK };
        encode_event_into(&mut out, name, piece);
    }
    out
}

/// A tool result as `chunk`/`end` events.
pub fn encode_result(result: &RunToolOutput) -> Vec<u8> {
    thread_local! {
        /// The thread's scratch buffer: a result is serialized here and copied out at its
        /// exact size, so encoding one allocates once, not twice.
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    /// Largest scratch buffer a thread keeps: a huge result's is let go with it.
    const KEEP: usize = 64 * 1024;
    SCRATCH.with(|scratch| {
        let Ok(mut out) = scratch.try_borrow_mut() else {
            // Not reached (encoding calls no encoder), but a fresh buffer is as right.
            return encode_result_in(&mut Vec::new(), result);
        };
        let encoded = encode_result_in(&mut out, result);
        if out.capacity() > KEEP {
            *out = Vec::new();
        }
        encoded
    })
}

/// [`encode_result`], serializing in `out` (cleared first).
fn encode_result_in(out: &mut Vec<u8>, result: &RunToolOutput) -> Vec<u8> {
    const HEAD: &[u8] = b"event: end\ndata: ";
    // Most results fit one `end` event: serialize straight after its head, one buffer, one
    // pass. Compact serde_json output has no raw line breaks (they are escaped in strings), so
    // the text needs no `data:` line splitting.
    out.clear();
    out.reserve(512);
    out.extend_from_slice(HEAD);
    result.write_json(out);
    if out.len() - HEAD.len() <= CHUNK_SIZE {
        out.extend_from_slice(b"\n\n");
        // Results are kept for reconnects, freed later and often on another thread: an
        // exact-size copy keeps no slack.
        return out.as_slice().to_vec();
    }
    match std::str::from_utf8(&out[HEAD.len()..]) {
        Ok(json) => encode_result_json(json),
        Err(_) => encode_result_json(&result.to_json()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolOutput;

    /// The one-pass encoder must frame exactly like chunking the result's JSON text.
    #[test]
    fn encode_result_matches_chunking_its_json() {
        let texts = [
            String::new(),
            "short\nwith a line break\r\nand é".to_owned(),
            "x".repeat(CHUNK_SIZE - 60),
            "ab ".repeat(3 * CHUNK_SIZE),
            "é€😀 ".repeat(CHUNK_SIZE),
            // Larger than the scratch buffer a thread keeps, then small again after it.
            "y".repeat(100_000),
            "after".to_owned(),
        ];
        for text in texts {
            for result in [
                RunToolOutput::Success(ToolOutput::text(text.clone()).with_reward(0.5)),
                RunToolOutput::error(text.clone()),
            ] {
                assert_eq!(
                    encode_result(&result),
                    encode_result_json(&result.to_json()),
                    "text of {} bytes",
                    text.len()
                );
            }
        }
    }

    /// A server keeps each result for reconnects: a small one holds no unused capacity.
    #[test]
    fn a_small_results_events_hold_no_slack() {
        let out = encode_result(&RunToolOutput::Success(ToolOutput::text("short")));
        assert_eq!(out.capacity(), out.len());
    }

    /// The hand-written JSON of a result is serde's, byte for byte, whatever it holds.
    #[test]
    fn a_results_json_is_what_serde_writes() {
        use crate::types::{Block, ImageBlock, JsonObject, ToolErrorReason};
        let object = |v: Value| -> JsonObject { serde_json::from_value(v).unwrap() };
        let odd = "quote \" backslash \\ line\n tab\t nul \u{0} é 😀 \u{7f}";
        let meta = object(serde_json::json!({"length": 43, odd: [1.5, -0.0, null, {"a": odd}]}));
        let mut full = ToolOutput::text(odd)
            .with_reward(-1.25e-300)
            .with_metadata(meta.clone())
            .finish();
        full.blocks.push(Block::Image(ImageBlock {
            data: "iVBOR".into(),
            mime_type: "image/png".into(),
            detail: Some(meta.clone()),
        }));
        full.blocks.push(Block::text(""));
        if let Block::Text(t) = &mut full.blocks[0] {
            t.detail = Some(meta);
        }
        let results = [
            RunToolOutput::Success(full),
            RunToolOutput::Success(ToolOutput::text("the quick brown fox").with_reward(0.0)),
            RunToolOutput::Success(ToolOutput::blocks(vec![])),
            RunToolOutput::Success(ToolOutput::text("x").with_reward(1.0)),
            RunToolOutput::Success(ToolOutput::text("x").with_reward(f64::NAN)),
            RunToolOutput::Success(ToolOutput::text("x").with_reward(f64::INFINITY)),
            RunToolOutput::error(odd),
            RunToolOutput::refused(ToolErrorReason::EpisodeFinished, "done"),
        ];
        for result in results {
            let mut ours = Vec::new();
            result.write_json(&mut ours);
            let serde = serde_json::to_vec(&result).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(serde).unwrap()
            );
        }
    }

    #[test]
    fn decoder_takes_lines_split_anywhere() {
        let bytes = b"event: a\r\ndata: 1\rdata: 2\n\n: ping\n\nevent: b\ndata: x\r\n\r\n";
        let whole = SseDecoder::new().push(bytes);
        assert_eq!(
            whole,
            vec![SseEvent::new("a", "1\n2"), SseEvent::new("b", "x")]
        );
        for cut in 0..bytes.len() {
            let mut d = SseDecoder::new();
            let mut got = d.push(&bytes[..cut]);
            got.extend(d.push(&bytes[cut..]));
            assert_eq!(got, whole, "cut at {cut}");
        }
    }
}
