//! `cargo xtask bench`: speed and memory of our `conformance` server against the Python
//! reference and a bare hyper server (the machine's limit), with one Rust load generator.
//!
//! The load generator and the bare server are the `ors-bench` binary (package `tools/bench/`),
//! built in release mode like our server; this module builds them, launches each server,
//! runs one `ors-bench load` process per workload (so a stuck workload can be killed), and
//! prints the table and the JSON.

mod agent;
mod concurrency;
mod metrics;
mod report;
pub(crate) mod servers;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use self::servers::{Kind, Launcher};
use crate::procs::ServerProcess;

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// About 1 s per workload and fewer idle sessions: proves the benchmark works (CI).
    #[arg(long)]
    quick: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Which servers to measure (default: all three).
    #[arg(long, value_enum, value_delimiter = ',')]
    servers: Vec<Kind>,
    /// Threads of the load generator; 1 keeps it off the server's cores as much as possible.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Override the measurement window of each workload, in seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Only these workloads (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Only>,
}

/// The workloads `--only` can pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// `echo` calls on warm sessions (16 and 256 at once).
    Calls,
    /// Whole episodes without a model (16 and 256 at once).
    Episodes,
    /// 1 MiB results through SSE.
    Big,
    /// Idle sessions and the server's memory.
    Idle,
    /// Agent episodes with an instant scripted model: our client against the reference's.
    Agent,
    /// 1,024 to 16,384 sessions each calling `sleep` 1 s in a loop for 30 s.
    Concurrency,
    /// `echo` calls/s of our server with metrics off and on, in interleaved rounds.
    Metrics,
}

impl BenchArgs {
    /// Whether `what` is to be measured.
    fn runs(&self, what: Only) -> bool {
        self.only.is_empty() || self.only.contains(&what)
    }
}

impl BenchArgs {
    /// `--quick` with every other option at its default: what `cargo xtask test` runs.
    pub fn quick() -> Self {
        Self {
            quick: true,
            json: None,
            servers: Vec::new(),
            client_threads: 1,
            duration: None,
            only: Vec::new(),
        }
    }
}

/// How long and how big everything is.
struct Plan {
    quick: bool,
    /// Measurement window for ours and the limit, and its warm-up (seconds).
    duration: f64,
    warmup: f64,
    /// The reference is ~100x slower: shorter windows keep the run short.
    ref_duration: f64,
    ref_warmup: f64,
    /// Idle-session counts at which memory is read.
    idle_ours: Vec<usize>,
    idle_ref: Vec<usize>,
    /// Launches timed for start-up (the last one serves the workloads).
    launches: usize,
    client_threads: usize,
    /// Session counts of the concurrency workload (ours and the limit; the reference).
    concurrency_ours: Vec<usize>,
    concurrency_ref: Vec<usize>,
    /// Its window and the warm-up at its start left out of the latencies (seconds).
    concurrency_duration: f64,
    concurrency_warmup: f64,
    /// Pairs of metrics-off / metrics-on rounds, and each round's window and warm-up.
    metrics_pairs: usize,
    metrics_round: f64,
    metrics_warmup: f64,
}

impl Plan {
    fn new(args: &BenchArgs) -> Self {
        let (duration, warmup, ref_duration, ref_warmup) = if args.quick {
            (1.0, 0.2, 1.0, 0.5)
        } else {
            (10.0, 1.0, 3.0, 0.5)
        };
        let duration = args.duration.unwrap_or(duration).max(0.1);
        Self {
            quick: args.quick,
            duration,
            warmup,
            ref_duration: args.duration.map_or(ref_duration, |d| d.min(ref_duration)),
            ref_warmup,
            idle_ours: if args.quick {
                vec![1_000, 5_000]
            } else {
                vec![10_000, 100_000]
            },
            idle_ref: if args.quick {
                vec![1_000]
            } else {
                vec![10_000]
            },
            launches: if args.quick { 1 } else { 3 },
            client_threads: args.client_threads.max(1),
            concurrency_ours: if args.quick {
                vec![256]
            } else {
                vec![1_024, 4_096, concurrency::TARGET_SESSIONS]
            },
            concurrency_ref: if args.quick {
                vec![256]
            } else {
                vec![1_024, 4_096]
            },
            concurrency_duration: args.duration.unwrap_or(if args.quick { 3.0 } else { 30.0 }),
            concurrency_warmup: if args.quick { 1.0 } else { 2.0 },
            metrics_pairs: if args.quick { 2 } else { 6 },
            metrics_round: args.duration.unwrap_or(if args.quick { 1.0 } else { 5.0 }),
            metrics_warmup: if args.quick { 0.2 } else { 0.5 },
        }
    }

