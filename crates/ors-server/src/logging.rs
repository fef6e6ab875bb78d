//! Log setup for server binaries (cargo feature `init_tracing`, on by default; a binary that
//! installs its own `tracing` subscriber turns it off and drops `tracing-subscriber`).

use std::io::IsTerminal as _;

/// How log lines are written (`ORS_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    /// Human-readable lines (the default).
    Text,
    /// One JSON object per line, for log collectors (`ORS_LOG_FORMAT=json`).
    Json,
}

/// The format `ORS_LOG_FORMAT` asks for; `Err` keeps the unknown value for the warning.
fn log_format(value: Option<&str>) -> Result<LogFormat, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("text") => Ok(LogFormat::Text),
        Some("json") => Ok(LogFormat::Json),
        Some(other) => Err(other.to_owned()),
    }
}

/// The filter when `RUST_LOG` is unset: `info`, but the MCP SDK (rmcp, used by `McpToolset`)
/// only from `warn`, as it logs every MCP session it starts at `info` (one per episode).
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// Install a `tracing` subscriber writing to stderr, filtered by `RUST_LOG` (default `info`,
/// rmcp from `warn`).
/// `ORS_LOG_FORMAT=json` writes one JSON object per line (`timestamp`, `level`, `fields`
/// with the message, `target`, and the request's `span` with its session, env and tool);
/// otherwise lines are text, in colour only when stderr is a terminal.
///
/// At `info` the server logs only start, drain, stop and problems; one line per request
/// appears at `debug` (`RUST_LOG=ors_server=debug`). Secrets are never logged. Calling it
/// twice is harmless.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    let requested = std::env::var("ORS_LOG_FORMAT").ok();
    let format = log_format(requested.as_deref());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        Ok(LogFormat::Json) => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        Ok(LogFormat::Text) | Err(_) => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
    if let Err(unknown) = format {
        tracing::warn!(
            value = %unknown,
            "ORS_LOG_FORMAT is 'text' or 'json'; writing text"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_text_unless_json_is_asked_for() {
        assert_eq!(log_format(None), Ok(LogFormat::Text));
        assert_eq!(log_format(Some("text")), Ok(LogFormat::Text));
        assert_eq!(log_format(Some(" JSON ")), Ok(LogFormat::Json));
        assert_eq!(log_format(Some("xml")), Err("xml".to_owned()));
    }
}
