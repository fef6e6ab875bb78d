//! `cargo xtask bench` (being written).

use std::process::ExitCode;

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct BenchArgs {}

/// Run the benchmarks.
pub fn run(_args: BenchArgs) -> Result<ExitCode, String> {
    Err("benchmark not written yet".to_owned())
}
