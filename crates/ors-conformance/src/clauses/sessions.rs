//! Sessions: both `create_session` forms, unique ids, every `create` validation error, the
//! default environment, a missing `X-Session-ID` on each route, duplicate create, ping,
//! task_tools, prompt, delete, 410 after delete, and secrets in the body and the header.

use std::collections::HashSet;

use ors_core::ErrorCode;
use serde_json::{json, Value};

use super::clause::{clause, Clause};
use crate::http::{Request, Response};
use crate::support::{
    check, ensure, expect_code, expect_error, expect_fields, expect_json, expect_ok_json,
    expect_status, expect_text, secrets_header, task, text_blocks, Check, Ctx, Session,
};

/// The session clauses.
pub const CLAUSES: &[Clause] = &[
    clause("sessions.create_session.json", "POST /create_session without Accept: text/event-stream answers JSON {\"sid\": ...} (notes row `create-session-reply`)", create_session_json),
    clause("sessions.create_session.sse", "POST /create_session with Accept: text/event-stream answers a task_id event with the sid, then an empty end (notes row `create-session-reply`)", create_session_sse),
    clause("sessions.create_session.uuid", "session ids are UUID v4 strings", create_session_uuid),
    clause("sessions.create_session.unique", "20 create_session calls give 20 different ids", create_session_unique),
    clause("sessions.create.task_spec", "POST /create with task_spec answers {\"sid\": sid} and the episode serves that task", create_task_spec),
    clause("sessions.create.split-index", "POST /create with split and index resolves the task on the server",
        |ctx| expect_prompt(ctx, &ctx.session_at("test", 3)?.sid, "What is 103+103?")),
    clause("sessions.create.default-env", "POST /create without env_name uses the default environment",
        |ctx| expect_prompt(ctx, &ctx.session(&json!({"split": "train", "index": 4}))?.sid, "What is 4+4?")),
    clause("sessions.create.ready-at-once", "requests right after /create wait for setup and succeed", create_ready),
    clause("sessions.create.both-sources-400", "POST /create with task_spec and split+index is 400 (notes row `bad-body-400`)",
        |ctx| create_error(ctx, &json!({"task_spec": task(1), "split": "train", "index": 1}), 400)),
    clause("sessions.create.neither-400", "POST /create with neither task_spec nor split+index is 400 (notes row `bad-body-400`)",
        |ctx| create_error(ctx, &json!({"env_name": ctx.env}), 400)),
    clause("sessions.create.split-without-index-400", "POST /create with split but no index is 400",
        |ctx| create_error(ctx, &json!({"split": "train"}), 400)),
    clause("sessions.create.index-without-split-400", "POST /create with index but no split is 400",
        |ctx| create_error(ctx, &json!({"index": 1}), 400)),
    clause("sessions.create.invalid-split-400", "POST /create with an unknown split is 400",
        |ctx| create_error(ctx, &json!({"split": "nope", "index": 0}), 400)),
    clause("sessions.create.index-out-of-range-400", "POST /create with index == num_tasks is 400",
        |ctx| create_error(ctx, &json!({"split": "test", "index": 5}), 400)),
    clause("sessions.create.negative-index-400", "POST /create with a negative index is 400 (notes row `negative-index`)",
        |ctx| create_error(ctx, &json!({"split": "train", "index": -1}), 400)),
    clause("sessions.create.task_spec-not-object-400", "POST /create with a task_spec that is not an object is 400",
        |ctx| create_error(ctx, &json!({"task_spec": "What is 1+1?"}), 400)),
    clause("sessions.create.unknown-env-404", "POST /create with an unknown env_name is 404",
        |ctx| create_error(ctx, &json!({"env_name": "no-such-env-xyz", "task_spec": task(1)}), 404)),
    clause("sessions.create.non-json-400", "POST /create with a body that is not JSON is 400 (notes row `bad-body-400`)", create_non_json),
    clause("sessions.create.duplicate-400", "a second POST /create on a live session is 400", create_duplicate),
    clause("sessions.missing-sid.create-400", "POST /create without X-Session-ID is 400",
        |ctx| ctx.refused(Request::new("POST", "/create").json(&json!({"task_spec": task(1)})), 400)),
    clause("sessions.missing-sid.ping-400", "POST /ping without X-Session-ID is 400",
        |ctx| ctx.refused(ctx.session_route("ping"), 400)),
    clause("sessions.missing-sid.delete-400", "POST /delete without X-Session-ID is 400",
        |ctx| ctx.refused(ctx.session_route("delete"), 400)),
    clause("sessions.missing-sid.delete_session-400", "POST /delete_session without X-Session-ID is 400",
        |ctx| ctx.refused(ctx.session_route("delete_session"), 400)),
    clause("sessions.missing-sid.prompt-400", "GET /{env}/prompt without X-Session-ID is 400",
        |ctx| ctx.refused(ctx.session_route("prompt"), 400)),
    clause("sessions.missing-sid.task_tools-400", "GET /{env}/task_tools without X-Session-ID is 400",
        |ctx| ctx.refused(ctx.session_route("task_tools"), 400)),
    clause("sessions.missing-sid.call-400", "POST /{env}/call without X-Session-ID is 400",
        |ctx| ctx.refused(ctx.session_route("call"), 400)),
    clause("sessions.unknown-sid.ping-404", "POST /ping for a session never created is 404",
        |ctx| ctx.refused(ctx.session_route("ping").sid(NEVER), 404)),
    clause("sessions.unknown-sid.prompt-404", "GET /{env}/prompt for a session never created is 404",
        |ctx| ctx.refused(ctx.session_route("prompt").sid(NEVER), 404)),
    clause("sessions.unknown-sid.task_tools-404", "GET /{env}/task_tools for a session never created is 404",
        |ctx| ctx.refused(ctx.session_route("task_tools").sid(NEVER), 404)),
    clause("sessions.unknown-sid.call-404", "POST /{env}/call for a session never created is 404",
        |ctx| ctx.refused(ctx.session_route("call").sid(NEVER), 404)),
    clause("sessions.ping", "POST /ping on a live session answers {\"status\": \"ok\"}", ping),
    clause("sessions.prompt", "GET /{env}/prompt is one text block with the question, detail null",
        |ctx| expect_prompt(ctx, &ctx.session_at("train", 9)?.sid, "What is 9+9?")),
    clause("sessions.prompt.default-env", "GET /prompt without env prefix serves the session (notes row `default-env-routes`)",
        |ctx| prompt_at(ctx, "/prompt", &ctx.session_at("train", 5)?.sid, "What is 5+5?")),
    clause("sessions.prompt.path-env-not-validated", "an episode route naming another known environment is served by the session's (notes row `path-env-not-validated`)", prompt_path_env),
    clause("sessions.task_tools", "GET /{env}/task_tools lists the shared tools and the task-specific hint", task_tools),
    clause("sessions.task_tools.shared-identical", "task_tools repeats every shared tool exactly as /tools lists it", task_tools_shared),
    clause("sessions.delete", "POST /delete answers {\"sid\": sid}", delete),
    clause("sessions.delete.gone-prompt-410", "GET /{env}/prompt after delete is 410 (notes row `gone-vs-not-found`)",
        |ctx| ctx.refused(ctx.session_route("prompt").sid(&deleted_session(ctx)?), 410)),
    clause("sessions.delete.gone-call-410", "POST /{env}/call after delete is 410 (notes row `gone-vs-not-found`)",
        |ctx| ctx.refused(ctx.session_route("call").sid(&deleted_session(ctx)?), 410)),
    clause("sessions.delete.gone-task_tools-410", "GET /{env}/task_tools after delete is 410 (notes row `gone-vs-not-found`)",
        |ctx| ctx.refused(ctx.session_route("task_tools").sid(&deleted_session(ctx)?), 410)),
    clause("sessions.delete.twice-410", "a second POST /delete is 410 (notes row `delete-unknown`)",
        |ctx| ctx.refused(ctx.session_route("delete").sid(&deleted_session(ctx)?), 410)),
    clause("sessions.delete.unknown-404", "POST /delete of a session never created is 404 (notes row `delete-unknown`)",
        |ctx| ctx.refused(ctx.session_route("delete").sid(NEVER), 404)),
    clause("sessions.delete.ping-after-delete", "POST /ping after delete is 404 or 410, never 200", ping_after_delete),
    clause("sessions.delete_session", "POST /delete_session answers {\"sid\": sid}", delete_session),
    clause("sessions.codes.not-found", "a session never created answers code session_not_found on ping, prompt, call and delete (notes rows `error-codes`, `gone-vs-not-found`)",
        |ctx| expect_session_code(ctx, NEVER, 404, ErrorCode::SessionNotFound)),
    clause("sessions.codes.no-episode-yet", "an id from /create_session with no /create yet answers code no_episode_yet on ping, prompt, call and delete (notes rows `error-codes`, `gone-vs-not-found`)",
        |ctx| expect_session_code(ctx, &ctx.new_sid()?, 404, ErrorCode::NoEpisodeYet)),
    clause("sessions.codes.deleted", "a deleted session answers code session_deleted on ping, prompt, call and delete (notes rows `error-codes`, `gone-vs-not-found`)",
        |ctx| expect_session_code(ctx, &deleted_session(ctx)?, 410, ErrorCode::SessionDeleted)),
    clause("sessions.codes.exists", "a second POST /create on a live session answers code session_exists (notes row `error-codes`)",
        |ctx| expect_code(&create_twice(ctx)?.1, 400, ErrorCode::SessionExists)),
    clause("sessions.create.unknown-fields-ignored", "POST /create with fields the server does not know (extensions) starts the episode (notes row `unknown-fields-ignored`)", create_unknown_fields),
    clause("sessions.create.unknown-toolset-400", "POST /create with a toolset_name the environment does not define is 400 naming it (notes row `toolset-name`)", create_unknown_toolset),
    clause("sessions.create.toolset-selects", "POST /create with toolset_name \"codex\" gives that session the fixture's toolset (shout in task_tools, callable); a session without it has neither (notes row `toolset-name`)", create_toolset_selects),
    clause("sessions.finished.no-teardown", "finished: true does not end the session: its prompt is still served; the client deletes (notes row `finished-no-teardown`)", finished_no_teardown),
    clause("sessions.finished.latch", "a call after one that returned finished: true is ok: false with reason episode_finished (notes row `finished-latch`)", finished_latch),
    clause("sessions.messages.default", "GET /{env}/messages is one user message holding the prompt's blocks (notes row `messages-route`)", messages_default),
    clause("sessions.secrets.body", "secrets in the /create body reach the environment", secrets_body),
    clause("sessions.secrets.header", "secrets in the X-Secrets header (base64 JSON) reach the environment (notes row `secrets-header`)", secrets_header_clause),
    clause("sessions.secrets.not-shared", "one session's secrets are not visible to another session", secrets_not_shared),
];

