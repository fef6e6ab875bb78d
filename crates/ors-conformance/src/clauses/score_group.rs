//! Group scoring (notes row `score-group`): `supports_score_group` in the tools listing exactly
//! when `POST /{env}/score_group` scores, one score per candidate over the call stream, a wrong
//! count an `error` event naming both numbers, and 404 before any stream where unsupported.

use std::time::Duration;

use ors_core::protocol::{routes, EVENT_STREAM};
use ors_core::sse::{EVENT_END, EVENT_TASK_ID};
use serde_json::{json, Value};

use super::clause::{clause, Clause};
use crate::http::Request;
use crate::support::{check, ensure, expect_ok_json, Call, Check, Ctx};

/// The group-scoring clauses.
pub const CLAUSES: &[Clause] = &[
    clause("calls.score_group.advertised-iff-implemented", "supports_score_group: true is in the tools listing exactly when POST /{env}/score_group scores a group over SSE; otherwise the route is 404 (notes row `score-group`)", advertised_iff_implemented),
    clause("calls.score_group.scores-in-order", "score_group gives one score per candidate in candidate order: the fixture's right answer 1.0, a wrong one 0.0 (notes row `score-group`)", scores_in_order),
    clause("calls.score_group.count-mismatch-error", "an environment returning the wrong number of scores gives an error event naming both numbers, no end (notes row `score-group`)", count_mismatch),
    clause("calls.score_group.unsupported-404", "POST /{env}/score_group on an environment that does not score groups is 404 with a detail, before any stream (notes row `score-group`)", unsupported_404),
];

/// Seconds a scoring may take before the check gives up.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A candidate whose final answer is `answer`, with `metadata`.
fn candidate(answer: &str, metadata: Value) -> Value {
    json!({
        "messages": [
            {"role": "user", "blocks": [{"type": "text", "text": "What is 0+0?"}]},
            {"role": "assistant", "blocks": [{"type": "text", "text": answer}]},
        ],
        "metadata": metadata,
    })
}

/// Whether `env`'s tools listing says it scores groups.
fn advertised(ctx: &Ctx, env: &str) -> Result<bool, String> {
    let listing = expect_ok_json(&ctx.get(&format!("/{env}{}", routes::TOOLS))?)?;
    match listing.get("supports_score_group") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(false),
        Some(Value::Bool(true)) => Ok(true),
        Some(other) => Err(format!("supports_score_group is {other}, not a boolean")),
    }
}

/// `POST /{env}/score_group` for a session, read to its end.
fn score(ctx: &Ctx, env: &str, sid: &str, candidates: Vec<Value>) -> Result<Call, String> {
    let req = Request::new("POST", &format!("/{env}{}", routes::SCORE_GROUP))
        .sid(sid)
        .header("Accept", EVENT_STREAM)
        .json(&json!({ "candidates": candidates }));
    ctx.call_with(&req, TIMEOUT)
}

/// The rewards of a scoring stream: `task_id` first, then `chunk`s and one `end` holding
/// `{"scores": [{"reward", ...}, ...]}`.
fn rewards(call: &Call) -> Result<Vec<f64>, String> {
    call.expect_no_error()?;
    let names = call.names();
    ensure!(
        names.first() == Some(&EVENT_TASK_ID),
        "the first event is not task_id: {names:?}"
    );
    ensure!(
        names.last() == Some(&EVENT_END) && names.iter().filter(|n| **n == EVENT_END).count() == 1,
        "expected one end event, last: {names:?}"
    );
    let v: Value =
        serde_json::from_str(&call.data()).map_err(|e| format!("end data is not JSON ({e})"))?;
    let scores = v["scores"]
        .as_array()
        .ok_or_else(|| format!("end data has no scores array: {v}"))?;
    scores
        .iter()
        .map(|s| {
            s["reward"]
                .as_f64()
                .ok_or_else(|| format!("a score without a numeric reward: {s}"))
        })
        .collect()
}

fn advertised_iff_implemented(ctx: &Ctx) -> Check {
    let flag = advertised(ctx, &ctx.env)?;
    let s = ctx.session_at("train", 0)?;
    let call = score(ctx, &ctx.env, &s.sid, vec![candidate("0", json!({}))])?;
    if flag {
        let got = rewards(&call).map_err(|e| format!("advertised, but: {e}"))?;
        ensure!(got.len() == 1, "one candidate got {} scores", got.len());
    } else {
        ensure!(
            call.head.status == 404,
            "not advertised, but POST /{}/score_group answered {}",
            ctx.env,
            call.head.status
        );
    }
    Ok(())
}

fn scores_in_order(ctx: &Ctx) -> Check {
    if !advertised(ctx, &ctx.env)? {
        return ctx.skip("the environment does not score groups");
    }
    // Task 1 of `train`: the answer is "2".
    let s = ctx.session_at("train", 1)?;
    let cands = vec![
        candidate("3", json!({})),
        candidate("2", json!({})),
        candidate("22", json!(null)),
    ];
    let got = rewards(&score(ctx, &ctx.env, &s.sid, cands)?)?;
    check!(
        got == [0.0, 1.0, 0.0],
        "rewards {got:?}, expected [0.0, 1.0, 0.0]"
    )
}

fn count_mismatch(ctx: &Ctx) -> Check {
    if !advertised(ctx, &ctx.env)? {
        return ctx.skip("the environment does not score groups");
    }
    let s = ctx.session_at("train", 1)?;
    // The fixture gives no score to a candidate marked so.
    let cands = vec![
        candidate("2", json!({})),
        candidate("2", json!({"score": "omit"})),
    ];
    let call = score(ctx, &ctx.env, &s.sid, cands)?;
    call.expect_stream()?;
    let error = call
        .error_event()
        .ok_or_else(|| format!("no error event; events {:?}", call.names()))?;
    ensure!(
        !call.names().contains(&EVENT_END),
        "an end event beside the error: {:?}",
        call.names()
    );
    check!(
        error.contains("1 scores") && error.contains("2 candidates"),
        "the error does not name both numbers (1 score, 2 candidates): {error:?}"
    )
}

fn unsupported_404(ctx: &Ctx) -> Check {
    for env in ctx.environments()? {
        if advertised(ctx, &env)? {
            continue;
        }
        let splits = expect_ok_json(&ctx.get(&format!("/{env}{}", routes::SPLITS))?)?;
        let Some(split) = splits
            .get(0)
            .and_then(|s| s.get("name").or(Some(s)))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let s = ctx.session(&json!({"env_name": env, "split": split, "index": 0}))?;
        let call = score(ctx, &env, &s.sid, vec![candidate("0", json!({}))])?;
        ensure!(
            call.head.status == 404,
            "POST /{env}/score_group answered {}, not 404",
            call.head.status
        );
        let ct = call.head.header("content-type").unwrap_or_default();
        ensure!(
            !ct.starts_with(EVENT_STREAM),
            "the 404 came as a stream ({ct})"
        );
        let detail = serde_json::from_slice::<Value>(&call.raw)
            .ok()
            .and_then(|v| v["detail"].as_str().map(str::to_owned))
            .unwrap_or_default();
        ensure!(!detail.is_empty(), "the 404 has no detail");
        return Ok(());
    }
    ctx.skip("every environment of this server scores groups")
}
