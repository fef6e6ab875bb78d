//! `ors eval`: a language model as an agent over an environment's tasks (K samples of each), or
//! schema-valid random calls (`--policy random`), one trajectory per line, a summary with
//! intervals and pass@k at the end.

mod out;
mod progress;
mod random;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use ors_client::agent::ModelOptions;
use ors_client::{
    evaluate_samples, Agent, AgentOptions, Api, ClientBuilder, Episode, Error, EvalOptions, OnText,
    StopHandle, Summary, TaskSample,
};
use serde_json::{json, Value};

use self::progress::Progress;
pub use self::random::RandomPolicy;
use crate::results::{RunStats, Scored};

/// Arguments of `ors eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Environment name.
    #[arg(required_unless_present = "print_schema")]
    env: Option<String>,
    /// Split of the tasks.
    #[arg(long, required_unless_present = "print_schema")]
    split: Option<String>,
    /// Who plays: `model` (the model at --base-url) or `random` (a random tool each step, with
    /// an input generated from its input schema; no model needed).
    #[arg(long, value_enum, default_value_t = PolicyKind::Model)]
    policy: PolicyKind,
    /// The seed of --policy random (default 0): the same seed plays the same calls.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Model name, as the model server knows it (required with --policy model).
    #[arg(long)]
    model: Option<String>,
    /// The model server's base URL: https://api.openai.com/v1, http://localhost:8000/v1
    /// (vLLM), https://api.anthropic.com (required with --policy model).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model server's API.
    #[arg(long, default_value = "openai")]
    api: Api,
    /// The model server's API key [default: $OPENAI_API_KEY or $ANTHROPIC_API_KEY, by --api].
    /// (`--api-key` is the ORS server's.)
    #[arg(long, value_name = "KEY", hide_env_values = true)]
    model_api_key: Option<String>,
    /// Only the tasks in A:B (Python slice rules; either side may be empty or negative).
    #[arg(long, allow_hyphen_values = true, value_name = "A:B", value_parser = crate::args::parse_range)]
    indices: Option<(Option<i64>, Option<i64>)>,
    /// At most N tasks (the first N of the selected ones).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Episodes of each task, each its own session; the summary adds pass@1 and pass@K.
    #[arg(long, default_value_t = 1, value_name = "K",
          value_parser = clap::value_parser!(u32).range(1..))]
    samples: u32,
    /// Episodes run at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    concurrency: usize,
    /// Model turns per episode before it is cut off.
    #[arg(long, default_value_t = 32, value_name = "N")]
    max_steps: usize,
    /// Sampling temperature.
    #[arg(long, value_name = "T")]
    temperature: Option<f64>,
    /// Completion token limit per model call (`max_tokens`).
    #[arg(long, value_name = "N")]
    max_tokens: Option<u32>,
    /// More request body fields, as a JSON object (e.g. '{"top_p": 0.9, "seed": 1}'; vLLM:
    /// '{"logprobs": true, "return_token_ids": true}').
    #[arg(long, value_name = "JSON", value_parser = parse_object)]
    extra: Option<serde_json::Map<String, Value>>,
    /// A system prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// When the model answers without a tool call, tell it to go on instead of ending the
    /// episode.
    #[arg(long)]
    nudge: bool,
    /// End an episode once its model calls have used this many tokens.
    #[arg(long, value_name = "TOKENS")]
    token_budget: Option<u64>,
    /// Limit on each step's model request (its retries included) and each tool call, in
    /// seconds.
    #[arg(long, default_value_t = 600.0, value_name = "SECS")]
    step_timeout: f64,
    /// The most bytes one answer of the model server may have (a KiB, MiB or GiB suffix
    /// allowed); past it the episode ends with a `too_large` error.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes,
          default_value_t = ors_client::agent::DEFAULT_MAX_RESPONSE_BYTES)]
    max_response_bytes: usize,
    /// Append one trajectory (JSON) per line to FILE as each episode ends.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Skip the episodes (task and sample) that already have a trajectory without error in
    /// --out.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Print the JSON Schema of a trajectory and exit.
    #[arg(long)]
    print_schema: bool,
}

/// Who plays the episodes of `ors eval`.
#[derive(clap::ValueEnum, serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum PolicyKind {
    /// A language model, as an agent.
    Model,
    /// Schema-valid random tool calls, no model needed.
    Random,
}