    pub(crate) fn window(&self, kind: Kind) -> (f64, f64) {
        match kind {
            Kind::Reference => (self.ref_duration, self.ref_warmup),
            _ => (self.duration, self.warmup),
        }
    }
}

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

/// Run `ors-bench load` and return its JSON report. The process is killed if it outlives its
/// own time limit by more than a grace period.
pub(crate) fn run_load(
    bench: &Path,
    url: &str,
    canned: bool,
    args: &[String],
) -> Result<Value, String> {
    let limit: f64 = args
        .iter()
        .position(|a| a == "--time-limit")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(300.0);
    let mut cmd = Command::new(bench);
    cmd.args(["load", "--url", url]).args(args);
    if canned {
        cmd.arg("--canned");
    }
    run_json(cmd, limit + 30.0)
}

/// The arguments of a timed `ors-bench load` run: `workload` on `sessions` at once, measured
/// for `duration` seconds after `warmup`, on the plan's client threads, then `extra`; its time
/// limit leaves room for setting up and closing the sessions.
fn timed_args(
    workload: &str,
    sessions: usize,
    (duration, warmup): (f64, f64),
    plan: &Plan,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--workload".into(),
        workload.into(),
        "--sessions".into(),
        sessions.to_string(),
        "--duration".into(),
        duration.to_string(),
        "--warmup".into(),
        warmup.to_string(),
        "--threads".into(),
        plan.client_threads.to_string(),
        "--time-limit".into(),
        (warmup + duration + 150.0).to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Run a workload process and return the JSON object of its last line; it is killed after
/// `limit` seconds.
fn run_json(mut cmd: Command, limit: f64) -> Result<Value, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start the load generator: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let deadline = Instant::now() + Duration::from_secs_f64(limit);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the workload ran past {limit} s and was killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for the load generator: {e}")),
        }
    };
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("the workload process failed ({status})"));
    }
    let line = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    serde_json::from_str(line).map_err(|e| format!("the workload printed no JSON: {e}"))
}

/// The error count of a workload report.
pub(crate) fn error_count(v: &Value) -> u64 {
    v["errors"]["count"].as_u64().unwrap_or(0)
}

/// What was measured on one server.
#[derive(Default)]
struct Measured {
    startup_ms: Vec<f64>,
    workloads: BTreeMap<String, Value>,
    idle: Option<Value>,
    /// The concurrency workload's report at each session count.
    concurrency: BTreeMap<usize, Value>,
    /// The metrics-off and metrics-on rounds (ours only).
    metrics: Option<metrics::MetricsCost>,
    /// Failures outside the load generator (launch, crash, build).
    failures: Vec<String>,
}

impl Measured {
    fn errors(&self) -> u64 {
        let in_workloads: u64 = self.workloads.values().map(error_count).sum();
        let in_idle = self.idle.as_ref().map_or(0, error_count);
        let in_concurrency: u64 = self.concurrency.values().map(error_count).sum();
        let in_metrics = self
            .metrics
            .as_ref()
            .map_or(0, metrics::MetricsCost::errors);
        in_workloads + in_idle + in_concurrency + in_metrics + self.failures.len() as u64
    }

    fn to_json(&self) -> Value {
        let mut sorted = self.startup_ms.clone();
        sorted.sort_by(f64::total_cmp);
        json!({
            "startup_ms": self.startup_ms,
            "startup_ms_median": sorted.get(sorted.len() / 2),
            "workloads": self.workloads,
            "idle": self.idle,
            "concurrency": concurrency_json(&self.concurrency),
            "metrics_cost": self.metrics.as_ref().map(metrics::MetricsCost::to_json),
            "failures": self.failures,
            "errors": self.errors(),
        })
    }
}

