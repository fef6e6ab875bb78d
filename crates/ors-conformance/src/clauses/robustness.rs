//! Robustness: oversized bodies and headers, bodies that are not JSON or not UTF-8, unknown
//! and wrong methods, malformed HTTP, and the server staying up through all of it.

use std::time::Duration;

use serde_json::json;

use super::clause::{clause, Clause};
use crate::http::{Conn, Request, Response};
use crate::support::{check, ensure, expect_ok_json, expect_status, expect_text, task, Check, Ctx};

/// The robustness clauses.
pub const CLAUSES: &[Clause] = &[
    clause(
        "robustness.body.oversized-413",
        "a body over 10 MiB (Content-Length) is refused with 413",
        |ctx| oversized_body(ctx, false),
    ),
    clause(
        "robustness.body.oversized-chunked-413",
        "a chunked body growing over 10 MiB is refused with 413",
        |ctx| oversized_body(ctx, true),
    ),
    clause(
        "robustness.header.oversized",
        "a 1 MiB header is refused (400/431 or connection closed), never 5xx",
        oversized_header,
    ),
    clause(
        "robustness.header.many",
        "a request with 500 headers is answered 2xx or 4xx, never 5xx",
        many_headers,
    ),
    clause(
        "robustness.json.not-json-400",
        "a body that is not JSON is 400 with a detail (notes row `bad-body-400`)",
        |ctx| ctx.refused(post_body(ctx, "/tasks", "split=train"), 400),
    ),
    clause(
        "robustness.json.wrong-shape-400",
        "a JSON body of the wrong shape (an array) is 400 (notes row `bad-body-400`)",
        |ctx| ctx.refused(post_body(ctx, "/tasks", "[\"train\"]"), 400),
    ),
    clause(
        "robustness.json.empty-body-400",
        "an empty body where JSON is required is 400 (notes row `bad-body-400`)",
        |ctx| ctx.refused(post_body(ctx, "/num_tasks", ""), 400),
    ),
    clause(
        "robustness.json.deep-nesting",
        "100 000 levels of JSON nesting are refused with 4xx, never 5xx",
        deep_nesting,
    ),
    clause(
        "robustness.utf8.body-400",
        "a JSON body with invalid UTF-8 is 400",
        |ctx| {
            ctx.refused(
                post_body(ctx, "/tasks", b"{\"split\": \"tr\xffin\"}".to_vec()),
                400,
            )
        },
    ),
    clause(
        "robustness.utf8.call-body-400",
        "a call body with invalid UTF-8 is 400",
        bad_utf8_call,
    ),
    clause(
        "robustness.utf8.session-header",
        "an X-Session-ID that is not UTF-8 is 400 or 404, never 5xx",
        bad_utf8_sid,
    ),
    clause(
        "robustness.method.unknown",
        "an unknown method (BREW) is 400, 405 or 501",
        unknown_method,
    ),
    clause(
        "robustness.method.wrong-405",
        "a known route with the wrong method is 405",
        wrong_method,
    ),
    clause(
        "robustness.content-type.absent",
        "a JSON body without Content-Type is accepted",
        |ctx| num_tasks_with(ctx, &[]),
    ),
    clause(
        "robustness.content-type.charset",
        "Content-Type: application/json; charset=utf-8 is accepted",
        |ctx| num_tasks_with(ctx, &[("Content-Type", "application/json; charset=utf-8")]),
    ),
    clause(
        "robustness.http.keep-alive-reuse",
        "several requests on one keep-alive connection are all answered",
        keep_alive_reuse,
    ),
    clause(
        "robustness.http.garbage",
        "a request line that is not HTTP is refused with 400 or a closed connection",
        garbage,
    ),
    clause(
        "robustness.http.truncated-body",
        "a body shorter than its Content-Length does not hang or crash the server",
        truncated_body,
    ),
    clause(
        "robustness.http.query-string",
        "a query string on a route is ignored",
        query_string,
    ),
    clause(
        "robustness.server-lives",
        "after every malformed request the server still serves a full episode",
        server_lives,
    ),
];

const LIMIT_PLUS: usize = 11 * 1024 * 1024;
const PIECE: usize = 64 * 1024;

