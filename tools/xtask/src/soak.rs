//! `cargo xtask soak --minutes N`: the release `conformance` server under a mixed workload for
//! N minutes (whole episodes, long calls, big results, slow readers, connections dropped
//! mid-request and mid-call, sessions deleted mid-call), its RSS and open file descriptors
//! sampled every few seconds.
//!
//! It passes when nothing was lost (every call of a live session answered, every `counter`
//! exact, every deleted call ended) and both curves are flat after the warm-up (the first
//! fifth of the run): the median of the last third of the samples is within
//! [`RSS_TOLERANCE_PCT`] % (or [`RSS_TOLERANCE_MIB`] MiB, whichever is larger) of the first
//! third's for memory, and within [`FD_TOLERANCE`] descriptors for files.

use std::fmt::Write as _;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ors_client::{Client, Environment, Session};
use ors_conformance::http::{Conn, Request, Target};
use serde_json::{json, Value};

use crate::bench::servers::{cpu_secs, rss_kib};
use crate::procs::ServerProcess;

/// Arguments of `cargo xtask soak`.
#[derive(clap::Args)]
pub struct SoakArgs {
    /// How long the workload runs, in minutes.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Seconds between two samples of the server.
    #[arg(long, default_value_t = 5.0)]
    pub sample_secs: f64,
    /// Also write the samples and counts as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// Growth of the RSS median allowed after the warm-up, percent...
pub const RSS_TOLERANCE_PCT: f64 = 10.0;
/// ...or MiB, whichever is larger.
pub const RSS_TOLERANCE_MIB: f64 = 8.0;
/// Growth of the open-descriptor median allowed after the warm-up.
pub const FD_TOLERANCE: f64 = 32.0;
/// The share of the run that is warm-up, left out of the flatness check.
const WARMUP_SHARE: f64 = 0.2;

/// The environment of the fixture server.
const ENV: &str = "conformance";
/// How long a session deleted mid-call may take to end that call.
const DELETE_ENDS_CALL_WITHIN: Duration = Duration::from_secs(15);

/// What the workload did, shared by its workers.
#[derive(Default)]
struct Counts {
    episodes: AtomicU64,
    calls: AtomicU64,
    long_calls: AtomicU64,
    big_bytes: AtomicU64,
    slow_reads: AtomicU64,
    drops: AtomicU64,
    deletes_mid_call: AtomicU64,
    /// Failures: what was lost or wrong, with a few messages kept.
    failures: AtomicU64,
    messages: Mutex<Vec<String>>,
}

impl Counts {
    fn fail(&self, what: impl Into<String>) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut m) = self.messages.lock() {
            if m.len() < 20 {
                m.push(what.into());
            }
        }
    }

    fn add(n: &AtomicU64, by: u64) {
        n.fetch_add(by, Ordering::Relaxed);
    }

    fn to_json(&self) -> Value {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        json!({
            "episodes": get(&self.episodes),
            "calls": get(&self.calls),
            "long_calls": get(&self.long_calls),
            "big_result_bytes": get(&self.big_bytes),
            "slow_reads": get(&self.slow_reads),
            "drops": get(&self.drops),
            "deletes_mid_call": get(&self.deletes_mid_call),
            "failures": get(&self.failures),
            "failure_messages": self.messages.lock().map(|m| m.clone()).unwrap_or_default(),
        })
    }
}

/// Everything a worker needs.
#[derive(Clone)]
struct Ctx {
    env: Environment,
    target: Target,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
}

impl Ctx {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    async fn open(&self, index: u64) -> Option<Session> {
        match self.env.session_at("train", (index % 25) as i64).await {
            Ok(s) => Some(s),
            Err(e) => {
                self.counts.fail(format!("open a session: {e}"));
                None
            }
        }
    }
}

fn text(out: &ors_client::ToolOutput) -> &str {
    out.blocks.first().and_then(|b| b.as_text()).unwrap_or("")
}

