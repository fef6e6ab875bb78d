//! The SSE codec on hand-written streams: line endings, comments, multi-line data, unknown
//! events and fields, the exact bytes the encoder writes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_core::sse::{
    self, CallEvent, CallStreamDecoder, CallStreamError, SseDecoder, SseEvent, CHUNK_SIZE,
};
use ors_core::{RunToolOutput, ToolOutput};
use serde_json::json;

fn decode_all(bytes: &[u8]) -> Vec<SseEvent> {
    SseDecoder::new().push(bytes)
}

fn decode_bytewise(bytes: &[u8]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    bytes.iter().flat_map(|b| d.push(&[*b])).collect()
}

fn ev(event: &str, data: &str) -> SseEvent {
    SseEvent::new(event, data)
}

#[test]
fn encoder_writes_the_documented_framing() {
    assert_eq!(sse::encode_event("end", "{}"), b"event: end\ndata: {}\n\n");
    assert_eq!(sse::encode_task_id("abc"), b"event: task_id\ndata: abc\n\n");
    assert_eq!(
        sse::encode_error("tool crashed"),
        b"event: error\ndata: tool crashed\n\n"
    );
    assert_eq!(
        sse::encode_progress(&json!({"step": 1})),
        b"event: progress\ndata: {\"step\":1}\n\n"
    );
    assert_eq!(sse::encode_comment("ping"), b": ping\n\n");
    assert_eq!(sse::encode_comment("a\nb"), b": a b\n\n");
    assert_eq!(sse::KEEPALIVE, b": ping\n\n");
    // Multi-line data becomes several data lines; CRLF and CR count as one break each.
    assert_eq!(
        sse::encode_event("m", "a\nb\r\nc\rd"),
        b"event: m\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    );
    // A line break in an event name cannot break the framing.
    assert_eq!(sse::encode_event("a\nb", "x"), b"event: a b\ndata: x\n\n");
}

#[test]
fn empty_end_of_create_session_is_an_event_with_empty_data() {
    // What the reference server's create_session sends.
    let stream = b"event: task_id\ndata: 877bb56c\n\nevent: end\ndata: \n\n";
    let expected = vec![ev("task_id", "877bb56c"), ev("end", "")];
    assert_eq!(decode_all(stream), expected);
    assert_eq!(decode_bytewise(stream), expected);
    // `data` with no colon at all is also an empty data line.
    assert_eq!(decode_all(b"event: end\ndata\n\n"), vec![ev("end", "")]);
}

#[test]
fn line_endings_lf_crlf_and_lone_cr_are_equivalent() {
    let lf = b"event: a\ndata: 1\n\nevent: b\ndata: 2\ndata: 3\n\n".to_vec();
    let crlf: Vec<u8> = String::from_utf8(lf.clone())
        .unwrap()
        .replace('\n', "\r\n")
        .into_bytes();
    let cr: Vec<u8> = String::from_utf8(lf.clone())
        .unwrap()
        .replace('\n', "\r")
        .into_bytes();
    let expected = vec![ev("a", "1"), ev("b", "2\n3")];
    for stream in [&lf, &crlf, &cr] {
        assert_eq!(decode_all(stream), expected);
        assert_eq!(decode_bytewise(stream), expected);
    }
    // A CRLF split across two pushes is one line break, not two (which would dispatch early).
    let mut d = SseDecoder::new();
    let mut got = d.push(b"event: a\r");
    got.extend(d.push(b"\ndata: 1\r"));
    got.extend(d.push(b"\n\r"));
    got.extend(d.push(b"\n"));
    assert_eq!(got, vec![ev("a", "1")]);
}

#[test]
fn comments_unknown_fields_and_ids_are_ignored() {
    let stream = b": ping\n\n:another\nevent: a\n: inside an event\nid: 7\nretry: 100\nfoo: bar\ndata: x\n\n: ping\n\n";
    assert_eq!(decode_all(stream), vec![ev("a", "x")]);
}

#[test]
fn data_without_space_and_extra_spaces() {
    // One space after the colon is optional and only one is removed.
    assert_eq!(decode_all(b"event:a\ndata:x\n\n"), vec![ev("a", "x")]);
    assert_eq!(decode_all(b"event: a\ndata:  x\n\n"), vec![ev("a", " x")]);
    assert_eq!(
        decode_all(b"event: a\ndata: x: y\n\n"),
        vec![ev("a", "x: y")]
    );
}

#[test]
fn events_without_name_are_messages_and_blank_events_are_not_dispatched() {
    assert_eq!(decode_all(b"data: x\n\n"), vec![ev("message", "x")]);
    assert_eq!(decode_all(b"event:\ndata: x\n\n"), vec![ev("message", "x")]);
    // A name without data dispatches nothing, and the name does not leak into the next event.
    assert_eq!(
        decode_all(b"event: lonely\n\n\n\ndata: y\n\n"),
        vec![ev("message", "y")]
    );
    // An event not terminated by a blank line is not dispatched.
    assert_eq!(decode_all(b"event: a\ndata: x\n"), vec![]);
}

#[test]
fn a_leading_byte_order_mark_is_skipped_even_when_split() {
    let stream = b"\xEF\xBB\xBFevent: a\ndata: x\n\n";
    assert_eq!(decode_all(stream), vec![ev("a", "x")]);
    assert_eq!(decode_bytewise(stream), vec![ev("a", "x")]);
    // Only at the very start: later it is data.
    assert_eq!(
        decode_all("event: a\ndata: \u{feff}x\n\n".as_bytes()),
        vec![ev("a", "\u{feff}x")]
    );
}

#[test]
fn multibyte_characters_split_across_pushes_survive() {
    let stream = "event: end\ndata: é€😀\n\n".as_bytes();
    assert_eq!(decode_bytewise(stream), vec![ev("end", "é€😀")]);
}

#[test]
fn saw_bytes_reports_keepalives() {
    let mut d = CallStreamDecoder::new();
    assert!(!d.saw_bytes());
    assert!(d.push(sse::KEEPALIVE).is_empty());
    assert!(d.saw_bytes());
}

#[test]
fn call_stream_joins_chunks_and_reports_every_kind() {
    let result = RunToolOutput::from(ToolOutput::text("ok").with_reward(0.5));
    let json = result.to_json();
    let (a, b) = json.split_at(7);
    let mut stream = sse::encode_task_id("t1");
    stream.extend(sse::KEEPALIVE);
    stream.extend(sse::encode_progress(&json!({"pct": 50})));
    stream.extend(sse::encode_event("something-new", "ignored"));
    stream.extend(sse::encode_event("chunk", a));
    stream.extend(sse::encode_event("end", b));
    let events: Vec<_> = CallStreamDecoder::new().push(&stream);
    assert_eq!(
        events,
        vec![
            Ok(CallEvent::TaskId("t1".into())),
            Ok(CallEvent::Progress(json!({"pct": 50}))),
            Ok(CallEvent::Result(result)),
        ]
    );
    // An error may come alone: the server's answer to a reconnect with an expired task id.
    let events = CallStreamDecoder::new().push(&sse::encode_error("expired"));
    assert_eq!(events, vec![Ok(CallEvent::Error("expired".into()))]);
}

#[test]
fn a_non_finite_number_in_a_result_is_named() {
    // What Python's json.dumps writes for float("nan"), float("-inf"), and a float too large.
    let cases = [
        (
            r#"{"ok":true,"output":{"blocks":[],"reward":NaN}}"#,
            "`NaN`",
        ),
        (
            r#"{"ok":true,"output":{"blocks":[],"reward":-Infinity}}"#,
            "`Infinity`",
        ),
        (
            r#"{"ok":true,"output":{"blocks":[],"reward":1e400}}"#,
            "out of range",
        ),
    ];
    for (json, named) in cases {
        let mut d = CallStreamDecoder::new();
        let got =
            d.push(format!("event: task_id\ndata: t\n\nevent: end\ndata: {json}\n\n").as_bytes());
        match &got[..] {
            [Ok(CallEvent::TaskId(_)), Err(CallStreamError::BadResult(msg))] => {
                assert!(msg.contains(named), "{msg}");
                assert!(msg.contains(sse::NON_FINITE_NOTE), "{msg}");
            }
            other => panic!("{json}: {other:?}"),
        }
    }
    // Other bad JSON is not blamed on a number.
    let mut d = CallStreamDecoder::new();
    let got = d.push(b"event: task_id\ndata: t\n\nevent: end\ndata: {\"ok\": true, \"Nope\"}\n\n");
    assert!(
        matches!(&got[..], [Ok(_), Err(CallStreamError::BadResult(m))] if !m.contains(sse::NON_FINITE_NOTE)),
        "{got:?}"
    );
}

#[test]
fn call_stream_reports_bad_json() {
    let mut d = CallStreamDecoder::new();
    let got = d.push(b"event: task_id\ndata: t\n\nevent: progress\ndata: nope\n\nevent: end\ndata: {\"ok\": tru\n\n");
    assert_eq!(got[0], Ok(CallEvent::TaskId("t".into())));
    assert!(
        matches!(&got[1], Err(CallStreamError::BadProgress(_))),
        "a bad progress report is not fatal: {got:?}"
    );
    assert!(
        matches!(&got[2], Err(CallStreamError::BadResult(m)) if m.contains("not JSON")),
        "{got:?}"
    );
    // JSON of another shape says so.
    let got = CallStreamDecoder::new()
        .push(b"event: task_id\ndata: t\n\nevent: end\ndata: {\"answer\": 42}\n\n");
    assert!(
        matches!(&got[1], Err(CallStreamError::BadResult(m)) if m.contains("not a RunToolOutput")),
        "{got:?}"
    );
    // An error event discards the chunks of a result that will not complete.
    let mut d = CallStreamDecoder::new();
    let got = d.push(
        b"event: task_id\ndata: t\n\nevent: chunk\ndata: {\"ok\":\n\nevent: error\ndata: boom\n\n",
    );
    assert_eq!(
        got,
        vec![
            Ok(CallEvent::TaskId("t".into())),
            Ok(CallEvent::Error("boom".into()))
        ]
    );
    assert_eq!(d.pending_result_bytes(), 0);
}

#[test]
fn results_are_cut_at_4096_bytes_on_character_boundaries() {
    // 4095 ASCII bytes then a 2-byte character: the cut must fall before the 'é'.
    let text = format!("{}é{}", "a".repeat(4095), "b".repeat(10));
    let pieces = sse::split_utf8(&text, CHUNK_SIZE);
    assert_eq!(pieces, vec![&text[..4095], &text[4095..]]);
    // Exactly 4096 bytes is one piece; 4097 is two.
    assert_eq!(sse::split_utf8(&"a".repeat(4096), CHUNK_SIZE).len(), 1);
    assert_eq!(sse::split_utf8(&"a".repeat(4097), CHUNK_SIZE).len(), 2);
    // Empty text still gives the one (empty) `end` piece.
    assert_eq!(sse::split_utf8("", CHUNK_SIZE), vec![""]);
    assert_eq!(sse::encode_result_json(""), b"event: end\ndata: \n\n");
}

#[test]
fn pieces_do_not_start_with_blanks_the_reference_client_would_strip() {
    // The reference client strips leading whitespace of every data value.
    let text = format!("{}  tail", "a".repeat(4095));
    let pieces = sse::split_utf8(&text, CHUNK_SIZE);
    assert_eq!(pieces.concat(), text);
    assert!(pieces.iter().all(|p| p.len() <= CHUNK_SIZE));
    assert!(
        pieces[1..].iter().all(|p| !p.starts_with([' ', '\t'])),
        "{pieces:?}"
    );
    // A run of blanks longer than a piece cannot avoid it, but still reassembles.
    let blanks = " ".repeat(9000);
    let pieces = sse::split_utf8(&blanks, CHUNK_SIZE);
    assert_eq!(pieces.concat(), blanks);
    assert!(pieces
        .iter()
        .all(|p| p.len() <= CHUNK_SIZE && !p.is_empty()));
}
