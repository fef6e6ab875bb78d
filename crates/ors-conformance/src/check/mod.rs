//! `ors check ENV`: is this environment, on this server, ready for training? Unlike the
//! conformance clauses, which need the fixture, it works against any ORS server hosting any
//! environment, talking to it as a trainer would: through `ors-client`.
//!
//! Three groups of checks, each printed as `ok <id>` or `problem <id>: <what, where, how to
//! fix>` as it finishes:
//!
//! - **discovery** ([`discovery`]): the environment is listed; its tools parse, each with a
//!   name models can call, a description, and an `input_schema` that is `null` or a valid JSON
//!   Schema of an object; its splits parse and each has tasks; `num_tasks`, `task` and
//!   `task_range` agree with `tasks`.
//! - **episodes** ([`episodes`]): on the first, a middle and the last task of every split
//!   (`--tasks N`: N tasks spread over the split) an episode is created, prompted (non-empty),
//!   its `task_tools` listed, and deleted; the time until the prompt arrived is reported.
//! - **tools, fuzzed** ([`calls`]): each tool (shared, and task-specific ones the first episode
//!   lists) is called with `--fuzz N` inputs generated from its schema ([`fuzz`]), valid and
//!   deliberately invalid; a crash, an invalid input not refused with a message, a call over
//!   `--timeout`, a result breaking the wire form, or a non-finite number in a result is a
//!   problem, printed with the input and the seed that reproduce it.
//!
//! Which episode a call runs in: every input the schema accepts gets a fresh episode, because
//! a tool may change state that no client can see (an attempt counter, a file), and each input
//! should meet the task as the model would. Inputs the schema rejects share one episode per
//! tool, for as long as each is answered `ok: false`: a server refuses such an input before the
//! tool runs, so nothing in the session changed. Any other answer (the tool ran, crashed, timed
//! out) retires that episode and the next input gets a fresh one.

mod calls;
mod discovery;
mod episodes;
pub mod fuzz;
mod report;
pub mod rng;

use std::time::Duration;

use ors_client::{ClientBuilder, Error};

pub use report::{one_line, shell_quote, show_input, CheckItem, CheckReport, EpisodeTiming};

/// Inputs generated per tool unless `--fuzz` says otherwise.
pub const DEFAULT_FUZZ: usize = 20;
/// The limit on one call (and on one ordinary request) unless `--timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Episodes open at once while fuzzing.
const CONCURRENCY: usize = 8;

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The environment's name.
    pub env: String,
    /// Tasks per split to open episodes on (spread evenly, first and last included); `None`:
    /// the first, a middle and the last.
    pub tasks: Option<usize>,
    /// Inputs generated per tool (0: no tool is called).
    pub fuzz: usize,
    /// The seed of the generated inputs.
    pub seed: u64,
    /// The limit on one call or request.
    pub timeout: Duration,
}

