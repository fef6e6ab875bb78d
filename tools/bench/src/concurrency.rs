//! The concurrency workload (the method of OpenEnv's scaling study): N sessions, each on its
//! own connection, each calling `sleep {"ms": M}` in a loop for the window. What counts is
//! whether every call succeeds and how far its latency is above M.
//!
//! Thousands of connections from one process need care: the sessions are spread over a few
//! threads each running a current-thread runtime (one busy runtime would be the bottleneck,
//! and a work-stealing one wastes the cores the server needs on stealing), and the
//! connections leave from several loopback addresses (127.0.0.1, .2, ...) so no one source
//! address runs out of ephemeral ports, however many connections linger in TIME_WAIT from an
//! earlier run.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::{Barrier, Semaphore};

use crate::client::{single_text, text_of, Conn, FailKind, Failure, Target};
use crate::stats::{cpu_secs, Errors, Recorder};

/// How many sessions each thread sets up at once: a burst of thousands of connects would
/// overflow the server's accept queue and cost SYN retries of a second each.
const SETUP_AT_ONCE: usize = 256;

/// How long setting one session up may take.
const SETUP_LIMIT: Duration = Duration::from_secs(240);

/// The call each session makes in its loop.
#[derive(Debug, Clone)]
pub enum Call {
    /// The fixture's `sleep {"ms": M}` (M from [`Opts::sleep`]), answered `slept`.
    Sleep,
    /// Any tool, whose every answer must be ok and contain `expect` (the `code` example's
    /// `run` with `sleep 1`, in a sandbox per episode).
    Tool {
        /// The tool.
        name: String,
        /// Its input.
        input: Value,
        /// Text its answer must contain.
        expect: String,
    },
}

/// What the workload does.
#[derive(Debug, Clone)]
pub struct Opts {
    /// The server.
    pub target: Target,
    /// What each session calls.
    pub call: Call,
    /// Concurrent sessions, one connection each.
    pub sessions: usize,
    /// How long each `sleep` call sleeps.
    pub sleep: Duration,
    /// How long sessions keep calling.
    pub duration: Duration,
    /// The first part of the window whose calls count for success but not for latency: every
    /// session starts at once, and the first round is one burst of N calls.
    pub warmup: Duration,
    /// Threads (one current-thread runtime each).
    pub threads: usize,
    /// Loopback source addresses to spread the connections over.
    pub sources: u8,
    /// Make each session's first call while it is set up, before the window: for a tool whose
    /// first call starts something the later ones reuse (the `code` example's sandbox), so
    /// the window measures sessions that hold it live. The first calls are reported apart
    /// (`prime`: their latencies, and how long setting every session up took).
    pub prime: bool,
}

/// The loopback source address of connection `i`.
fn source(i: usize, sources: u8) -> IpAddr {
    let n = sources.max(1);
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1 + (i % usize::from(n)) as u8))
}

/// What one thread's sessions did.
#[derive(Default)]
struct Tally {
    /// Latencies of successful calls after the warm-up.
    steady: Recorder,
    /// Latencies of every successful call.
    all: Recorder,
    /// Latencies of the first calls made while setting up (with [`Opts::prime`]).
    prime: Recorder,
    ok: u64,
    failed: u64,
    sessions_set_up: u64,
    /// Sessions whose every call succeeded (and that made at least one).
    sessions_clean: u64,
    errors: Errors,
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.steady.merge(o.steady);
        self.all.merge(o.all);
        self.prime.merge(o.prime);
        self.ok += o.ok;
        self.failed += o.failed;
        self.sessions_set_up += o.sessions_set_up;
        self.sessions_clean += o.sessions_clean;
        self.errors.merge(o.errors);
    }
}

/// Whether an answer is what `call` must answer.
fn check(call: &Call, r: &ors_core::types::RunToolOutput) -> Result<(), Failure> {
    let out = single_text(r)?;
    let (fine, tool) = match call {
        Call::Sleep => (text_of(out) == "slept", "sleep"),
        Call::Tool { name, expect, .. } => (text_of(out).contains(expect.as_str()), name.as_str()),
    };
    if fine {
        Ok(())
    } else {
        Err(Failure {
            kind: FailKind::Check,
            msg: format!("{tool} answered {:?}", text_of(out)),
        })
    }
}

/// What every session shares: the gate of set-ups at once (per thread), the barrier all
/// sessions start calling from, and the wall-clock time they started.
#[derive(Clone)]
struct Shared {
    opts: Arc<Opts>,
    gate: Arc<Semaphore>,
    barrier: Arc<Barrier>,
    started: Arc<OnceLock<SystemTime>>,
}

