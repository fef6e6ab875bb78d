//! `ors-bench`: the load generator and the bare hyper server that `cargo xtask bench` runs.
//!
//! `ors-bench load --workload calls --url http://127.0.0.1:PORT ...` runs one workload and
//! prints one JSON object on stdout; `ors-bench bare --port 0` serves canned ORS answers;
//! `ors-bench sandbox` measures what a sandbox per episode costs, in-process.

mod agent;
mod bare;
mod client;
mod concurrency;
mod sandbox;
mod stats;
mod workloads;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::json;

use crate::client::Target;
use crate::stats::Errors;
use crate::workloads::LoadOpts;

/// Load generator and bare server for `cargo xtask bench`.
#[derive(Parser)]
#[command(name = "ors-bench")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve canned ORS answers with no logic (the machine's limit).
    Bare {
        /// Address to bind.
        #[arg(long, default_value = "127.0.0.1")]
        host: std::net::IpAddr,
        /// Port (0 picks a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Size of the canned `big` result.
        #[arg(long, default_value_t = 1 << 20)]
        big_bytes: usize,
    },
    /// Run one workload against a server and print its JSON report.
    Load(Box<LoadArgs>),
    /// Time `true` unsandboxed and in sandboxes (first and later commands); print the JSON
    /// report.
    Sandbox {
        /// Episodes timed.
        #[arg(long, default_value_t = 100)]
        rounds: usize,
        /// Later commands per episode.
        #[arg(long, default_value_t = 5)]
        later: usize,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Workload {
    /// `echo` calls on warm sessions.
    Calls,
    /// Full episodes.
    Episodes,
    /// One large result after another.
    Big,
    /// Idle sessions and the server's memory.
    Idle,
    /// Agent episodes (`ors_client::evaluate` with the `Agent`) against a scripted model
    /// server (`--model-base`).
    Agent,
    /// Many sessions each calling `sleep` in a loop (success rate and latency).
    Concurrency,
}

#[derive(clap::Args)]
struct LoadArgs {
    /// The workload.
    #[arg(long, value_enum)]
    workload: Workload,
    /// The server, `http://127.0.0.1:PORT`.
    #[arg(long)]
    url: String,
    /// The server answers canned bytes (prompts are not checked against the task).
    #[arg(long)]
    canned: bool,
    /// Concurrent sessions, one connection each.
    #[arg(long, default_value_t = 16)]
    sessions: usize,
    /// Measurement window, seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Warm-up before the window, seconds.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Size of the `big` result, bytes.
    #[arg(long, default_value_t = 1 << 20)]
    big_bytes: usize,
    /// Idle-session counts at which memory is read.
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    steps: Vec<usize>,
    /// Connections creating and deleting idle sessions.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// The server's process id: `idle` reads its memory, `calls` and `episodes` its CPU time
    /// over the window.
    #[arg(long)]
    pid: Option<u32>,
    /// `calls` and `episodes`: run exactly this many operations in all, each one timed, instead
    /// of a warm-up and a window (instruction counts are taken over a known number).
    #[arg(long, value_name = "N")]
    ops: Option<u64>,
    /// Client threads; 1 (the default) keeps the client off the server's second core.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Give up after this many seconds, whatever the workload reached.
    #[arg(long, default_value_t = 300.0)]
    time_limit: f64,
    /// The scripted model server's OpenAI base URL (`agent` workload).
    #[arg(long, value_name = "URL")]
    model_base: Option<String>,
    /// How long each `sleep` call of the concurrency workload sleeps, milliseconds.
    #[arg(long, default_value_t = 1000)]
    sleep_ms: u64,
    /// Loopback source addresses the concurrency workload spreads its connections over.
    #[arg(long, default_value_t = 8)]
    sources: u8,
    /// The environment the concurrency workload's sessions are of.
    #[arg(long, default_value = client::ENV)]
    env: String,
    /// The tool the concurrency workload calls (default `sleep` with `--sleep-ms`).
    #[arg(long)]
    tool: Option<String>,
    /// Its input, JSON.
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// Text every answer of that tool must contain.
    #[arg(long)]
    expect: Option<String>,
    /// Make each session's first call while setting it up, before the window (for a tool
    /// whose first call starts what later ones reuse, such as a sandbox); reported as `prime`.
    #[arg(long)]
    prime: bool,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, 86_400.0))
}

fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
}

/// The file descriptors the concurrency workload needs beyond one per connection.
const SPARE_FDS: u64 = 256;