/// Write `body` in pieces, stopping quietly when the server closes the connection (it may
/// answer before reading everything); then read the response.
fn push_and_read(
    conn: &mut Conn,
    pieces: impl Iterator<Item = Vec<u8>>,
) -> Result<Response, String> {
    if !conn.poll_readable(Duration::from_millis(500))? {
        for piece in pieces {
            if conn.write_all(&piece).is_err() {
                break;
            }
        }
    }
    conn.read_response("POST")
}

fn oversized_body(ctx: &Ctx, chunked: bool) -> Check {
    let framing = if chunked {
        ("Transfer-Encoding", "chunked".to_owned())
    } else {
        ("Content-Length", LIMIT_PLUS.to_string())
    };
    let head = post_body(ctx, "/tasks", Vec::new())
        .header(framing.0, framing.1)
        .to_bytes(&ctx.target);
    let mut conn = Conn::open_with_timeout(&ctx.target, Duration::from_secs(60))?;
    conn.write_all(&head)?;
    // A JSON string value that never ends within the limit.
    let mut first = b"{\"split\": \"".to_vec();
    first.resize(PIECE, b'x');
    let n = LIMIT_PLUS / PIECE;
    let pieces = (0..n).map(move |i| {
        let data = if i == 0 {
            first.clone()
        } else {
            vec![b'x'; PIECE]
        };
        if chunked {
            let mut framed = [format!("{:x}\r\n", data.len()).as_bytes(), &data, b"\r\n"].concat();
            if i + 1 == n {
                framed.extend_from_slice(b"0\r\n\r\n");
            }
            framed
        } else {
            data
        }
    });
    let r = push_and_read(&mut conn, pieces)
        .map_err(|e| format!("no response to an 11 MiB body: {e}"))?;
    expect_status(&r, 413)
}

/// Send raw bytes; `Ok(None)` when the server closed the connection without answering.
fn raw(ctx: &Ctx, bytes: &[u8], timeout: Duration) -> Result<Option<Response>, String> {
    let mut conn = Conn::open_with_timeout(&ctx.target, timeout)?;
    let _ = conn.write_all(bytes);
    match conn.read_response("GET") {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.starts_with("timed out") => Err(e),
        Err(_) => Ok(None),
    }
}

fn oversized_header(ctx: &Ctx) -> Check {
    let req = Request::new("GET", "/health").header("X-Filler", "a".repeat(1024 * 1024));
    if let Some(r) = raw(ctx, &req.to_bytes(&ctx.target), Duration::from_secs(20))? {
        ensure!(
            matches!(r.status(), 400 | 413 | 431),
            "a 1 MiB header got {}",
            r.status()
        );
    }
    Ok(())
}

fn many_headers(ctx: &Ctx) -> Check {
    let req = (0..500).fold(Request::new("GET", "/health"), |req, i| {
        req.header(&format!("X-Filler-{i}"), "v")
    });
    let r = raw(ctx, &req.to_bytes(&ctx.target), Duration::from_secs(20))?
        .ok_or("the connection was closed without a response")?;
    check!(
        (200..500).contains(&r.status()),
        "500 headers got {}",
        r.status()
    )
}

/// `POST /{env}{route}` with a raw body labelled as JSON.
fn post_body(ctx: &Ctx, route: &str, body: impl Into<Vec<u8>>) -> Request {
    Request::new("POST", &ctx.path(route))
        .header("Content-Type", "application/json")
        .body(body)
}

fn deep_nesting(ctx: &Ctx) -> Check {
    let depth = 100_000;
    let mut body = b"{\"split\": ".to_vec();
    body.extend(std::iter::repeat_n(b'[', depth));
    body.extend(std::iter::repeat_n(b']', depth));
    body.push(b'}');
    let r = ctx.send(post_body(ctx, "/tasks", body))?;
    ensure!(
        (400..500).contains(&r.status()),
        "deep nesting got {}: {}",
        r.status(),
        r.snippet()
    );
    expect_status(&ctx.get("/health")?, 200)
}

