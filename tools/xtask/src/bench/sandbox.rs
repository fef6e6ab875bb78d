//! `cargo xtask bench --only sandbox`: what a sandbox per episode costs, and how many episodes
//! with live sandboxes the machine holds.
//!
//! - **Cost** (`ors-bench sandbox`, in one process): `true` run unsandboxed and in sandboxes,
//!   an episode's first command (which starts its sandbox) and its later ones, interleaved
//!   round by round; their medians as differences and ratios to the unsandboxed one.
//! - **Capacity**: the `code` example's server, N sessions each calling `run` with `sleep 1` in
//!   a loop (each session's sandbox started by its first call and live from then on), at each
//!   N a fresh server; success over every call, latency, and the memory of the server and of
//!   all its sandboxes per episode.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};

use super::load::{error_count, run_json, run_load};
use super::plan::{Plan, TARGET_EPISODES};
use super::servers::{self, Launcher};
use crate::procs::ServerProcess;

/// The targets of the issue (with [`TARGET_EPISODES`]): an episode's first command at most
/// this much (p50, ms) ...
pub const TARGET_FIRST_P50_MS: f64 = 20.0;
/// ... and later ones at most this much over the same command unsandboxed (p50, ms).
pub const TARGET_LATER_OVER_MS: f64 = 5.0;

/// The command of the capacity runs, and what its answer holds.
const COMMAND: &str = "sleep 1";
const EXPECT: &str = "[exit code 0]";

/// Kernel accounting of one process: `VmRSS` and the `Pss` of `smaps_rollup`, KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let pss = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    (servers::rss_kib(pid).unwrap_or(0), pss)
}

/// Every process under `root`, and their summed RSS and PSS in KiB.
fn tree_memory(root: u32) -> (usize, u64, u64) {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(all.iter().filter(|(_, pp)| *pp == p).map(|(pid, _)| *pid));
        i += 1;
    }
    let (rss, pss) = found[1..]
        .iter()
        .map(|p| memory_kib(*p))
        .fold((0, 0), |(r, q), (a, b)| (r + a, q + b));
    (found.len() - 1, rss, pss)
}