/// Whole episodes: prompt, `counter` five times (exact), `echo`, the right answer, delete.
async fn episodes(ctx: Ctx, worker: u64) {
    let mut n = worker;
    while ctx.running() {
        n += 7;
        let Some(s) = ctx.open(n).await else { continue };
        let task = n % 25;
        let mut ok = s.prompt().await.is_ok();
        for expected in 1..=5u64 {
            match s.call("counter", json!({})).await {
                Ok(out) if text(&out) == expected.to_string() => {}
                Ok(out) => {
                    ok = false;
                    ctx.counts.fail(format!(
                        "counter answered {:?}, expected {expected}",
                        text(&out)
                    ));
                }
                Err(e) => {
                    ok = false;
                    ctx.counts.fail(format!("counter: {e}"));
                }
            }
        }
        let echo = s.call("echo", json!({"text": "soak"})).await;
        let submit = s
            .call("submit", json!({"answer": (2 * task).to_string()}))
            .await;
        match (echo, submit) {
            (Ok(_), Ok(out)) if out.reward == Some(1.0) => {}
            (e, sub) => {
                ok = false;
                ctx.counts.fail(format!(
                    "episode end: echo {:?}, submit {:?}",
                    e.err().map(|e| e.to_string()),
                    sub.map(|o| o.reward).map_err(|e| e.to_string())
                ));
            }
        }
        if let Err(e) = s.close().await {
            ctx.counts.fail(format!("delete: {e}"));
        }
        Counts::add(&ctx.counts.calls, 7);
        if ok {
            Counts::add(&ctx.counts.episodes, 1);
        }
    }
}

/// Long calls: `sleep` 5 s, three per session.
async fn long_calls(ctx: Ctx, worker: u64) {
    let mut n = worker;
    while ctx.running() {
        n += 1;
        let Some(s) = ctx.open(n).await else { continue };
        for _ in 0..3 {
            match s.call("sleep", json!({"ms": 5000})).await {
                Ok(out) if text(&out) == "slept" => Counts::add(&ctx.counts.long_calls, 1),
                Ok(out) => ctx.counts.fail(format!("sleep answered {:?}", text(&out))),
                Err(e) => ctx.counts.fail(format!("sleep: {e}")),
            }
        }
        let _ = s.close().await;
    }
}

/// Big results: 4 MiB each, their length checked.
async fn big_results(ctx: Ctx, worker: u64) {
    const BYTES: usize = 4 << 20;
    let mut n = worker;
    while ctx.running() {
        n += 1;
        let Some(s) = ctx.open(n).await else { continue };
        for _ in 0..5 {
            match s.call("big", json!({"bytes": BYTES})).await {
                Ok(out) if text(&out).len() == BYTES => {
                    Counts::add(&ctx.counts.big_bytes, BYTES as u64)
                }
                Ok(out) => ctx
                    .counts
                    .fail(format!("big answered {} bytes", text(&out).len())),
                Err(e) => ctx.counts.fail(format!("big: {e}")),
            }
        }
        let _ = s.close().await;
    }
}

/// A call of `tool` with `input` on `sid`, as raw bytes for the blocking client.
fn call_request(sid: &str, tool: &str, input: Value) -> Request {
    Request::new("POST", &format!("/{ENV}/call"))
        .sid(sid)
        .header("Accept", "text/event-stream")
        .json(&json!({"name": tool, "input": input}))
}

