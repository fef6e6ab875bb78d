//! Chunking of large results (notes row `chunking`): at most 4096 bytes per `chunk`/`end` data, cut
//! only on UTF-8 character boundaries, and a result of exactly 4096 bytes in one `end`.

use ors_core::sse::CallEvent;
use ors_core::RunToolOutput;
use serde_json::json;

use super::clause::{clause, Clause};
use crate::support::{check, ensure, Call, Check, Ctx};

/// The chunking clauses (part of the calls group).
pub const CLAUSES: &[Clause] = &[
    clause(
        "calls.chunking.small-one-end",
        "a small result is one end event with no chunk",
        small_one_end,
    ),
    clause(
        "calls.chunking.4096",
        "a result of exactly 4096 bytes of JSON is one end event",
        |ctx| expect_pieces(ctx, 4096, &[("end", 4096)]),
    ),
    clause(
        "calls.chunking.4097",
        "a result of 4097 bytes is a 4096-byte chunk and a 1-byte end",
        |ctx| expect_pieces(ctx, 4097, &[("chunk", 4096), ("end", 1)]),
    ),
    clause(
        "calls.chunking.large",
        "a 100 000-byte result arrives as chunks of at most 4096 bytes that join to the result",
        large,
    ),
    clause(
        "calls.chunking.order",
        "chunk events come after task_id and before the single end",
        order,
    ),
    clause(
        "calls.chunking.multibyte",
        "chunks are at most 4096 bytes and never split a UTF-8 character (notes row `chunking`)",
        multibyte,
    ),
    clause(
        "calls.chunking.core-decoder",
        "the core CallStreamDecoder reassembles a chunked result exactly",
        core_decoder,
    ),
];

/// Data sizes in bytes of the `chunk` and `end` events.
fn piece_sizes(call: &Call) -> Vec<(&str, usize)> {
    call.events
        .iter()
        .filter(|e| e.event == "chunk" || e.event == "end")
        .map(|e| (e.event.as_str(), e.data.len()))
        .collect()
}

/// A call of `big` for `bytes` bytes, in the session the call clauses use.
fn big(ctx: &Ctx, bytes: usize) -> Result<Call, String> {
    super::calls::session(ctx)?.call("big", json!({ "bytes": bytes }))
}

/// Fails unless a result of `json_len` bytes of JSON comes as the `want` pieces.
fn expect_pieces(ctx: &Ctx, json_len: usize, want: &[(&str, usize)]) -> Check {
    let s = super::calls::session(ctx)?;
    // How many bytes of JSON surround `big`'s text in this server's result.
    let call = s.call("big", json!({"bytes": 1}))?;
    call.result_json()?;
    let sizes = piece_sizes(&call);
    ensure!(sizes.len() == 1, "a 1-byte big result came as {sizes:?}");
    let overhead = sizes[0].1 - 1;
    ensure!(json_len > overhead, "overhead {overhead} too large");
    let call = s.call("big", json!({"bytes": json_len - overhead}))?;
    let text = call.text()?;
    ensure!(
        text.len() == json_len - overhead,
        "big returned {} bytes",
        text.len()
    );
    let sizes = piece_sizes(&call);
    check!(sizes == want, "a {json_len}-byte result came as {sizes:?}")
}

/// Fails unless no `chunk` or `end` data of `call` is over 4096 bytes.
fn expect_pieces_fit(call: &Call) -> Check {
    let sizes = piece_sizes(call);
    check!(
        sizes.iter().all(|(_, n)| *n <= 4096),
        "a piece exceeds 4096 bytes: {sizes:?}"
    )
}

fn small_one_end(ctx: &Ctx) -> Check {
    let call = big(ctx, 100)?;
    call.result_json()?;
    check!(
        call.names() == ["task_id", "end"],
        "events are {:?}",
        call.names()
    )
}

fn large(ctx: &Ctx) -> Check {
    let call = big(ctx, 100_000)?;
    let text = call.text()?;
    ensure!(
        text.len() == 100_000 && text.bytes().all(|b| b == b'x'),
        "the joined text is wrong ({} bytes)",
        text.len()
    );
    expect_pieces_fit(&call)?;
    let sizes = piece_sizes(&call);
    let total: usize = sizes.iter().map(|(_, n)| n).sum();
    check!(
        sizes.len() >= total.div_ceil(4096),
        "{} pieces for {total} bytes",
        sizes.len()
    )
}

fn order(ctx: &Ctx) -> Check {
    let call = big(ctx, 20_000)?;
    call.result_json()?;
    let names = call.names();
    ensure!(
        names.first() == Some(&"task_id"),
        "first event is {:?}",
        names.first()
    );
    ensure!(
        names.last() == Some(&"end"),
        "last event is {:?}",
        names.last()
    );
    let middle = &names[1..names.len() - 1];
    check!(
        !middle.is_empty() && middle.iter().all(|n| *n == "chunk"),
        "events are {names:?}"
    )
}

fn multibyte(ctx: &Ctx) -> Check {
    // 2-, 3- and 4-byte characters after a 1-byte prefix, so cuts at fixed byte offsets
    // would land inside characters.
    let text = format!("a{}", "é€🎉".repeat(1500));
    let call = super::calls::session(ctx)?.call("echo", json!({ "text": text }))?;
    for e in &call.events {
        ensure!(
            !e.data.contains('\u{FFFD}'),
            "a {} event splits a UTF-8 character",
            e.event
        );
    }
    expect_pieces_fit(&call)?;
    let got = call.text()?;
    check!(got == text, "the joined text differs from what was sent")
}

fn core_decoder(ctx: &Ctx) -> Check {
    let call = big(ctx, 30_000)?;
    let raw = call.result_json()?;
    let typed = call
        .typed
        .iter()
        .find_map(|t| match t {
            Ok(CallEvent::Result(r)) => Some(r.clone()),
            _ => None,
        })
        .ok_or("the core decoder gave no result")?;
    let parsed: RunToolOutput = serde_json::from_value(raw).map_err(|e| e.to_string())?;
    ensure!(
        typed == parsed,
        "the core decoder's result differs from the joined JSON"
    );
    let text = typed
        .output()
        .and_then(|o| o.blocks.first())
        .and_then(|b| b.as_text())
        .unwrap_or_default();
    check!(
        text.len() == 30_000,
        "decoded text has {} bytes",
        text.len()
    )
}
