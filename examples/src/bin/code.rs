//! Serve the `code` environment: `cargo run --release -p ors-examples --bin code`.
//!
//! Commands the agent runs execute on this machine as this user: serve it in a container or VM.

use std::process::ExitCode;

use clap::Parser;
use ors_examples::cli::{self, ServeArgs};
use ors_examples::code::Code;

/// Serve Python programming exercises over the Open Reward Standard.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
}

/// jemalloc, configured in `.cargo/config.toml` to hand freed pages back to the OS within
/// about a second: glibc kept the memory of deleted sessions in its arenas.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    cli::serve::<Code>("code", &args.serve).await
}
