//! `ors`: list, inspect, play and check Open Reward Standard environments from the command
//! line.

mod args;
mod call;
mod check;
mod eval;
#[cfg(feature = "mcp")]
mod mcp;
mod new;
mod play;
mod render;
mod report;
mod results;
#[cfg(feature = "mcp")]
mod shutdown;
mod stats;
mod trajectories;

use std::process::ExitCode;

use args::{parse_range, JsonOut};
use clap::{Args, Parser, Subcommand};
use ors_client::{Client, ClientBuilder, Error, Provider, Split, TlsRoots};

#[derive(Parser, Debug)]
#[command(
    name = "ors",
    version,
    about = "Talk to an Open Reward Standard (ORS) server"
)]
struct Cli {
    /// Server URL.
    #[arg(long, global = true, env = ors_client::URL_ENV, default_value = ors_client::DEFAULT_URL)]
    url: String,
    /// API key sent as X-API-Key.
    #[arg(long, global = true, env = ors_client::API_KEY_ENV, hide_env_values = true)]
    api_key: Option<String>,
    /// A PEM file of CA certificates to trust for https:// (a self-signed or private
    /// deployment), on top of the root certificates.
    #[arg(long, global = true, env = ors_client::CA_CERT_ENV, value_name = "FILE")]
    ca_cert: Option<std::path::PathBuf>,
    /// Root certificates to trust for https://: mozilla (built in) or system.
    #[arg(long, global = true, env = ors_client::TLS_ROOTS_ENV, value_name = "ROOTS")]
    tls_roots: Option<TlsRoots>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the server's environments.
    Envs {
        #[command(flatten)]
        out: JsonOut,
    },
    /// List an environment's tools.
    Tools {
        /// Environment name.
        env: String,
        #[command(flatten)]
        out: JsonOut,
        /// Print the tools in an LLM provider's format (JSON): openai, anthropic or gemini.
        #[arg(long)]
        format: Option<Provider>,
    },
    /// List an environment's splits.
    Splits {
        /// Environment name.
        env: String,
        #[command(flatten)]
        out: JsonOut,
    },
    /// List the tasks of a split.
    Tasks(TasksArgs),
    /// Run one episode: make the given calls in order, print each result (and progress),
    /// delete the session.
    Call(call::CallArgs),
    /// Play one episode interactively: type `TOOL {JSON}` lines (stdin may be a pipe).
    Play {
        /// Environment name.
        env: String,
        /// Split of the task.
        #[arg(long)]
        split: String,
        /// Index of the task in the split.
        #[arg(long)]
        index: i64,
    },
    /// Check that an environment, on any ORS server, is ready for training: discovery,
    /// episodes on sampled tasks, and its tools fuzzed from their input schemas.
    Check(check::CheckArgs),
    /// Check a server hosting the conformance fixture against the protocol, clause by clause.
    Conformance(ors_conformance::ConformanceArgs),
    /// Evaluate a policy over a split's tasks (a language model as an agent, OpenAI-compatible
    /// or Anthropic API, or random tool calls): one trajectory per line in --out, a summary
    /// at the end.
    Eval(Box<eval::EvalArgs>),
    /// Turn trajectory files of `ors eval --out` into one self-contained HTML report (summary,
    /// plots, task table, trajectory viewer, comparison of runs) or a Markdown summary.
    Report(report::ReportArgs),
    /// Serve one episode to an MCP client (Claude Code, Codex, IDE agents): the episode's tools
    /// as MCP tools, its prompt as the `task` prompt, over stdio or streamable HTTP.
    #[cfg(feature = "mcp")]
    Mcp(mcp::McpArgs),
    /// Serve one episode to an MCP client (needs an `ors` built with the `mcp` feature:
    /// `cargo install --path crates/ors-cli --features mcp`).
    #[cfg(not(feature = "mcp"))]
    Mcp(WithoutMcp),
    /// Create a new environment crate in DIR: a small working environment (two splits, a
    /// typed task, a multi-step tool, a test), ready for `cargo run` and `ors check`.
    New(new::NewArgs),
}

/// The arguments of `ors tasks`.
#[derive(Args, Debug)]
struct TasksArgs {
    /// Environment name.
    env: String,
    /// Split name.
    #[arg(long)]
    split: String,
    /// Only the tasks in A:B (Python slice rules; either side may be empty or negative).
    #[arg(long, allow_hyphen_values = true, value_name = "A:B", value_parser = parse_range)]
    range: Option<(Option<i64>, Option<i64>)>,
    #[command(flatten)]
    out: JsonOut,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let url = cli.url.clone();
    let builder = client_builder(&cli);
    let result = match cli.command {
        Command::Conformance(args) => {
            // The runner speaks blocking raw HTTP/1.1 (so it can send malformed requests).
            let api_key = cli.api_key.filter(|k| !k.is_empty());
            let run = move || ors_conformance::run_cli(&args, &url, api_key);
            return match tokio::task::spawn_blocking(run).await {
                Ok(Ok(code)) => code,
                Ok(Err(e)) => render::fail("ors", &e),
                // A JoinError shows a panic's message escaped: one line already.
                Err(e) => render::fail("ors", &format!("the conformance runner failed: {e}")),
            };
        }
        // Files in, a file out: no server is involved.
        Command::Report(args) => {
            return report::run(&args).unwrap_or_else(|e| render::fail("ors report", &e))
        }
        Command::New(args) => return new::run(&args),
        Command::Check(args) => return check::run(args, builder).await,
        Command::Eval(args) => eval::run(*args, builder).await,
        command => run(command, builder).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let msg = match &e {
                // The client's connection errors name the URL; others get it added.
                Error::Transport(m) if m.contains(url.trim_end_matches('/')) => m.clone(),
                Error::Transport(m) => format!("{url}: {m}"),
                Error::Http { status: 401, .. } => {
                    format!("{e} (pass --api-key or set {})", ors_client::API_KEY_ENV)
                }
                _ => e.to_string(),
            };
            render::fail("ors", &msg)
        }
    }
}

