//! `cargo xtask bench`: speed and memory of our `conformance` server against the Python
//! reference and a bare hyper server (the machine's limit), with one Rust load generator.
//!
//! The load generator and the bare server are the `ors-bench` binary (package `tools/bench/`),
//! built in release mode like our server; this module builds them, launches each server,
//! runs one `ors-bench load` process per workload (so a stuck workload can be killed), and
//! prints the table and the JSON.

mod against;
mod agent;
mod args;
mod build;
mod callgrind;
mod concurrency;
mod idle;
pub(crate) mod load;
mod measured;
mod metrics;
mod plan;
mod report;
mod revision;
mod sandbox;
pub(crate) mod servers;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{json, Value};

pub use self::args::BenchArgs;
use self::args::Only;
use self::build::{build, Built};
use self::idle::idle_once;
use self::load::{brief, brief_idle, load_average, run_load, timed_args};
use self::measured::{concurrency_json, Measured};
use self::plan::Plan;
use self::servers::{Kind, Launcher};
use crate::procs::ServerProcess;

pub(crate) use against::quick_in_test as quick_against;

/// The timed workloads: key, `ors-bench` workload, concurrent sessions, `--only` name.
const WORKLOADS: [(&str, &str, usize, Only); 5] = [
    ("calls_16", "calls", 16, Only::Calls),
    ("calls_256", "calls", 256, Only::Calls),
    ("episodes_16", "episodes", 16, Only::Episodes),
    ("episodes_256", "episodes", 256, Only::Episodes),
    ("big", "big", 1, Only::Big),
];

/// Size of the `big` result.
const BIG_BYTES: usize = 1 << 20;

/// Launch `kind` `plan.launches` times, timing each to its ready line; the last one stays up.
fn launch(kind: Kind, launcher: &Launcher, plan: &Plan, m: &mut Measured) -> Option<ServerProcess> {
    let mut server = None;
    for _ in 0..plan.launches {
        match launcher.start(kind, None) {
            Ok((s, took)) => {
                m.startup_ms.push(took.as_secs_f64() * 1e3);
                server = Some(s);
            }
            Err(e) => {
                m.failures.push(format!("launch: {e}"));
                return None;
            }
        }
    }
    server
}

/// Run one timed workload on one server (relaunching it first if it died).
fn run_workload(
    kind: Kind,
    (key, workload, sessions): (&str, &str, usize),
    server: &mut Option<ServerProcess>,
    launcher: &Launcher,
    plan: &Plan,
    m: &mut Measured,
) {
    let name = kind.name();
    let (duration, warmup) = plan.window(kind);
    if !server.as_ref().is_some_and(|s| servers::alive(s.pid)) {
        m.failures.push(format!(
            "the server was not running before {key}; relaunched"
        ));
        match launcher.start(kind, None) {
            Ok((s, _)) => *server = Some(s),
            Err(e) => {
                m.failures.push(format!("relaunch: {e}"));
                return;
            }
        }
    }
    let Some(s) = server.as_ref() else { return };
    eprintln!("bench: {name}: {key} ...");
    let cpu0 = servers::cpu_secs(s.pid);
    let big = BIG_BYTES.to_string();
    let args = timed_args(
        workload,
        sessions,
        (duration, warmup),
        plan,
        &["--big-bytes", &big],
    );
    match run_load(&launcher.bench, &s.url, kind == Kind::Limit, &args) {
        Ok(mut v) => {
            if let (Some(a), Some(b)) = (cpu0, servers::cpu_secs(s.pid)) {
                v["server_cpu_s"] = json!(b - a);
            }
            v["server_rss_kib_after"] = json!(servers::rss_kib(s.pid));
            eprintln!("bench: {name}: {key}: {}", brief(&v));
            m.workloads.insert(key.to_owned(), v);
        }
        Err(e) => m.failures.push(format!("{key}: {e}")),
    }
}

