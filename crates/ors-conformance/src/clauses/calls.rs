//! Calls: SSE framing, `task_id` first, exact outputs and wire keys, images, `ok: false`,
//! crashes, reconnects, task ids bound to sessions, isolation, parallel sessions, long calls
//! and keep-alives. Chunking is in `chunking.rs`.

use std::time::Duration;

use ors_core::sse::{SseDecoder, EVENT_TASK_ID};
use serde_json::{json, Value};

use super::clause::{clause, Clause};
use crate::http::{OpenBody, Request};
use crate::support::{
    b64_decode, check, comment_offsets, ensure, expect_json, expect_status, expect_text,
    first_text, task, text_blocks, Call, Check, Ctx, Session,
};

/// The call clauses.
pub const CLAUSES: &[Clause] = &[
    clause("calls.sse.content-type", "POST /{env}/call answers 200 text/event-stream",
        |ctx| session(ctx)?.call("counter", json!({}))?.expect_stream()),
    clause("calls.sse.task_id-first", "the first event of a call stream is task_id with a non-empty id", sse_task_id_first),
    clause("calls.sse.end-last", "a call stream has exactly one end event and nothing after it", sse_end_last),
    clause("calls.sse.single-line-data", "every event's data is a single data: line", sse_single_line),
    clause("calls.sse.accept-optional", "a call without Accept: text/event-stream still gets the SSE stream", sse_accept_optional),
    clause("calls.sse.task-ids-unique", "each call gets its own task_id", sse_task_ids_unique),
    clause("calls.echo.exact", "echo's end data is exactly the documented result (text, metadata, reward 0.0, finished false)", echo_exact),
    clause("calls.echo.unicode", "non-ASCII text round-trips; metadata.length counts characters",
        |ctx| echo_roundtrip(ctx, "héllo wörld ✓ 数学 🎉")),
    clause("calls.echo.escapes", "quotes, backslashes, newlines and control characters round-trip in one data line",
        |ctx| echo_roundtrip(ctx, "quote \" backslash \\ newline \n cr \r tab \t nul-ish \u{1} </script>")),
    clause("calls.echo.empty", "an empty text round-trips",
        |ctx| echo_roundtrip(ctx, "")),
    clause("calls.wire-keys.output", "output always carries blocks, metadata, reward and finished, null when unset (notes row `tool-output-wire-form`)", wire_keys_output),
    clause("calls.wire-keys.text-block", "a text block is exactly {text, detail: null, type: \"text\"} (notes row `tool-output-wire-form`)", wire_keys_text_block),
    clause("calls.submit.correct", "submit with the right answer gives Correct!, reward 1.0, finished",
        |ctx| submit(ctx, "14", "Correct!", 1.0)),
    clause("calls.submit.incorrect", "submit with a wrong answer gives Incorrect, reward 0.0, finished",
        |ctx| submit(ctx, "15", "Incorrect", 0.0)),
    clause("calls.counter.sequence", "counter counts the calls of its session: 1, 2, 3", counter_sequence),
    clause("calls.image", "image gives a text block and an image block {data, mimeType, detail, type} with a PNG", image),
    clause("calls.fail.ok-false", "a tool error is an end event {\"ok\": false, \"error\": message} (a `reason` of null is no reason)", fail_ok_false),
    clause("calls.unknown-tool.ok-false", "an unknown tool name is an ok: false result naming the tool (notes row `tool-error-ok-false`)",
        |ctx| error_names(ctx, "no_such_tool", json!({}), "tool", "no_such_tool")),
    clause("calls.bad-input.ok-false", "input of the wrong type is an ok: false result naming the field (notes row `tool-error-ok-false`)",
        |ctx| error_names(ctx, "echo", json!({"text": 5}), "field", "text")),
    clause("calls.reason.not-found", "an unknown tool's ok: false result has reason not_found (notes row `error-reason`)",
        |ctx| expect_reason(&session(ctx)?.call("no_such_tool", json!({}))?, Some("not_found"))),
    clause("calls.reason.input-validation", "bad input's ok: false result has reason input_validation (notes row `error-reason`)",
        |ctx| expect_reason(&session(ctx)?.call("echo", json!({"text": 5}))?, Some("input_validation"))),
    clause("calls.reason.own-error-none", "a tool's own ok: false result has no reason (notes row `error-reason`)",
        |ctx| expect_reason(&session(ctx)?.call("fail", json!({"message": "mine"}))?, None)),
    clause("calls.missing-input.ok-false", "input missing a required field is an ok: false result naming the field (notes row `tool-error-ok-false`)",
        |ctx| error_names(ctx, "submit", json!({}), "field", "answer")),
    clause("calls.panic.error-event", "a crashing tool gives task_id then an error event and no end (notes row `tool-crash-error-event`)", panic_error_event),
    clause("calls.panic.server-lives", "after a crash the server and the session keep working (notes row `tool-crash-error-event`)", panic_server_lives),
    clause("calls.hint", "the task-specific tool hint can be called and knows the task",
        |ctx| expect_text("hint", &session(ctx)?.text("hint", json!({}))?, "The answer is 14")),
    clause("calls.hint.task_spec", "hint works for a task given inline as task_spec", hint_task_spec),
    clause("calls.reconnect.same-result", "a call with the task_id of a finished call returns the same result without running again", reconnect_same),
    clause("calls.reconnect.after-disconnect", "a call whose client disconnected finishes; reconnecting by task_id gets its result", reconnect_after_disconnect),
    clause("calls.client-task-id.new-call", "a task_id the session has never seen starts a new call under that id (notes row `client-task-id`)", client_task_id_new_call),
    clause("calls.client-task-id.resend-runs-once", "sending a call with a new task_id twice runs the tool once; both get its result (notes row `client-task-id`)", client_task_id_runs_once),
    clause("calls.reconnect.other-session", "a task_id from another session never reaches that session's call: refused, or a new call of this session (notes rows `task-id-bound-to-session`, `client-task-id`)", reconnect_other_session),
    clause("calls.isolation.counter", "counters of two sessions do not interfere", isolation_counter),
    clause("calls.isolation.tasks", "two sessions on different tasks grade against their own task", isolation_tasks),
    clause("calls.parallel.64-sessions", "64 sessions created and driven in parallel all get correct results", parallel_64),
    clause("calls.concurrent.same-session", "two overlapping calls on one session both complete correctly (notes row `calls-serialized`)", concurrent_same_session),
    clause("calls.sleep", "sleep answers slept",
        |ctx| expect_text("sleep", &session(ctx)?.text("sleep", json!({"ms": 50}))?, "slept")),
    clause("calls.timeout.long-call", "a 3 s call completes; the server does not cut long calls short", long_call),
    clause("calls.default-env", "POST /call without env prefix calls the default environment (notes row `default-env-routes`)", default_env),
    clause("calls.body.missing-name-400", "a call body without name is 400, not 422 (notes row `bad-body-400`)",
        |ctx| ctx.refused(ctx.call_request(&session(ctx)?.sid, &json!({"input": {}})), 400)),
    clause("calls.body.unknown-fields-ignored", "a call body with fields the server does not know runs the tool (notes row `unknown-fields-ignored`)", body_unknown_fields),
    clause("calls.body.non-json-400", "a call body that is not JSON is 400 (notes row `bad-body-400`)", body_non_json),
    clause("calls.body.input-not-object", "a call whose input is not an object is refused (400 or ok: false)", body_input_not_object),
    Clause {
        slow: true,
        ..clause("calls.keepalive", "a call longer than the keep-alive interval shows a : comment before end (notes rows `keep-alive`, `keep-alive-interval`)", keepalive)
    },
];

