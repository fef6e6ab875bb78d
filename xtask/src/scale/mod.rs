//! `cargo xtask scale`: replicas of the conformance example behind a real nginx running the
//! shipped `deploy/nginx/ors.conf`, driven through nginx only with our client: episodes
//! spread over the replicas, long calls and reconnects, a replica added, one killed, one
//! drained. Prints a table and `N passed, M failed`.

mod deploy;
mod nginx;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use ors_client::{Client, Environment, Error, TaskRef};
use ors_conformance::http::{Request, Target};
use serde_json::json;

use crate::procs::ServerProcess;

/// Arguments of `cargo xtask scale`.
#[derive(clap::Args)]
pub struct ScaleArgs {
    /// Fewer episodes per step (what `cargo xtask test` runs).
    #[arg(long)]
    pub quick: bool,
}

/// The key every replica shares, so each accepts the others' ids (only the replica an id
/// names ever sees it, through nginx; the key is what a deployment must share anyway).
const SESSION_KEY: &str = "cargo xtask scale: one key for all replicas";
/// An episode that takes longer than this has hung.
const EPISODE_LIMIT: Duration = Duration::from_secs(60);

/// How big each step is.
struct Plan {
    episodes: usize,
    concurrency: usize,
    /// Episodes of the steps that change replicas mid-run.
    churn: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                episodes: 300,
                concurrency: 32,
                churn: 160,
            }
        } else {
            Plan {
                episodes: 2000,
                concurrency: 64,
                churn: 600,
            }
        }
    }
}

/// One replica: its number, port and process (`None` once stopped).
struct Replica {
    n: u32,
    port: u16,
    process: Option<ServerProcess>,
}

/// The replicas and the nginx in front of them.
struct Cluster {
    bin: PathBuf,
    nginx_bin: PathBuf,
    dir: PathBuf,
    template: String,
    port: u16,
    replicas: Vec<Replica>,
    nginx: Option<nginx::Nginx>,
}

impl Cluster {
    fn start_replica(&mut self, n: u32) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.join(format!("replica-{n}.log")))
            .map_err(|e| format!("replica log: {e}"))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--host", "127.0.0.1", "--port", "0"])
            .env("ORS_REPLICA_ID", n.to_string())
            .env("ORS_SESSION_KEY", SESSION_KEY)
            // Keep-alive comments every second, so a 3 s call shows them through nginx.
            .env("ORS_KEEPALIVE_SECS", "1")
            .env("ORS_DRAIN_SECS", "60")
            .env("RUST_LOG", "warn")
            .env_remove("ORS_API_KEY")
            .env_remove("ORS_MAX_SESSIONS")
            .stderr(Stdio::from(log));
        let process = ServerProcess::start(cmd, Duration::from_secs(60))?;
        let port = process.port();
        self.replicas.push(Replica {
            n,
            port,
            process: Some(process),
        });
        Ok(())
    }

    /// The rendered `ors.conf` for the replicas still running.
    fn conf(&self) -> Result<String, String> {
        let live: Vec<(u32, u16)> = self
            .replicas
            .iter()
            .filter(|r| r.process.is_some())
            .map(|r| (r.n, r.port))
            .collect();
        nginx::render(&self.template, &live, self.port)
    }

    fn start_nginx(&mut self) -> Result<(), String> {
        let conf = self.conf()?;
        self.nginx = Some(nginx::Nginx::start(
            &self.nginx_bin,
            &self.dir.join("nginx"),
            &conf,
            self.port,
        )?);
        Ok(())
    }

    fn reload(&self) -> Result<(), String> {
        let nginx = self.nginx.as_ref().ok_or("nginx is not running")?;
        nginx.reload(&self.conf()?)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn replica(&mut self, n: u32) -> Result<&mut Replica, String> {
        self.replicas
            .iter_mut()
            .find(|r| r.n == n)
            .ok_or_else(|| format!("no replica {n}"))
    }
}

/// How one episode went.
#[derive(Debug, Clone)]
struct Outcome {
    /// The replica its session id names (once `/create_session` answered).
    replica: Option<u32>,
    /// When the episode began asking for its session (`/create_session`), since the step
    /// began.
    began: Duration,
    /// `None`: done, reward checked; else the kind of error.
    error: Option<String>,
    took: Duration,
}