/// One session: set up (at most `SETUP_AT_ONCE` per thread at once), wait until every
/// session is set up (or failed to be), call `sleep` until the end, delete.
async fn session(mut conn: Conn, index: u64, shared: Shared) -> Tally {
    let mut t = Tally::default();
    let o = &shared.opts;
    let body = Bytes::from(
        match &o.call {
            Call::Sleep => json!({"name": "sleep", "input": {"ms": o.sleep.as_millis() as u64}}),
            Call::Tool { name, input, .. } => json!({"name": name, "input": input}),
        }
        .to_string(),
    );
    let set_up = async {
        let _permit = shared.gate.acquire().await;
        let sid = conn.create_session().await?;
        conn.create(&sid, index % 25).await?;
        if o.prime {
            let t0 = tokio::time::Instant::now();
            let r = conn.call(&sid, body.clone()).await?;
            check(&o.call, &r)?;
            t.prime.record(t0.elapsed());
        }
        Ok::<_, Failure>(sid)
    };
    let set_up = tokio::time::timeout(SETUP_LIMIT, set_up).await;
    if shared.barrier.wait().await.is_leader() {
        let _ = shared.started.set(SystemTime::now());
    }
    let start = tokio::time::Instant::now();
    let sid = match set_up {
        Ok(Ok(sid)) => sid,
        Ok(Err(f)) => {
            t.failed += 1;
            t.errors.add(&f);
            return t;
        }
        Err(_) => {
            t.failed += 1;
            t.errors
                .add_other(format!("the session was not set up within {SETUP_LIMIT:?}"));
            return t;
        }
    };
    t.sessions_set_up = 1;
    let steady_from = start + o.warmup;
    let end = start + o.duration;
    while tokio::time::Instant::now() < end {
        let t0 = tokio::time::Instant::now();
        let r = conn
            .call(&sid, body.clone())
            .await
            .and_then(|r| check(&o.call, &r));
        let took = t0.elapsed();
        match r {
            Ok(()) => {
                t.ok += 1;
                t.all.record(took);
                if t0 >= steady_from {
                    t.steady.record(took);
                }
            }
            Err(f) => {
                t.failed += 1;
                t.errors.add(&f);
                if matches!(f.kind, FailKind::Transport | FailKind::Timeout) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    if t.failed == 0 && t.ok > 0 {
        t.sessions_clean = 1;
    }
    if let Err(f) = conn.delete(&sid).await {
        t.errors.add(&f);
    }
    t
}

/// One thread's share of the sessions, on a current-thread runtime.
fn thread(first: usize, count: usize, shared: Shared) -> Result<Tally, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    Ok(rt.block_on(async move {
        let shared = Shared {
            gate: Arc::new(Semaphore::new(SETUP_AT_ONCE)),
            ..shared
        };
        let handles: Vec<_> = (first..first + count)
            .map(|i| {
                let conn =
                    Conn::with_source(shared.opts.target.clone(), source(i, shared.opts.sources));
                tokio::spawn(session(conn, i as u64, shared.clone()))
            })
            .collect();
        let mut tally = Tally::default();
        // Set-up, the window, and a last call (REQUEST_TIMEOUT bounds it) with room to spare.
        let deadline = tokio::time::Instant::now()
            + SETUP_LIMIT
            + shared.opts.duration
            + Duration::from_secs(60);
        for h in handles {
            let abort = h.abort_handle();
            match tokio::time::timeout_at(deadline, h).await {
                Ok(Ok(t)) => tally.merge(t),
                Ok(Err(e)) => {
                    tally.failed += 1;
                    tally
                        .errors
                        .add_other(format!("a session task failed: {e}"));
                }
                Err(_) => {
                    abort.abort();
                    tally.failed += 1;
                    tally.errors.add_other("a session did not finish in time");
                }
            }
        }
        tally
    }))
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Run the workload; the report's `window_start_unix_ms` / `window_end_unix_ms` let the
/// caller read the server's CPU and memory over the same window.
pub fn run(o: Opts) -> Value {
    let o = Arc::new(o);
    let threads = o.threads.clamp(1, o.sessions.max(1));
    let per = o.sessions.div_ceil(threads);
    let shared = Shared {
        opts: o.clone(),
        gate: Arc::new(Semaphore::new(SETUP_AT_ONCE)),
        barrier: Arc::new(Barrier::new(o.sessions)),
        started: Arc::new(OnceLock::new()),
    };
    let cpu0 = cpu_secs("self");
    let began = SystemTime::now();
    let handles: Vec<_> = (0..threads)
        .map(|k| {
            let first = k * per;
            let count = per.min(o.sessions.saturating_sub(first));
            let shared = shared.clone();
            std::thread::spawn(move || thread(first, count, shared))
        })
        .collect();
    let mut tally = Tally::default();
    for h in handles {
        match h.join() {
            Ok(Ok(t)) => tally.merge(t),
            Ok(Err(e)) => tally.errors.add_other(e),
            Err(_) => tally.errors.add_other("a load thread panicked"),
        }
    }
    let client_cpu = match (cpu0, cpu_secs("self")) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let steady_window = o.duration.saturating_sub(o.warmup);
    let mut steady = tally.steady.summary(steady_window);
    let all = tally.all.summary(o.duration);
    let attempted = tally.ok + tally.failed;
    steady["workload"] = json!("concurrency");
    steady["sessions"] = json!(o.sessions);
    steady["sessions_set_up"] = json!(tally.sessions_set_up);
    steady["sessions_clean"] = json!(tally.sessions_clean);
    steady["calls_ok"] = json!(tally.ok);
    steady["calls_failed"] = json!(tally.failed);
    steady["success_rate"] = json!(if attempted == 0 {
        0.0
    } else {
        tally.ok as f64 / attempted as f64
    });
    steady["sleep_ms"] = json!(o.sleep.as_millis() as u64);
    steady["duration_s"] = json!(o.duration.as_secs_f64());
    steady["warmup_s"] = json!(o.warmup.as_secs_f64());
    steady["p50_all_ms"] = all["p50_ms"].clone();
    steady["p99_all_ms"] = all["p99_ms"].clone();
    steady["max_all_ms"] = all["max_ms"].clone();
    if let Some(&started) = shared.started.get() {
        steady["window_start_unix_ms"] = json!(unix_ms(started));
        steady["window_end_unix_ms"] = json!(unix_ms(started + o.duration));
    }
    if o.prime {
        let set_up_s = shared
            .started
            .get()
            .and_then(|s| s.duration_since(began).ok())
            .map(|d| d.as_secs_f64());
        let mut prime = tally
            .prime
            .summary(Duration::from_secs_f64(set_up_s.unwrap_or(0.0)));
        prime["set_up_s"] = json!(set_up_s);
        steady["prime"] = prime;
    }
    steady["client_threads"] = json!(threads);
    steady["client_cpu_s"] = json!(client_cpu);
    steady["errors"] = tally.errors.to_json();
    steady
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_cycle_over_loopback_addresses() {
        assert_eq!(source(0, 4).to_string(), "127.0.0.1");
        assert_eq!(source(3, 4).to_string(), "127.0.0.4");
        assert_eq!(source(4, 4).to_string(), "127.0.0.1");
        assert_eq!(source(9, 0).to_string(), "127.0.0.1");
    }

    /// The workload against the bare server, each session making its first call while set up
    /// or not.
    async fn against_the_bare_server(prime: bool) -> Value {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(crate::bare::run(listener, 10));
        let target = Target::parse(&format!("http://{addr}"), true).unwrap();
        tokio::task::spawn_blocking(move || {
            run(Opts {
                target,
                call: Call::Sleep,
                sessions: 8,
                sleep: Duration::from_millis(20),
                duration: Duration::from_millis(300),
                warmup: Duration::from_millis(50),
                threads: 2,
                sources: 2,
                prime,
            })
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_call_succeeds_against_the_bare_server() {
        let report = against_the_bare_server(false).await;
        assert_eq!(report["errors"]["count"], 0, "{report}");
        assert_eq!(report["success_rate"], 1.0, "{report}");
        assert_eq!(report["sessions_clean"], 8, "{report}");
        assert!(report["calls_ok"].as_u64().unwrap() >= 8, "{report}");
        assert!(report.get("prime").is_none(), "{report}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn primed_sessions_make_their_first_call_before_the_window() {
        let report = against_the_bare_server(true).await;
        assert_eq!(report["errors"]["count"], 0, "{report}");
        // One first call per session, reported apart from the window's calls.
        assert_eq!(report["prime"]["ops"], 8, "{report}");
        assert!(
            report["prime"]["set_up_s"].as_f64().unwrap() > 0.0,
            "{report}"
        );
        assert_eq!(report["sessions_clean"], 8, "{report}");
    }
}
