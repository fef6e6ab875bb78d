//! The checks every tool result passes before it is sent: the size limit
//! ([`crate::ServerConfig::max_result_bytes`], `ORS_MAX_RESULT_BYTES`) and, in debug builds,
//! an output with no blocks (PROTOCOL_NOTES row `additions`).

use ors_core::types::RunToolOutput;

/// The result to send for what a tool returned: unchanged, or `ok: false` saying which limit
/// it broke.
pub(crate) fn check_result(tool: &str, out: RunToolOutput, max_bytes: usize) -> RunToolOutput {
    // Many clients read `blocks[0]`; an empty list is almost always a bug in the tool. Release
    // builds send it as it is, so a working deployment never starts failing over it.
    if cfg!(debug_assertions) && matches!(&out, RunToolOutput::Success(o) if o.blocks.is_empty()) {
        return RunToolOutput::error(format!(
            "tool '{tool}' returned an output with no blocks; give it at least one (a text \
             block saying what happened), as clients read blocks[0] (this check runs in debug \
             builds only)"
        ));
    }
    // Counting the JSON text is a whole serialization (as much as encoding the result); a
    // bound found by adding up lengths settles every result far below the limit for nothing.
    if json_size_at_most(&out) <= max_bytes {
        return out;
    }
    let size = json_size(&out);
    if size > max_bytes {
        tracing::warn!(
            tool,
            size,
            limit = max_bytes,
            "tool result over the size limit"
        );
        return RunToolOutput::error(format!(
            "tool '{tool}' returned a result of {size} bytes, more than this server's limit of \
             {max_bytes} bytes (ORS_MAX_RESULT_BYTES)"
        ));
    }
    out
}

/// Bytes of JSON text a string can take: each byte at most six (`\u001f`), and its quotes.
fn string_at_most(s: &str) -> usize {
    s.len().saturating_mul(6).saturating_add(2)
}

/// Bytes of JSON text a value can take (a number at most 32).
fn value_at_most(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 32,
        Value::String(s) => string_at_most(s),
        Value::Array(items) => items.iter().fold(2, |n, v| {
            n.saturating_add(value_at_most(v)).saturating_add(1)
        }),
        Value::Object(map) => object_at_most(map),
    }
}

fn object_at_most(map: &serde_json::Map<String, serde_json::Value>) -> usize {
    map.iter().fold(2, |n, (k, v)| {
        n.saturating_add(string_at_most(k))
            .saturating_add(value_at_most(v))
            .saturating_add(2)
    })
}

/// More than the keys, punctuation and fixed values of a result and of one block take.
const RESULT_FRAME: usize = 160;
const BLOCK_FRAME: usize = 64;

/// An upper bound of a result's JSON length, from the lengths of what it holds, without
/// encoding anything.
fn json_size_at_most(out: &RunToolOutput) -> usize {
    use ors_core::types::Block;
    let detail = |d: &Option<ors_core::types::JsonObject>| d.as_ref().map_or(4, object_at_most);
    match out {
        RunToolOutput::Success(o) => o.blocks.iter().fold(
            RESULT_FRAME.saturating_add(detail(&o.metadata)),
            |n, block| {
                let inner = match block {
                    Block::Text(t) => string_at_most(&t.text).saturating_add(detail(&t.detail)),
                    Block::Image(i) => string_at_most(&i.data)
                        .saturating_add(string_at_most(&i.mime_type))
                        .saturating_add(detail(&i.detail)),
                };
                n.saturating_add(BLOCK_FRAME).saturating_add(inner)
            },
        ),
        RunToolOutput::Error(e) => RESULT_FRAME.saturating_add(string_at_most(&e.error)),
    }
}

/// The length of a result's JSON text, counted without building it.
fn json_size(out: &RunToolOutput) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a result that cannot be serialized is sent as the
    // error `to_json` makes of it, which is small.
    let _ = serde_json::to_writer(&mut count, out);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use ors_core::types::ToolOutput;

    #[test]
    fn results_over_the_limit_become_errors_with_size_and_limit() {
        let out = RunToolOutput::Success(ToolOutput::text("x".repeat(100)));
        let size = out.to_json().len();
        assert_eq!(json_size(&out), size);
        assert_eq!(check_result("t", out.clone(), size), out);
        let RunToolOutput::Error(msg) = check_result("t", out, size - 1) else {
            panic!("over the limit");
        };
        assert_eq!(
            msg.error,
            format!(
                "tool 't' returned a result of {size} bytes, more than this server's limit of {} \
                 bytes (ORS_MAX_RESULT_BYTES)",
                size - 1
            )
        );
    }

    #[test]
    fn the_bound_is_never_below_the_json_length() {
        use ors_core::types::{Block, ImageBlock, JsonObject, ToolErrorReason};
        use serde_json::json;
        let object = |v: serde_json::Value| -> JsonObject { serde_json::from_value(v).unwrap() };
        // Escapes at their longest (control characters), quotes, non-ASCII, nesting, numbers
        // at their longest, an image, every optional field set.
        let nasty = "\u{1}\u{1f}\"\\\n\té😀".repeat(50);
        let meta = object(json!({
            nasty.clone(): [nasty.clone(), -1.2345678901234567e-300, u64::MAX, i64::MIN, null, true],
            "nested": {"deeper": {"x": [[], {}, ""]}},
        }));
        let mut text = ToolOutput::text(nasty.clone())
            .with_reward(-1.2345678901234567e-300)
            .with_metadata(meta.clone())
            .finish();
        text.blocks.push(Block::Image(ImageBlock {
            data: nasty.clone(),
            mime_type: nasty.clone(),
            detail: Some(meta.clone()),
        }));
        if let Block::Text(t) = &mut text.blocks[0] {
            t.detail = Some(meta);
        }
        for out in [
            RunToolOutput::Success(text),
            RunToolOutput::Success(ToolOutput::text("")),
            RunToolOutput::error(nasty.clone()),
            RunToolOutput::refused(ToolErrorReason::InputValidation, ""),
        ] {
            let exact = json_size(&out);
            assert_eq!(exact, out.to_json().len());
            assert!(json_size_at_most(&out) >= exact, "{out:?}");
            // Right at the limit the exact size decides: the result passes, one byte less fails.
            assert_eq!(check_result("t", out.clone(), exact), out);
            if out.is_ok() {
                assert!(!check_result("t", out, exact - 1).is_ok());
            }
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    fn an_output_without_blocks_is_an_error_in_debug_builds() {
        let out = RunToolOutput::Success(ToolOutput::blocks(vec![]));
        let RunToolOutput::Error(msg) = check_result("t", out, usize::MAX) else {
            panic!("no blocks");
        };
        assert!(
            msg.error
                .starts_with("tool 't' returned an output with no blocks"),
            "{msg}"
        );
    }
}