/// The policy a run plays, made from the arguments.
enum Player {
    Model(Agent),
    Random(RandomPolicy),
}

fn parse_bytes(s: &str) -> Result<usize, String> {
    ors_core::settings::BYTES
        .parse("--max-response-bytes", s)
        .map_err(|e| e.to_string())
}

fn parse_object(s: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_str(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("expected a JSON object".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// Run `ors eval`.
pub async fn run(args: EvalArgs, builder: ClientBuilder) -> Result<ExitCode, Error> {
    if args.print_schema {
        use std::io::Write;
        // The JSON Schema of one trajectory line.
        let schema = serde_json::to_value(schemars::schema_for!(Episode)).unwrap_or(Value::Null);
        // `ors eval --print-schema | head` closes the pipe early: not an error.
        let _ = writeln!(std::io::stdout(), "{}", crate::render::pretty(&schema));
        return Ok(ExitCode::SUCCESS);
    }
    let env_name = args.env.clone().ok_or_else(|| missing("ENV"))?;
    let split = args.split.clone().ok_or_else(|| missing("--split"))?;
    if !(args.step_timeout.is_finite() && args.step_timeout > 0.0) {
        return Err(Error::InvalidArgument(
            "--step-timeout must be a number of seconds above 0".into(),
        ));
    }
    let step = Duration::from_secs_f64(args.step_timeout);
    let client = builder.call_timeout(Some(step)).build()?;
    let player = match args.policy {
        PolicyKind::Model if args.seed.is_some() => {
            return Err(Error::InvalidArgument(
                "--seed is for --policy random (a model's sampling takes --temperature, or a \
                 seed in --extra)"
                    .into(),
            ))
        }
        PolicyKind::Model => Player::Model(agent(&args, &client, step)?),
        PolicyKind::Random => Player::Random(RandomPolicy(args.seed.unwrap_or(0))),
    };

    let env = client.environment(&env_name);
    let n = usize::try_from(env.num_tasks(&split).await?).unwrap_or(usize::MAX);
    let (start, stop) = args.indices.unwrap_or((None, None));
    let selected = ors_core::slice_bounds(start, stop, n).take(args.limit.unwrap_or(usize::MAX));
    let wanted = TaskSample::each(selected.map(|i| i as i64), args.samples);

    let previous = match args.out.as_deref().filter(|_| args.resume) {
        Some(path) => crate::trajectories::read(path, true).map_err(Error::InvalidArgument)?,
        None => crate::trajectories::Trajectories::default(),
    };
    if previous.unreadable > 0 {
        eprintln!(
            "ors eval: {} line(s) of the --out file are not trajectories and were ignored",
            previous.unreadable
        );
    }
    // Episodes of this environment and split that ended without an error are not run again.
    let done: HashMap<TaskSample, &Episode> = previous
        .episodes
        .iter()
        .filter(|e| e.env == env_name && e.split == split && e.error.is_none())
        .map(|e| (e.task_sample(), e))
        .collect();
    let (skipped, to_run): (Vec<TaskSample>, Vec<TaskSample>) =
        wanted.iter().partition(|at| done.contains_key(at));
    let writer = args.out.as_deref().map(out::Writer::append).transpose();
    let writer = writer.map_err(Error::InvalidArgument)?;

    let progress = Arc::new(Progress::new(to_run.len()));
    if !skipped.is_empty() {
        let (done, all, left) = (skipped.len(), wanted.len(), to_run.len());
        progress.note(&format!(
            "ors eval: {done} of {all} episodes already have a trajectory; running {left}"
        ));
    }
    // Trajectories go to the file as they end; only the summary stays in memory.
    let options = EvalOptions::default()
        .concurrency(args.concurrency)
        .max_steps(args.max_steps)
        .keep_episodes(false);
    let stop = options.stop_handle();
    let ctrl_c = tokio::spawn(stop_on_ctrl_c(stop.clone(), Arc::clone(&progress)));
    let watch = Arc::new(Watch {
        stop,
        progress: Arc::clone(&progress),
        writer,
        write_failed: AtomicBool::default(),
        unreachable: AtomicUsize::default(),
        ran: Mutex::default(),
    });
    let on_end = Arc::clone(&watch);
    let options = options.on_progress(move |p| on_end.episode(p.episode));

    let started = Instant::now();
    let report = match player {
        Player::Model(p) => evaluate_samples(&env, &split, to_run, Arc::new(p), options).await,
        Player::Random(p) => evaluate_samples(&env, &split, to_run, Arc::new(p), options).await,
    };
    let wall = started.elapsed();
    ctrl_c.abort();
    progress.finish();

    let (ran, mut scored) = watch.ran.lock().map(|r| r.clone()).unwrap_or_default();
    let mut summary = ran.clone();
    // The skipped episodes are the ones done before.
    for e in skipped.iter().filter_map(|at| done.get(at)) {
        summary.add(e);
        scored.push(Scored::of(e));
    }
    let not_run = report.not_run.len();
    let counts = (ran.episodes, skipped.len(), not_run);
    print_summary(&summary, &RunStats::of(scored), counts, wall, &args);
    let failed = ran.error_count() > 0 || not_run > 0 || watch.write_failed.load(Ordering::Relaxed);
    Ok(ExitCode::from(u8::from(failed)))
}

fn missing(what: &str) -> Error {
    Error::InvalidArgument(format!("{what} is required"))
}

/// The agent of `--policy model`: the model the arguments name, through `client`.
fn agent(args: &EvalArgs, client: &ors_client::Client, step: Duration) -> Result<Agent, Error> {
    let model = args.model.clone().ok_or_else(|| missing("--model"))?;
    let base_url = args.base_url.clone().ok_or_else(|| missing("--base-url"))?;
    let mut opts = ModelOptions::new(args.api, base_url, model)
        .timeout(step)
        .max_response_bytes(args.max_response_bytes);
    // Each unset here as in `ModelOptions::new`: the key then comes from the API's variable.
    opts.api_key = args.model_api_key.clone().filter(|k| !k.is_empty());
    opts.temperature = args.temperature;
    opts.max_tokens = args.max_tokens;
    opts.extra = args.extra.clone().unwrap_or_default();
    Ok(Agent::with_options(
        opts.connect(client)?,
        AgentOptions {
            system: args.system.clone(),
            on_text: args.nudge.then(OnText::nudge).unwrap_or(OnText::Stop),
            token_budget: args.token_budget,
        },
    ))
}

/// Consecutive episodes that could not reach the ORS server after which no more are started:
/// when the server is gone, the rest would fail too (run again with --resume).
const UNREACHABLE_LIMIT: usize = 3;

/// What happens as each episode ends: its trajectory written, progress shown, the first error
/// of each kind told, and the run stopped when the ORS server has gone away.
struct Watch {
    stop: StopHandle,
    progress: Arc<Progress>,
    writer: Option<out::Writer>,
    write_failed: AtomicBool,
    unreachable: AtomicUsize,
    /// The episodes of this run: their summary, and what the statistics need of each.
    ran: Mutex<(Summary, Vec<Scored>)>,
}

impl Watch {
    fn episode(&self, e: &Episode) {
        if let Some(Err(msg)) = self.writer.as_ref().map(|w| w.write(e)) {
            if !self.write_failed.swap(true, Ordering::Relaxed) {
                self.progress.note(&format!("ors eval: error: {msg}"));
            }
        }
        self.progress.episode(e);
        // The first error of its kind is told: the run's summary then counts one of it.
        let kind = e.error.as_ref().map(|x| x.kind.as_str());
        let first = self.ran.lock().is_ok_and(|mut ran| {
            ran.0.add(e);
            ran.1.push(Scored::of(e));
            kind.is_some_and(|k| ran.0.errors.get(k) == Some(&1))
        });
        if let Some(error) = e.error.as_ref().filter(|_| first) {
            let sample = (e.sample > 0).then(|| format!(" (sample {})", e.sample));
            let sample = sample.unwrap_or_default();
            let (index, message) = (e.index, crate::render::one_line(&error.message));
            self.progress.note(&format!(
                "ors eval: episode {index}{sample} failed: {message}"
            ));
        }
        // An episode that reached the server (with or without an error) ends a row of misses.
        if kind != Some("transport") {
            self.unreachable.store(0, Ordering::Relaxed);
        } else if self.unreachable.fetch_add(1, Ordering::Relaxed) + 1 == UNREACHABLE_LIMIT {
            self.stop.stop();
            self.progress.note(&format!(
                "ors eval: {UNREACHABLE_LIMIT} episodes in a row could not reach the ORS \
                 server; no more are started (run again with --resume to complete the rest)"
            ));
        }
    }
}

/// First Ctrl-C: start no more episodes; second: end the running ones too. Sessions are
/// deleted either way.
async fn stop_on_ctrl_c(stop: StopHandle, progress: Arc<Progress>) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    stop.stop();
    progress.note(
        "ors eval: stopping: no new episodes; the running ones finish and their sessions are \
         deleted (Ctrl-C again to end them now)",
    );
    if tokio::signal::ctrl_c().await.is_ok() {
        stop.abort();
        progress.note("ors eval: ending the running episodes");
    }
}

/// How the summary labels its intervals.
const CI: &str = "95% CI ";

/// Print the summary; `counts` are the episodes that ran, came from the file, were never
/// started.
fn print_summary(
    s: &Summary,
    stats: &RunStats,
    (ran, resumed, not_run): (usize, usize, usize),
    wall: Duration,
    args: &EvalArgs,
) {
    let rate = ran as f64 / wall.as_secs_f64().max(1e-9);
    if args.json {
        let doc = json!({
            "summary": s,
            "stats": stats,
            "ran": ran,
            "resumed": resumed,
            "not_run": not_run,
            "wall_s": wall.as_secs_f64(),
            "episodes_per_s": rate,
            "out": args.out,
            "policy": args.policy,
            "seed": (args.policy == PolicyKind::Random).then(|| args.seed.unwrap_or(0)),
        });
        println!("{}", crate::render::pretty(&doc));
        return;
    }
    let line = |k: &str, v: String| println!("{k:<13} {v}");
    let several = stats.max_samples > 1;
    let (tasks, samples) = (stats.tasks.len(), stats.samples_shown());
    let notes: String = [
        several.then(|| format!(" ({tasks} tasks × {samples} samples)")),
        (resumed > 0).then(|| format!(" ({resumed} from an earlier run)")),
        (not_run > 0).then(|| format!(", {not_run} not run (stopped)")),
    ]
    .into_iter()
    .flatten()
    .collect();
    line("episodes", format!("{}{notes}", s.episodes));
    let mean_at = several.then(|| format!(", mean@{}", stats.samples));
    let mean_at = mean_at.unwrap_or_default();
    line("mean reward", stats.mean_reward.show(false, CI) + &mean_at);
    line("success rate", stats.success_rate.show(true, CI));
    for p in &stats.pass_at {
        line(&format!("pass@{}", p.k), crate::results::percent(p.value));
    }
    if several {
        let std = stats.task_std;
        line(
            "reward std",
            format!("{std:.4} between a task's samples (mean over tasks)"),
        );
    }
    line("mean steps", format!("{:.2}", s.mean_steps));
    line("errors", kinds(&s.errors, s.error_count()));
    line("stop reasons", kinds(&s.stop_reasons, s.episodes));
    let (tokens_in, tokens_out, seed) = (s.input_tokens, s.output_tokens, args.seed.unwrap_or(0));
    match args.policy {
        PolicyKind::Model => line("tokens", format!("{tokens_in} in, {tokens_out} out")),
        PolicyKind::Random => line("policy", format!("random, seed {seed}")),
    }
    let secs = wall.as_secs_f64();
    line("wall time", format!("{secs:.1} s ({rate:.1} episodes/s)"));
    if let Some(path) = &args.out {
        line("trajectories", path.display().to_string());
    }
}

/// `3 (model 2, timeout 1)`, or `0`.
fn kinds(by: &std::collections::BTreeMap<String, usize>, total: usize) -> String {
    if by.is_empty() {
        return total.to_string();
    }
    let parts: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!("{total} ({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_limit_is_bytes_with_an_optional_unit() {
        assert_eq!(parse_bytes("32MiB"), Ok(32 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        let e = parse_bytes("0").unwrap_err();
        assert!(e.contains("--max-response-bytes"), "{e}");
        assert!(parse_bytes("lots").is_err());
    }
}