/// The session most call clauses use (the chunking clauses too).
pub(super) fn session(ctx: &Ctx) -> Result<Session<'_>, String> {
    ctx.session_at("train", 7)
}

fn sse_task_id_first(ctx: &Ctx) -> Check {
    let call = session(ctx)?.call("echo", json!({"text": "a"}))?;
    call.expect_stream()?;
    let first = call.events.first().ok_or("empty stream")?;
    ensure!(first.event == "task_id", "first event is {:?}", first.event);
    check!(!first.data.trim().is_empty(), "empty task_id")
}

fn sse_end_last(ctx: &Ctx) -> Check {
    let call = session(ctx)?.call("echo", json!({"text": "a"}))?;
    call.result_json()?;
    check!(
        call.events.last().map(|e| e.event.as_str()) == Some("end"),
        "events are {:?}",
        call.names()
    )
}

fn sse_single_line(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    for call in [
        s.call("echo", json!({"text": "line one\nline two\r\nthree"}))?,
        s.call("big", json!({"bytes": 9000}))?,
        s.call("image", json!({}))?,
    ] {
        call.result_json()?;
        for e in &call.events {
            ensure!(
                !e.data.contains('\n'),
                "{} event data spans several lines",
                e.event
            );
        }
    }
    Ok(())
}