fn bad_utf8_call(ctx: &Ctx) -> Check {
    let s = ctx.session(&json!({"task_spec": task(1)}))?;
    let body = b"{\"name\": \"echo\", \"input\": {\"text\": \"\xc3\x28\"}}";
    ctx.refused(ctx.raw_call_request(&s.sid, body.to_vec()), 400)
}

fn bad_utf8_sid(ctx: &Ctx) -> Check {
    let req = Request::new("GET", &ctx.path("/prompt")).header("X-Session-ID", b"\xff\xfe-bad");
    let r = ctx.send(req)?;
    check!(
        matches!(r.status(), 400 | 404),
        "a non-UTF-8 session id got {}",
        r.status()
    )
}

fn unknown_method(ctx: &Ctx) -> Check {
    let r = ctx.send(Request::new("BREW", "/health"))?;
    check!(
        matches!(r.status(), 400 | 405 | 501),
        "BREW /health got {}",
        r.status()
    )
}

fn wrong_method(ctx: &Ctx) -> Check {
    for (method, path) in [
        ("GET", "/create".to_owned()),
        ("DELETE", "/health".to_owned()),
        ("GET", ctx.path("/tasks")),
        ("GET", ctx.path("/call")),
        ("POST", ctx.path("/tools")),
    ] {
        let r = ctx.send(Request::new(method, &path))?;
        ensure!(r.status() == 405, "{method} {path} got {}", r.status());
    }
    Ok(())
}

/// Fails unless `POST /{env}/num_tasks` of split test, sent with these headers, is answered.
fn num_tasks_with(ctx: &Ctx, headers: &[(&str, &str)]) -> Check {
    let req = Request::new("POST", &ctx.path("/num_tasks")).body("{\"split\": \"test\"}");
    let req = headers.iter().fold(req, |r, (k, v)| r.header(k, v));
    let v = expect_ok_json(&ctx.send(req)?)?;
    check!(v == json!({"num_tasks": 5}), "got {v}")
}

fn keep_alive_reuse(ctx: &Ctx) -> Check {
    let mut conn = Conn::open(&ctx.target)?;
    for i in 0..3 {
        let req = if i == 1 {
            Request::new("POST", &ctx.path("/num_tasks")).json(&json!({"split": "hard"}))
        } else {
            Request::new("GET", "/health")
        };
        conn.write_all(&req.to_bytes(&ctx.target))?;
        let r = conn
            .read_response(&req.method)
            .map_err(|e| format!("request {} on the connection: {e}", i + 1))?;
        expect_status(&r, 200)?;
    }
    Ok(())
}

fn garbage(ctx: &Ctx) -> Check {
    if let Some(r) = raw(ctx, b"HELLO THERE\r\n\r\n", Duration::from_secs(10))? {
        ensure!(r.status() == 400, "garbage got {}", r.status());
    }
    Ok(())
}

fn truncated_body(ctx: &Ctx) -> Check {
    let req = post_body(ctx, "/tasks", Vec::new()).header("Content-Length", "100");
    let mut conn = Conn::open_with_timeout(&ctx.target, Duration::from_secs(10))?;
    conn.write_all(&req.to_bytes(&ctx.target))?;
    conn.write_all(b"{\"split\":")?;
    conn.shutdown_write();
    match conn.read_response("POST") {
        Ok(r) => ensure!(r.status() == 400, "a truncated body got {}", r.status()),
        Err(e) => ensure!(
            !e.starts_with("timed out"),
            "the server hung on a truncated body"
        ),
    }
    expect_status(&ctx.get("/health")?, 200)
}

fn query_string(ctx: &Ctx) -> Check {
    let v = expect_ok_json(&ctx.get("/health?probe=1&x=%20")?)?;
    ensure!(v == json!({"status": "ok"}), "got {v}");
    let v = expect_ok_json(&ctx.get(&format!("{}?verbose=1", ctx.path("/splits")))?)?;
    check!(
        v.as_array().is_some_and(|a| a.len() == 3),
        "splits with a query string: {v}"
    )
}

fn server_lives(ctx: &Ctx) -> Check {
    expect_status(&ctx.get("/health")?, 200)?;
    let s = ctx.session_at("hard", 2)?;
    let t = s.text("submit", json!({"answer": "404"}))?;
    expect_text("submit", &t, "Correct!")
}
