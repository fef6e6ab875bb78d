//! A hostile ORS server for trying a client by hand: it answers the session routes of the
//! environment `env` like a real server, and every tool call with the chosen misbehaviour. It
//! plays the behaviours of the client's hostile-server tests (the same scripted fake).
//!
//! ```text
//! cargo run --release -p ors-client --example hostile_server -- chunk-flood 127.0.0.1:9999
//! ors --url http://127.0.0.1:9999 call env --split train --index 0 tool '{}'
//! ```
//!
//! Behaviours: `chunk-flood` (a `task_id`, then 4 KiB `chunk` events forever), `line-flood`
//! (an `end` line that never ends), `drip` (a `task_id`, then a byte a second, no line break),
//! `silent` (accepts the call and says nothing).

use std::time::Duration;

#[allow(dead_code)]
// The fake server is test support shared with the client tests, which may unwrap.
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../tests/it/fake.rs"]
mod fake;

use fake::{call_start, drip, event, write_forever, Fake, FakeResponse};

fn behaviour(name: &str) -> Option<fn() -> FakeResponse> {
    let f: fn() -> FakeResponse = match name {
        "chunk-flood" => || {
            let head = call_start("flood", b"");
            let chunk = event("chunk", &"x".repeat(4096));
            FakeResponse::raw(move |conn| async move {
                let sent = write_forever(conn, &head, &chunk).await;
                eprintln!("chunk flood: the client went away after {sent} bytes");
            })
        },
        "line-flood" => || {
            let head = call_start("flood", b"event: end\ndata: ");
            FakeResponse::raw(move |conn| async move {
                let sent = write_forever(conn, &head, &[b'x'; 4096]).await;
                eprintln!("line flood: the client went away after {sent} bytes");
            })
        },
        "drip" => || {
            let head = call_start("drip", b": ");
            FakeResponse::raw(move |conn| async move {
                drip(conn, &head, b"z", Duration::from_secs(1)).await;
                eprintln!("drip: the client went away");
            })
        },
        "silent" => || {
            FakeResponse::raw(|conn| async move {
                let _held_open = conn;
                tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
            })
        },
        _ => return None,
    };
    Some(f)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "chunk-flood".to_owned());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:9999".to_owned());
    let Some(play) = behaviour(&name) else {
        eprintln!("unknown behaviour {name:?}: chunk-flood, line-flood, drip or silent");
        std::process::exit(2);
    };
    let server = Fake::start_on(&addr, move |req, _| match req.line.as_str() {
        "POST /create_session" => FakeResponse::json(200, r#"{"sid":"hostile"}"#),
        "GET /env/prompt" => FakeResponse::json(200, r#"[{"type":"text","text":"beware"}]"#),
        "POST /env/call" => play(),
        "POST /create" | "POST /delete" | "POST /ping" | "POST /delete_session" => {
            FakeResponse::json(200, "{}")
        }
        _ => FakeResponse::json(404, r#"{"detail":"Not Found"}"#),
    })
    .await;
    eprintln!("{name} on {} (environment `env`); Ctrl-C stops", server.url);
    let _ = tokio::signal::ctrl_c().await;
}
