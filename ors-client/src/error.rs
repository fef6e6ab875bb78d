//! The one error type of the client.

use std::error::Error as StdError;

use ors_core::ErrorCode;

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
    },
    /// The tool crashed (an SSE `error` event), or a reconnect asked for a result the server no
    /// longer has. The session is still usable.
    #[error("tool crashed: {message}")]
    ToolCrashed {
        /// The message the server sent.
        message: String,
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
    /// The caller passed something the client cannot send (a bad URL, a non-object tool input).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A rollout policy failed to choose the next call.
    #[error("policy error: {0}")]
    Policy(String),
}

/// The client's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status of an [`Error::Http`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Http { status, .. } => Some(*status),
            _ => None,
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
    let mut cur = err.source();
    while let Some(e) = cur {
        let msg = e.to_string();
        if !msg.is_empty() && !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        cur = e.source();
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
