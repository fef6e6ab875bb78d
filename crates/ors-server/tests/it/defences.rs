//! Defences against clients that hold the server's resources: trickled and stalled request
//! bodies, bodies that together exceed the server's budget, connections past the limit, and a
//! client that half-closes its connection after sending its request.

use std::time::Duration;

use ors_conformance::http::{Conn, Response, Target};
use ors_server::{RunningServer, ServerStats};
use serde_json::json;

use crate::support::*;

/// A raw connection to `addr` with a read timeout that turns a hang into a failure.
fn connect(addr: std::net::SocketAddr) -> Result<Conn, String> {
    Conn::open(&Target {
        timeout: Duration::from_secs(30),
        ..Target::from_addr(addr)
    })
}

/// The head of a `POST path` announcing a body of `length` bytes.
fn post_head(path: &str, length: usize) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    .into_bytes()
}

/// Fails unless the server closed `conn` (a read sees the end, not a timeout).
fn expect_closed(conn: &mut Conn) -> Result<(), String> {
    match conn.read_head() {
        Err(e) if e.contains("closed") => Ok(()),
        other => Err(format!("the connection stayed open: {other:?}")),
    }
}

/// Wait (up to 10 s) until `f` holds for the server's stats.
async fn wait_stats(server: &RunningServer, what: &str, f: impl Fn(&ServerStats) -> bool) {
    for _ in 0..1000 {
        if f(&server.stats()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: never happened; stats {:?}", server.stats());
}

fn assert_error(r: &Response, status: u16, code: &str) {
    assert_eq!(
        (r.status(), r.code().as_deref()),
        (status, Some(code)),
        "{}",
        r.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stalls_is_408_and_its_connection_closed() {
    let server = start_with(|c| c.body_timeout = Duration::from_millis(300)).await;
    let addr = server.local_addr();
    blocking(move || {
        let mut conn = connect(addr)?;
        conn.write_all(&post_head("/lab/num_tasks", 100))?;
        conn.write_all(br#"{"split""#)?;
        let r = conn.read_response("POST")?;
        assert_error(&r, 408, "request_timeout");
        assert_eq!(
            r.detail().as_deref(),
            Some("the request body did not arrive within 0.3 s")
        );
        assert_eq!(r.header("connection"), Some("close"));
        expect_closed(&mut conn)
    })
    .await;
    assert_eq!(server.stats().body_bytes, 0, "the buffer was released");
    server.shutdown().await;
}

/// Read from `tcp` until the server closes it (within a minute of paused time); what arrived
/// and when the close came.
async fn read_until_closed(tcp: &mut tokio::net::TcpStream) -> (String, tokio::time::Instant) {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(60), tcp.read(&mut buf)).await;
        match read.expect("the server closed the connection within a minute") {
            Ok(0) | Err(_) => {
                return (
                    String::from_utf8_lossy(&got).into_owned(),
                    tokio::time::Instant::now(),
                )
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

// Paused time: the server's idle watch sleeps on tokio's clock, which jumps to the next timer
// whenever the runtime has nothing to do (the client here is async, so nothing holds it).
#[tokio::test(start_paused = true)]
async fn a_connection_without_a_request_is_closed_after_the_head_timeout() {
    use tokio::io::AsyncWriteExt as _;
    let server = start_with(|c| {
        c.head_timeout = Duration::from_secs(10);
        // No keep-alive comments: the long call below writes nothing while it runs.
        c.keepalive = Duration::from_secs(3600);
    })
    .await;
    let addr = server.local_addr();
    let within_timeout = |since: tokio::time::Instant, closed: tokio::time::Instant| {
        let idle = closed - since;
        assert!(
            idle >= Duration::from_secs(10) && idle <= Duration::from_secs(15),
            "closed after {idle:?} without a request (timeout 10 s)"
        );
    };

    // Half a head, then silence: closed unanswered.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\n")
        .await
        .unwrap();
    let sent = tokio::time::Instant::now();
    let (got, closed) = read_until_closed(&mut tcp).await;
    assert_eq!(got, "", "no answer to half a head");
    within_timeout(sent, closed);

    // A request answered, then no next one: closed a timeout after the answer.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let sent = tokio::time::Instant::now();
    let (got, closed) = read_until_closed(&mut tcp).await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    within_timeout(sent, closed);

    // A call that runs for 25 s, three timeouts, without writing: its connection is answering
    // a request, not idle, and the result arrives.
    let sid = ready_episode(addr, task(1)).await;
    let body = json!({"name": "sleep", "input": {"ms": 25_000, "key": "head-timeout-call"}});
    let (stream, _, raw) = open_call(addr, &sid, &body.to_string()).await;
    // Reading the stream runs on a blocking thread, which holds the clock: move it by hand,
    // a second at a time so the idle watch looks at the connection every 5 s.
    for _ in 0..26 {
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(text_of(&finish(stream, raw).await), "slept 1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_beyond_the_servers_budget_are_503_until_it_frees() {
    let server = start_with(|c| {
        c.max_body_bytes = 1000;
        c.max_body_bytes_in_flight = 1000;
    })
    .await;
    let addr = server.local_addr();
    // One body announced at the limit and left unfinished holds the whole budget.
    let body = format!("{{\"split\": \"train\"}}{}", " ".repeat(1000 - 18));
    assert_eq!(body.len(), 1000);
    let mut slow = blocking(move || {
        let mut conn = connect(addr)?;
        conn.write_all(&post_head("/lab/num_tasks", 1000))?;
        conn.write_all(&body.as_bytes()[..10])?;
        Ok((conn, body))
    })
    .await;
    wait_stats(&server, "the first body held", |s| s.body_bytes == 1000).await;

    let r = post(addr, "/lab/num_tasks", r#"{"split": "train"}"#).await;
    r.assert_error(503, "overloaded");
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        r.detail().contains("1000 bytes of request bodies"),
        "{}",
        r.detail()
    );

    // The first body completes and is answered; its bytes go back to the budget.
    let first = blocking(move || {
        slow.0.write_all(&slow.1.as_bytes()[10..])?;
        slow.0.read_response("POST")
    })
    .await;
    assert_eq!(first.status(), 200, "{}", first.text());
    wait_stats(&server, "the budget given back", |s| s.body_bytes == 0).await;
    let r = post(addr, "/lab/num_tasks", r#"{"split": "train"}"#).await;
    assert_eq!(r.json(), json!({"num_tasks": 5}));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_answered_503_and_closed() {
    let server = start_with(|c| c.max_connections = 3).await;
    let addr = server.local_addr();
    let mut idle =
        blocking(move || (0..3).map(|_| connect(addr)).collect::<Result<Vec<_>, _>>()).await;
    wait_stats(&server, "three connections open", |s| s.connections == 3).await;

    blocking(move || {
        let mut conn = connect(addr)?;
        conn.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")?;
        let r = conn.read_response("GET")?;
        assert_error(&r, 503, "overloaded");
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(
            r.detail()
                .is_some_and(|d| d.contains("limit of 3 open connections")),
            "{}",
            r.text()
        );
        expect_closed(&mut conn)
    })
    .await;
    assert_eq!(
        server.stats().connections,
        3,
        "the refused one never counted"
    );

    // Room again once one of them goes.
    drop(idle.pop());
    wait_stats(&server, "a connection closed", |s| s.connections == 2).await;
    assert_eq!(get(addr, "/health").await.status, 200);
    drop(idle);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_half_closes_still_gets_its_streamed_result() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let r = blocking(move || {
        let body = json!({"name": "sleep", "input": {"ms": 300, "key": "half-close"}}).to_string();
        let mut conn = connect(addr)?;
        let head = format!(
            "POST /lab/call HTTP/1.1\r\nHost: t\r\nX-Session-ID: {sid}\r\n\
             Accept: text/event-stream\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes())?;
        conn.write_all(body.as_bytes())?;
        // Nothing more to say: the client shuts its sending side, as `curl -T` and some
        // proxies do, and waits for the answer.
        conn.shutdown_write();
        conn.read_response("POST")
    })
    .await;
    assert_eq!(r.status(), 200, "{}", r.text());
    let names: Vec<String> = r.events().into_iter().map(|e| e.event).collect();
    assert_eq!(names, ["task_id", "end"], "{}", r.text());
    assert_eq!(count("half-close"), 1);
    server.shutdown().await;
}

/// Set in the child process that serves for `a_trickled_body_costs_its_bytes_not_a_buffer_each`.
#[cfg(target_os = "linux")]
const TRICKLE_CHILD: &str = "ORS_SERVER_IT_TRICKLE_CHILD";

/// The child's half of `a_trickled_body_costs_its_bytes_not_a_buffer_each`: serve, print the
/// address, and stop when stdin closes. In a normal run (without the variable) it does nothing.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickle_child() {
    if std::env::var_os(TRICKLE_CHILD).is_none() {
        return;
    }
    let server = start().await;
    println!("serving {}", server.local_addr());
    tokio::task::spawn_blocking(|| {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut rest);
    })
    .await
    .unwrap();
    server.shutdown().await;
}

/// The resident memory of a process, in bytes.
#[cfg(target_os = "linux")]
fn rss(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status");
    kb * 1024
}

/// A body sent a byte per TCP segment used to keep each segment's frame, and with it one of
/// hyper's read buffers (kilobytes), until the body was complete: ~4.4 KB of memory per byte
/// received. Now every frame is copied into one buffer and released. Measured as the RSS of a
/// server in a child process (a copy of this test binary), so nothing else of this binary's
/// tests is counted.
#[cfg(target_os = "linux")]
#[test]
fn a_trickled_body_costs_its_bytes_not_a_buffer_each() {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};

    /// Bytes trickled; at the old cost they would pin ~90 MB.
    const BYTES: usize = 20_000;
    /// Growth allowed for the whole body (its buffer is 32 KiB; the rest is noise).
    const ALLOWED: usize = 8 << 20;

    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "defences::trickle_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TRICKLE_CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the test binary runs");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr: std::net::SocketAddr = lines
        // libtest may print "test ... " on the same line first.
        .find_map(|l| Some(l.ok()?.split_once("serving ")?.1.to_owned()))
        .expect("the child serves")
        .parse()
        .expect("an address");
    let result = std::panic::catch_unwind(|| {
        // Warm up: the first requests allocate what every request needs.
        for _ in 0..3 {
            let mut conn = connect(addr).unwrap();
            conn.write_all(&post_head("/lab/num_tasks", 18)).unwrap();
            conn.write_all(br#"{"split": "train"}"#).unwrap();
            assert_eq!(conn.read_response("POST").unwrap().status(), 200);
        }
        let before = rss(child.id());
        let body = format!("{{\"split\": \"train\"}}{}", " ".repeat(BYTES - 18));
        let mut conn = connect(addr).unwrap();
        conn.write_all(&post_head("/lab/num_tasks", BYTES)).unwrap();
        for byte in &body.as_bytes()[..BYTES - 1] {
            conn.write_all(std::slice::from_ref(byte)).unwrap();
            // Paced, so each byte arrives and is read on its own, as from a slow sender.
            std::thread::sleep(Duration::from_micros(50));
        }
        // Measured while the body is still incomplete: whatever it pins is pinned now.
        let during = rss(child.id());
        conn.write_all(&body.as_bytes()[BYTES - 1..]).unwrap();
        let r = conn.read_response("POST").unwrap();
        assert_eq!(r.status(), 200, "{}", r.text());
        let grew = during.saturating_sub(before);
        assert!(
            grew < ALLOWED,
            "a {BYTES}-byte body sent a byte at a time grew the server by {grew} bytes \
             ({} per byte)",
            grew / BYTES
        );
    });
    drop(child.stdin.take());
    let _ = child.wait();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