/// `ors mcp`'s arguments in a build without the `mcp` feature: taken as they come, so the
/// answer is the one thing missing (the feature), not a complaint about a flag.
#[cfg(not(feature = "mcp"))]
#[derive(Args, Debug)]
struct WithoutMcp {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<String>,
}

#[cfg(not(feature = "mcp"))]
impl WithoutMcp {
    /// Why `ors mcp` did nothing, and how to get one that does. The MCP SDK and its HTTP
    /// server are a third of the CLI's build, so a first install leaves them out.
    const MESSAGE: &'static str = "this ors was built without MCP support (the `mcp` \
        feature); install one with it: cargo install --path crates/ors-cli --features mcp";
}

/// A client builder for the global options: URL, API key, CA file and roots.
fn client_builder(cli: &Cli) -> ClientBuilder {
    let builder = Client::builder(&cli.url);
    let builder = match &cli.api_key {
        Some(k) if !k.is_empty() => builder.api_key(k),
        _ => builder.no_api_key(),
    };
    // The CA file and the roots set when given.
    let builder = cli.ca_cert.iter().fold(builder, ClientBuilder::ca_cert);
    cli.tls_roots
        .into_iter()
        .fold(builder, ClientBuilder::tls_roots)
}

/// The commands that talk to the server through the client.
async fn run(command: Command, builder: ClientBuilder) -> Result<ExitCode, Error> {
    let client = builder.build()?;
    match command {
        Command::Envs { out } => print(out, &client.environments().await?, |envs| {
            envs.iter().map(|e| format!("{e}\n")).collect()
        }),
        Command::Tools { env, format, out } => {
            let env = client.environment(env);
            match format {
                Some(p) => println!("{}", render::pretty(&env.tools_for(p).await?)),
                None if out.json => println!("{}", render::pretty(&env.tools().await?)),
                None => print!("{}", render::tools_table(&env.listing().await?)),
            }
        }
        Command::Splits { env, out } => {
            print(out, &client.environment(env).splits().await?, |splits| {
                let row = |s: &Split| vec![s.name.clone(), s.split_type.to_string()];
                let rows: Vec<_> = splits.iter().map(row).collect();
                render::table(&["NAME", "TYPE"], &rows, 60)
            });
        }
        Command::Tasks(args) => tasks(&client, args).await?,
        Command::Call(args) => return call::call(&client, args).await,
        Command::Play { env, split, index } => {
            play::run(&client.environment(env), &split, index).await?;
        }
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => return mcp::run(client.environment(args.env.clone()), args).await,
        #[cfg(not(feature = "mcp"))]
        Command::Mcp(_) => {
            eprintln!("ors: error: {}", WithoutMcp::MESSAGE);
            return Ok(ExitCode::from(2));
        }
        // Check, Conformance, Report, New, Eval.
        _ => unreachable!("handled in main"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn tasks(client: &Client, args: TasksArgs) -> Result<(), Error> {
    let (env, split) = (client.environment(args.env), args.split.as_str());
    let (first, tasks) = match args.range {
        None => (0, env.tasks(split).await?),
        Some((start, stop)) => {
            let tasks = env.task_range(split, start, stop).await?;
            // Negative bounds count from the end; resolve them to show real indices.
            let first = match start {
                Some(s) if s < 0 => {
                    let n = usize::try_from(env.num_tasks(split).await?).unwrap_or(usize::MAX);
                    ors_core::slice_bounds(start, stop, n).start
                }
                s => usize::try_from(s.unwrap_or(0)).unwrap_or(0),
            };
            (first, tasks)
        }
    };
    print(args.out, &tasks, |tasks| render::tasks_table(first, tasks));
    Ok(())
}

/// `value` as JSON with `--json`, else as the text `text` makes of it.
fn print<T: serde::Serialize>(out: JsonOut, value: &T, text: impl FnOnce(&T) -> String) {
    if out.json {
        println!("{}", render::pretty(value));
    } else {
        print!("{}", text(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// A first install has no `ors mcp`: whatever flags a user copied from the docs, the
    /// answer must be the missing feature and how to get it, not a complaint about a flag.
    /// (`cargo xtask test` runs this crate's unit tests without the feature for this.)
    #[cfg(not(feature = "mcp"))]
    #[test]
    fn ors_mcp_without_the_feature_takes_any_flags_and_names_the_feature() {
        let cli = Cli::try_parse_from([
            "ors",
            "mcp",
            "gsm8k",
            "--split",
            "test",
            "--http",
            "127.0.0.1:0",
            "--token",
            "t",
        ])
        .unwrap();
        assert!(matches!(cli.command, Command::Mcp(_)), "{:?}", cli.command);
        assert!(
            WithoutMcp::MESSAGE.contains("--features mcp"),
            "{}",
            WithoutMcp::MESSAGE
        );
    }
}
