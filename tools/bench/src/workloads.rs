//! The benchmark workloads: closed-loop tool calls on warm sessions, full episodes, a large
//! result, and idle sessions with the server's memory read around them.
//!
//! Every worker owns one keep-alive connection and (except in `episodes`) one session, and
//! issues its next request as soon as the previous one is answered. Only operations that
//! complete inside the measurement window (after the warm-up) are timed; every failure, in
//! or out of the window, is counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ors_core::types::RunToolOutput;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::client::{single_text, text_of, Conn, FailKind, Failure, Outcome, Target};
use crate::stats::{cpu_secs, Errors, Recorder};

/// The text every `echo` call sends (the bare server's canned answer carries the same).
pub const ECHO_TEXT: &str = "the quick brown fox jumps over the lazy dog";

/// How many tasks the fixture's `train` split has.
pub const TRAIN_TASKS: u64 = 25;

/// How long workers may take to finish their last operation after the window closes.
const GRACE: Duration = Duration::from_secs(20);

/// How long session set-up and tear-down may take, beyond which workers count as failed.
const SETUP_LIMIT: Duration = Duration::from_secs(120);

/// What a workload runs against and for how long.
#[derive(Debug, Clone)]
pub struct LoadOpts {
    /// The server.
    pub target: Target,
    /// Concurrent sessions (one connection each).
    pub sessions: usize,
    /// Length of the measurement window.
    pub duration: Duration,
    /// Warm-up before the window opens.
    pub warmup: Duration,
    /// Size of the `big` result.
    pub big_bytes: usize,
    /// Idle-session counts at which the server's memory is read.
    pub steps: Vec<usize>,
    /// Connections used to create and delete idle sessions.
    pub concurrency: usize,
    /// The server's process id (idle sessions only).
    pub pid: Option<u32>,
    /// When the idle workload stops creating sessions, whatever it reached.
    pub deadline: Instant,
    /// Count mode (`calls` and `episodes`): exactly this many operations in all, each timed,
    /// with no warm-up and no time window (what instruction counts are taken over).
    pub ops: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn new(warmup: Duration, duration: Duration) -> Self {
        let start = Instant::now() + warmup;
        Self {
            start,
            end: start + duration,
        }
    }

    /// The window of a timed workload, or in count mode one that holds the whole run.
    fn of(o: &LoadOpts) -> Self {
        match o.ops {
            Some(_) => Self::new(Duration::ZERO, Duration::from_secs(86_400)),
            None => Self::new(o.warmup, o.duration),
        }
    }

    fn contains(&self, t: Instant) -> bool {
        t >= self.start && t <= self.end
    }
}

/// The operations a count-mode run has left to hand out (unbounded in a timed run).
#[derive(Clone)]
struct Budget(Option<Arc<AtomicU64>>);

impl Budget {
    fn of(o: &LoadOpts) -> Self {
        Self(o.ops.map(|n| Arc::new(AtomicU64::new(n))))
    }

    /// Take one operation; false once they are all taken.
    fn take(&self) -> bool {
        self.0.as_ref().is_none_or(|left| {
            left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
        })
    }
}