fn sse_accept_optional(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let req = Request::new("POST", &ctx.path("/call"))
        .sid(&s.sid)
        .json(&json!({"name": "echo", "input": {"text": "no accept"}}));
    expect_text("echo", &ctx.call(&req)?.text()?, "no accept")
}

fn sse_task_ids_unique(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let calls = [s.call("counter", json!({}))?, s.call("counter", json!({}))?];
    let [a, b] = calls.each_ref().map(|c| c.task_id().ok_or("no task_id"));
    let (a, b) = (a?, b?);
    check!(a != b, "two calls share task_id {a}")
}

fn echo_exact(ctx: &Ctx) -> Check {
    let v = session(ctx)?
        .call("echo", json!({"text": "hello"}))?
        .result_json()?;
    let want = json!({"ok": true, "output": {"blocks": text_blocks("hello"),
        "metadata": {"length": 5}, "reward": 0.0, "finished": false}});
    expect_json("echo result", &v, &want)
}

fn echo_roundtrip(ctx: &Ctx, text: &str) -> Check {
    let out = session(ctx)?.ok("echo", json!({"text": text}))?;
    let got = first_text(&out)?;
    ensure!(
        got == text,
        "echo changed the text: sent {text:?}, got {got:?}"
    );
    let n = text.chars().count();
    check!(
        out["metadata"]["length"] == json!(n),
        "metadata.length is {}, expected {n}",
        out["metadata"]["length"]
    )
}

fn wire_keys_output(ctx: &Ctx) -> Check {
    let out = session(ctx)?.ok("counter", json!({}))?;
    let obj = out.as_object().ok_or("output is not an object")?;
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    ensure!(
        keys == ["blocks", "finished", "metadata", "reward"],
        "output keys are {keys:?}"
    );
    ensure!(
        out["metadata"].is_null() && out["reward"].is_null(),
        "unset metadata/reward are not null: {out}"
    );
    check!(
        out["finished"] == json!(false),
        "finished is {}",
        out["finished"]
    )
}

fn wire_keys_text_block(ctx: &Ctx) -> Check {
    let out = session(ctx)?.ok("counter", json!({}))?;
    expect_json("counter blocks", &out["blocks"], &text_blocks("1"))
}

fn submit(ctx: &Ctx, answer: &str, text: &str, reward: f64) -> Check {
    let out = session(ctx)?.ok("submit", json!({"answer": answer}))?;
    let want =
        json!({"blocks": text_blocks(text), "metadata": null, "reward": reward, "finished": true});
    expect_json("submit output", &out, &want)
}

fn counter_sequence(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    for want in ["1", "2", "3"] {
        expect_text("counter", &s.text("counter", json!({}))?, want)?;
    }
    Ok(())
}