/// Slow readers: a 1 MiB result read 16 KiB at a time, 20 ms apart; every other one is
/// abandoned half-way. Blocking (the raw client), so on its own thread.
fn slow_reader(ctx: &Ctx, sid: &str, round: u64) -> Result<(), String> {
    let req = call_request(sid, "big", json!({"bytes": 1 << 20}));
    let mut body = req.open_body(&ctx.target, Duration::from_secs(30))?;
    let mut got = 0usize;
    let give_up_at = if round % 2 == 0 {
        usize::MAX
    } else {
        512 << 10
    };
    while let Some(piece) = body.next_piece()? {
        got += piece.len();
        if got >= give_up_at {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if got < 1 << 20 {
        return Err(format!("a slow reader got {got} bytes of a 1 MiB result"));
    }
    Ok(())
}

/// Dropped connections: a call sent whole and the connection closed before the answer, a
/// request cut in the middle of its body, a connection opened and closed. The session must
/// still work afterwards.
fn drops(ctx: &Ctx, sid: &str) -> Result<(), String> {
    let call = call_request(sid, "sleep", json!({"ms": 2000})).to_bytes(&ctx.target);
    let mut conn = Conn::open(&ctx.target)?;
    conn.write_all(&call)?;
    drop(conn);
    let mut conn = Conn::open(&ctx.target)?;
    conn.write_all(&call[..call.len() - 5])?;
    drop(conn);
    drop(Conn::open(&ctx.target)?);
    Ok(())
}

/// The blocking workers: slow readers and drops, each on a session of its own.
async fn raw_worker(ctx: Ctx, worker: u64, slow: bool) {
    let mut n = worker;
    while ctx.running() {
        n += 1;
        let Some(s) = ctx.open(n).await else { continue };
        let sid = s.sid().to_owned();
        let c = ctx.clone();
        let done = tokio::task::spawn_blocking(move || {
            if slow {
                slow_reader(&c, &sid, n)
            } else {
                drops(&c, &sid)
            }
        })
        .await
        .unwrap_or_else(|e| Err(format!("the worker thread failed: {e}")));
        match done {
            Ok(()) => Counts::add(
                if slow {
                    &ctx.counts.slow_reads
                } else {
                    &ctx.counts.drops
                },
                1,
            ),
            Err(e) => ctx.counts.fail(e),
        }
        // The session still answers.
        if let Err(e) = s.call("echo", json!({"text": "still here"})).await {
            ctx.counts.fail(format!(
                "echo after a {}: {e}",
                if slow { "slow read" } else { "drop" }
            ));
        }
        let _ = s.close().await;
    }
}

/// Deletes mid-call: a 60 s `sleep` started, the session deleted a second later; the call
/// must end (with an error) well before its sleep would.
async fn deletes(ctx: Ctx, worker: u64) {
    let mut n = worker;
    while ctx.running() {
        n += 1;
        let Some(s) = ctx.open(n).await else { continue };
        let s = Arc::new(s);
        let sid = s.sid().to_owned();
        let caller = s.clone();
        let call = tokio::spawn(async move { caller.call("sleep", json!({"ms": 60_000})).await });
        tokio::time::sleep(Duration::from_secs(1)).await;
        let target = ctx.target.clone();
        let deleted = tokio::task::spawn_blocking(move || {
            Request::new("POST", "/delete").sid(&sid).send(&target)
        })
        .await;
        match deleted {
            Ok(Ok(r)) if r.status() == 200 => {}
            Ok(Ok(r)) => ctx.counts.fail(format!(
                "delete mid-call answered {}: {}",
                r.status(),
                r.snippet()
            )),
            Ok(Err(e)) => ctx.counts.fail(format!("delete mid-call: {e}")),
            Err(e) => ctx.counts.fail(format!("delete mid-call: {e}")),
        }
        match tokio::time::timeout(DELETE_ENDS_CALL_WITHIN, call).await {
            Ok(Ok(Err(_))) => Counts::add(&ctx.counts.deletes_mid_call, 1),
            Ok(Ok(Ok(_))) => ctx.counts.fail("a call of a deleted session gave a result"),
            Ok(Err(e)) => ctx.counts.fail(format!("the call task failed: {e}")),
            Err(_) => ctx.counts.fail(format!(
                "a call of a deleted session did not end within {DELETE_ENDS_CALL_WITHIN:?}"
            )),
        }
    }
}

/// One sample of the server.
#[derive(Clone, Copy)]
struct Sample {
    secs: f64,
    rss_kib: u64,
    fds: u64,
    cpu_s: f64,
    calls: u64,
}

fn open_fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The flatness verdict: (first-third median, last-third median, allowed growth, flat?).
fn flat(values: &[f64], tolerance: impl Fn(f64) -> f64) -> (f64, f64, f64, bool) {
    let third = values.len() / 3;
    let first = median(values[..third].to_vec());
    let last = median(values[values.len() - third..].to_vec());
    let allowed = tolerance(first);
    (first, last, allowed, third > 0 && last - first <= allowed)
}

/// The verdicts on memory and descriptors after the warm-up, as text and JSON.
fn judge(samples: &[Sample], total_secs: f64) -> (bool, String, Value) {
    let after: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.secs >= total_secs * WARMUP_SHARE)
        .collect();
    let rss: Vec<f64> = after.iter().map(|s| s.rss_kib as f64 / 1024.0).collect();
    let fds: Vec<f64> = after.iter().map(|s| s.fds as f64).collect();
    let (r0, r1, r_allowed, r_ok) = flat(&rss, |first| {
        (first * RSS_TOLERANCE_PCT / 100.0).max(RSS_TOLERANCE_MIB)
    });
    let (f0, f1, f_allowed, f_ok) = flat(&fds, |_| FD_TOLERANCE);
    let text = format!(
        "RSS median {r0:.1} -> {r1:.1} MiB (allowed +{r_allowed:.1}): {}; open fds median \
         {f0:.0} -> {f1:.0} (allowed +{f_allowed:.0}): {}",
        if r_ok { "flat" } else { "GROWING" },
        if f_ok { "flat" } else { "GROWING" },
    );
    let v = json!({
        "rss_mib_first_third": r0, "rss_mib_last_third": r1, "rss_allowed_mib": r_allowed,
        "rss_flat": r_ok,
        "fds_first_third": f0, "fds_last_third": f1, "fds_allowed": f_allowed, "fds_flat": f_ok,
    });
    (r_ok && f_ok, text, v)
}

/// The curve in about a dozen rows: per stretch, RSS and fds (median and max) and calls.
fn curve(samples: &[Sample], total_secs: f64) -> String {
    let mut out = String::new();
    let rows = 12usize;
    let step = (total_secs / rows as f64).max(1.0);
    let _ = writeln!(
        out,
        "{:>9}  {:>10}  {:>10}  {:>7}  {:>7}  {:>6}  {:>9}",
        "minute", "RSS MiB", "max MiB", "fds", "max fds", "CPU %", "calls"
    );
    let mut from = 0.0;
    let mut prev: Option<&Sample> = None;
    while from < total_secs + step {
        let part: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.secs >= from && s.secs < from + step)
            .collect();
        if let (Some(first), Some(last)) = (part.first(), part.last()) {
            let rss = median(part.iter().map(|s| s.rss_kib as f64 / 1024.0).collect());
            let max_rss = part.iter().map(|s| s.rss_kib).max().unwrap_or(0) as f64 / 1024.0;
            let fds = median(part.iter().map(|s| s.fds as f64).collect());
            let max_fds = part.iter().map(|s| s.fds).max().unwrap_or(0);
            let base = prev.unwrap_or(first);
            let span = last.secs - base.secs;
            let cpu = if span > 0.0 {
                (last.cpu_s - base.cpu_s) / span * 100.0
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "{:>4.1}-{:<4.1}  {rss:>10.1}  {max_rss:>10.1}  {fds:>7.0}  {max_fds:>7}  \
                 {cpu:>6.0}  {:>9}",
                from / 60.0,
                (from + step) / 60.0,
                last.calls
            );
            prev = Some(last);
        }
        from += step;
    }
    out
}

