//! Project automation for ors-rs: `cargo xtask test`, `cargo xtask conformance`,
//! `cargo xtask bench`, `cargo xtask readme`, and the measurement commands (`fuzz`, `soak`,
//! `bigtasks`, `blocking`, `memprobe`, `scale`, `coldbuild`, `circles`, `lines`, `new-crate`). Run `cargo xtask --help`.

mod bench;
mod bigtasks;
mod blocking;
mod browser;
mod circles;
mod coldbuild;
mod conformance;
mod debian;
mod fuzz;
mod interop;
mod lines;
mod memprobe;
mod modtree;
mod newcrate;
mod pages;
mod procs;
mod python;
mod readme;
mod scale;
mod settings;
mod soak;
mod test;
mod workspace;

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
    /// Every check CI runs: fmt, clippy, tests, the HTML report in Chromium, each fuzz target
    /// briefly, interop with the Python reference, conformance, the scale-out behind nginx
    /// (short), the examples of the README and the guides, a quick bench.
    Test(test::TestArgs),
    /// Check an ORS server against the protocol, clause by clause.
    Conformance(conformance::XtaskConformanceArgs),
    /// Measure speed and memory against the Python reference and a bare hyper server.
    Bench(bench::BenchArgs),
    /// Run the console examples of the README and the guides in docs/ against a gsm8k server
    /// and compare their output (and check the settings tables).
    Readme {
        /// Only rewrite the guides' settings tables from the settings' declarations.
        #[arg(long)]
        settings: bool,
    },
    /// Use `ors report`'s HTML page in Chromium (installed when missing): the checks, the
    /// 10,000-episode timing and a screenshot of each view in target/tmp/report-browser/.
    Browser,
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
    /// Time a newcomer's first builds from cold: the README's serve command to its ready
    /// line and its CLI install, each in a fresh cargo home and target directory.
    Coldbuild(coldbuild::ColdbuildArgs),
    /// Print the import circles between the modules of each crate; fails when a crate has one.
    Circles(circles::CirclesArgs),
    /// Make a crate with `ors new`, run its tests, serve it and run `ors check` on it.
    NewCrate,
    /// Count the lines of code of the seven product crates (not tests, comments or blanks),
    /// and compare them with a revision's.
    Lines(lines::LinesArgs),
}

/// `cargo run` (which `cargo xtask` is) describes the package it runs to this process
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...), and every cargo run from here would inherit
/// that. Build scripts that watch those variables (ring's) then saw other values than in the
/// `cargo run` that built xtask, so each `cargo xtask` rebuilt ring, rustls and every crate
/// above them twice. `CARGO` stays: it names the cargo to run. Called before any thread starts.
fn forget_cargo_run() {
    let set_by_cargo_run = |name: &str| {
        name.starts_with("CARGO_PKG_")
            || matches!(
                name,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
            )
    };
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_run) {
            std::env::remove_var(name);
        }
    }
}

fn main() -> ExitCode {
    forget_cargo_run();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Test(args) => test::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Readme { settings: true } => settings::write().map(|()| ExitCode::SUCCESS),
        Command::Readme { settings: false } => readme::run().map(|()| ExitCode::SUCCESS),
        Command::Browser => browser::run().map(|()| ExitCode::SUCCESS),
        Command::Bigtasks(args) => bigtasks::run(args),
        Command::Blocking(args) => blocking::run(args),
        Command::Memprobe(args) => memprobe::run(args),
        Command::Fuzz(args) => fuzz::run(args),
        Command::Soak(args) => soak::run(args),
        Command::Scale(args) => scale::run(args),
        Command::Coldbuild(args) => coldbuild::run(args),
        Command::Circles(args) => circles::run(args),
        Command::Lines(args) => lines::run(args),
        Command::NewCrate => newcrate::run().map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
