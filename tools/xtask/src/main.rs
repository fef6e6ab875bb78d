//! Project automation for ors-rs: `cargo xtask test`, `cargo xtask conformance`,
//! `cargo xtask bench`, `cargo xtask readme`, and the measurement commands (`fuzz`, `soak`,
//! `bigtasks`, `blocking`, `memprobe`, `scale`). Run `cargo xtask --help`.

mod bench;
mod bigtasks;
mod blocking;
mod conformance;
mod fuzz;
mod interop;
mod memprobe;
mod procs;
mod python;
mod readme;
mod scale;
mod soak;
mod test;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// ors-rs project tasks.
#[derive(Parser)]
#[command(name = "cargo xtask", about = "ors-rs project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every check CI runs: fmt, clippy, tests, each fuzz target briefly, interop with the
    /// Python reference, conformance, the scale-out behind nginx (short), the README's
    /// examples, a quick bench.
    Test(test::TestArgs),
    /// Check an ORS server against the protocol, clause by clause.
    Conformance(conformance::XtaskConformanceArgs),
    /// Measure speed and memory against the Python reference and a bare hyper server.
    Bench(bench::BenchArgs),
    /// Run the README's console examples against a gsm8k server and compare their output.
    Readme,
    /// Serve ten million tasks from one JSONL and one Parquet file: start-up, memory, latency.
    Bigtasks(bigtasks::BigTasksArgs),
    /// Measure /health and echo latency while sessions run 2 s CPU-bound tools.
    Blocking(blocking::BlockingArgs),
    /// Measure a server's memory under trickled bodies, lingering results and JSON-heavy
    /// bodies (Linux).
    Memprobe(memprobe::MemprobeArgs),
    /// Run every cargo-fuzz target in fuzz/ for a while (nightly toolchain).
    Fuzz(fuzz::FuzzArgs),
    /// A mixed workload against the release server for N minutes; passes when its memory and
    /// open files stay flat and nothing is lost.
    Soak(soak::SoakArgs),
    /// Replicas behind a real nginx with deploy/nginx/ors.conf: spread, long calls, scale up,
    /// a replica killed, one drained.
    Scale(scale::ScaleArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Test(args) => test::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Readme => readme::run().map(|()| ExitCode::SUCCESS),
        Command::Bigtasks(args) => bigtasks::run(args),
        Command::Blocking(args) => blocking::run(args),
        Command::Memprobe(args) => memprobe::run(args),
        Command::Fuzz(args) => fuzz::run(args),
        Command::Soak(args) => soak::run(args),
        Command::Scale(args) => scale::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