/// The concurrency reports keyed by their session count as text (JSON keys are strings).
fn concurrency_json(c: &BTreeMap<usize, Value>) -> Value {
    c.iter()
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

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
            eprintln!("bench: {name}: {key}: {}", report::brief(&v));
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
    let cap = steps.iter().max().map(|n| n * 2);
    let s = match launcher.start(kind, cap) {
        Ok((s, took)) => {
            m.startup_ms.push(took.as_secs_f64() * 1e3);
            s
        }
        Err(e) => {
            m.failures.push(format!("launch for idle sessions: {e}"));
            return;
        }
    };
    eprintln!("bench: {name}: idle sessions {steps:?} ...");
    let steps: Vec<String> = steps.iter().map(usize::to_string).collect();
    let args: Vec<String> = [
        "--workload",
        "idle",
        "--steps",
        &steps.join(","),
        "--pid",
        &s.pid.to_string(),
        "--concurrency",
        "32",
        "--threads",
        &plan.client_threads.to_string(),
        "--time-limit",
        if plan.quick { "120" } else { "400" },
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match run_load(&launcher.bench, &s.url, false, &args) {
        Ok(mut v) => {
            settle_after_delete(&mut v, s.pid);
            eprintln!("bench: {name}: idle: {}", report::brief_idle(&v));
            m.idle = Some(v);
        }
        Err(e) => m.failures.push(format!("idle: {e}")),
    }
}

/// Longest wait for the server's memory to stop falling after the sessions are deleted.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// The load generator reads the memory 1 s after the last delete, but an allocator may give
/// freed pages back over a few seconds (jemalloc's decay, done by its background thread):
/// read it again every 500 ms until it stops falling, for at most `SETTLE_LIMIT`, and report
/// that (`after_delete_extra_wait_s` says how long was added), keeping the 1 s figure as
/// `after_delete_1s_kib`.
fn settle_after_delete(v: &mut Value, pid: u32) {
    let Some(first) = v["after_delete_kib"].as_u64() else {
        return;
    };
    let started = Instant::now();
    let mut last = first;
    while started.elapsed() < SETTLE_LIMIT {
        std::thread::sleep(Duration::from_millis(500));
        match servers::rss_kib(pid) {
            Some(now) if now < last => last = now,
            _ => break,
        }
    }
    v["after_delete_1s_kib"] = json!(first);
    v["after_delete_kib"] = json!(last);
    v["after_delete_extra_wait_s"] = json!(started.elapsed().as_secs_f64());
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
        metrics::measure(launcher, plan, m);
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

/// The release binaries: the load generator, our server and the scripted model server.
struct Built {
    bench: PathBuf,
    ours: Option<PathBuf>,
    model: Option<PathBuf>,
    failure: Option<String>,
}

/// Build the release binaries; our server may fail to build (reported, the rest still runs).
fn build(kinds: &[Kind], agent: bool) -> Result<Built, String> {
    let dir = crate::procs::cargo_build(&["-p", "ors-bench", "--bin", "ors-bench"], true)?;
    let mut built = Built {
        bench: dir.join("ors-bench"),
        ours: None,
        model: None,
        failure: None,
    };
    if kinds.contains(&Kind::Ours) {
        let mut args = vec!["-p", "ors-examples", "--bin", "conformance"];
        if agent {
            args.extend(["--bin", "scripted-model"]);
        }
        match crate::procs::cargo_build(&args, true) {
            Ok(dir) => {
                built.ours = Some(dir.join("conformance"));
                built.model = agent.then(|| dir.join("scripted-model"));
            }
            Err(e) => built.failure = Some(e),
        }
    }
    Ok(built)
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next().map(str::to_owned)
}

/// Whether a load average says other work competed for the cores (the benchmark itself
/// keeps at most about two busy).
fn busy(load: Option<&str>, cores: usize) -> bool {
    load.and_then(|l| l.parse::<f64>().ok())
        .is_some_and(|l| l > cores as f64 + 1.0)
}

/// Run the benchmark.
pub fn run(args: BenchArgs) -> Result<ExitCode, String> {
    let started = Instant::now();
    let plan = Plan::new(&args);
    let kinds: Vec<Kind> = if args.servers.is_empty() {
        Kind::ALL.to_vec()
    } else {
        Kind::ALL
            .into_iter()
            .filter(|k| args.servers.contains(k))
            .collect()
    };
    let root = crate::workspace::workspace_root();
    let Built {
        bench,
        ours,
        model,
        failure: build_failure,
    } = build(&kinds, args.runs(Only::Agent))?;
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
        bench,
        python,
        fixture: servers::fixture_path(&root),
        logs,
    };
    if args.runs(Only::Concurrency) {
        let most = plan.concurrency_ours.iter().max().copied().unwrap_or(0);
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
