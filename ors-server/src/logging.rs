//! Log setup for server binaries (cargo feature `init_tracing`, on by default; a binary that
//! installs its own `tracing` subscriber turns it off and drops `tracing-subscriber`).

use std::io::IsTerminal as _;

/// Install a `tracing` subscriber writing to stderr, filtered by `RUST_LOG` (default `info`),
/// in colour only when stderr is a terminal (plain text in files, pipes and log collectors).
///
/// At `info` the server logs only start, stop and problems; one line per request appears at
/// `debug` (`RUST_LOG=ors_server=debug`). Secrets are never logged. Calling it twice is harmless.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