/// The replica number in the first group of a session id.
fn replica_of(sid: &str) -> Option<u32> {
    let group = sid.get(..8)?;
    if group.bytes().all(|b| b.is_ascii_digit()) {
        group.parse().ok()
    } else {
        None
    }
}

/// The replica of a whole session id (36 characters), else `None`.
fn replica_of_id(token: &str) -> Option<u32> {
    (token.len() == 36 && token.as_bytes()[8] == b'-')
        .then(|| replica_of(token))
        .flatten()
}

/// What kind of failure an error is, for the table.
fn kind(e: &Error) -> String {
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
async fn episode(env: Environment, i: usize, sleep_ms: u64, t0: Instant) -> Outcome {
    let started = Instant::now();
    let mut out = Outcome {
        replica: None,
        began: t0.elapsed(),
        error: None,
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
            Some(kind(&e))
        }
        Err(_) => Some("hang".to_owned()),
    };
    out.took = started.elapsed();
    out
}

/// Run `n` episodes at `concurrency`; `done` counts the finished ones as they finish.
async fn episodes(
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
async fn until(done: &AtomicUsize, n: usize) {
    while done.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A replica's `/metrics`, read directly (not through nginx).
async fn metrics(port: u16) -> Result<String, String> {
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
fn series(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Percentile of durations, in milliseconds.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// The record of one step: its checks and its episodes.
struct Step {
    name: &'static str,
    failures: Vec<String>,
    outcomes: Vec<Outcome>,
}

impl Step {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            failures: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.failures.push(what.into());
        }
    }

    fn print(&self) {
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

/// Step 1: many full episodes, spread over every replica.
async fn spread(cluster: &Cluster, env: &Environment, plan: &Plan) -> Step {
    let mut step = Step::new("1. episodes through nginx, spread over the replicas");
    let before: Vec<f64> = sessions_created(cluster).await;
    step.outcomes = episodes(env, plan.episodes, plan.concurrency, 0, Arc::default()).await;
    let errors = step.outcomes.iter().filter(|o| o.error.is_some()).count();
    step.check(errors == 0, format!("{errors} episodes failed"));
    let after = sessions_created(cluster).await;
    for ((r, b), a) in cluster.replicas.iter().zip(&before).zip(&after) {
        let share = (a - b) / plan.episodes as f64;
        step.check(
            share >= 0.2,
            format!(
                "replica {} served {:.0}% of the sessions (its /metrics), under 20%",
                r.n,
                share * 100.0
            ),
        );
        println!(
            "      replica {}: ors_sessions_created_total +{} ({:.0}%)",
            r.n,
            a - b,
            share * 100.0
        );
    }
    step
}

/// `ors_sessions_created_total` of every running replica, in order.
async fn sessions_created(cluster: &Cluster) -> Vec<f64> {
    let mut out = Vec::new();
    for r in &cluster.replicas {
        let text = metrics(r.port).await.unwrap_or_default();
        out.push(series(&text, "ors_sessions_created_total"));
    }
    out
}

/// Step 2: 3 s calls stream through nginx with keep-alives, and a reconnect by `task_id`
/// through nginx reaches the replica that runs the call.
async fn long_calls(cluster: &Cluster, env: &Environment, client: &Client) -> Step {
    let mut step =
        Step::new("2. long calls stream through nginx; a reconnect by task_id finds its call");
    step.outcomes = episodes(env, 8, 8, 3000, Arc::default()).await;
    let errors = step.outcomes.iter().filter(|o| o.error.is_some()).count();
    step.check(errors == 0, format!("{errors} long-call episodes failed"));

    let session = match client
        .environment("conformance")
        .session(TaskRef::at("train", 1))
        .open()
        .await
    {
        Ok(s) => s,
        Err(e) => {
            step.check(false, format!("could not open a session: {e}"));
            return step;
        }
    };
    let sid = session.sid().to_owned();
    let Some(owner) = replica_of(&sid).and_then(|n| cluster.replicas.iter().find(|r| r.n == n))
    else {
        step.check(false, format!("session id {sid} names no replica"));
        return step;
    };
    let before = series(
        &metrics(owner.port).await.unwrap_or_default(),
        "ors_sse_reconnects_total",
    );
    let port = cluster.port;
    let result = tokio::task::spawn_blocking(move || reconnect(port, &sid)).await;
    match result {
        Ok(Ok(keepalives)) => {
            step.check(
                keepalives,
                "no keep-alive comment reached the client through nginx",
            );
        }
        Ok(Err(e)) => step.check(false, e),
        Err(e) => step.check(false, e.to_string()),
    }
    let after = series(
        &metrics(owner.port).await.unwrap_or_default(),
        "ors_sse_reconnects_total",
    );
    step.check(
        after == before + 1.0,
        format!(
            "replica {} counted {} reconnects, not 1: the reconnect went elsewhere",
            owner.n,
            after - before
        ),
    );
    let _ = session.close().await;
    step
}

/// Start a 3 s call with our own `task_id` through nginx, hang up after its `task_id` event,
/// then send the same request again: it must stream the one call's result. Whether keep-alive
/// comments came through.
fn reconnect(port: u16, sid: &str) -> Result<bool, String> {
    let target = Target {
        timeout: Duration::from_secs(30),
        ..Target::from_addr(([127, 0, 0, 1], port).into())
    };
    let body = json!({"name": "sleep", "input": {"ms": 3000}, "task_id": "xtask-scale-reconnect"});
    let req = Request::new("POST", "/conformance/call")
        .sid(sid)
        .header("Accept", "text/event-stream")
        .json(&body);
    let mut open = req.open_body(&target, Duration::from_secs(30))?;
    let mut first = Vec::new();
    while !String::from_utf8_lossy(&first).contains("event: task_id") {
        match open.next_piece()? {
            Some(piece) => first.extend_from_slice(&piece),
            None => return Err("the call stream closed before its task_id".to_owned()),
        }
    }
    drop(open);
    let again = req.send(&target)?;
    let text = again.text();
    if again.status() != 200 || !text.contains("slept") {
        return Err(format!(
            "the reconnect got {}: {}",
            again.status(),
            again.snippet()
        ));
    }
    Ok(text.lines().any(|l| l.starts_with(':')))
}

/// Start the episodes of a step that changes replicas mid-run, each with a `sleep` of
/// `sleep_ms` so many are live at any time; returns once a quarter are done, with the
/// running batch and when it began.
async fn churn(
    env: &Environment,
    plan: &Plan,
    sleep_ms: u64,
) -> (tokio::task::JoinHandle<Vec<Outcome>>, Instant) {
    let done = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let run = {
        let (env, done) = (env.clone(), Arc::clone(&done));
        let (n, c) = (plan.churn, plan.concurrency / 2);
        tokio::spawn(async move { episodes(&env, n, c, sleep_ms, done).await })
    };
    until(&done, plan.churn / 4).await;
    (run, t0)
}

/// Step 3: a fourth replica joins mid-run; nobody is lost, new sessions reach it.
async fn scale_up(cluster: &mut Cluster, env: &Environment, plan: &Plan) -> Step {
    let mut step = Step::new("3. scale up mid-run: a 4th replica, nginx reloaded");
    let (run, _) = churn(env, plan, 300).await;
    if let Err(e) = cluster.start_replica(3).and_then(|()| cluster.reload()) {
        step.check(false, format!("adding replica 3: {e}"));
    }
    step.outcomes = run.await.unwrap_or_default();
    let errors = step.outcomes.iter().filter(|o| o.error.is_some()).count();
    step.check(
        errors == 0,
        format!("{errors} episodes failed while scaling up"),
    );
    let on_new = step
        .outcomes
        .iter()
        .filter(|o| o.replica == Some(3))
        .count();
    step.check(on_new > 0, "no new session reached replica 3");
    step
}

/// Step 4: one replica is killed (-9) mid-run: only its episodes fail, fast; the others
/// complete; new episodes go to the survivors.
async fn kill_one(cluster: &mut Cluster, env: &Environment, plan: &Plan) -> Step {
    let mut step = Step::new("4. kill -9 a replica mid-run: only its episodes fail, fast");
    let (run, t0) = churn(env, plan, 500).await;
    let killed_at = t0.elapsed();
    match cluster.replica(1) {
        // Dropping the process kills it (SIGKILL).
        Ok(r) => drop(r.process.take()),
        Err(e) => step.check(false, e),
    }
    step.outcomes = run.await.unwrap_or_default();
    for o in step.outcomes.clone() {
        let Some(e) = &o.error else { continue };
        step.check(
            o.replica == Some(1),
            format!("an episode on replica {:?} failed: {e}", o.replica),
        );
        step.check(
            e != "hang" && e != "timeout",
            format!("an episode on the killed replica hung ({e}, {:?})", o.took),
        );
    }
    let late_on_dead = step
        .outcomes
        .iter()
        .filter(|o| o.replica == Some(1) && o.began > killed_at)
        .count();
    step.check(
        late_on_dead == 0,
        format!("{late_on_dead} episodes begun after the kill got a session on the dead replica"),
    );
    // The operator takes it out of the config.
    if let Err(e) = cluster.reload() {
        step.check(false, format!("reload without replica 1: {e}"));
    }
    step
}

/// Step 5: one replica gets SIGTERM mid-run: its live episodes complete, no new one lands on
/// it, it exits 0, nothing is lost.
async fn drain_one(cluster: &mut Cluster, env: &Environment, plan: &Plan) -> Step {
    let mut step = Step::new("5. scale down: SIGTERM a replica mid-run: it drains, nothing lost");
    let (run, t0) = churn(env, plan, 500).await;
    let process = match cluster.replica(2) {
        Ok(r) => r.process.take(),
        Err(e) => {
            step.check(false, e);
            None
        }
    };
    let signalled = t0.elapsed();
    let exit = process
        .map(|mut p| tokio::task::spawn_blocking(move || p.terminate(Duration::from_secs(120))));
    step.outcomes = run.await.unwrap_or_default();
    match exit {
        Some(exit) => match exit.await {
            Ok(Ok(status)) => step.check(status.success(), format!("replica 2 exited {status}")),
            Ok(Err(e)) => step.check(false, e),
            Err(e) => step.check(false, e.to_string()),
        },
        None => step.check(false, "replica 2 was not running"),
    }
    let errors = step.outcomes.iter().filter(|o| o.error.is_some()).count();
    step.check(
        errors == 0,
        format!("{errors} episodes failed while draining"),
    );
    // Sessions asked for after the signal has had time to arrive.
    let late = step
        .outcomes
        .iter()
        .filter(|o| o.replica == Some(2) && o.began > signalled + Duration::from_millis(200))
        .count();
    step.check(
        late == 0,
        format!("{late} episodes begun after the SIGTERM got a session on the draining replica"),
    );
    step
}

/// Step 0: the deploy files, as far as they can be tried here: the Kubernetes manifests
/// checked, `nginx -t` on the router's config, and the image's binary started the way the
/// Dockerfile starts it (its user, its environment) and probed with its HEALTHCHECK command.
fn deploy_files(cluster: &Cluster, root: &Path) -> Step {
    let mut step = Step::new("0. deploy files: manifests, the router config under nginx -t, the image's user and health check");
    let docs = match deploy::manifests(root) {
        Ok(docs) => docs,
        Err(e) => {
            step.check(false, e);
            return step;
        }
    };
    for problem in deploy::check_manifests(&docs, &cluster.template) {
        step.check(false, problem);
    }
    match deploy::router_conf(&docs) {
        Ok(conf) => {
            let conf = deploy::router_conf_for_nginx_t(&conf);
            let dir = cluster.dir.join("k8s-router");
            if let Err(e) = nginx::write_config(&cluster.nginx_bin, &dir, &conf) {
                step.check(false, format!("the Kubernetes router config: {e}"));
            }
        }
        Err(e) => step.check(false, e),
    }
    if let Err(e) = image_binary(cluster, root) {
        step.check(false, e);
    }
    step
}

/// Start the server binary as the Dockerfile's user with its `ENV`, on a free port, and run
/// its `HEALTHCHECK` command against it.
fn image_binary(cluster: &Cluster, root: &Path) -> Result<(), String> {
    let docker = deploy::dockerfile(root)?;
    let uid: u32 = docker
        .user
        .parse()
        .map_err(|_| format!("USER {} is not numeric", docker.user))?;
    let port = free_port()?.to_string();
    let mut cmd = if is_root() {
        // Drop to the image's user, as the container runtime would.
        let mut c = Command::new("setpriv");
        c.args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".to_owned(),
        ])
        .arg(&cluster.bin);
        c
    } else {
        Command::new(&cluster.bin)
    };
    cmd.envs(docker.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("ORS_PORT", &port)
        .env_remove("ORS_API_KEY")
        .stderr(Stdio::null());
    let server = ServerProcess::start(cmd, Duration::from_secs(30))?;
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.pid)).unwrap_or_default();
    let running_as = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse::<u32>().ok());
    if is_root() && running_as != Some(uid) {
        return Err(format!(
            "the server runs as uid {running_as:?}, not the image's {uid}"
        ));
    }
    if !server.url.ends_with(&format!(":{port}")) {
        return Err(format!(
            "the server listens on {}, not port {port}",
            server.url
        ));
    }
    // ORS_HOST=0.0.0.0: reachable on every interface, so on the loopback too (the check's).
    let check = docker
        .healthcheck
        .ok_or("the Dockerfile has no HEALTHCHECK")?;
    let (program, args) = check.split_first().ok_or("an empty HEALTHCHECK")?;
    let ok = Command::new(program)
        .args(args)
        .envs(docker.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("ORS_PORT", &port)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err("the Dockerfile's HEALTHCHECK command failed against the running binary".to_owned())
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|l| l.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}

async fn scenarios(cluster: &mut Cluster, plan: &Plan) -> Result<Vec<Step>, String> {
    let client = Client::new(cluster.url()).map_err(|e| e.to_string())?;
    let env = client.environment("conformance");
    let mut steps = vec![spread(cluster, &env, plan).await];
    steps.last().map(Step::print);
    steps.push(long_calls(cluster, &env, &client).await);
    steps.last().map(Step::print);
    steps.push(scale_up(cluster, &env, plan).await);
    steps.last().map(Step::print);
    steps.push(kill_one(cluster, &env, plan).await);
    steps.last().map(Step::print);
    steps.push(drain_one(cluster, &env, plan).await);
    steps.last().map(Step::print);
    Ok(steps)
}

/// A free local port (closed again before nginx takes it).
fn free_port() -> Result<u16, String> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    probe
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// Run every step.
pub fn run(args: ScaleArgs) -> Result<ExitCode, String> {
    let plan = Plan::new(args.quick);
    let nginx_bin = nginx::ensure_nginx()?;
    let bin = crate::procs::cargo_build(&["-p", "ors-examples", "--bin", "conformance"], true)?
        .join("conformance");
    let root = crate::python::workspace_root();
    let template = std::fs::read_to_string(root.join(nginx::ORS_CONF))
        .map_err(|e| format!("{}: {e}", nginx::ORS_CONF))?;
    let dir = root.join("target/xtask-scale");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut cluster = Cluster {
        bin,
        nginx_bin,
        dir: dir.clone(),
        template,
        port: free_port()?,
        replicas: Vec::new(),
        nginx: None,
    };
    for n in 0..3 {
        cluster.start_replica(n)?;
    }
    cluster.start_nginx()?;
    println!(
        "xtask: scale: 3 replicas of the conformance example behind nginx ({}) on {}; logs in {}",
        nginx_version(&cluster.nginx_bin),
        cluster.url(),
        dir.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let first = deploy_files(&cluster, &root);
    first.print();
    let mut steps = vec![first];
    steps.extend(rt.block_on(scenarios(&mut cluster, &plan))?);
    drop(cluster);
    let failed = steps.iter().filter(|s| !s.failures.is_empty()).count();
    println!("{} passed, {failed} failed", steps.len() - failed);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn nginx_version(bin: &Path) -> String {
    Command::new(bin)
        .arg("-v")
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stderr)
                .trim()
                .replace("nginx version: ", "")
        })
        .unwrap_or_else(|| "nginx".to_owned())
}