fn image(ctx: &Ctx) -> Check {
    let out = session(ctx)?.ok("image", json!({}))?;
    let blocks = out["blocks"].as_array().ok_or("no blocks")?;
    ensure!(blocks.len() == 2, "expected 2 blocks, got {}", blocks.len());
    expect_json("text block", &blocks[0], &text_blocks("image")[0])?;
    let img = blocks[1]
        .as_object()
        .ok_or("image block is not an object")?;
    let mut keys: Vec<&str> = img.keys().map(String::as_str).collect();
    keys.sort_unstable();
    ensure!(
        keys == ["data", "detail", "mimeType", "type"],
        "image block keys are {keys:?}"
    );
    ensure!(
        img["type"] == json!("image") && img["mimeType"] == json!("image/png"),
        "image block is {}",
        blocks[1]
    );
    ensure!(img["detail"].is_null(), "image detail is not null");
    let png = b64_decode(img["data"].as_str().ok_or("data is not a string")?)?;
    check!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "data is not a PNG")
}

fn fail_ok_false(ctx: &Ctx) -> Check {
    let mut v = session(ctx)?
        .call("fail", json!({"message": "boom: intentional"}))?
        .result_json()?;
    // `reason: null` is no reason (notes row `error-reason`); the openreward server writes it.
    if let Some(obj) = v.as_object_mut() {
        obj.retain(|key, value| key != "reason" || !value.is_null());
    }
    expect_json(
        "fail result",
        &v,
        &json!({"ok": false, "error": "boom: intentional"}),
    )
}

/// Fails unless calling `name` with `input` is an `ok: false` result whose error names
/// `part` (the `what`: tool or field).
fn error_names(ctx: &Ctx, name: &str, input: Value, what: &str, part: &str) -> Check {
    let err = session(ctx)?.call(name, input)?.tool_error()?;
    check!(
        err.contains(part),
        "the error does not name the {what}: {err:?}"
    )
}

fn expect_reason(call: &Call, want: Option<&str>) -> Check {
    let got = call.tool_error_reason()?;
    check!(
        got.as_deref() == want,
        "expected reason {want:?}, got {got:?}"
    )
}

fn panic_error_event(ctx: &Ctx) -> Check {
    let call = session(ctx)?.call("panic", json!({}))?;
    call.expect_stream()?;
    ensure!(
        call.names() == ["task_id", "error"],
        "events are {:?}",
        call.names()
    );
    check!(
        !call.error_event().unwrap_or_default().is_empty(),
        "empty error message"
    )
}

fn panic_server_lives(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    ensure!(
        s.text("counter", json!({}))? == "1",
        "counter did not start at 1"
    );
    let _ = s.call("panic", json!({}))?;
    expect_status(&ctx.get("/health")?, 200)?;
    let n = s.text("counter", json!({}))?;
    check!(
        n == "2",
        "the session lost its state after a crash: counter gave {n:?}"
    )
}

fn hint_task_spec(ctx: &Ctx) -> Check {
    let spec = json!({"id": 999, "question": "Name a colour.", "answer": "blue"});
    let s = ctx.session(&json!({"task_spec": spec}))?;
    expect_text("hint", &s.text("hint", json!({}))?, "The answer is blue")
}

fn reconnect(ctx: &Ctx, sid: &str, name: &str, task_id: &str) -> Result<Call, String> {
    let body = json!({"name": name, "input": {}, "task_id": task_id});
    ctx.call(&ctx.call_request(sid, &body))
}

/// Fails unless `again` (a `what` of `first`) has `first`'s result and the counter of `s`
/// ran once for both.
fn ran_once(s: &Session<'_>, what: &str, first: &Call, again: &Call) -> Check {
    let want = first.result_json()?;
    expect_json(
        &format!("the {what}'s result"),
        &again.result_json()?,
        &want,
    )?;
    let n = s.text("counter", json!({}))?;
    check!(
        n == "2",
        "the {what} ran the tool again: next counter is {n:?}"
    )
}

fn reconnect_same(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let first = s.call("counter", json!({}))?;
    let again = reconnect(ctx, &s.sid, "counter", first.task_id().ok_or("no task_id")?)?;
    ran_once(&s, "reconnect", &first, &again)
}

