//! Property tests of the SSE codec: whatever the payload and however the byte stream is cut,
//! decoding gives back exactly what was encoded.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

mod common;

use ors_core::sse::{self, CallEvent, CallStreamDecoder, SseDecoder, SseEvent, CHUNK_SIZE};
use ors_core::RunToolOutput;
use proptest::prelude::*;
use serde_json::json;

/// An event name: any text without line breaks, not empty (an empty name reads as `message`).
fn event_name() -> impl Strategy<Value = String> {
    "[^\r\n]{1,12}"
}

/// A data payload: any text without CR (SSE cannot carry a CR; it arrives as LF).
fn payload() -> impl Strategy<Value = String> {
    prop_oneof![
        "[^\r]{0,40}",
        // Both sides of where the encoder's search for line breaks changes method (64 bytes).
        "[^\r]{60,70}",
        "[^\r]{60,200}",
        common::tricky_text(40).prop_map(|s| s.replace('\r', "")),
        Just(String::new()),
        Just("\n".to_owned()),
        Just(" leading space".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sse_decode_of_encode_is_identity_for_any_cuts(
        events in prop::collection::vec((event_name(), payload(), any::<bool>()), 0..6),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut bytes = Vec::new();
        for (name, data, keepalive) in &events {
            if *keepalive {
                bytes.extend_from_slice(sse::KEEPALIVE);
            }
            sse::encode_event_into(&mut bytes, name, data);
        }
        let mut decoder = SseDecoder::new();
        let mut got = Vec::new();
        for piece in common::cut(&bytes, &cuts) {
            got.extend(decoder.push(&piece));
        }
        let expected: Vec<SseEvent> =
            events.iter().map(|(n, d, _)| SseEvent::new(n.clone(), d.clone())).collect();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn call_stream_decode_of_encode_is_identity_for_any_cuts(
        task_id in "[0-9a-f]{32}",
        progress in prop::collection::vec(any::<u16>(), 0..3),
        result in common::large_run_tool_output(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut bytes = sse::encode_task_id(&task_id);
        for p in &progress {
            bytes.extend(sse::encode_progress(&json!({"done": p})));
            bytes.extend_from_slice(sse::KEEPALIVE);
        }
        bytes.extend(sse::encode_result(&result));

        let mut decoder = CallStreamDecoder::new();
        let mut got = Vec::new();
        for piece in common::cut(&bytes, &cuts) {
            got.extend(decoder.push(&piece));
        }
        let mut expected = vec![Ok(CallEvent::TaskId(task_id))];
        expected.extend(progress.iter().map(|p| Ok(CallEvent::Progress(json!({"done": p})))));
        expected.push(Ok(CallEvent::Result(result)));
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn result_pieces_fit_in_chunk_size_and_small_results_are_one_end(
        result in common::large_run_tool_output(),
    ) {
        let json = result.to_json();
        let events = SseDecoder::new().push(&sse::encode_result(&result));
        let (last, chunks) = events.split_last().expect("at least the end event");
        prop_assert_eq!(last.event.as_str(), sse::EVENT_END);
        prop_assert!(chunks.iter().all(|e| e.event == sse::EVENT_CHUNK));
        for e in &events {
            prop_assert!(e.data.len() <= CHUNK_SIZE, "piece of {} bytes", e.data.len());
            // JSON text has no raw line breaks, so every piece is one `data:` line.
            prop_assert!(!e.data.contains('\n'));
        }
        let joined: String = events.iter().map(|e| e.data.as_str()).collect();
        prop_assert_eq!(&joined, &json);
        if json.len() <= CHUNK_SIZE {
            prop_assert_eq!(events.len(), 1);
        } else {
            prop_assert!(events.len() >= json.len().div_ceil(CHUNK_SIZE));
        }
        let back: RunToolOutput = serde_json::from_str(&joined).unwrap();
        prop_assert_eq!(back, result);
    }

    #[test]
    fn split_utf8_pieces_are_bounded_and_reassemble(
        text in common::long_text(20_000),
        max in prop_oneof![Just(CHUNK_SIZE), 1usize..64],
    ) {
        let pieces = sse::split_utf8(&text, max);
        let bound = max.max(4);
        prop_assert!(pieces.iter().all(|p| p.len() <= bound));
        prop_assert!(pieces.len() == 1 || pieces.iter().all(|p| !p.is_empty()));
        prop_assert_eq!(pieces.concat(), text);
    }
}
