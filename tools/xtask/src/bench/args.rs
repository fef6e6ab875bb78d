//! The arguments of `cargo xtask bench`, below every module of the benchmark that reads them.

use std::path::PathBuf;

use super::servers::Kind;

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// About 1 s per workload and fewer idle sessions: proves the benchmark works (CI).
    #[arg(long)]
    pub(super) quick: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,
    /// Which servers to measure (default: all three).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(super) servers: Vec<Kind>,
    /// Threads of the load generator; 1 keeps it off the server's cores as much as possible.
    #[arg(long, default_value_t = 1)]
    pub(super) client_threads: usize,
    /// Override the measurement window of each workload, in seconds.
    #[arg(long, value_name = "SECS")]
    pub(super) duration: Option<f64>,
    /// Only these workloads (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(super) only: Vec<Only>,
    /// Compare with revision REV instead: build its server in a worktree and run the calls,
    /// episodes, idle and concurrency workloads on both in alternating rounds, printing each
    /// figure as new / old with the rounds' spread (`--only` picks among those four).
    /// `bare` compares with the bare hyper server instead (calls, episodes, concurrency).
    #[arg(long, value_name = "REV")]
    pub(super) against: Option<String>,
    /// Rounds of `--against` (default 3, `--quick` 2).
    #[arg(long, value_name = "N", requires = "against")]
    pub(super) rounds: Option<usize>,
    /// Count instructions instead: our server under `valgrind --tool=callgrind` for a fixed
    /// number of calls and of episodes, reporting instructions per call and per episode
    /// (with `--against REV`, for REV's server too).
    #[arg(long)]
    pub(super) callgrind: bool,
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
    /// What a sandbox per episode costs (`true` unsandboxed and sandboxed), and episodes of
    /// the `code` example with live sandboxes each running `sleep 1` in a loop (memory too).
    Sandbox,
}

impl BenchArgs {
    /// Whether `what` is to be measured.
    pub(super) fn runs(&self, what: Only) -> bool {
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
            against: None,
            rounds: None,
            callgrind: false,
        }
    }
}