fn create_session_json(ctx: &Ctx) -> Check {
    for accept in [None, Some("application/json")] {
        let req = Request::new("POST", "/create_session");
        let req = accept.into_iter().fold(req, |r, a| r.header("Accept", a));
        let r = ctx.send(req)?;
        let ct = r.header("content-type").unwrap_or_default().to_owned();
        ensure!(
            ct.starts_with("application/json"),
            "Accept {accept:?}: content-type {ct:?}: {}",
            r.snippet()
        );
        let v = expect_ok_json(&r)?;
        ensure!(v["sid"].is_string(), "no sid string: {v}");
    }
    Ok(())
}

fn create_session_sse(ctx: &Ctx) -> Check {
    let r =
        ctx.send(Request::new("POST", "/create_session").header("Accept", "text/event-stream"))?;
    expect_status(&r, 200)?;
    let ct = r.header("content-type").unwrap_or_default();
    ensure!(ct.starts_with("text/event-stream"), "content-type {ct:?}");
    let events = r.events();
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    ensure!(names == ["task_id", "end"], "events are {names:?}");
    ensure!(!events[0].data.trim().is_empty(), "empty sid");
    check!(
        events[1].data.is_empty(),
        "end data is {:?}, not empty",
        events[1].data
    )
}

fn is_uuid_v4(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
        && b[14] == b'4'
        && matches!(b[19].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b')
}

fn create_session_uuid(ctx: &Ctx) -> Check {
    let sid = ctx.new_sid()?;
    check!(is_uuid_v4(&sid), "{sid:?} is not a UUID v4")
}

fn create_session_unique(ctx: &Ctx) -> Check {
    let mut seen = HashSet::new();
    for _ in 0..20 {
        let sid = ctx.new_sid()?;
        ensure!(seen.insert(sid.clone()), "{sid} was handed out twice");
    }
    Ok(())
}

fn expect_prompt(ctx: &Ctx, sid: &str, question: &str) -> Check {
    prompt_at(ctx, &ctx.path("/prompt"), sid, question)
}

/// Fails unless `GET path` for session `sid` is one text block holding `question`.
fn prompt_at(ctx: &Ctx, path: &str, sid: &str, question: &str) -> Check {
    let v = expect_ok_json(&ctx.send(Request::new("GET", path).sid(sid))?)?;
    expect_json(&format!("GET {path}"), &v, &text_blocks(question))
}

fn create_task_spec(ctx: &Ctx) -> Check {
    let sid = ctx.new_sid()?;
    let spec = json!({"id": 7, "question": "What is 7+7?", "answer": "14"});
    let body = json!({"env_name": ctx.env, "task_spec": spec});
    let v = expect_ok_json(&ctx.send(ctx.create(&sid, &body))?)?;
    expect_json("create reply", &v, &json!({"sid": sid}))?;
    expect_prompt(ctx, &sid, "What is 7+7?")?;
    let _ = ctx.delete(&sid);
    Ok(())
}

fn create_ready(ctx: &Ctx) -> Check {
    let s = ctx.session(&json!({"task_spec": task(1)}))?;
    let n = s.text("counter", json!({}))?;
    expect_text("counter right after create", &n, "1")
}

fn create_error(ctx: &Ctx, body: &Value, status: u16) -> Check {
    let sid = ctx.new_sid()?;
    let r = ctx.send(ctx.create(&sid, body))?;
    if r.status() == 200 {
        let _ = ctx.delete(&sid);
    }
    expect_error(&r, status).map(drop)
}

fn create_non_json(ctx: &Ctx) -> Check {
    let sid = ctx.new_sid()?;
    let req = Request::new("POST", "/create")
        .sid(&sid)
        .header("Content-Type", "application/json")
        .body("task_spec=1");
    ctx.refused(req, 400)
}

/// A live session on task 2 and the answer to a second `/create` on its id (task 3).
fn create_twice(ctx: &Ctx) -> Result<(Session<'_>, Response), String> {
    let s = ctx.session(&json!({"task_spec": task(2)}))?;
    let r = ctx.send(ctx.create(&s.sid, &json!({"task_spec": task(3)})))?;
    Ok((s, r))
}

fn create_duplicate(ctx: &Ctx) -> Check {
    let (s, r) = create_twice(ctx)?;
    expect_error(&r, 400)?;
    expect_prompt(ctx, &s.sid, "What is 2+2?")
}

const NEVER: &str = "00000000-0000-4000-8000-00000000dead";

fn ping(ctx: &Ctx) -> Check {
    let s = ctx.session(&json!({"task_spec": task(1)}))?;
    let v = expect_ok_json(&ctx.send(Request::new("POST", "/ping").sid(&s.sid))?)?;
    expect_json("ping", &v, &json!({"status": "ok"}))
}

fn prompt_path_env(ctx: &Ctx) -> Check {
    // Needs a second environment: an unknown name is a 404 like any env-scoped route
    // (notes row `default-env-routes`); row `path-env-not-validated` is about a known environment that is not the session's.
    let envs = ctx.environments()?;
    let Some(other) = envs.iter().find(|e| !e.eq_ignore_ascii_case(&ctx.env)) else {
        return ctx
            .skip("the server hosts one environment; row `path-env-not-validated` needs a second");
    };
    let s = ctx.session_at("train", 6)?;
    prompt_at(ctx, &format!("/{other}/prompt"), &s.sid, "What is 6+6?")
}

fn list_of(v: &Value) -> Result<Vec<Value>, String> {
    v.get("tools")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| format!("no tools array: {v}"))
}