/// The `code` server, with room for `sessions`.
fn start_code(launcher: &Launcher, sessions: usize) -> Result<ServerProcess, String> {
    let bin = launcher
        .code
        .as_ref()
        .ok_or("the code example did not build")?;
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    cmd.env_remove("RUST_LOG");
    for var in [
        "ORS_API_KEY",
        "ORS_TOOL_TIMEOUT_SECS",
        "ORS_MAX_CONNECTIONS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("ORS_MAX_SESSIONS", (sessions * 2).max(64).to_string());
    let log = launcher.logs.join("code.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    cmd.stderr(file);
    ServerProcess::start(cmd, Duration::from_secs(60))
        .map_err(|e| format!("{e} (its stderr is in {})", log.display()))
}

/// One capacity run: `n` sessions of the code server calling `run` in a loop.
fn capacity(launcher: &Launcher, plan: &Plan, n: usize) -> Result<Value, String> {
    let server = start_code(launcher, n)?;
    let (window, warmup) = (plan.sandbox_window, plan.sandbox_warmup);
    let input = json!({"command": COMMAND, "timeout_secs": 10}).to_string();
    let args: Vec<String> = [
        "--workload",
        "concurrency",
        "--env",
        "code",
        "--tool",
        "run",
        "--input",
        &input,
        "--expect",
        EXPECT,
        "--sessions",
        &n.to_string(),
        "--duration",
        &window.to_string(),
        "--warmup",
        &warmup.to_string(),
        "--threads",
        &plan.client_threads.max(2).to_string(),
        "--time-limit",
        &(window + 600.0).to_string(),
        // Each session's first call, which starts its sandbox, is made while the sessions are
        // set up: the window measures episodes that hold a live sandbox, and the start-up
        // (every sandbox started at once) is reported apart, as `prime`.
        "--prime",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Read the memory in the middle of the window, when every sandbox is live: the window
    // starts once every sandbox has started (a sandbox is at least two processes: bwrap and
    // the init inside), which takes longer the more there are.
    let pid = server.pid;
    let probe_at = Duration::from_secs_f64(warmup + window / 2.0);
    let memory = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        while tree_memory(pid).0 < 2 * n && started.elapsed() < Duration::from_secs(240) {
            std::thread::sleep(Duration::from_millis(500));
        }
        std::thread::sleep(probe_at);
        let cpu = servers::cpu_secs(pid);
        (memory_kib(pid).0, tree_memory(pid), cpu)
    });
    let cpu0 = servers::cpu_secs(pid);
    let result = run_load(&launcher.bench, &server.url, false, &args);
    let cpu1 = servers::cpu_secs(pid);
    let (server_kib, (procs, rss, pss), _) = memory.join().unwrap_or((0, (0, 0, 0), None));
    let alive = servers::alive(pid);
    drop(server);
    let mut v = result?;
    let per = n.max(1) as f64;
    v["sessions"] = json!(n);
    v["server_survived"] = json!(alive);
    v["server_rss_kib"] = json!(server_kib);
    v["sandbox_processes"] = json!(procs);
    v["sandboxes_rss_kib"] = json!(rss);
    v["sandboxes_pss_kib"] = json!(pss);
    v["kib_per_episode_rss"] = json!((server_kib + rss) as f64 / per);
    v["kib_per_episode_pss"] = json!((server_kib + pss) as f64 / per);
    if let (Some(a), Some(b)) = (cpu0, cpu1) {
        v["server_cpu_s"] = json!(b - a);
    }
    Ok(v)
}

/// Run both parts; their reports under `cost` and `capacity` (by session count).
pub fn measure(launcher: &Launcher, plan: &Plan, failures: &mut Vec<String>) -> Value {
    eprintln!(
        "bench: sandbox: cost of `true`, {} episodes of 1 + {} commands ...",
        plan.sandbox_rounds, plan.sandbox_later
    );
    let mut cmd = std::process::Command::new(&launcher.bench);
    cmd.args([
        "sandbox",
        "--rounds",
        &plan.sandbox_rounds.to_string(),
        "--later",
        &plan.sandbox_later.to_string(),
    ]);
    let cost = match run_json(cmd, 600.0) {
        Ok(v) => {
            if error_count(&v) > 0 {
                failures.push(format!("sandbox cost: {}", v["errors"]));
            }
            eprintln!("bench: sandbox: {}", brief_cost(&v));
            v
        }
        Err(e) => {
            failures.push(format!("sandbox cost: {e}"));
            Value::Null
        }
    };
    let mut runs = serde_json::Map::new();
    for &n in &plan.sandbox_sessions {
        eprintln!(
            "bench: sandbox: {n} episodes each running `{COMMAND}` in a loop for {} s ...",
            plan.sandbox_window
        );
        match capacity(launcher, plan, n) {
            Ok(v) => {
                if error_count(&v) > 0 {
                    failures.push(format!("sandbox capacity {n}: {}", v["errors"]));
                }
                eprintln!("bench: sandbox: {n}: {}", super::concurrency::brief(&v));
                runs.insert(n.to_string(), v);
            }
            Err(e) => failures.push(format!("sandbox capacity {n}: {e}")),
        }
    }
    json!({"cost": cost, "capacity": runs})
}

fn f(v: &Value, key: &str) -> String {
    v[key].as_f64().map_or("-".into(), |x| format!("{x:.1}"))
}

/// One line about the cost.
fn brief_cost(v: &Value) -> String {
    format!(
        "true p50: unsandboxed {} ms, first {} ms (x{}), later {} ms (x{})",
        f(&v["unsandboxed"], "p50_ms"),
        f(&v["first"], "p50_ms"),
        f(v, "first_to_unsandboxed_p50"),
        f(&v["later"], "p50_ms"),
        f(v, "later_to_unsandboxed_p50"),
    )
}

/// The sandbox tables, as printed after the main one.
pub fn render(v: &Value, plan: &Plan) -> String {
    let mut out = String::new();
    let cost = &v["cost"];
    if cost.is_object() {
        let _ = writeln!(
            out,
            "\nSandboxes: `true` unsandboxed and in a sandbox per episode ({} episodes: its \
             first command starts the sandbox, {} later ones reuse it)",
            plan.sandbox_rounds, plan.sandbox_later
        );
        let _ = writeln!(
            out,
            "{:<12} {:>8} {:>8} {:>14} {:>15}",
            "", "p50 ms", "p99 ms", "p50 over bare", "p50 / bare p50"
        );
        for (name, key, over) in [
            ("unsandboxed", "unsandboxed", None),
            ("first", "first", Some("first")),
            ("later", "later", Some("later")),
        ] {
            let _ = writeln!(
                out,
                "{name:<12} {:>8} {:>8} {:>14} {:>15}",
                f(&cost[key], "p50_ms"),
                f(&cost[key], "p99_ms"),
                over.map_or(String::new(), |o| format!(
                    "+{}",
                    f(cost, &format!("{o}_over_unsandboxed_p50_ms"))
                )),
                over.map_or(String::new(), |o| format!(
                    "x{}",
                    f(cost, &format!("{o}_to_unsandboxed_p50"))
                )),
            );
        }
    }
    if let Some(runs) = v["capacity"].as_object().filter(|r| !r.is_empty()) {
        let _ = writeln!(
            out,
            "\nEpisodes of `code` with live sandboxes, each calling run `{COMMAND}` in a loop \
             for {} s (latency after a {} s warm-up), once every session has started its \
             sandbox with its first call (all started: how long starting them all at once took, \
             and how many of those first calls failed)",
            plan.sandbox_window, plan.sandbox_warmup
        );
        let _ = writeln!(
            out,
            "{:>8} {:>13} {:>8} {:>7} {:>7} {:>7} {:>10} {:>13} {:>12} {:>6}",
            "episodes",
            "all started",
            "success",
            "calls",
            "p50 ms",
            "p99 ms",
            "server MiB",
            "sandboxes MiB",
            "KiB/episode",
            "CPU s"
        );
        let mut rows: Vec<(usize, &Value)> = runs
            .iter()
            .filter_map(|(k, v)| Some((k.parse().ok()?, v)))
            .collect();
        rows.sort_by_key(|(n, _)| *n);
        for (n, r) in rows {
            let mib = |key: &str| {
                r[key]
                    .as_f64()
                    .map_or("-".into(), |k| format!("{:.0}", k / 1024.0))
            };
            let _ = writeln!(
                out,
                "{n:>8} {:>13} {:>8} {:>7} {:>7} {:>7} {:>10} {:>13} {:>12} {:>6}",
                format!(
                    "{} s ({} fail)",
                    f(&r["prime"], "set_up_s"),
                    r["sessions"].as_u64().unwrap_or(0) - r["prime"]["ops"].as_u64().unwrap_or(0)
                ),
                r["success_rate"]
                    .as_f64()
                    .map_or("-".into(), |s| format!("{:.2}%", s * 100.0)),
                r["calls_ok"],
                f(r, "p50_ms").trim_end_matches(".0"),
                f(r, "p99_ms").trim_end_matches(".0"),
                mib("server_rss_kib"),
                format!(
                    "{} (PSS {})",
                    mib("sandboxes_rss_kib"),
                    mib("sandboxes_pss_kib")
                ),
                f(r, "kib_per_episode_pss"),
                f(r, "server_cpu_s"),
            );
        }
    }
    // A --quick run's windows are too short to judge targets by, as for the main table.
    if cost.is_object() && !plan.quick {
        let _ = writeln!(out, "Sandbox targets:");
        for (what, met, figure) in targets(v) {
            let verdict = match met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not measured",
            };
            let _ = writeln!(out, "  {what}: {verdict} ({figure})");
        }
    }
    out
}

/// The three sandbox targets, met or not, with the figures saying so.
pub fn targets(v: &Value) -> Vec<(String, Option<bool>, String)> {
    let cost = &v["cost"];
    let first = cost["first"]["p50_ms"].as_f64();
    let later = cost["later_over_unsandboxed_p50_ms"].as_f64();
    let at = &v["capacity"][TARGET_EPISODES.to_string()];
    let rate = at["success_rate"].as_f64();
    vec![
        (
            format!("sandbox: first command p50 <= {TARGET_FIRST_P50_MS} ms"),
            first.map(|x| x <= TARGET_FIRST_P50_MS),
            first.map_or("-".into(), |x| format!("{x:.1} ms")),
        ),
        (
            format!("sandbox: later commands <= {TARGET_LATER_OVER_MS} ms over unsandboxed (p50)"),
            later.map(|x| x <= TARGET_LATER_OVER_MS),
            later.map_or("-".into(), |x| format!("+{x:.1} ms")),
        ),
        (
            format!("sandbox: {TARGET_EPISODES} episodes with live sandboxes at 100% success"),
            rate.map(|r| r >= 1.0),
            rate.map_or("-".into(), |r| format!("{:.2}%", r * 100.0)),
        ),
    ]
}
