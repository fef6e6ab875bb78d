//! The one error type of the client.

use std::error::Error as StdError;

use ors_core::ErrorCode;

use crate::config::SizeLimit;

/// Everything that can go wrong talking to an ORS server; match on the variant to decide what
/// to do (an agent can read a [`Error::ToolError`] and try again, a trainer may skip an episode
/// on [`Error::SessionTerminated`], and so on).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The tool ran and answered `{"ok": false, "error": ...}` (bad input, unknown tool, or an
    /// error the tool chose to report). The session is still usable.
    #[error("tool error: {message}")]
    ToolError {
        /// The message the server sent.
        message: String,
        /// Why the call was refused, when the server said (PROTOCOL_NOTES row `error-reason`):
        /// `episode_finished` means the episode is over and no call will run.
        reason: Option<ors_core::ToolErrorReason>,
    },
    /// The tool crashed (an SSE `error` event), or a reconnect asked for a result the server no
    /// longer has. The session is still usable.
    #[error("tool crashed: {message}")]
    ToolCrashed {
        /// The message the server sent.
        message: String,
    },
    /// The environment does not offer an optional capability (`score_group` of an environment
    /// that does not score groups, PROTOCOL_NOTES row `score-group`): nothing ran, and the
    /// session is still usable.
    #[error("environment '{env}' does not support {capability}")]
    Unsupported {
        /// The environment.
        env: String,
        /// The capability ("score_group").
        capability: String,
    },
    /// The server answered with an HTTP error status.
    #[error("HTTP {status}{}: {detail}", code_note(.code.as_deref()))]
    Http {
        /// The status code.
        status: u16,
        /// The server's machine-readable `code` (PROTOCOL_NOTES row `error-codes`; see
        /// [`ErrorCode`]); `None` from servers without codes, such as the Python reference.
        code: Option<String>,
        /// The server's `detail` (or the raw body when it sent no JSON detail), for people.
        detail: String,
    },
    /// The session is gone (deleted, reaped, or its server is unreachable); every later call on
    /// it fails fast with this error.
    #[error("session {sid} terminated: {reason}")]
    SessionTerminated {
        /// The session id.
        sid: String,
        /// Why the client considers the session dead.
        reason: String,
    },
    /// The connection could not be made or broke, after any retries.
    #[error("transport error: {0}")]
    Transport(String),
    /// A request, a heartbeat or a whole call took too long.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The server sent something that is not valid ORS (bad SSE, bad JSON, missing fields).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The TLS handshake with an `https://` server failed: its certificate is not trusted
    /// (add its CA with [`crate::ClientBuilder::ca_cert`] or `ORS_CA_CERT`), names another
    /// host, has expired, or the server does not speak TLS. Not retried.
    #[error("TLS handshake with {host} failed: {detail}")]
    Tls {
        /// The `host:port` the client was connecting to.
        host: String,
        /// What rustls found wrong, and what the client trusts.
        detail: String,
    },
    /// The caller passed something the client cannot send (a bad URL, a non-object tool input).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A rollout policy failed to choose the next call.
    #[error("policy error: {0}")]
    Policy(String),
    /// An agent's model server failed: it answered an error status other than 429 and 5xx
    /// (with the API's message), or kept failing with those or broken connections through
    /// every retry, or sent a reply that is not its API's. (A model that gives no whole
    /// answer within the step is [`Error::Timeout`]; an answer over its limit,
    /// [`Error::ResponseTooLarge`].)
    #[error("model error: {message}")]
    Model {
        /// The last HTTP status, when the server answered.
        status: Option<u16>,
        /// What went wrong, with the API's own message when it sent one.
        message: String,
    },
    /// A response was larger than a limit of this client (a call's result, one SSE line or
    /// event, a JSON body). The connection was dropped and the request is not retried (its
    /// answer would be just as large); the session is still usable.
    #[error(
        "{what} exceeds the client's limit of {} (raise it with {})",
        human_bytes(*.limit), .kind.how_to_raise()
    )]
    ResponseTooLarge {
        /// What was too large ("the result of tool 'read_file'").
        what: String,
        /// The limit, in bytes.
        limit: usize,
        /// Which limit it was.
        kind: SizeLimit,
    },
}