fn reconnect_after_disconnect(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let req = ctx.call_request(&s.sid, &json!({"name": "sleep", "input": {"ms": 1500}}));
    let task_id = {
        let mut body = req.open_body(&ctx.target, ctx.target.timeout)?;
        let status = body.head.status;
        ensure!(status == 200, "call answered {status}");
        until_task_id(&mut body)?.0
        // the connection is dropped here, mid-call
    };
    let again = reconnect(ctx, &s.sid, "sleep", &task_id)?;
    expect_text("reconnected result", &again.text()?, "slept")
}

/// Read a call stream up to its `task_id` event: the id, and every byte read so far.
fn until_task_id(body: &mut OpenBody) -> Result<(String, Vec<u8>), String> {
    let (mut raw, mut sse) = (Vec::new(), SseDecoder::new());
    loop {
        let piece = body
            .next_piece()?
            .ok_or("the call's stream ended before its task_id")?;
        raw.extend_from_slice(&piece);
        let events = sse.push(&piece);
        if let Some(e) = events.into_iter().find(|e| e.event == EVENT_TASK_ID) {
            return Ok((e.data, raw));
        }
    }
}

/// A task id no server has seen before.
fn fresh_task_id(what: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("conformance-{what}-{nanos:x}-{n}")
}

fn client_task_id_new_call(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let id = fresh_task_id("new");
    let call = reconnect(ctx, &s.sid, "counter", &id)?;
    call.expect_stream()?;
    ensure!(
        call.task_id() == Some(id.as_str()),
        "the call did not run under the client's id: events {:?}, task_id {:?}",
        call.names(),
        call.task_id()
    );
    expect_text("counter", &call.text()?, "1")
}

fn client_task_id_runs_once(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let id = fresh_task_id("once");
    let first = reconnect(ctx, &s.sid, "counter", &id)?;
    let again = reconnect(ctx, &s.sid, "counter", &id)?;
    ran_once(&s, "resend", &first, &again)
}

fn reconnect_other_session(ctx: &Ctx) -> Check {
    let a = session(ctx)?;
    let b = session(ctx)?;
    let first = a.call("echo", json!({"text": "private to a"}))?;
    first.result_json()?;
    let id = first.task_id().ok_or("no task_id")?;
    let stolen = reconnect(ctx, &b.sid, "echo", id)?;
    ensure!(
        !String::from_utf8_lossy(&stolen.raw).contains("private to a"),
        "session b received session a's result"
    );
    let refused = stolen.error_event().is_some() || stolen.head.status >= 400;
    // Or, under the `client-task-id` row, the id is new to b: b's own echo of no text ran.
    let ran_in_b = stolen.task_id() == Some(id) && stolen.result_json().is_ok();
    check!(
        refused || ran_in_b,
        "a foreign task_id was neither refused nor a new call: {:?}",
        stolen.names()
    )
}

fn isolation_counter(ctx: &Ctx) -> Check {
    let a = session(ctx)?;
    let b = session(ctx)?;
    a.text("counter", json!({}))?;
    a.text("counter", json!({}))?;
    let nb = b.text("counter", json!({}))?;
    let na = a.text("counter", json!({}))?;
    check!(
        nb == "1" && na == "3",
        "counters interfere: b gave {nb:?}, a gave {na:?}"
    )
}

fn isolation_tasks(ctx: &Ctx) -> Check {
    let a = ctx.session_at("train", 2)?;
    let b = ctx.session_at("train", 3)?;
    let ta = a.text("submit", json!({"answer": "4"}))?;
    let tb = b.text("submit", json!({"answer": "4"}))?;
    check!(
        ta == "Correct!" && tb == "Incorrect",
        "a gave {ta:?}, b gave {tb:?}"
    )
}

