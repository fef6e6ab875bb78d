//! `ors-bench sandbox`: what a sandbox per episode costs, in this process. The latency of
//! running `true` unsandboxed (`Program::run`) and in a sandbox: an episode's first command
//! (which starts the sandbox) and its later ones, interleaved round by round so the three see
//! the same machine, as differences and ratios of their medians. (The memory of live sandboxes
//! is measured on the `code` server by `cargo xtask bench`'s capacity runs.)

use std::time::{Duration, Instant};

use ors_runtime::process::{Exit, Finished, Program};
use ors_runtime::sandbox::{SandboxSettings, Sandboxes};
use ors_runtime::ToolContext;
use serde_json::{json, Value};

use crate::stats::Recorder;

/// What to measure.
pub struct Opts {
    /// Episodes timed: each runs one unsandboxed `true`, then its first and later commands.
    pub rounds: usize,
    /// Later commands per episode.
    pub later: usize,
}

/// p50, p99 and the count of a recorder's latencies.
fn figures(r: &mut Recorder) -> Value {
    let s = r.summary(Duration::from_secs(1));
    json!({"p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"], "n": s["ops"]})
}

/// Whether a run of `true` succeeded; its failure is added to `errors`.
fn ok<E: std::fmt::Display>(what: &str, r: Result<Finished, E>, errors: &mut Vec<String>) -> bool {
    match r {
        Ok(f) if f.exit == Exit::Code(0) => true,
        Ok(f) => {
            errors.push(format!("{what}: {:?}", f.exit));
            false
        }
        Err(e) => {
            errors.push(format!("{what}: {e}"));
            false
        }
    }
}

/// Run the measurement and return its report.
pub async fn run(o: &Opts) -> Result<Value, String> {
    let sandboxes = Sandboxes::new(SandboxSettings::new()).map_err(|e| e.to_string())?;
    let ctx = ToolContext::detached();
    let program = Program::new("true").timeout(Duration::from_secs(30));
    let (mut bare, mut first, mut later) = (
        Recorder::default(),
        Recorder::default(),
        Recorder::default(),
    );
    let mut errors: Vec<String> = Vec::new();
    for _ in 0..o.rounds {
        let t = Instant::now();
        if ok("unsandboxed", program.run(&ctx).await, &mut errors) {
            bare.record(t.elapsed());
        }
        let sandbox = sandboxes.sandbox();
        let t = Instant::now();
        if ok("first", program.run_in(&sandbox, &ctx).await, &mut errors) {
            first.record(t.elapsed());
        }
        for _ in 0..o.later {
            let t = Instant::now();
            if ok("later", program.run_in(&sandbox, &ctx).await, &mut errors) {
                later.record(t.elapsed());
            }
        }
        if let Err(e) = sandbox.shutdown().await {
            errors.push(format!("shutdown: {e}"));
        }
    }
    let (bare, first, later) = (figures(&mut bare), figures(&mut first), figures(&mut later));
    let p50 = |a: &Value| a["p50_ms"].as_f64().unwrap_or(0.0);
    let ratio = |a: &Value| (p50(&bare) > 0.0).then(|| p50(a) / p50(&bare));
    Ok(json!({
        "first_over_unsandboxed_p50_ms": p50(&first) - p50(&bare),
        "later_over_unsandboxed_p50_ms": p50(&later) - p50(&bare),
        "first_to_unsandboxed_p50": ratio(&first),
        "later_to_unsandboxed_p50": ratio(&later),
        "unsandboxed": bare,
        "first": first,
        "later": later,
        "errors": {"count": errors.len(), "first": errors.first()},
    }))
}