fn task_tools(ctx: &Ctx) -> Check {
    let s = ctx.session_at("train", 1)?;
    let mut names = task_tool_names(ctx, &s.sid)?;
    names.sort();
    let mut want = super::discovery::SHARED_TOOLS.to_vec();
    want.push("hint");
    want.sort_unstable();
    check!(
        names == want,
        "task_tools lists {names:?}, expected {want:?}"
    )
}

fn task_tools_shared(ctx: &Ctx) -> Check {
    let s = ctx.session_at("train", 1)?;
    let combined = list_of(&expect_ok_json(&s.get("/task_tools")?)?)?;
    let shared = list_of(&expect_ok_json(&ctx.get(&ctx.path("/tools"))?)?)?;
    for t in &shared {
        ensure!(combined.contains(t), "task_tools lacks or changes {t}");
    }
    Ok(())
}

fn delete(ctx: &Ctx) -> Check {
    let mut s = ctx.session_at("train", 1)?;
    let v = expect_ok_json(&s.delete()?)?;
    expect_json("delete reply", &v, &json!({"sid": s.sid}))
}

fn deleted_session(ctx: &Ctx) -> Result<String, String> {
    let mut s = ctx.session_at("train", 1)?;
    expect_status(&s.delete()?, 200)?;
    Ok(s.sid.clone())
}