/// Wait briefly after a failure that suggests the server is unreachable, so a dead server
/// costs a bounded number of errors instead of a spin.
async fn backoff(f: &Failure) {
    if matches!(f.kind, FailKind::Transport | FailKind::Timeout) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Await every handle until `deadline`; late or panicked workers are aborted and counted.
async fn join_all<T>(
    handles: Vec<JoinHandle<T>>,
    deadline: Instant,
    errors: &mut Errors,
) -> Vec<T> {
    let mut out = Vec::with_capacity(handles.len());
    let deadline = tokio::time::Instant::from_std(deadline);
    for h in handles {
        let abort = h.abort_handle();
        match tokio::time::timeout_at(deadline, h).await {
            Ok(Ok(v)) => out.push(v),
            Ok(Err(e)) => errors.add_other(format!("a worker failed: {e}")),
            Err(_) => {
                abort.abort();
                errors.add_other("a worker did not finish in time");
            }
        }
    }
    out
}

/// Create and set up one session (`create_session`, then `create`) on `conn`.
async fn open_session(conn: &mut Conn, index: u64) -> Outcome<String> {
    let sid = conn.create_session().await?;
    conn.create(&sid, index).await?;
    Ok(sid)
}

/// `n` sessions, each on its own connection; failures are counted and left out.
async fn open_sessions(target: &Target, n: usize, errors: &mut Errors) -> Vec<(Conn, String)> {
    let handles = (0..n)
        .map(|i| {
            let mut conn = Conn::new(target.clone());
            tokio::spawn(async move {
                let r = open_session(&mut conn, i as u64 % TRAIN_TASKS).await;
                (conn, r)
            })
        })
        .collect();
    let mut sessions = Vec::with_capacity(n);
    for (conn, r) in join_all(handles, Instant::now() + SETUP_LIMIT, errors).await {
        match r {
            Ok(sid) => sessions.push((conn, sid)),
            Err(f) => errors.add(&f),
        }
    }
    sessions
}

/// Delete the sessions, each on its own connection; failures are counted.
async fn close_sessions(sessions: Vec<(Conn, String)>, errors: &mut Errors) {
    let handles = sessions
        .into_iter()
        .map(|(mut conn, sid)| tokio::spawn(async move { conn.delete(&sid).await }))
        .collect();
    for r in join_all(handles, Instant::now() + SETUP_LIMIT, errors).await {
        if let Err(f) = r {
            errors.add(&f);
        }
    }
}

fn check_echo(r: &RunToolOutput) -> Outcome<()> {
    let out = single_text(r)?;
    let text = text_of(out);
    let length = out.metadata.as_ref().and_then(|m| m.get("length"));
    if text != ECHO_TEXT {
        return Err(Failure {
            kind: FailKind::Check,
            msg: format!("echo answered {text:?}"),
        });
    }
    if out.reward != Some(0.0) || out.finished || length != Some(&json!(ECHO_TEXT.len())) {
        return Err(Failure {
            kind: FailKind::Check,
            msg: "echo: reward, finished or metadata.length is wrong".into(),
        });
    }
    Ok(())
}

fn report(kind: &str, o: &LoadOpts, mut rec: Recorder, window: Duration, errors: &Errors) -> Value {
    let mut v = rec.summary(window);
    v["workload"] = json!(kind);
    v["sessions"] = json!(o.sessions);
    v["errors"] = errors.to_json();
    v
}

/// `echo` calls on `o.sessions` warm sessions.
pub async fn calls(o: &LoadOpts) -> Value {
    let mut errors = Errors::default();
    let sessions = open_sessions(&o.target, o.sessions, &mut errors).await;
    let body = Bytes::from(json!({"name": "echo", "input": {"text": ECHO_TEXT}}).to_string());
    let win = Window::of(o);
    let budget = Budget::of(o);
    let server_cpu = CpuReading::start(o, win);
    let started = Instant::now();
    let handles = sessions
        .into_iter()
        .map(|(mut conn, sid)| {
            let body = body.clone();
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut rec = Recorder::default();
                let mut errs = Errors::default();
                while Instant::now() < win.end && budget.take() {
                    let t0 = Instant::now();
                    let r = conn
                        .call(&sid, body.clone())
                        .await
                        .and_then(|r| check_echo(&r));
                    let t1 = Instant::now();
                    match r {
                        Ok(()) if win.contains(t1) => rec.record(t1 - t0),
                        Ok(()) => {}
                        Err(f) => {
                            errs.add(&f);
                            backoff(&f).await;
                        }
                    }
                }
                (rec, errs, (conn, sid))
            })
        })
        .collect();
    let mut rec = Recorder::default();
    let mut sessions = Vec::new();
    for (r, e, s) in join_all(handles, win.end + GRACE, &mut errors).await {
        rec.merge(r);
        errors.merge(e);
        sessions.push(s);
    }
    let took = started.elapsed();
    let calls = rec.ops();
    let cpu = CpuReading::finish(server_cpu).await;
    close_sessions(sessions, &mut errors).await;
    let mut v = report("calls", o, rec, window_of(o, took), &errors);
    add_server_cpu(&mut v, cpu, calls, "call");
    v
}

/// The length a rate is taken over: the window, or in count mode the whole run.
fn window_of(o: &LoadOpts, took: Duration) -> Duration {
    if o.ops.is_some() {
        took
    } else {
        o.duration
    }
}

/// The CPU time process `pid` used inside `win`, in seconds: read when the window opens and
/// when it closes, so session set-up and tear-down are left out like they are from the rate.
async fn server_cpu_over(pid: u32, win: Window) -> Option<f64> {
    let which = pid.to_string();
    tokio::time::sleep_until(win.start.into()).await;
    let before = cpu_secs(&which)?;
    tokio::time::sleep_until(win.end.into()).await;
    Some(cpu_secs(&which)? - before)
}

