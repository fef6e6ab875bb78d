//! Serve the `conformance` fixture that the conformance runner and interop tests drive.

use std::process::ExitCode;

use clap::Parser;
use ors_examples::cli::{self, ServeArgs};
use ors_examples::conformance::Conformance;

/// Serve the ORS conformance fixture environment.
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
    cli::serve::<Conformance>("conformance", &args.serve, ()).await
}
