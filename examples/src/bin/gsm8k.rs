//! Serve the `gsm8k` environment: `cargo run --release -p ors-examples --bin gsm8k`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ors_examples::cli::{self, ServeArgs};
use ors_examples::gsm8k::{Gsm8k, Problems};

/// Serve grade-school math word problems over the Open Reward Standard.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// Serve GSM8K files instead of the embedded problems, read on demand: a directory with
    /// train.jsonl / test.jsonl (or .parquet), or files named for their split
    /// (train-00000-of-00001.parquet). Repeat for several files.
    #[arg(long, value_name = "DIR|FILE")]
    data: Vec<PathBuf>,
}

/// With the cargo feature `jemalloc` (the benchmarks build with it): jemalloc, configured in
/// `.cargo/config.toml` to hand freed pages back to the OS within about a second (glibc kept
/// the memory of deleted sessions in its arenas).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let problems = if args.data.is_empty() {
        Problems::Embedded
    } else {
        let started = std::time::Instant::now();
        match Problems::open(&args.data) {
            Ok(problems) => {
                eprintln!(
                    "gsm8k: serving {} train and {} test problems, indexed in {} ms",
                    problems.num_tasks("train").unwrap_or(0),
                    problems.num_tasks("test").unwrap_or(0),
                    started.elapsed().as_millis()
                );
                problems
            }
            Err(e) => {
                eprintln!("gsm8k: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    cli::serve::<Gsm8k>("gsm8k", &args.serve, problems).await
}
