//! One episode through nginx and what became of it, many of them at once, and the record of
//! a step (its checks, its episodes, its line of the table).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use ors_client::{Environment, Error, TaskRef};
use ors_conformance::http::{Request, Target};
use serde_json::json;

/// An episode that takes longer than this has hung.
const EPISODE_LIMIT: Duration = Duration::from_secs(60);

/// How one episode went.
#[derive(Debug, Clone)]
pub(super) struct Outcome {
    /// The replica its session id names (once `/create_session` answered).
    pub(super) replica: Option<u32>,
    /// When the episode began asking for its session (`/create_session`), since the step
    /// began.
    pub(super) began: Duration,
    /// `None`: done, reward checked; else the kind of error.
    pub(super) error: Option<String>,
    /// The client's error message, when the episode failed with one.
    pub(super) message: Option<String>,
    /// How long the episode took, to its end or its failure.
    pub(super) took: Duration,
}

/// The replica number in the first group of a session id.
pub(super) fn replica_of(sid: &str) -> Option<u32> {
    let group = sid.get(..8)?;
    if group.bytes().all(|b| b.is_ascii_digit()) {
        group.parse().ok()
    } else {
        None
    }
}

/// The replica of a whole session id (36 characters), else `None`.
pub(super) fn replica_of_id(token: &str) -> Option<u32> {
    (token.len() == 36 && token.as_bytes()[8] == b'-')
        .then(|| replica_of(token))
        .flatten()
}

/// What kind of failure an error is, for the table.
pub(super) fn kind(e: &Error) -> String {
    match e {
        Error::SessionTerminated { .. } => "session_terminated".into(),
        Error::Http { status, code, .. } => {
            format!("http_{status}_{}", code.as_deref().unwrap_or("-"))
        }
        Error::Transport(_) => "transport".into(),
        Error::Timeout(_) => "timeout".into(),
        Error::ToolCrashed { .. } => "tool_crashed".into(),
        Error::Protocol(_) => "protocol".into(),
        _ => "other".into(),
    }
}

/// One full episode through nginx: open at `train[i % 25]`, prompt, an optional `sleep`,
/// submit (every fifth answer wrong on purpose: reward 0), check the reward, close.
pub(super) async fn episode(env: Environment, i: usize, sleep_ms: u64, t0: Instant) -> Outcome {
    let started = Instant::now();
    let mut out = Outcome {
        replica: None,
        began: t0.elapsed(),
        error: None,
        message: None,
        took: Duration::ZERO,
    };
    let index = (i % 25) as i64;
    let run = async {
        let session = env.session(TaskRef::at("train", index)).open().await?;
        out.replica = replica_of(session.sid());
        let prompt = session.prompt().await?;
        if prompt.is_empty() {
            return Ok(Some("empty_prompt".to_owned()));
        }
        if sleep_ms > 0 {
            session.call("sleep", json!({ "ms": sleep_ms })).await?;
        }
        let right = i % 5 != 0;
        let answer = if right {
            (2 * index).to_string()
        } else {
            "wrong".to_owned()
        };
        let result = session.call("submit", json!({ "answer": answer })).await?;
        let expected = if right { 1.0 } else { 0.0 };
        if result.reward != Some(expected) || !result.finished {
            return Ok(Some("wrong_reward".to_owned()));
        }
        session.close().await?;
        Ok::<_, Error>(None)
    };
    out.error = match tokio::time::timeout(EPISODE_LIMIT, run).await {
        Ok(Ok(problem)) => problem,
        Ok(Err(e)) => {
            // Opening failed after `/create_session` answered: the id is in the error
            // (nginx's answer for a replica that is gone names it).
            if out.replica.is_none() {
                out.replica = e
                    .to_string()
                    .split(['\'', '"', ' '])
                    .find_map(replica_of_id);
            }
            out.message = Some(e.to_string());
            Some(kind(&e))
        }
        Err(_) => Some("hang".to_owned()),
    };
    out.took = started.elapsed();
    out
}

/// Run `n` episodes at `concurrency`; `done` counts the finished ones as they finish.
pub(super) async fn episodes(
    env: &Environment,
    n: usize,
    concurrency: usize,
    sleep_ms: u64,
    done: Arc<AtomicUsize>,
) -> Vec<Outcome> {
    let t0 = Instant::now();
    futures_util::stream::iter(0..n)
        .map(|i| {
            let (env, done) = (env.clone(), Arc::clone(&done));
            async move {
                let out = episode(env, i, sleep_ms, t0).await;
                done.fetch_add(1, Ordering::Relaxed);
                out
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await
}

/// Wait until `done` reaches `n`.
pub(super) async fn until(done: &AtomicUsize, n: usize) {
    while done.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A replica's `/metrics`, read directly (not through nginx).
pub(super) async fn metrics(port: u16) -> Result<String, String> {
    tokio::task::spawn_blocking(move || {
        let target = Target::from_addr(([127, 0, 0, 1], port).into());
        let r = Request::new("GET", "/metrics").send(&target)?;
        if r.status() == 200 {
            Ok(r.text())
        } else {
            Err(format!("/metrics of port {port}: {}", r.status()))
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The value of one series in a metrics text (0 when absent).
pub(super) fn series(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Percentile of durations, in milliseconds.
pub(super) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// The record of one step: its checks and its episodes.
pub(super) struct Step {
    pub(super) name: &'static str,
    pub(super) failures: Vec<String>,
    pub(super) outcomes: Vec<Outcome>,
}

impl Step {
    pub(super) fn new(name: &'static str) -> Self {
        Self {
            name,
            failures: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    pub(super) fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.failures.push(what.into());
        }
    }

    /// Fail the step if any of its episodes failed: "N {what}".
    pub(super) fn check_no_failed_episode(&mut self, what: &str) {
        let failed = self.outcomes.iter().filter(|o| o.error.is_some()).count();
        self.check(failed == 0, format!("{failed} {what}"));
    }

    pub(super) fn print(&self) {
        let mut per_replica: BTreeMap<String, usize> = BTreeMap::new();
        let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
        for o in &self.outcomes {
            let r = o.replica.map_or("-".to_owned(), |n| n.to_string());
            *per_replica.entry(r).or_default() += 1;
            if let Some(e) = &o.error {
                *errors.entry(e.as_str()).or_default() += 1;
            }
        }
        let mut took: Vec<Duration> = self.outcomes.iter().map(|o| o.took).collect();
        took.sort_unstable();
        let verdict = if self.failures.is_empty() {
            "PASS"
        } else {
            "FAIL"
        };
        println!("{verdict}  {}", self.name);
        if !self.outcomes.is_empty() {
            let spread: Vec<String> = per_replica
                .iter()
                .map(|(r, n)| format!("r{r}={n}"))
                .collect();
            let errs: Vec<String> = errors.iter().map(|(k, n)| format!("{k}={n}")).collect();
            println!(
                "      episodes {:>5}  per replica [{}]  errors [{}]  p50 {:.0} ms  p99 {:.0} ms",
                self.outcomes.len(),
                spread.join(" "),
                errs.join(" "),
                percentile(&took, 0.5),
                percentile(&took, 0.99)
            );
        }
        for f in &self.failures {
            println!("      - {f}");
        }
    }
}
