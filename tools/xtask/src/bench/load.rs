//! Running the load generator (`ors-bench load`): its arguments, its process with a time
//! limit, its JSON report and the one-line summaries of it; and the machine's load average.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::plan::Plan;

/// Run `ors-bench load` and return its JSON report. The process is killed if it outlives its
/// own time limit by more than a grace period.
pub fn run_load(bench: &Path, url: &str, canned: bool, args: &[String]) -> Result<Value, String> {
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
pub fn timed_args(
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
pub fn run_json(mut cmd: Command, limit: f64) -> Result<Value, String> {
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
pub fn error_count(v: &Value) -> u64 {
    v["errors"]["count"].as_u64().unwrap_or(0)
}

/// A one-line summary of a workload report, for progress output.
pub fn brief(v: &Value) -> String {
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    let rate = if v["workload"] == "big" {
        format!("{} MB/s", num(f("mb_per_s")))
    } else {
        format!("{}/s", num(f("rate")))
    };
    format!(
        "{rate}, p50 {} ms, p99 {} ms, {} errors",
        num(f("p50_ms")),
        num(f("p99_ms")),
        v["errors"]["count"].as_u64().unwrap_or(0)
    )
}

/// A one-line summary of an idle-sessions report.
pub fn brief_idle(v: &Value) -> String {
    let steps: Vec<String> = v["steps"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    format!(
                        "{} sessions: {} B/session",
                        s["sessions"],
                        num(s["bytes_per_session"].as_f64().unwrap_or(0.0))
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{}; after delete {} KiB (baseline {} KiB); {} errors",
        steps.join(", "),
        v["after_delete_kib"],
        v["baseline_kib"],
        v["errors"]["count"].as_u64().unwrap_or(0)
    )
}

/// A number with as many decimals as make sense for its size.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_owned()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The 1-minute load average, from `/proc/loadavg`.
pub fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next().map(str::to_owned)
}