/// Idle sessions on a fresh server, so the memory of earlier workloads does not hide the
/// growth.
fn run_idle(kind: Kind, launcher: &Launcher, plan: &Plan, m: &mut Measured) {
    let name = kind.name();
    let steps = match kind {
        Kind::Ours => &plan.idle_ours,
        Kind::Reference => &plan.idle_ref,
        Kind::Limit => return,
    };
    eprintln!("bench: {name}: idle sessions {steps:?} ...");
    match idle_once(kind, launcher, steps, plan) {
        Ok((v, startup)) => {
            m.startup_ms.push(startup.as_secs_f64() * 1e3);
            eprintln!("bench: {name}: idle: {}", brief_idle(&v));
            m.idle = Some(v);
        }
        Err(e) => m.failures.push(e),
    }
}

/// Measure every server. Each workload runs on the servers back to back, so the ratios
/// compare figures taken within seconds of each other on this shared machine.
fn measure(
    kinds: &[Kind],
    launcher: &Launcher,
    plan: &Plan,
    args: &BenchArgs,
) -> BTreeMap<&'static str, Measured> {
    let mut results: BTreeMap<&'static str, Measured> = BTreeMap::new();
    let workloads: Vec<_> = WORKLOADS
        .into_iter()
        .filter(|w| args.runs(w.3))
        .map(|(key, workload, sessions, _)| (key, workload, sessions))
        .collect();
    let mut running = Vec::new();
    let servers_needed = !workloads.is_empty() || args.runs(Only::Idle);
    for &kind in kinds.iter().filter(|_| servers_needed) {
        let m = results.entry(kind.name()).or_default();
        if kind == Kind::Ours && launcher.ours.is_none() {
            continue;
        }
        let server = launch(kind, launcher, plan, m);
        if server.is_some() {
            running.push((kind, server));
        }
    }
    for &workload in &workloads {
        for (kind, server) in running.iter_mut() {
            let m = results.entry(kind.name()).or_default();
            run_workload(*kind, workload, server, launcher, plan, m);
        }
    }
    drop(running);
    for &kind in kinds.iter().filter(|_| args.runs(Only::Idle)) {
        if kind == Kind::Ours && launcher.ours.is_none() {
            continue;
        }
        let m = results.entry(kind.name()).or_default();
        if m.startup_ms.is_empty() {
            continue; // it never started; already reported
        }
        run_idle(kind, launcher, plan, m);
    }
    // The clients are compared here: both need our server; the reference only its venv.
    if args.runs(Only::Agent) && kinds.contains(&Kind::Ours) && launcher.ours.is_some() {
        agent::measure(launcher, plan, &mut results);
    }
    // Two servers of ours, alone on the machine, taking the rounds in turns.
    if args.runs(Only::Metrics) && kinds.contains(&Kind::Ours) && launcher.ours.is_some() {
        let m = results.entry(Kind::Ours.name()).or_default();
        m.metrics = metrics::measure(launcher, plan, &mut m.failures);
    }
    if args.runs(Only::Sandbox) && kinds.contains(&Kind::Ours) {
        let m = results.entry(Kind::Ours.name()).or_default();
        m.sandbox = Some(sandbox::measure(launcher, plan, &mut m.failures));
    }
    // A fresh server per size, after the rest: 16k connections leave a lot in TIME_WAIT.
    for &kind in kinds.iter().filter(|_| args.runs(Only::Concurrency)) {
        if kind == Kind::Ours && launcher.ours.is_none() {
            continue;
        }
        let m = results.entry(kind.name()).or_default();
        concurrency::measure(kind, launcher, plan, m);
    }
    results
}

/// Whether a load average says other work competed for the cores (the benchmark itself
/// keeps at most about two busy).
fn busy(load: Option<&str>, cores: usize) -> bool {
    load.and_then(|l| l.parse::<f64>().ok())
        .is_some_and(|l| l > cores as f64 + 1.0)
}

