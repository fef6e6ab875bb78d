//! Serve the `gsm8k` environment: `cargo run --release -p ors-examples --bin gsm8k`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ors_examples::cli::{self, ServeArgs};
use ors_examples::gsm8k::{self, Gsm8k};

/// Serve grade-school math word problems over the Open Reward Standard.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// Serve the GSM8K files DIR/train.jsonl and DIR/test.jsonl instead of the embedded problems.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
}

/// jemalloc, configured in `.cargo/config.toml` to hand freed pages back to the OS within
/// about a second: glibc kept the memory of deleted sessions in its arenas.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(dir) = &args.data {
        match gsm8k::use_data_dir(dir) {
            Ok((train, test)) => eprintln!(
                "gsm8k: serving {train} train and {test} test problems from {}",
                dir.display()
            ),
            Err(e) => {
                eprintln!("gsm8k: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    cli::serve::<Gsm8k>("gsm8k", &args.serve).await
}
