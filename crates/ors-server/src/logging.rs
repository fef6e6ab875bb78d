//! Log setup for server binaries (cargo feature `init_tracing`, on by default; a binary that
//! installs its own `tracing` subscriber turns it off and drops `tracing-subscriber`).

use std::io::IsTerminal as _;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

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

/// What `RUST_LOG` asks for: a comma-separated list of `LEVEL` and `TARGET=LEVEL` directives
/// (`debug`, `info,ors_server=debug`); `Err` keeps the value and why for the warning.
fn log_filter(value: Option<&str>) -> Result<Targets, (String, String)> {
    match value.map(str::trim) {
        None | Some("") => Ok(DEFAULT_FILTER.parse().unwrap_or_default()),
        Some(v) => v.parse().map_err(|e| (v.to_owned(), format!("{e}"))),
    }
}

/// Install a `tracing` subscriber writing to stderr, filtered by `RUST_LOG` (default `info`,
/// rmcp from `warn`): `LEVEL` and `TARGET=LEVEL` directives separated by commas, as
/// `ors_server=debug,info`. A value that does not parse is warned about and the default used.
/// `ORS_LOG_FORMAT=json` writes one JSON object per line (`timestamp`, `level`, `fields`
/// with the message, `target`, and the request's `span` with its session, env and tool);
/// otherwise lines are text, in colour only when stderr is a terminal.
///
/// At `info` the server logs only start, drain, stop and problems; one line per request
/// appears at `debug` (`RUST_LOG=ors_server=debug`). Secrets are never logged. Calling it
/// twice is harmless.
pub fn init_tracing() {
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
    let format = log_format(std::env::var("ORS_LOG_FORMAT").ok().as_deref());
    let targets = filter
        .clone()
        .unwrap_or_else(|_| log_filter(None).unwrap_or_default());
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(targets);
    let _ = match format {
        Ok(LogFormat::Json) => registry
            .with(layer.json().with_current_span(true).with_span_list(false))
            .try_init(),
        Ok(LogFormat::Text) | Err(_) => registry
            .with(layer.with_ansi(std::io::stderr().is_terminal()))
            .try_init(),
    };
    if let Err(unknown) = format {
        tracing::warn!(value = %unknown, "ORS_LOG_FORMAT is 'text' or 'json'; writing text");
    }
    if let Err((value, why)) = filter {
        tracing::warn!(
            %value,
            %why,
            "RUST_LOG is a comma-separated list of LEVEL and TARGET=LEVEL (like 'info,ors_server=debug'); logging at the default {DEFAULT_FILTER}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_is_levels_and_targets() {
        use tracing::level_filters::LevelFilter;
        let default = log_filter(None).unwrap();
        assert!(default.would_enable("ors_server", &tracing::Level::INFO));
        assert!(!default.would_enable("ors_server", &tracing::Level::DEBUG));
        assert!(!default.would_enable("rmcp::service", &tracing::Level::INFO));
        let debug = log_filter(Some("warn,ors_server=debug")).unwrap();
        assert!(debug.would_enable("ors_server::call", &tracing::Level::DEBUG));
        assert!(!debug.would_enable("hyper", &tracing::Level::INFO));
        assert_eq!(
            log_filter(Some("trace")).unwrap().default_level(),
            Some(LevelFilter::TRACE)
        );
        let (value, _) = log_filter(Some("ors_server=loud")).unwrap_err();
        assert_eq!(value, "ors_server=loud");
    }

    #[test]
    fn the_format_is_text_unless_json_is_asked_for() {
        assert_eq!(log_format(None), Ok(LogFormat::Text));
        assert_eq!(log_format(Some("text")), Ok(LogFormat::Text));
        assert_eq!(log_format(Some(" JSON ")), Ok(LogFormat::Json));
        assert_eq!(log_format(Some("xml")), Err("xml".to_owned()));
    }
}