/// `cargo xtask soak`.
pub fn run(args: SoakArgs) -> Result<ExitCode, String> {
    let total = Duration::from_secs_f64((args.minutes * 60.0).max(10.0));
    let dir = crate::procs::build_examples(&["conformance"], true)?;
    let mut cmd = Command::new(dir.join("conformance"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    for var in [
        "RUST_LOG",
        "ORS_API_KEY",
        "ORS_MAX_SESSIONS",
        "ORS_LINGER_SECS",
    ] {
        cmd.env_remove(var);
    }
    let server = ServerProcess::start(cmd, Duration::from_secs(60))?;
    let pid = server.pid;
    eprintln!(
        "xtask: soak: {} for {:.1} min, sampled every {} s",
        server.url,
        total.as_secs_f64() / 60.0,
        args.sample_secs
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let counts = Arc::new(Counts::default());
    let ctx = Ctx {
        env: Client::builder(server.url.clone())
            .build()
            .map_err(|e| e.to_string())?
            .environment(ENV),
        target: Target::from_url(&server.url, None)?,
        counts: counts.clone(),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let started = Instant::now();
    let samples = rt.block_on(async {
        let mut workers = Vec::new();
        for w in 0..6 {
            workers.push(tokio::spawn(episodes(ctx.clone(), w)));
        }
        for w in 0..2 {
            workers.push(tokio::spawn(long_calls(ctx.clone(), 100 + w)));
            workers.push(tokio::spawn(raw_worker(ctx.clone(), 200 + w, true)));
            workers.push(tokio::spawn(raw_worker(ctx.clone(), 300 + w, false)));
            workers.push(tokio::spawn(deletes(ctx.clone(), 400 + w)));
        }
        workers.push(tokio::spawn(big_results(ctx.clone(), 500)));
        let mut samples = Vec::new();
        let every = Duration::from_secs_f64(args.sample_secs.max(0.5));
        let mut last_print = Instant::now();
        while started.elapsed() < total {
            tokio::time::sleep(every).await;
            let (Some(rss), Some(fds), Some(cpu)) = (rss_kib(pid), open_fds(pid), cpu_secs(pid))
            else {
                counts.fail("the server is gone");
                break;
            };
            samples.push(Sample {
                secs: started.elapsed().as_secs_f64(),
                rss_kib: rss,
                fds,
                cpu_s: cpu,
                calls: counts.calls.load(Ordering::Relaxed),
            });
            if last_print.elapsed() >= Duration::from_secs(60) {
                last_print = Instant::now();
                eprintln!(
                    "xtask: soak: {:.1} min: RSS {:.1} MiB, {fds} fds, {} failures",
                    started.elapsed().as_secs_f64() / 60.0,
                    rss as f64 / 1024.0,
                    counts.failures.load(Ordering::Relaxed)
                );
            }
        }
        ctx.stop.store(true, Ordering::Relaxed);
        for w in workers {
            if tokio::time::timeout(Duration::from_secs(120), w)
                .await
                .is_err()
            {
                counts.fail("a worker did not stop within 120 s");
            }
        }
        samples
    });
    let alive = crate::bench::servers::alive(pid);
    // What a quiet server keeps once every session is closed.
    std::thread::sleep(Duration::from_secs(5));
    let settled = (rss_kib(pid), open_fds(pid));
    drop(server);
    let total_secs = total.as_secs_f64();
    let (flat_ok, verdict, verdict_json) = judge(&samples, total_secs);
    let failures = counts.failures.load(Ordering::Relaxed);
    let summary = counts.to_json();
    println!(
        "\nSoak: {:.1} min, {} samples (warm-up: the first {:.0}%)",
        total_secs / 60.0,
        samples.len(),
        WARMUP_SHARE * 100.0
    );
    print!("{}", curve(&samples, total_secs));
    println!(
        "work: {} episodes, {} calls in them, {} long calls, {:.0} MiB of big results, {} slow \
         reads, {} drop rounds, {} deletes mid-call; {failures} failures",
        summary["episodes"],
        summary["calls"],
        summary["long_calls"],
        summary["big_result_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        summary["slow_reads"],
        summary["drops"],
        summary["deletes_mid_call"],
    );
    for m in summary["failure_messages"].as_array().into_iter().flatten() {
        println!("  {}", m.as_str().unwrap_or_default());
    }
    println!("{verdict}");
    if let (Some(rss), Some(fds)) = settled {
        println!(
            "idle 5 s after the workload: RSS {:.1} MiB, {fds} fds",
            rss as f64 / 1024.0
        );
    }
    let passed = flat_ok && failures == 0 && alive;
    if let Some(path) = &args.json {
        let doc = json!({
            "minutes": total_secs / 60.0,
            "sample_secs": args.sample_secs,
            "samples": samples.iter().map(|s| json!({
                "secs": s.secs, "rss_kib": s.rss_kib, "fds": s.fds, "cpu_s": s.cpu_s,
                "calls": s.calls,
            })).collect::<Vec<_>>(),
            "work": summary,
            "verdict": verdict_json,
            "server_survived": alive,
            "passed": passed,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if passed {
        println!("soak: PASSED");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "soak: FAILED{}",
            if alive { "" } else { " (the server died)" }
        );
        Ok(ExitCode::FAILURE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rss_mib: &[u64], fds: &[u64]) -> Vec<Sample> {
        rss_mib
            .iter()
            .zip(fds)
            .enumerate()
            .map(|(i, (r, f))| Sample {
                secs: i as f64,
                rss_kib: r * 1024,
                fds: *f,
                cpu_s: 0.0,
                calls: 0,
            })
            .collect()
    }

    #[test]
    fn flat_after_the_warm_up_passes_and_growth_fails() {
        // A warm-up climb (the first fifth) does not count; the rest is flat.
        let rss = [10, 40, 50, 50, 51, 50, 52, 50, 51, 50];
        let fds = [5, 30, 40, 41, 40, 42, 40, 41, 40, 41];
        assert!(judge(&samples(&rss, &fds), 10.0).0);
        // Memory that keeps growing fails.
        let rss = [10, 40, 50, 60, 70, 80, 90, 100, 110, 120];
        assert!(!judge(&samples(&rss, &fds), 10.0).0);
        // So do descriptors.
        let rss = [10, 40, 50, 50, 51, 50, 52, 50, 51, 50];
        let fds = [5, 30, 40, 60, 80, 100, 120, 140, 160, 180];
        assert!(!judge(&samples(&rss, &fds), 10.0).0);
    }
}
