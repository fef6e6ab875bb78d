//! Serve the `code` environment: `cargo run --release -p ors-examples --bin code`.
//!
//! The agent's commands run in a bubblewrap sandbox per episode; a machine where sandboxes
//! cannot be made (no `bwrap`, user namespaces blocked) is refused at start-up, naming the
//! cause and the fix.

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

/// With the cargo feature `jemalloc` (the benchmarks build with it): jemalloc, configured in
/// `.cargo/config.toml` to hand freed pages back to the OS within about a second (glibc kept
/// the memory of deleted sessions in its arenas).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let sandboxes = match ors_examples::code::sandboxes() {
        Ok(sandboxes) => sandboxes,
        Err(e) => {
            eprintln!("code: {e}");
            return ExitCode::FAILURE;
        }
    };
    cli::serve::<Code>("code", &args.serve, sandboxes).await
}