/// A byte count for people: `256 MiB`, `1.5 KiB`, `17 bytes`.
pub(crate) fn human_bytes(n: usize) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {} ({n} bytes)", UNITS[unit])
    }
}

/// The client's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status of an [`Error::Http`] or [`Error::Model`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Http { status, .. } => Some(*status),
            Error::Model { status, .. } => *status,
            _ => None,
        }
    }

    /// A stable snake_case name of the variant, for logs and trajectories (`http`, `model`,
    /// `transport`, `timeout`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::ToolError { .. } => "tool_error",
            Error::ToolCrashed { .. } => "tool_crashed",
            Error::Unsupported { .. } => "unsupported",
            Error::Http { .. } => "http",
            Error::SessionTerminated { .. } => "session_terminated",
            Error::Transport(_) => "transport",
            Error::Timeout(_) => "timeout",
            Error::Protocol(_) => "protocol",
            Error::Tls { .. } => "tls",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::Policy(_) => "policy",
            Error::Model { .. } => "model",
            Error::ResponseTooLarge { .. } => "too_large",
        }
    }

    /// The server's machine-readable code of an [`Error::Http`], as sent.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Http { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// The code of an [`Error::Http`] when it is one this version knows: decide on this,
    /// never on the words of the detail.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.code().and_then(|c| c.parse().ok())
    }

    /// Whether this error ended the session (the session cannot be used again).
    pub fn is_session_terminated(&self) -> bool {
        matches!(self, Error::SessionTerminated { .. })
    }

    /// A transport error built from an error and its whole `source()` chain, so the one line a
    /// user sees names the real cause ("connection refused") and not only the outermost layer.
    pub(crate) fn transport(err: &(dyn StdError + 'static)) -> Self {
        Error::Transport(chain(err))
    }
}

/// ` (code)` after the status in an [`Error::Http`] message, when the server sent one.
fn code_note(code: Option<&str>) -> String {
    code.map(|c| format!(" ({c})")).unwrap_or_default()
}

/// `err` and its sources joined with `: `, without repeating a message already included.
pub(crate) fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = err.to_string();
    for e in std::iter::successors(err.source(), |&e| e.source()) {
        let msg = e.to_string();
        if !msg.is_empty() && !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn transport_errors_name_the_root_cause() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        let msg = Error::transport(&e).to_string();
        assert_eq!(msg, "transport error: outer: connection refused");
    }

    #[test]
    fn too_large_names_the_limit_and_how_to_raise_it() {
        let e = Error::ResponseTooLarge {
            what: "the result of tool 'big'".into(),
            limit: 256 << 20,
            kind: SizeLimit::Result,
        };
        assert_eq!(
            e.to_string(),
            "the result of tool 'big' exceeds the client's limit of 256 MiB (raise it with \
             ClientBuilder::max_result_bytes or ORS_CLIENT_MAX_RESULT_BYTES)"
        );
        assert_eq!(human_bytes(17), "17 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(human_bytes(64 << 20), "64 MiB");
    }

    #[test]
    fn status_and_code_are_only_for_http_errors() {
        let e = Error::Http {
            status: 410,
            code: Some("session_deleted".into()),
            detail: "session 's' was deleted".into(),
        };
        assert_eq!(e.status(), Some(410));
        assert_eq!(e.code(), Some("session_deleted"));
        assert_eq!(e.error_code(), Some(ErrorCode::SessionDeleted));
        assert_eq!(
            e.to_string(),
            "HTTP 410 (session_deleted): session 's' was deleted"
        );
        let reference = Error::Http {
            status: 404,
            code: None,
            detail: "Active environment not found".into(),
        };
        assert_eq!(reference.error_code(), None);
        assert_eq!(
            reference.to_string(),
            "HTTP 404: Active environment not found"
        );
        let newer = Error::Http {
            status: 400,
            code: Some("brand_new".into()),
            detail: "d".into(),
        };
        assert_eq!(
            (newer.code(), newer.error_code()),
            (Some("brand_new"), None)
        );
        assert_eq!(Error::Timeout("x".into()).status(), None);
        assert_eq!(Error::Timeout("x".into()).code(), None);
    }
}
