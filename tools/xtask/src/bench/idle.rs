//! The idle-sessions workload on a fresh server: sessions grown to each step, deleted, and the
//! server's memory read until it settles.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::load::run_load;
use super::plan::Plan;
use super::servers::{self, Kind, Launcher};

/// Launch a fresh `kind` with room for the most of `steps`, grow idle sessions to each step,
/// delete them, and return the report (memory settled after the delete) and the launch time.
pub(super) fn idle_once(
    kind: Kind,
    launcher: &Launcher,
    steps: &[usize],
    plan: &Plan,
) -> Result<(Value, Duration), String> {
    let cap = steps.iter().max().map(|n| n * 2);
    let (s, took) = launcher
        .start(kind, cap)
        .map_err(|e| format!("launch for idle sessions: {e}"))?;
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
    let mut v =
        run_load(&launcher.bench, &s.url, false, &args).map_err(|e| format!("idle: {e}"))?;
    settle_after_delete(&mut v, s.pid);
    Ok((v, took))
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
