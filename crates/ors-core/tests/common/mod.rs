//! Proptest strategies shared by the integration tests.
#![allow(dead_code)] // each test crate uses a different subset

use ors_core::{Block, JsonObject, RunToolOutput, ToolOutput};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Characters that stress UTF-8 handling: 1- to 4-byte characters, blanks, escapes.
pub fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => Just('a'),
        1 => Just(' '),
        1 => Just('é'),
        1 => Just('€'),
        1 => Just('😀'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('\n'),
        1 => Just('\t'),
        1 => any::<char>(),
    ]
}

/// Text of up to `max_chars` characters drawn from [`tricky_char`].
pub fn tricky_text(max_chars: usize) -> BoxedStrategy<String> {
    prop::collection::vec(tricky_char(), 0..=max_chars)
        .prop_map(|v| v.into_iter().collect())
        .boxed()
}

/// Long text: runs of ASCII of random length (so multi-byte characters land at every offset
/// around the 4096-byte boundaries) followed by a tricky character; about `max_bytes` at most.
pub fn long_text(max_bytes: usize) -> BoxedStrategy<String> {
    prop::collection::vec((0usize..6000, tricky_char()), 0..6)
        .prop_map(move |runs| {
            let mut s = String::new();
            for (n, c) in runs {
                if s.len() + n + 4 > max_bytes {
                    break;
                }
                s.extend(std::iter::repeat_n('x', n));
                s.push(c);
            }
            s
        })
        .boxed()
}

/// A small JSON object (metadata, detail).
pub fn small_object() -> BoxedStrategy<JsonObject> {
    prop::collection::btree_map(
        tricky_text(8),
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            tricky_text(16).prop_map(Value::from),
            Just(json!({"nested": [1, 2.5, "three"]})),
        ],
        0..4,
    )
    .prop_map(|m| m.into_iter().collect())
    .boxed()
}

/// A text or image block, possibly with detail, its text drawn from `text`.
pub fn block(text: BoxedStrategy<String>) -> impl Strategy<Value = Block> {
    let detail = prop::option::of(small_object());
    prop_oneof![
        (text.clone(), detail.clone()).prop_map(|(t, d)| match d {
            Some(d) => Block::text(t).with_detail(d),
            None => Block::text(t),
        }),
        (text, "[a-z]+/[a-z0-9.+-]+", detail).prop_map(|(data, mime, d)| {
            let b = Block::image(data, mime);
            match d {
                Some(d) => b.with_detail(d),
                None => b,
            }
        }),
    ]
}

/// A finite reward (non-finite floats have no JSON form).
pub fn reward() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(1.0),
        Just(-0.5),
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ]
}

/// A tool output whose blocks carry text from `text`.
pub fn tool_output(text: BoxedStrategy<String>) -> impl Strategy<Value = ToolOutput> {
    (
        prop::collection::vec(block(text), 0..4),
        prop::option::of(small_object()),
        prop::option::of(reward()),
        any::<bool>(),
    )
        .prop_map(|(blocks, metadata, reward, finished)| ToolOutput {
            blocks,
            metadata,
            reward,
            finished,
        })
}

/// A success or an error result, small.
pub fn run_tool_output() -> impl Strategy<Value = RunToolOutput> {
    prop_oneof![
        4 => tool_output(tricky_text(40)).prop_map(RunToolOutput::Success),
        1 => tricky_text(60).prop_map(RunToolOutput::error),
    ]
}

/// A success or an error result of up to about 20 KB of JSON.
pub fn large_run_tool_output() -> impl Strategy<Value = RunToolOutput> {
    prop_oneof![
        4 => tool_output(long_text(6000)).prop_map(RunToolOutput::Success),
        1 => long_text(20_000).prop_map(RunToolOutput::error),
    ]
}

/// Cut `bytes` at the given positions (taken modulo its length) into consecutive pieces.
pub fn cut(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| {
            if bytes.is_empty() {
                0
            } else {
                c % (bytes.len() + 1)
            }
        })
        .collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points
        .windows(2)
        .map(|w| bytes[w[0]..w[1]].to_vec())
        .collect()
}
