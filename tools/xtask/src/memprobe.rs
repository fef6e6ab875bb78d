//! `cargo xtask memprobe`: the memory of a `conformance` server under the three loads that
//! issue 13 found growing faster than the work, so a build can be measured before and after a
//! change (Linux: it reads `/proc`).
//!
//! - `trickle`: a request body sent a byte per TCP segment. Reported: the resident memory it
//!   added while incomplete, per byte, and scaled to a 10 MiB body (sending 10 MiB a byte at a
//!   time would take hours, so fewer bytes are sent and the cost per byte is scaled).
//! - `linger`: ten sessions each calling `big` for 64 MiB, with `ORS_LINGER_SECS=5`. Reported:
//!   the peak, and the resident memory 10 s after the last call.
//! - `json`: one call of `echo` whose 10 MiB body is mostly `[0],` repeated. Reported: the peak
//!   while it is handled, above the memory before it.
//!
//! `--server PATH` measures another build of `examples/src/bin/conformance.rs` (main's, say).

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use ors_conformance::http::{Conn, Request, Response, Target};
use serde_json::json;

use crate::procs::{reset_peak, status_kib, ServerProcess};

/// What `cargo xtask memprobe` takes.
#[derive(clap::Args)]
pub struct MemprobeArgs {
    /// The server binary to measure, a build of `examples/src/bin/conformance.rs` (default:
    /// this checkout's, built in release mode).
    #[arg(long)]
    server: Option<PathBuf>,
    /// Bytes of the trickled body.
    #[arg(long, default_value_t = 100_000)]
    trickle_bytes: usize,
    /// Run only these loads (`trickle`, `linger`, `json`), comma-separated.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

const MIB: f64 = 1024.0 * 1024.0;
/// The body size the figures are about.
const TEN_MIB: usize = 10 * 1024 * 1024;
/// The largest `big` result of the fixture.
const BIG_BYTES: u64 = 64 * 1024 * 1024;

/// Run the selected loads, each on a fresh server, and print what they cost.
pub fn run(args: MemprobeArgs) -> Result<ExitCode, String> {
    let server = match args.server {
        Some(path) => path,
        None => crate::procs::build_examples(&["conformance"], true)?.join("conformance"),
    };
    println!("memprobe: {}", server.display());
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    if wanted("trickle") {
        trickle(&server, args.trickle_bytes)?;
    }
    if wanted("linger") {
        linger(&server)?;
    }
    if wanted("json") {
        json_heavy(&server)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn start(server: &PathBuf, envs: &[(&str, &str)]) -> Result<(ServerProcess, Target), String> {
    let mut cmd = Command::new(server);
    cmd.args(["--host", "127.0.0.1", "--port", "0"])
        .env_remove("ORS_API_KEY")
        .envs(envs.iter().copied())
        .stderr(std::process::Stdio::null());
    let process = ServerProcess::start(cmd, Duration::from_secs(30))?;
    let target = Target {
        timeout: Duration::from_secs(300),
        ..Target::from_url(&process.url, None)?
    };
    Ok((process, target))
}

fn kib(pid: u32, key: &str) -> Result<u64, String> {
    status_kib(pid, key).ok_or_else(|| format!("no {key} for process {pid}"))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn ok(r: Response, what: &str) -> Result<Response, String> {
    if r.status() == 200 {
        Ok(r)
    } else {
        Err(format!("{what} answered {}: {}", r.status(), r.snippet()))
    }
}

/// `POST /create_session`, then `/create` on the first training task; the session id.
fn session(target: &Target) -> Result<String, String> {
    let r = ok(
        Request::new("POST", "/create_session").send(target)?,
        "create_session",
    )?;
    let sid = r.json()?["sid"]
        .as_str()
        .ok_or("create_session sent no sid")?
        .to_owned();
    let create = json!({"split": "train", "index": 0});
    ok(
        Request::new("POST", "/create")
            .sid(&sid)
            .json(&create)
            .send(target)?,
        "create",
    )?;
    Ok(sid)
}

fn trickle(server: &PathBuf, bytes: usize) -> Result<(), String> {
    let (process, target) = start(server, &[])?;
    let body = format!(
        "{{\"split\":\"train\"}}{}",
        " ".repeat(bytes.saturating_sub(17))
    );
    let num_tasks = |body: &str| {
        Request::new("POST", "/num_tasks")
            .header("Content-Type", "application/json")
            .body(body)
    };
    for _ in 0..3 {
        ok(
            num_tasks(r#"{"split":"train"}"#).send(&target)?,
            "num_tasks",
        )?;
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = kib(process.pid, "VmRSS")?;
    let mut conn = Conn::open(&target)?;
    let wire = num_tasks(&body).to_bytes(&target);
    let head = wire.len() - body.len();
    conn.write_all(&wire[..head])?;
    let started = Instant::now();
    for byte in &wire[head..wire.len() - 1] {
        conn.write_all(std::slice::from_ref(byte))?;
        // Paced so each byte arrives, and is read, on its own.
        std::thread::sleep(Duration::from_micros(50));
    }
    let during = kib(process.pid, "VmRSS")?;
    conn.write_all(&wire[wire.len() - 1..])?;
    ok(conn.read_response("POST")?, "the trickled num_tasks")?;
    let grew = during.saturating_sub(before) * 1024;
    let per_byte = grew as f64 / bytes as f64;
    println!(
        "trickle: {bytes} bytes a byte per segment in {:.0} s: RSS {} -> {} while incomplete \
         (+{:.1} MiB, {per_byte:.0} B per byte received; a 10 MiB body so sent: {:.0} MiB)",
        started.elapsed().as_secs_f64(),
        mib(before),
        mib(during),
        grew as f64 / MIB,
        per_byte * TEN_MIB as f64 / MIB,
    );
    Ok(())
}

fn linger(server: &PathBuf) -> Result<(), String> {
    // The result limit counts the JSON around a result's text, so a 64 MiB `big` result needs
    // a limit a little above 64 MiB.
    let (process, target) = start(
        server,
        &[
            ("ORS_LINGER_SECS", "5"),
            ("ORS_MAX_RESULT_BYTES", "100000000"),
        ],
    )?;
    let before = kib(process.pid, "VmRSS")?;
    reset_peak(process.pid)?;
    for i in 0..10 {
        let sid = session(&target)?;
        let call = json!({"name": "big", "input": {"bytes": BIG_BYTES}});
        let r = Request::new("POST", "/call")
            .sid(&sid)
            .header("Accept", "text/event-stream")
            .json(&call)
            .send(&target)?;
        let r = ok(r, "big")?;
        if (r.body.len() as u64) < BIG_BYTES {
            return Err(format!("call {i} of big sent only {} bytes", r.body.len()));
        }
    }
    let peak = kib(process.pid, "VmHWM")?;
    let after_calls = kib(process.pid, "VmRSS")?;
    std::thread::sleep(Duration::from_secs(10));
    let after = kib(process.pid, "VmRSS")?;
    println!(
        "linger: ten 64 MiB results, ORS_LINGER_SECS=5: RSS {} before, peak {}, {} after the \
         last call, {} 10 s later",
        mib(before),
        mib(peak),
        mib(after_calls),
        mib(after)
    );
    Ok(())
}

fn json_heavy(server: &PathBuf) -> Result<(), String> {
    let (process, target) = start(server, &[("ORS_MAX_BODY_BYTES", "16777216")])?;
    let sid = session(&target)?;
    let call = |body: Vec<u8>| -> Result<Response, String> {
        Request::new("POST", "/call")
            .sid(&sid)
            .header("Accept", "text/event-stream")
            .header("Content-Type", "application/json")
            .body(body)
            .send(&target)
    };
    ok(
        call(br#"{"name":"echo","input":{"text":"warm"}}"#.to_vec())?,
        "echo",
    )?;
    let head = br#"{"name":"echo","input":{"text":"hi","pad":["#;
    let tail = b"[0]]}}";
    let mut body = head.to_vec();
    while body.len() + 4 + tail.len() <= TEN_MIB {
        body.extend_from_slice(b"[0],");
    }
    body.extend_from_slice(tail);
    let size = body.len();
    std::thread::sleep(Duration::from_millis(200));
    let before = kib(process.pid, "VmRSS")?;
    reset_peak(process.pid)?;
    let r = ok(call(body)?, "echo with a JSON-heavy body")?;
    let peak = kib(process.pid, "VmHWM")?;
    let text = String::from_utf8_lossy(&r.body);
    if !text.contains(r#""text":"hi""#) {
        return Err(format!("unexpected echo result: {}", r.snippet()));
    }
    println!(
        "json: one call with a {:.1} MiB body of `[0],`: RSS {} before, peak {} (+{})",
        size as f64 / MIB,
        mib(before),
        mib(peak),
        mib(peak.saturating_sub(before))
    );
    Ok(())
}
