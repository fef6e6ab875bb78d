//! The steps of `cargo xtask scale`: the deploy files (0), episodes spread over the replicas
//! (1), long calls and a reconnect (2), a replica added (3), one killed (4), one drained (5).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ors_client::{Client, Environment, TaskRef};
use ors_conformance::http::{Request, Target};
use ors_core::ErrorCode;
use serde_json::json;

use super::cluster::{free_port, Cluster, Plan};
use super::episodes::{episodes, metrics, replica_of, series, until, Outcome, Step};
use super::{deploy, nginx};
use crate::procs::ServerProcess;

/// Step 1: many full episodes, spread over every replica.
pub(super) async fn spread(cluster: &Cluster, env: &Environment, plan: &Plan) -> Step {
    let mut step = Step::new("1. episodes through nginx, spread over the replicas");
    let before: Vec<f64> = sessions_created(cluster).await;
    step.outcomes = episodes(env, plan.episodes, plan.concurrency, 0, Arc::default()).await;
    step.check_no_failed_episode("episodes failed");
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
pub(super) async fn sessions_created(cluster: &Cluster) -> Vec<f64> {
    let mut out = Vec::new();
    for r in &cluster.replicas {
        let text = metrics(r.port).await.unwrap_or_default();
        out.push(series(&text, "ors_sessions_created_total"));
    }
    out
}

/// Step 2: 3 s calls stream through nginx with keep-alives, and a reconnect by `task_id`
/// through nginx reaches the replica that runs the call.
pub(super) async fn long_calls(cluster: &Cluster, env: &Environment, client: &Client) -> Step {
    let mut step =
        Step::new("2. long calls stream through nginx; a reconnect by task_id finds its call");
    step.outcomes = episodes(env, 8, 8, 3000, Arc::default()).await;
    step.check_no_failed_episode("long-call episodes failed");

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
pub(super) fn reconnect(port: u16, sid: &str) -> Result<bool, String> {
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
pub(super) async fn churn(
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
pub(super) async fn scale_up(cluster: &mut Cluster, env: &Environment, plan: &Plan) -> Step {
    let mut step = Step::new("3. scale up mid-run: a 4th replica, nginx reloaded");
    let (run, _) = churn(env, plan, 300).await;
    if let Err(e) = cluster.start_replica(3).and_then(|()| cluster.reload()) {
        step.check(false, format!("adding replica 3: {e}"));
    }
    step.outcomes = run.await.unwrap_or_default();
    step.check_no_failed_episode("episodes failed while scaling up");
    let on_new = step
        .outcomes
        .iter()
        .filter(|o| o.replica == Some(3))
        .count();
    step.check(on_new > 0, "no new session reached replica 3");
    step
}

/// How an episode on a killed replica may fail: nginx's 502 for a replica that does not answer
/// (ors.conf's @unreachable: no `code`), the client giving the session up, or the stream of a
/// call in flight broken. Not `http_404_session_not_found`: that would say the session never
/// existed (nginx used to answer so), and not another replica's answer.
const SERVER_GONE: [&str; 3] = ["http_502_-", "session_terminated", "transport"];

/// Step 4: one replica is killed (-9) mid-run: only its episodes fail, fast, with an error
/// saying their server is gone; the others complete; new episodes go to the survivors.
pub(super) async fn kill_one(cluster: &mut Cluster, env: &Environment, plan: &Plan) -> Step {
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
        // The kind alone does not tell a session the client gave up because the proxy said
        // it does not exist; the error code in the message does.
        let unknown = o
            .message
            .as_deref()
            .is_some_and(|m| m.contains(ErrorCode::SessionNotFound.as_str()));
        step.check(
            SERVER_GONE.contains(&e.as_str()) && !unknown,
            format!(
                "an episode on the killed replica failed with {e} ({}), not as its replica \
                 stopping to answer ({SERVER_GONE:?}, without session_not_found)",
                o.message.as_deref().unwrap_or("-")
            ),
        );
    }
    step.check(
        step.outcomes.iter().any(|o| o.error.is_some()),
        "no episode failed: none was on replica 1 when it was killed, so the step tried nothing",
    );
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
pub(super) async fn drain_one(cluster: &mut Cluster, env: &Environment, plan: &Plan) -> Step {
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
    step.check_no_failed_episode("episodes failed while draining");
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
pub(super) fn deploy_files(cluster: &Cluster, root: &Path) -> Step {
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
    for problem in nginx::session_routing_problems(&cluster.template) {
        step.check(false, format!("{}: {problem}", nginx::ORS_CONF));
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

/// The server binary as the Dockerfile's user (when we are root, as the container runtime
/// would drop to it) with the image's `ENV`, on `port`.
fn image_command(cluster: &Cluster, docker: &deploy::Dockerfile, uid: u32, port: &str) -> Command {
    let mut cmd = if is_root() {
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
        .env("ORS_PORT", port)
        .env_remove("ORS_API_KEY")
        .stderr(Stdio::null());
    cmd
}

/// Start the server binary as the Dockerfile's user with its `ENV`, on a free port, and run
/// its `HEALTHCHECK` command against it.
pub(super) fn image_binary(cluster: &Cluster, root: &Path) -> Result<(), String> {
    let docker = deploy::dockerfile(root)?;
    let uid: u32 = docker
        .user
        .parse()
        .map_err(|_| format!("USER {} is not numeric", docker.user))?;
    // The port is free when probed, but another program on this machine may take it before
    // the server binds it; the server then exits, and another port is tried.
    let mut attempts = 0;
    let (server, port) = loop {
        attempts += 1;
        let port = free_port()?.to_string();
        let cmd = image_command(cluster, &docker, uid, &port);
        match ServerProcess::start(cmd, Duration::from_secs(30)) {
            Ok(server) => break (server, port),
            Err(e) if attempts < 3 && e.contains("before its ready line") => continue,
            Err(e) => return Err(e),
        }
    };
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

pub(super) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|l| l.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}