fn ping_after_delete(ctx: &Ctx) -> Check {
    let sid = deleted_session(ctx)?;
    let r = ctx.send(Request::new("POST", "/ping").sid(&sid))?;
    check!(
        matches!(r.status(), 404 | 410),
        "ping after delete answered {}: {}",
        r.status(),
        r.snippet()
    )
}

fn delete_session(ctx: &Ctx) -> Check {
    let sid = ctx.new_sid()?;
    let v = expect_ok_json(&ctx.send(ctx.session_route("delete_session").sid(&sid))?)?;
    expect_json("delete_session reply", &v, &json!({"sid": sid}))
}

fn finished_no_teardown(ctx: &Ctx) -> Check {
    let s = ctx.session_at("train", 3)?;
    let out = s.ok("submit", json!({"answer": "6"}))?;
    ensure!(
        out["finished"] == json!(true),
        "submit did not finish: {out}"
    );
    expect_prompt(ctx, &s.sid, "What is 3+3?")
}

fn secrets_body(ctx: &Ctx) -> Check {
    let s = ctx.session(&json!({"task_spec": task(1), "secrets": {"API_KEY": "sk-body-123"}}))?;
    let v = s.text("secret", json!({"name": "API_KEY"}))?;
    expect_text("secret API_KEY", &v, "sk-body-123")
}