/// The server's CPU time over the measured operations: over the window in a timed run, from
/// before the first operation to after the last in count mode.
enum CpuReading {
    Timed(JoinHandle<Option<f64>>),
    Counted { pid: String, before: Option<f64> },
}

impl CpuReading {
    /// Start reading, when the workload was given the server's pid.
    fn start(o: &LoadOpts, win: Window) -> Option<Self> {
        let pid = o.pid?;
        Some(if o.ops.is_some() {
            let pid = pid.to_string();
            CpuReading::Counted {
                before: cpu_secs(&pid),
                pid,
            }
        } else {
            CpuReading::Timed(tokio::spawn(server_cpu_over(pid, win)))
        })
    }

    /// The CPU seconds, once the operations are over.
    async fn finish(this: Option<Self>) -> Option<f64> {
        match this? {
            CpuReading::Timed(h) => h.await.ok().flatten(),
            CpuReading::Counted { pid, before } => Some(cpu_secs(&pid)? - before?),
        }
    }
}

/// The server's CPU time over the window, and per operation.
fn add_server_cpu(v: &mut Value, cpu: Option<f64>, ops: u64, per: &str) {
    if let Some(cpu) = cpu {
        v["server_cpu_window_s"] = json!(cpu);
        if ops > 0 {
            v[format!("server_cpu_us_per_{per}")] = json!(cpu * 1e6 / ops as f64);
        }
    }
}

/// One full episode on task `index`: create_session, create, prompt, a correct `submit`
/// (checked), delete.
async fn episode(conn: &mut Conn, index: u64) -> Outcome<()> {
    let sid = conn.create_session().await?;
    let result = async {
        conn.create(&sid, index).await?;
        conn.prompt(&sid, index).await?;
        let body = json!({"name": "submit", "input": {"answer": (2 * index).to_string()}});
        let r = conn.call(&sid, Bytes::from(body.to_string())).await?;
        let out = single_text(&r)?;
        if text_of(out) != "Correct!" || out.reward != Some(1.0) || !out.finished {
            return Err(Failure {
                kind: FailKind::Check,
                msg: format!(
                    "submit of the right answer gave {:?}, reward {:?}, finished {}",
                    text_of(out),
                    out.reward,
                    out.finished
                ),
            });
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => conn.delete(&sid).await,
        Err(f) => {
            // Best effort, so a failed episode does not leave a session behind.
            let _ = conn.delete(&sid).await;
            Err(f)
        }
    }
}

/// Full episodes, `o.sessions` at a time, cycling through the `train` tasks.
pub async fn episodes(o: &LoadOpts) -> Value {
    let mut errors = Errors::default();
    let counter = Arc::new(AtomicU64::new(0));
    // Every connection is up before the clock starts: a burst of connects can meet a full
    // accept queue, and a SYN retried after 1 s is not what an episode costs.
    let dials = (0..o.sessions)
        .map(|_| {
            let mut conn = Conn::new(o.target.clone());
            tokio::spawn(async move { conn.connect().await.map(|()| conn) })
        })
        .collect();
    let mut conns = Vec::with_capacity(o.sessions);
    for r in join_all(dials, Instant::now() + SETUP_LIMIT, &mut errors).await {
        match r {
            Ok(conn) => conns.push(conn),
            Err(f) => errors.add(&f),
        }
    }
    let win = Window::of(o);
    let budget = Budget::of(o);
    let server_cpu = CpuReading::start(o, win);
    let started = Instant::now();
    let handles = conns
        .into_iter()
        .map(|mut conn| {
            let counter = counter.clone();
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut rec = Recorder::default();
                let mut errs = Errors::default();
                while Instant::now() < win.end && budget.take() {
                    let index = counter.fetch_add(1, Ordering::Relaxed) % TRAIN_TASKS;
                    let t0 = Instant::now();
                    let r = episode(&mut conn, index).await;
                    let t1 = Instant::now();
                    match r {
                        Ok(()) if win.contains(t1) => rec.record(t1 - t0),
                        Ok(()) => {}
                        Err(f) => {
                            errs.add(&f);
                            backoff(&f).await;
                        }
                    }
                }
                (rec, errs)
            })
        })
        .collect();
    let mut rec = Recorder::default();
    for (r, e) in join_all(handles, win.end + GRACE, &mut errors).await {
        rec.merge(r);
        errors.merge(e);
    }
    let took = started.elapsed();
    let episodes = rec.ops();
    let cpu = CpuReading::finish(server_cpu).await;
    let mut v = report("episodes", o, rec, window_of(o, took), &errors);
    add_server_cpu(&mut v, cpu, episodes, "episode");
    v
}

