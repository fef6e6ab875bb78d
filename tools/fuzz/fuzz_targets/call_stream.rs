//! `CallStreamDecoder` on arbitrary bytes under arbitrary bounds: what it holds (unfinished
//! line, event and result together) never exceeds the result bound, cuts never change what it
//! decodes, a failed decoder stays failed; and any result our encoder sends decodes to itself
//! exactly when it fits the bound.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use ors_core::sse::{self, CallEvent, CallStreamDecoder, CallStreamError, DecodeLimits};
use ors_core::{Block, RunToolOutput, ToolOutput};
use ors_fuzz::{cuts, limits, pieces, FIELD_ROOM};

type Decoded = Vec<std::result::Result<CallEvent, CallStreamError>>;

fn decode(limits: DecodeLimits, pieces: &[&[u8]]) -> (Decoded, CallStreamDecoder) {
    let mut d = CallStreamDecoder::with_limits(limits);
    let mut out = Vec::new();
    for piece in pieces {
        out.extend(d.push(piece));
        let cap = limits.max_result_bytes.saturating_add(FIELD_ROOM);
        assert!(d.high_water() <= cap, "held {} of {cap}", d.high_water());
        if matches!(out.last(), Some(Err(e)) if e.is_fatal()) {
            break;
        }
    }
    (out, d)
}

/// A result built from the fuzzer's bytes: text of any size (so chunking is exercised), a
/// reward, metadata, an image, or an error.
fn result(u: &mut Unstructured<'_>) -> Result<RunToolOutput> {
    let text: String = u.arbitrary()?;
    let repeat = u.int_in_range(1usize..=3000)?;
    let text = text.repeat(repeat.min(20_000 / text.len().max(1)).max(1));
    if u.arbitrary::<bool>()? {
        return Ok(RunToolOutput::error(text));
    }
    let mut out = ToolOutput::text(text);
    let reward: f64 = u.arbitrary()?;
    if reward.is_finite() {
        out = out.with_reward(reward);
    }
    if u.arbitrary()? {
        out = out.finish();
    }
    if u.arbitrary()? {
        let key: String = u.arbitrary()?;
        let value: String = u.arbitrary()?;
        let mut meta = ors_core::JsonObject::new();
        meta.insert(key, serde_json::Value::String(value));
        out = out.with_metadata(meta);
    }
    if u.arbitrary()? {
        out = out.with_block(Block::image("iVBORw0KGgo=", "image/png"));
    }
    Ok(RunToolOutput::Success(out))
}

fn check(mut u: Unstructured<'_>) -> Result<()> {
    let u = &mut u;
    let limits = limits(u)?;
    let cuts = cuts(u)?;
    if u.arbitrary::<bool>()? {
        let result = result(u)?;
        let size = result.to_json().len();
        let max = if u.arbitrary()? {
            size.saturating_add(u.int_in_range(0usize..=100)?)
        } else {
            size.saturating_sub(u.int_in_range(1usize..=100)?).max(1)
        };
        let mut stream = sse::encode_task_id("t1");
        stream.extend(sse::encode_result(&result));
        let (got, _) = decode(DecodeLimits::bounded(max), &pieces(&stream, &cuts));
        if size <= max {
            assert_eq!(
                got,
                vec![
                    Ok(CallEvent::TaskId("t1".into())),
                    Ok(CallEvent::Result(result))
                ]
            );
        } else {
            assert!(
                matches!(got.last(), Some(Err(e)) if e.is_limit()),
                "{size} bytes over a bound of {max}: {got:?}"
            );
        }
        return Ok(());
    }
    let bytes = std::mem::replace(u, Unstructured::new(&[])).take_rest();
    let (whole, mut d) = decode(limits, &[bytes]);
    let (cut, _) = decode(limits, &pieces(bytes, &cuts));
    // As for the SSE decoder, which bound is named may depend on the cuts; nothing else may.
    match (whole.split_last(), cut.split_last()) {
        (Some((Err(a), a_rest)), Some((Err(b), b_rest))) if a.is_limit() && b.is_limit() => {
            assert_eq!(a_rest, b_rest, "the cuts changed what was decoded");
        }
        _ => assert_eq!(whole, cut, "the cuts changed what was decoded"),
    }
    if let Some(Err(e)) = whole.last() {
        if e.is_fatal() {
            assert_eq!(d.push(b"event: end\ndata: {}\n\n"), vec![Err(e.clone())]);
            assert_eq!(
                d.pending_result_bytes(),
                0,
                "a failed decoder keeps nothing"
            );
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = check(Unstructured::new(data));
});