/// Fail early, saying what to do, when `sessions` connections would run out of descriptors.
fn check_fd_limit(sessions: usize) -> Result<(), String> {
    let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .map_err(|e| format!("reading the file descriptor limit: {e}"))?;
    let need = sessions as u64 + SPARE_FDS;
    if soft < need {
        return Err(format!(
            "{sessions} sessions need {need} file descriptors and the limit is {soft}; raise it \
             (`ulimit -n {need}`; `cargo xtask bench` raises its own)"
        ));
    }
    Ok(())
}

fn load(args: LoadArgs) -> Result<(), String> {
    let target = Target::parse(&args.url, args.canned)?;
    if matches!(args.workload, Workload::Concurrency) {
        check_fd_limit(args.sessions)?;
    }
    let call = match (&args.tool, &args.input) {
        (Some(tool), input) => {
            let input: serde_json::Value = match input {
                Some(text) => serde_json::from_str(text).map_err(|e| format!("--input: {e}"))?,
                None => json!({}),
            };
            concurrency::Call::Tool {
                name: tool.clone(),
                input,
                expect: args.expect.clone().unwrap_or_default(),
            }
        }
        (None, _) => concurrency::Call::Sleep,
    };
    let concurrency = concurrency::Opts {
        target: target.clone().with_env(&args.env),
        call,
        sessions: args.sessions.max(1),
        sleep: Duration::from_millis(args.sleep_ms),
        duration: secs(args.duration),
        warmup: secs(args.warmup),
        threads: args.threads,
        sources: args.sources,
        prime: args.prime,
    };
    let limit = secs(args.time_limit);
    let opts = LoadOpts {
        target,
        sessions: args.sessions.max(1),
        duration: secs(args.duration),
        warmup: secs(args.warmup),
        big_bytes: args.big_bytes,
        steps: args.steps,
        concurrency: args.concurrency.max(1),
        pid: args.pid,
        // Leave room inside the time limit for deleting the sessions again.
        deadline: Instant::now() + limit.mul_f64(0.6),
        ops: args.ops,
    };
    let workload = args.workload;
    let (url, model_base) = (
        args.url.clone(),
        args.model_base.clone().unwrap_or_default(),
    );
    if matches!(workload, Workload::Agent) && model_base.is_empty() {
        return Err("the agent workload needs --model-base".into());
    }
    // The concurrency workload brings its own runtimes; this one only waits for them.
    let threads = match workload {
        Workload::Concurrency => 1,
        _ => args.threads,
    };
    let rt = runtime(threads).map_err(|e| format!("tokio runtime: {e}"))?;
    let report = rt.block_on(async move {
        let run = async {
            match workload {
                Workload::Calls => workloads::calls(&opts).await,
                Workload::Episodes => workloads::episodes(&opts).await,
                Workload::Big => workloads::big(&opts).await,
                Workload::Idle => workloads::idle(&opts).await,
                Workload::Agent => agent::agent(&url, &model_base, &opts).await,
                // Its own threads, each with a current-thread runtime.
                Workload::Concurrency => {
                    tokio::task::spawn_blocking(move || concurrency::run(concurrency))
                        .await
                        .unwrap_or_else(|e| {
                            let mut errors = Errors::default();
                            errors.add_other(format!("the concurrency workload failed: {e}"));
                            json!({"errors": errors.to_json()})
                        })
                }
            }
        };
        match tokio::time::timeout(limit, run).await {
            Ok(v) => v,
            Err(_) => {
                let mut e = Errors::default();
                e.add_other(format!("the workload did not finish within {limit:?}"));
                json!({"errors": e.to_json()})
            }
        }
    });
    // Workers still blocked on a dead server must not hold the process open.
    rt.shutdown_timeout(Duration::from_secs(1));
    println!("{report}");
    Ok(())
}

fn sandbox_costs(opts: sandbox::Opts) -> Result<(), String> {
    let rt = runtime(2).map_err(|e| format!("tokio runtime: {e}"))?;
    let report = rt.block_on(sandbox::run(&opts))?;
    println!("{report}");
    Ok(())
}

fn bare(host: std::net::IpAddr, port: u16, big_bytes: usize) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    rt.block_on(bare::serve(SocketAddr::new(host, port), big_bytes))
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Bare {
            host,
            port,
            big_bytes,
        } => bare(host, port, big_bytes),
        Command::Load(args) => load(*args),
        Command::Sandbox { rounds, later } => sandbox_costs(sandbox::Opts { rounds, later }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ors-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