/// Run the benchmark (or, with `--against` or `--callgrind`, the comparison or the
/// instruction counts).
pub fn run(args: BenchArgs) -> Result<ExitCode, String> {
    if args.callgrind {
        return callgrind::run(&args);
    }
    if let Some(rev) = &args.against {
        return against::run(rev, &args);
    }
    let started = Instant::now();
    let plan = Plan::new(args.quick, args.duration, args.client_threads);
    let kinds: Vec<Kind> = if args.servers.is_empty() {
        Kind::ALL.to_vec()
    } else {
        Kind::ALL
            .into_iter()
            .filter(|k| args.servers.contains(k))
            .collect()
    };
    let root = crate::workspace::workspace_root();
    let sandboxes = args.runs(Only::Sandbox) && kinds.contains(&Kind::Ours);
    if sandboxes {
        crate::debian::ensure("bench", "bwrap", "bubblewrap")?;
    }
    let Built {
        bench,
        ours,
        model,
        code,
        failure: build_failure,
    } = build(&kinds, args.runs(Only::Agent), sandboxes)?;
    let python = if kinds.contains(&Kind::Reference) {
        Some(crate::python::ensure_venv()?)
    } else {
        None
    };
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let logs = target.join("bench-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let launcher = Launcher {
        ours,
        model,
        code,
        bench,
        python,
        fixture: servers::fixture_path(&root),
        logs,
        wrapper: Vec::new(),
    };
    let mut most = 0;
    if args.runs(Only::Concurrency) {
        most = plan.concurrency_ours.iter().max().copied().unwrap_or(0);
    }
    if sandboxes {
        // Each episode holds a connection and its sandbox's three pipes on the server.
        let episodes = plan.sandbox_sessions.iter().max().copied().unwrap_or(0);
        most = most.max(episodes * 4);
    }
    if most > 0 {
        concurrency::raise_fd_limit(most)?;
    }
    // Read after the build, which loads the machine itself.
    let load_before = load_average();
    let mut results = measure(&kinds, &launcher, &plan, &args);
    if let Some(e) = build_failure {
        results
            .entry(Kind::Ours.name())
            .or_default()
            .failures
            .push(format!("build: {e}"));
    }
    let report = report::Report::new(&results, &plan);
    let total_errors: u64 = results.values().map(Measured::errors).sum();
    let elapsed = started.elapsed();
    let load_after = load_average();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let context = format!(
        "ors-rs bench{}: {cores} cores, load generator on {} thread(s), {} s windows \
         (reference {} s); load average {} before, {} after{}",
        if plan.quick { " --quick" } else { "" },
        plan.client_threads,
        plan.duration,
        plan.ref_duration,
        load_before.as_deref().unwrap_or("?"),
        load_after.as_deref().unwrap_or("?"),
        if busy(load_before.as_deref(), cores) || busy(load_after.as_deref(), cores) {
            "\n(other processes were competing for the CPU: figures are noisy; ratios, taken \
             back to back, less so)"
        } else {
            ""
        },
    );
    print!("{}", report.render(&results, &context, elapsed));
    print!("{}", concurrency::render(&results, &plan));
    let metrics_cost = results
        .get(Kind::Ours.name())
        .and_then(|m| m.metrics.as_ref());
    if let Some(cost) = metrics_cost {
        print!("{}", metrics::render(cost));
    }
    let sandbox_figures = results
        .get(Kind::Ours.name())
        .and_then(|m| m.sandbox.as_ref());
    if let Some(v) = sandbox_figures {
        print!("{}", sandbox::render(v, &plan));
    }
    if let Some(path) = &args.json {
        let servers: BTreeMap<&str, Value> =
            results.iter().map(|(k, m)| (*k, m.to_json())).collect();
        let doc = json!({
            "quick": plan.quick,
            "cores": cores,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "client_threads": plan.client_threads,
            "duration_s": plan.duration,
            "reference_duration_s": plan.ref_duration,
            "big_bytes": BIG_BYTES,
            "errors": total_errors,
            "elapsed_s": elapsed.as_secs_f64(),
            "servers": servers,
            "table": report.rows_json(),
            "targets": report.targets_json(),
            // Ours, keyed by session count (each server's are under `servers`).
            "concurrency": results
                .get(Kind::Ours.name())
                .map(|m| concurrency_json(&m.concurrency)),
            "metrics_cost": metrics_cost.map(metrics::MetricsCost::to_json),
            "sandbox": sandbox_figures,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    }
    Ok(if total_errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