impl CheckOptions {
    /// The defaults for `env`, with a seed taken from the clock.
    pub fn new(env: impl Into<String>) -> Self {
        Self {
            env: env.into(),
            tasks: None,
            fuzz: DEFAULT_FUZZ,
            seed: clock_seed(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The `ors check` arguments that regenerate this run's inputs.
    fn reproduce_args(&self) -> String {
        let mut args = format!("--seed {}", self.seed);
        if self.fuzz != DEFAULT_FUZZ {
            args.push_str(&format!(" --fuzz {}", self.fuzz));
        }
        args
    }
}

/// A seed that differs from run to run, so repeated checks explore different inputs.
pub fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // Keep seeds short enough to retype.
    (nanos ^ u64::from(std::process::id())) % 1_000_000
}

/// Why a check could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The server could not be reached (or the URL is not usable).
    #[error("{0}")]
    Unreachable(String),
    /// The server wants an API key this run does not have.
    #[error("{0} (pass --api-key or set ORS_API_KEY)")]
    Unauthorized(String),
}

/// Run every check against the server `client` points at, handing each result to `on_item`
/// as it finishes. The client's timeouts are set from `opts`.
pub async fn run(
    client: ClientBuilder,
    opts: &CheckOptions,
    on_item: &mut (dyn FnMut(&CheckItem) + Send),
) -> Result<CheckReport, CheckError> {
    let client = client
        .request_timeout(opts.timeout)
        // Our own limit ends a slow call; the stream's silence limit must not end it first.
        .heartbeat_timeout(opts.timeout + Duration::from_secs(5))
        .max_retries(1)
        .backoff(Duration::from_millis(50), Duration::from_millis(500))
        .build()
        .map_err(|e| CheckError::Unreachable(e.to_string()))?;
    let listed = match client.environments().await {
        Ok(envs) => Ok(envs),
        Err(e @ (Error::Transport(_) | Error::Timeout(_))) => {
            return Err(CheckError::Unreachable(e.to_string()))
        }
        Err(e @ Error::Http { status: 401, .. }) => {
            return Err(CheckError::Unauthorized(e.to_string()))
        }
        Err(e) => Err(e),
    };
    let env = client.environment(opts.env.clone());
    let mut rec = Recorder {
        items: Vec::new(),
        on_item,
    };
    discovery::listed(&mut rec, listed, &opts.env);
    let shared = discovery::tools(&mut rec, &env).await;
    let splits = discovery::splits(&mut rec, &env, opts.tasks).await;
    let (episodes, fuzz_task) = episodes::run(&mut rec, &env, &splits, opts).await;
    let mut tools: Vec<calls::ToolUnderTest> = shared
        .iter()
        .map(|spec| calls::ToolUnderTest::new(spec.clone()))
        .collect();
    if let Some(task) = &fuzz_task {
        for spec in &task.task_tools {
            if !shared.iter().any(|s| s.name == spec.name) {
                discovery::tool_spec(&mut rec, spec, "task-specific tool");
                tools.push(calls::ToolUnderTest::new(spec.clone()));
            }
        }
    }
    if opts.fuzz > 0 {
        calls::fuzz(&mut rec, &env, fuzz_task.as_ref(), &tools, opts).await;
    }
    Ok(CheckReport {
        url: client.url().to_owned(),
        env: opts.env.clone(),
        seed: opts.seed,
        fuzz: opts.fuzz,
        items: rec.items,
        episodes,
    })
}

/// Collects the items of a run and hands each to the caller as it is added.
struct Recorder<'a> {
    items: Vec<CheckItem>,
    on_item: &'a mut (dyn FnMut(&CheckItem) + Send),
}

impl Recorder<'_> {
    fn push(&mut self, item: CheckItem) {
        (self.on_item)(&item);
        self.items.push(item);
    }
}

/// A name as part of a check id: as is when it is a plain name, else JSON-quoted (so a tool
/// called `look up` gives `tool."look up".name`, still one token per dot).
fn id_part(name: &str) -> String {
    if ors_core::is_valid_tool_name(name) {
        name.to_owned()
    } else {
        serde_json::Value::String(name.to_owned()).to_string()
    }
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The indices checked in a split of `count` tasks: `n` spread evenly with the first and the
/// last included, or (no `n`) the first, the middle and the last.
fn sample_indices(count: u64, n: Option<usize>) -> Vec<u64> {
    if count == 0 {
        return Vec::new();
    }
    let n = n.unwrap_or(3).max(1) as u64;
    let mut out: Vec<u64> = if n == 1 {
        vec![0]
    } else {
        (0..n).map(|i| i * (count - 1) / (n - 1)).collect()
    };
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_first_middle_last_or_spread() {
        assert_eq!(sample_indices(50, None), vec![0, 24, 49]);
        assert_eq!(sample_indices(2, None), vec![0, 1]);
        assert_eq!(sample_indices(1, None), vec![0]);
        assert_eq!(sample_indices(0, None), Vec::<u64>::new());
        assert_eq!(sample_indices(100, Some(5)), vec![0, 24, 49, 74, 99]);
        assert_eq!(sample_indices(100, Some(1)), vec![0]);
        assert_eq!(sample_indices(3, Some(10)), vec![0, 1, 2]);
    }

    #[test]
    fn ids_quote_names_that_are_not_plain() {
        assert_eq!(id_part("submit"), "submit");
        assert_eq!(id_part("look up"), "\"look up\"");
    }
}