/// `big` calls of `o.big_bytes` bytes, one after another on one session.
pub async fn big(o: &LoadOpts) -> Value {
    let mut errors = Errors::default();
    let sessions = open_sessions(&o.target, 1, &mut errors).await;
    let body = Bytes::from(json!({"name": "big", "input": {"bytes": o.big_bytes}}).to_string());
    let n = o.big_bytes;
    let win = Window::new(o.warmup, o.duration);
    let mut rec = Recorder::default();
    let mut kept = Vec::new();
    for (mut conn, sid) in sessions {
        while Instant::now() < win.end {
            let t0 = Instant::now();
            let r = conn.call(&sid, body.clone()).await.and_then(|r| {
                let out = single_text(&r)?;
                let text = text_of(out);
                if text.len() == n && text.bytes().all(|b| b == b'x') {
                    Ok(())
                } else {
                    Err(Failure {
                        kind: FailKind::Check,
                        msg: format!("big answered {} bytes, not {n} x's", text.len()),
                    })
                }
            });
            let t1 = Instant::now();
            match r {
                Ok(()) if win.contains(t1) => {
                    rec.record(t1 - t0);
                    rec.bytes += n as u64;
                }
                Ok(()) => {}
                Err(f) => {
                    errors.add(&f);
                    backoff(&f).await;
                }
            }
        }
        kept.push((conn, sid));
    }
    close_sessions(kept, &mut errors).await;
    report("big", o, rec, o.duration, &errors)
}

/// The resident set size of a process, in KiB, from `/proc/PID/status`.
fn rss_kib(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no VmRSS in {path}"))
}

/// Create sessions with `concurrency` connections until `sids` holds `target` or the deadline
/// passes.
async fn grow(o: &LoadOpts, sids: &mut Vec<(String, u64)>, target: usize, errors: &mut Errors) {
    let remaining = Arc::new(AtomicU64::new(target.saturating_sub(sids.len()) as u64));
    let deadline = o.deadline;
    let handles = (0..o.concurrency)
        .map(|_| {
            let mut conn = Conn::new(o.target.clone());
            let remaining = remaining.clone();
            tokio::spawn(async move {
                let mut made = Vec::new();
                let mut errs = Errors::default();
                let mut index = 0;
                while Instant::now() < deadline
                    && remaining
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .is_ok()
                {
                    let task = index % TRAIN_TASKS;
                    match open_session(&mut conn, task).await {
                        Ok(sid) => made.push((sid, task)),
                        Err(f) => {
                            errs.add(&f);
                            backoff(&f).await;
                        }
                    }
                    index += 1;
                }
                (made, errs)
            })
        })
        .collect();
    for (made, e) in join_all(handles, deadline + GRACE, errors).await {
        sids.extend(made);
        errors.merge(e);
    }
    if sids.len() < target {
        errors.add_other(format!(
            "only {} of {target} idle sessions were created in time",
            sids.len()
        ));
    }
}

/// Delete every session with `concurrency` connections.
async fn shrink(o: &LoadOpts, sids: Vec<(String, u64)>, errors: &mut Errors) {
    let per = sids.len().div_ceil(o.concurrency.max(1)).max(1);
    let handles = sids
        .chunks(per)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            let mut conn = Conn::new(o.target.clone());
            tokio::spawn(async move {
                let mut errs = Errors::default();
                for (sid, _) in chunk {
                    if let Err(f) = conn.delete(&sid).await {
                        errs.add(&f);
                        backoff(&f).await;
                    }
                }
                errs
            })
        })
        .collect();
    for e in join_all(handles, Instant::now() + SETUP_LIMIT, errors).await {
        errors.merge(e);
    }
}

