//! The optional API key (notes row `api-key`): checked only when the runner is given the key
//! (`--api-key` or `ORS_API_KEY`); a server without one skips these clauses.

use serde_json::json;

use super::clause::{clause, Clause};
use crate::http::{Request, Response, Target};
use crate::support::{check, ensure, expect_error, expect_ok_json, expect_text, Check, Ctx};

/// The API key clauses (part of the robustness group).
pub const CLAUSES: &[Clause] = &[
    clause(
        "robustness.auth.health-open",
        "with an API key set, GET /health and GET /version need no key (notes rows `api-key`, `version-route`)",
        |ctx| with_key(ctx, health_open),
    ),
    clause(
        "robustness.auth.missing-401",
        "with an API key set, every other route without a key is 401 (notes row `api-key`)",
        |ctx| with_key(ctx, missing),
    ),
    clause(
        "robustness.auth.wrong-401",
        "a wrong X-API-Key is 401 (notes row `api-key`)",
        |ctx| with_key(ctx, wrong),
    ),
    clause(
        "robustness.auth.bearer",
        "Authorization: Bearer <key> is accepted like X-API-Key (notes row `api-key`)",
        |ctx| with_key(ctx, bearer),
    ),
];

/// Runs `check` with the runner's API key, or skips the clause when it was given none.
fn with_key(ctx: &Ctx, check: fn(&Ctx, &str) -> Check) -> Check {
    match &ctx.target.api_key {
        Some(key) => check(ctx, key),
        None => ctx.skip("no API key given (--api-key or ORS_API_KEY)"),
    }
}

/// The target with `api_key` in place of its own (`None`: requests go out unauthenticated).
fn keyed(ctx: &Ctx, api_key: Option<String>) -> Target {
    Target {
        api_key,
        ..ctx.target.clone()
    }
}

fn health_open(ctx: &Ctx, _key: &str) -> Check {
    let v = expect_ok_json(&Request::new("GET", "/health").send(&keyed(ctx, None))?)?;
    ensure!(v == json!({"status": "ok"}), "health without a key: {v}");
    let r = Request::new("GET", "/version").send(&keyed(ctx, None))?;
    check!(
        r.status() == 200,
        "GET /version without a key: {}",
        r.status()
    )
}

/// One request to every kind of route (the session ones with a real session).
fn every_route(ctx: &Ctx, sid: &str) -> Vec<Request> {
    vec![
        Request::new("GET", "/list_environments"),
        Request::new("GET", &ctx.path("/tools")),
        Request::new("GET", &ctx.path("/splits")),
        Request::new("POST", &ctx.path("/tasks")).json(&json!({"split": "train"})),
        Request::new("POST", &ctx.path("/num_tasks")).json(&json!({"split": "train"})),
        Request::new("POST", &ctx.path("/task")).json(&json!({"split": "train", "index": 0})),
        Request::new("POST", "/create_session").header("Accept", "text/event-stream"),
    ]
    .into_iter()
    .chain(
        ["ping", "prompt", "task_tools", "call", "delete"].map(|r| ctx.session_route(r).sid(sid)),
    )
    .collect()
}

fn expect_refused(target: &Target, reqs: Vec<Request>) -> Check {
    for req in reqs {
        let r: Response = req.send(target)?;
        expect_error(&r, 401).map_err(|e| format!("{} {}: {e}", req.method, req.path))?;
    }
    Ok(())
}

fn missing(ctx: &Ctx, _key: &str) -> Check {
    let s = ctx.session_at("train", 1)?;
    expect_refused(&keyed(ctx, None), every_route(ctx, &s.sid))?;
    // The refused requests changed nothing: the session is still at its first counter.
    let n = s.text("counter", json!({}))?;
    expect_text("a refused call ran: counter", &n, "1")
}

fn wrong(ctx: &Ctx, key: &str) -> Check {
    let s = ctx.session_at("train", 1)?;
    let wrong = keyed(ctx, Some(format!("{key}-wrong")));
    expect_refused(&wrong, every_route(ctx, &s.sid))
}

fn bearer(ctx: &Ctx, key: &str) -> Check {
    let bearer = format!("Bearer {key}");
    let target = keyed(ctx, None);
    let r = Request::new("GET", "/list_environments")
        .header("Authorization", &bearer)
        .send(&target)?;
    expect_ok_json(&r)?;
    let r = Request::new("POST", &ctx.path("/num_tasks"))
        .header("Authorization", &bearer)
        .json(&json!({"split": "hard"}))
        .send(&target)?;
    let v = expect_ok_json(&r)?;
    check!(
        v == json!({"num_tasks": 3}),
        "num_tasks with a bearer token: {v}"
    )
}
