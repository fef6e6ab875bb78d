//! The agent workload: whole agent episodes (task, session, prompt, tools, a model call, the
//! tool call, delete) with an instant scripted model. Here the *client* is compared: our
//! `Agent` through `evaluate` (`ors-bench load --workload agent`) against the Python reference
//! client driving the same episodes with the same loop (`tools/interop/python/agent_bench.py`),
//! back to back, against the same server (ours) and the same scripted model server.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::load::{brief, run_json, timed_args};
use super::measured::Measured;
use super::plan::Plan;
use super::servers::{Kind, Launcher};
use crate::procs::ServerProcess;

/// Agent episodes run at once, by each client.
pub const SESSIONS: usize = 16;

/// The key of the workload in the results.
pub const KEY: &str = "agent_16";

/// Start the scripted model server.
fn start_model(bin: &Path, logs: &Path) -> Result<ServerProcess, String> {
    let mut cmd = Command::new(bin);
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    let log = logs.join("scripted-model.log");
    let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    cmd.stderr(file);
    ServerProcess::start(cmd, Duration::from_secs(60))
}

/// Measure both clients; their reports go under [`KEY`] of `ours` and `reference`.
pub fn measure(launcher: &Launcher, plan: &Plan, results: &mut BTreeMap<&'static str, Measured>) {
    let fail = |results: &mut BTreeMap<&'static str, Measured>, who: &'static str, e: String| {
        results
            .entry(who)
            .or_default()
            .failures
            .push(format!("{KEY}: {e}"));
    };
    let Some(model_bin) = &launcher.model else {
        fail(
            results,
            "ours",
            "the scripted model server did not build".into(),
        );
        return;
    };
    let server = match launcher.start(Kind::Ours, None) {
        Ok((s, _)) => s,
        Err(e) => return fail(results, "ours", format!("launch: {e}")),
    };
    let model = match start_model(model_bin, &launcher.logs) {
        Ok(m) => m,
        Err(e) => return fail(results, "ours", format!("scripted model: {e}")),
    };
    let model_base = format!("{}/v1", model.url);

    eprintln!("bench: ours (client): {KEY} ...");
    let (duration, warmup) = plan.window(Kind::Ours);
    let args = timed_args(
        "agent",
        SESSIONS,
        (duration, warmup),
        plan,
        &["--model-base", &model_base],
    );
    let mut cmd = Command::new(&launcher.bench);
    cmd.args(["load", "--url", &server.url]).args(&args);
    match run_json(cmd, warmup + duration + 180.0) {
        Ok(v) => {
            eprintln!("bench: ours (client): {KEY}: {}", brief(&v));
            results
                .entry("ours")
                .or_default()
                .workloads
                .insert(KEY.into(), v);
        }
        Err(e) => fail(results, "ours", e),
    }

    let Some(python) = &launcher.python else {
        return;
    };
    eprintln!("bench: reference (client): {KEY} ...");
    let (duration, warmup) = plan.window(Kind::Reference);
    let script = crate::workspace::workspace_root()
        .join("tools")
        .join("interop")
        .join("python")
        .join("agent_bench.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .args([&server.url, &model_base])
        .args(["--sessions", &SESSIONS.to_string()])
        .args(["--duration", &duration.to_string()])
        .args(["--warmup", &warmup.to_string()]);
    if let Some(dir) = script.parent() {
        cmd.current_dir(dir);
    }
    match run_json(cmd, warmup + duration + 150.0) {
        Ok(v) => {
            eprintln!("bench: reference (client): {KEY}: {}", brief(&v));
            results
                .entry("reference")
                .or_default()
                .workloads
                .insert(KEY.into(), v);
        }
        Err(e) => fail(results, "reference", e),
    }
}