/// Idle sessions: the server's RSS before, at each step, and after deleting them all.
pub async fn idle(o: &LoadOpts) -> Value {
    let mut errors = Errors::default();
    let Some(pid) = o.pid else {
        errors.add_other("the idle workload needs --pid");
        return json!({"workload": "idle", "errors": errors.to_json()});
    };
    let settle = || tokio::time::sleep(Duration::from_millis(500));
    settle().await;
    let rss = |errors: &mut Errors| match rss_kib(pid) {
        Ok(v) => v,
        Err(e) => {
            errors.add_other(e);
            0
        }
    };
    let baseline = rss(&mut errors);
    let mut sids = Vec::new();
    let mut steps = Vec::new();
    let started = Instant::now();
    for &step in &o.steps {
        grow(o, &mut sids, step, &mut errors).await;
        let created_in = started.elapsed();
        settle().await;
        // A few sessions are checked to be live and set up, not just accepted.
        let mut conn = Conn::new(o.target.clone());
        for (sid, task) in sids.iter().step_by((sids.len() / 8).max(1)) {
            if let Err(f) = conn.prompt(sid, *task).await {
                errors.add(&f);
            }
        }
        let now = rss(&mut errors);
        let growth = now.saturating_sub(baseline);
        steps.push(json!({
            "sessions": sids.len(),
            "target": step,
            "rss_kib": now,
            "growth_kib": growth,
            "bytes_per_session": if sids.is_empty() { 0.0 } else { growth as f64 * 1024.0 / sids.len() as f64 },
            "created_per_s": sids.len() as f64 / created_in.as_secs_f64().max(1e-9),
        }));
    }
    let peak = rss(&mut errors);
    shrink(o, sids, &mut errors).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss(&mut errors);
    json!({
        "workload": "idle",
        "baseline_kib": baseline,
        "steps": steps,
        "peak_kib": peak,
        "after_delete_kib": after,
        "errors": errors.to_json(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ors_core::types::ToolOutput;

    /// A bare server on a free loopback port, serving in the background.
    async fn bare(big_bytes: usize) -> Target {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(crate::bare::run(listener, big_bytes));
        Target::parse(&format!("http://{addr}"), true).unwrap()
    }

    fn opts(target: Target, sessions: usize) -> LoadOpts {
        LoadOpts {
            target,
            sessions,
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(50),
            big_bytes: 10_000,
            steps: vec![],
            concurrency: 2,
            pid: None,
            deadline: Instant::now() + Duration::from_secs(60),
            ops: None,
        }
    }

    #[tokio::test]
    async fn every_workload_runs_clean_against_the_bare_server() {
        let target = bare(10_000).await;
        for (name, report) in [
            ("calls", calls(&opts(target.clone(), 4)).await),
            ("episodes", episodes(&opts(target.clone(), 4)).await),
            ("big", big(&opts(target.clone(), 1)).await),
        ] {
            assert_eq!(report["errors"]["count"], 0, "{name}: {report}");
            assert!(report["ops"].as_u64().unwrap_or(0) > 0, "{name}: {report}");
        }
    }

    #[tokio::test]
    async fn count_mode_runs_exactly_the_operations_asked_for() {
        let target = bare(10_000).await;
        let counted = |n| LoadOpts {
            ops: Some(n),
            // A 1 ms window would end a timed run at once: the count, not the clock, ends it.
            duration: Duration::from_millis(1),
            ..opts(target.clone(), 4)
        };
        for (name, n, report) in [
            ("calls", 37, calls(&counted(37)).await),
            ("episodes", 11, episodes(&counted(11)).await),
        ] {
            assert_eq!(report["errors"]["count"], 0, "{name}: {report}");
            assert_eq!(report["ops"], n, "{name}: {report}");
        }
    }

    #[tokio::test]
    async fn a_server_that_is_not_there_is_counted_as_errors() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let target = Target::parse(&format!("http://{addr}"), false).unwrap();
        let report = calls(&opts(target, 2)).await;
        assert!(
            report["errors"]["count"].as_u64().unwrap_or(0) >= 2,
            "{report}"
        );
        assert_eq!(report["ops"], 0);
    }

    #[test]
    fn a_wrong_echo_is_an_error() {
        let mut meta = serde_json::Map::new();
        meta.insert("length".into(), json!(ECHO_TEXT.len()));
        let good = ToolOutput::text(ECHO_TEXT)
            .with_reward(0.0)
            .with_metadata(meta.clone());
        assert!(check_echo(&RunToolOutput::Success(good.clone())).is_ok());
        let wrong_text = ToolOutput::text("something else")
            .with_reward(0.0)
            .with_metadata(meta);
        assert!(check_echo(&RunToolOutput::Success(wrong_text)).is_err());
        assert!(check_echo(&RunToolOutput::Success(good.finish())).is_err());
        assert!(check_echo(&RunToolOutput::error("no")).is_err());
    }

    #[test]
    fn only_loopback_targets_are_accepted() {
        assert!(Target::parse("http://127.0.0.1:8080", false).is_ok());
        assert!(Target::parse("http://10.1.2.3:8080", false).is_err());
        assert!(Target::parse("https://127.0.0.1:8080", false).is_err());
    }
}