fn drive_one(ctx: &Ctx, i: i64) -> Check {
    let mut s = ctx.session_at("train", i % 25)?;
    for want in ["1", "2"] {
        let n = s.text("counter", json!({}))?;
        ensure!(n == want, "session {i}: counter gave {n:?}");
    }
    let answer = (2 * (i % 25)).to_string();
    let t = s.text("submit", json!({"answer": answer}))?;
    ensure!(t == "Correct!", "session {i}: submit gave {t:?}");
    expect_status(&s.delete()?, 200)
}

fn parallel_64(ctx: &Ctx) -> Check {
    let errors: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..64)
            .map(|i| scope.spawn(move || drive_one(ctx, i)))
            .collect();
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(r) => r.err(),
                Err(_) => Some("a worker thread panicked".to_owned()),
            })
            .collect()
    });
    check!(
        errors.is_empty(),
        "{} of 64 sessions failed; first: {}",
        errors.len(),
        errors[0]
    )
}

fn concurrent_same_session(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    // The second call is sent once the first call's stream has begun (its task_id comes first:
    // clause calls.sse.task_id-first), so the server holds the first call by then: the two
    // overlap by what the server said, not by a pause that a loaded machine can outlast.
    let sleep = json!({"name": "sleep", "input": {"ms": 400}});
    let mut slow = ctx
        .call_request(&s.sid, &sleep)
        .open_body(&ctx.target, ctx.target.timeout)?;
    let (_, raw) = until_task_id(&mut slow)?;
    let fast = s.text("echo", json!({"text": "overlap"}))?;
    let slow = slow.finish(raw)?;
    let slow = Call::parse(slow.head, slow.body).text()?;
    check!(
        slow == "slept" && fast == "overlap",
        "got {slow:?} and {fast:?}"
    )
}

fn long_call(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let call = s.call_timeout("sleep", json!({"ms": 3000}), Duration::from_secs(60))?;
    expect_text("sleep", &call.text()?, "slept")
}

fn default_env(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let req = Request::new("POST", "/call")
        .sid(&s.sid)
        .header("Accept", "text/event-stream")
        .json(&json!({"name": "echo", "input": {"text": "default"}}));
    expect_text("echo", &ctx.call(&req)?.text()?, "default")
}

fn body_non_json(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    ctx.refused(ctx.raw_call_request(&s.sid, "{\"name\": \"echo\", "), 400)
}

fn body_input_not_object(ctx: &Ctx) -> Check {
    let s = session(ctx)?;
    let req = ctx.call_request(&s.sid, &json!({"name": "echo", "input": "text"}));
    let (mut conn, head) = req.open(&ctx.target, ctx.target.timeout)?;
    if head.status == 400 {
        return Ok(());
    }
    let call = Call::read(&mut conn, head, "POST")?;
    call.tool_error()
        .map(drop)
        .map_err(|e| format!("neither 400 nor ok: false: {e}"))
}

fn keepalive(ctx: &Ctx) -> Check {
    let s = ctx.session(&json!({"task_spec": task(1)}))?;
    let ms = ctx.keepalive.as_millis() as u64 + 1500;
    let timeout = ctx.keepalive * 3 + Duration::from_secs(30);
    let call = s.call_timeout("sleep", json!({"ms": ms}), timeout)?;
    ensure!(call.text()? == "slept", "sleep did not answer slept");
    let first_comment = *comment_offsets(&call.raw).first().ok_or_else(|| {
        format!(
            "no comment line in a {ms} ms call (keep-alive interval {:?})",
            ctx.keepalive
        )
    })?;
    let before = SseDecoder::new().push(&call.raw[..first_comment]);
    check!(
        !before.iter().any(|e| e.event == "end"),
        "the first comment came after end"
    )
}

fn body_unknown_fields(ctx: &Ctx) -> Check {
    let s = ctx.session_at("train", 0)?;
    let req = ctx.call_request(
        &s.sid,
        &json!({"name": "echo", "input": {"text": "extended"}, "x_extension": {"trace": 1}}),
    );
    expect_text("echo", &ctx.call(&req)?.text()?, "extended")
}
