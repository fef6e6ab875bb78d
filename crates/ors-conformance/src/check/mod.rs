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
//! - **tools, fuzzed** ([`calls`]): each tool (shared, task-specific ones the first episode
//!   lists, and the terminal tool, with its one field a string: answers in prose) is called with `--fuzz N` inputs generated from its schema ([`fuzz`]), valid and
//!   deliberately invalid; a crash, an invalid input not refused with a message, a call over
//!   `--timeout`, a result breaking the wire form, or a non-finite number in a result is a
//!   problem, printed with the input and the seed that reproduce it.
//! - **escapes** ([`escapes`]): through each tool that runs commands (declared with
//!   `"runs_commands": true`, or found by its name and schema), seven ways out of an episode
//!   are tried; each that works is a problem naming what leaked.
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
mod escapes;
pub mod fuzz;
mod options;
mod report;
pub mod rng;
pub(crate) mod schema;

use std::time::Duration;

use ors_client::{ClientBuilder, Error};

pub use options::{clock_seed, CheckOptions, DEFAULT_FUZZ, DEFAULT_TIMEOUT};
use report::Recorder;
pub use report::{one_line, truncate, CheckItem, CheckReport, EpisodeTiming};

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
    let mut rec = Recorder::new(on_item);
    discovery::listed(&mut rec, listed, &opts.env);
    let (shared, terminal) = discovery::tools(&mut rec, &env).await;
    let terminal = terminal.map(|term| discovery::terminal_tool(&mut rec, &term, &shared));
    let splits = discovery::splits(&mut rec, &env, opts.tasks).await;
    let (episodes, fuzz_task) = episodes::run(&mut rec, &env, &splits, opts).await;
    // The shared tools, then the task-specific ones the fuzzed episode lists beside them.
    let mut specs = shared.clone();
    for spec in fuzz_task.iter().flat_map(|task| &task.task_tools) {
        if !shared.iter().any(|s| s.name == spec.name) {
            discovery::tool_spec(&mut rec, spec, "task-specific tool");
            specs.push(spec.clone());
        }
    }
    if opts.fuzz > 0 {
        // The terminal tool is called as a harness calls it, with answers in prose (and broken
        // ones): a crash there ends every episode a model answers in words.
        let tools = specs.iter().cloned().chain(terminal);
        let tools: Vec<_> = tools.map(calls::ToolUnderTest::new).collect();
        calls::fuzz(&mut rec, &env, fuzz_task.as_ref(), &tools, opts).await;
    }
    escapes::run(
        &mut rec,
        &env,
        fuzz_task.as_ref(),
        &specs,
        opts,
        client.url(),
    )
    .await;
    Ok(CheckReport {
        url: client.url().to_owned(),
        env: opts.env.clone(),
        seed: opts.seed,
        fuzz: opts.fuzz,
        items: rec.into_items(),
        episodes,
    })
}