fn secrets_header_clause(ctx: &Ctx) -> Check {
    let sid = ctx.new_sid()?;
    let header = secrets_header(&[("TOKEN", "tok-header-456")]);
    let req = Request::new("POST", "/create")
        .sid(&sid)
        .header("X-Secrets", &header)
        .json(&json!({"task_spec": task(1)}));
    expect_status(&ctx.send(req)?, 200)?;
    let secret = json!({"name": "secret", "input": {"name": "TOKEN"}});
    let call = ctx.call(&ctx.call_request(&sid, &secret));
    let _ = ctx.delete(&sid);
    expect_text("secret TOKEN", &call?.text()?, "tok-header-456")
}

fn secrets_not_shared(ctx: &Ctx) -> Check {
    let _a =
        ctx.session(&json!({"task_spec": task(1), "secrets": {"API_KEY": "sk-private-789"}}))?;
    let b = ctx.session(&json!({"task_spec": task(1)}))?;
    let call = b.call("secret", json!({"name": "API_KEY"}))?;
    let v = call.result_json()?;
    check!(
        !v.to_string().contains("sk-private-789"),
        "session b sees session a's secret: {v}"
    )
}

/// Ping, prompt, call and delete on `sid` all answer `status` with `code`.
fn expect_session_code(ctx: &Ctx, sid: &str, status: u16, code: ErrorCode) -> Check {
    let routes = ["ping", "prompt", "call", "delete"];
    let replies = routes.map(|route| ctx.send(ctx.session_route(route).sid(sid)));
    for (what, r) in routes.into_iter().zip(replies) {
        expect_code(&r?, status, code).map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

fn create_unknown_fields(ctx: &Ctx) -> Check {
    let s = ctx.session(&json!({
        "env_name": ctx.env,
        "split": "train",
        "index": 6,
        "x_extension": {"from": "a newer client"},
    }))?;
    expect_prompt(ctx, &s.sid, "What is 6+6?")
}

fn create_unknown_toolset(ctx: &Ctx) -> Check {
    let sid = ctx.new_sid()?;
    let body =
        json!({"env_name": ctx.env, "task_spec": task(1), "toolset_name": "no-such-toolset"});
    let detail = expect_error(&ctx.send(ctx.create(&sid, &body))?, 400)?;
    check!(
        detail.contains("no-such-toolset"),
        "the error does not name the toolset: {detail:?}"
    )
}

/// The tool names of a session's `task_tools`.
fn task_tool_names(ctx: &Ctx, sid: &str) -> Result<Vec<String>, String> {
    let v = expect_ok_json(&ctx.send(ctx.session_route("task_tools").sid(sid))?)?;
    Ok(list_of(&v)?
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect())
}

fn create_toolset_selects(ctx: &Ctx) -> Check {
    let loud = ctx.session(
        &json!({"env_name": ctx.env, "split": "train", "index": 1, "toolset_name": "codex"}),
    )?;
    let names = task_tool_names(ctx, &loud.sid)?;
    ensure!(
        names.iter().any(|n| n == "shout") && names.iter().any(|n| n == "echo"),
        "a session with toolset codex lists {names:?}, not shout beside the fixture's tools"
    );
    let text = loud.text("shout", json!({"text": "hi there"}))?;
    ensure!(text == "HI THERE", "shout answered {text:?}");
    let plain = ctx.session_at("train", 1)?;
    let names = task_tool_names(ctx, &plain.sid)?;
    ensure!(
        !names.iter().any(|n| n == "shout"),
        "a session without a toolset lists shout: {names:?}"
    );
    let reason = plain
        .call("shout", json!({"text": "x"}))?
        .tool_error_reason()?;
    check!(
        reason.as_deref() == Some("not_found"),
        "shout without the toolset gave reason {reason:?}, not not_found"
    )
}

fn finished_latch(ctx: &Ctx) -> Check {
    let s = ctx.session_at("train", 3)?;
    s.ok("submit", json!({"answer": "5"}))?;
    let call = s.call("submit", json!({"answer": "6"}))?;
    let reason = call.tool_error_reason()?;
    check!(
        reason.as_deref() == Some("episode_finished"),
        "a second submit after finished gave reason {reason:?}, not episode_finished"
    )
}

fn messages_default(ctx: &Ctx) -> Check {
    let s = ctx.session_at("train", 4)?;
    let v = expect_ok_json(&s.get("/messages")?)?;
    expect_fields(
        "messages",
        &v.get(0).cloned().unwrap_or(Value::Null),
        &json!({"role": "user", "blocks": text_blocks("What is 4+4?")}),
    )?;
    check!(
        v.as_array().map(Vec::len) == Some(1),
        "expected one message, got {v}"
    )
}
