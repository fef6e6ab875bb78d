//! `cargo xtask conformance` (being written).

use std::process::ExitCode;

/// Arguments of `cargo xtask conformance`.
#[derive(clap::Args)]
pub struct ConformanceArgs {}

/// Run the conformance checks.
pub fn run(_args: ConformanceArgs) -> Result<ExitCode, String> {
    Err("conformance runner not written yet".to_owned())
}
