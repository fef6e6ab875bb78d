//! Errors: [`ApiError`] (what a request gets back, mapped to a status and a code in one
//! place) and [`ServerError`] (why a server could not start); and the JSON answers, whose
//! rendering can fail with an [`ApiError`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ALLOW, CONNECTION, RETRY_AFTER, WWW_AUTHENTICATE};
use http::StatusCode;
use ors_core::text::Echo;
use ors_core::types::ErrorBody;
use ors_core::{protocol, ErrorCode};
use ors_runtime::env::{EnvError, TaskError};
use serde::Serialize;

use crate::body::{json_bytes, json_status, Resp};
use crate::config::ConfigError;

/// Why a session's background setup failed; later requests on the session get it back.
#[derive(Debug, Clone)]
pub(crate) struct SetupFailure {
    /// The task could not be used (400) rather than the environment failing (500).
    pub(crate) bad_task: bool,
    pub(crate) message: Arc<str>,
}

/// An error answered with a status and a `{"detail": "...", "code": "..."}` body (row
/// `error-codes`).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("no route for {method} {path}")]
    NoRoute { method: String, path: String },
    #[error("method {method} is not allowed on {path} (allowed: {allow})")]
    MethodNotAllowed {
        method: String,
        path: String,
        allow: &'static str,
    },
    /// An environment name the server does not host, and the names it does.
    #[error("unknown environment '{}'; available environments: {known}", Echo(.name))]
    UnknownEnvironment { name: String, known: String },
    #[error("X-Session-ID header is required")]
    MissingSessionId,
    #[error("invalid X-Session-ID header: {0}")]
    InvalidSessionId(&'static str),
    #[error("session '{0}' not found")]
    SessionNotFound(Arc<str>),
    #[error("session '{0}' was deleted")]
    SessionDeleted(Arc<str>),
    // An `f64` is displayed as people write seconds: `900`, not `900.0`; `1.5`.
    #[error("session '{sid}' timed out after {} s of inactivity", .after.as_secs_f64())]
    SessionTimedOut { sid: Arc<str>, after: Duration },
    #[error("session '{0}' already exists")]
    SessionExists(Arc<str>),
    #[error(
        "session id '{0}' was not issued by this server: call POST /create_session for one, \
         then POST /create with it"
    )]
    UnknownSessionId(Arc<str>),
    #[error("session '{0}' has no episode yet: POST /create first")]
    NoEpisodeYet(Arc<str>),
    #[error("session setup failed: {}", .0.message)]
    SetupFailed(SetupFailure),
    #[error("{0}")]
    BadRequest(String),
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error(
        "the candidates take about {parsed} bytes once parsed, over the limit of {limit} bytes \
         for a request (ORS_MAX_BODY_BYTES); send fewer or larger blocks"
    )]
    GroupTooLarge { parsed: usize, limit: usize },
    #[error("the request body did not arrive within {} s", .after.as_secs_f64())]
    BodyTimeout { after: Duration },
    #[error("{0}")]
    Overloaded(String),
    #[error("the server is at its limit of {max} live sessions; retry later")]
    TooManySessions { max: usize },
    #[error("session '{sid}' already has {max} calls running or queued; retry when one ends")]
    TooManyCalls { sid: Arc<str>, max: usize },
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("session '{0}' is still being set up; retry (Retry-After says when)")]
    SessionStarting(Arc<str>),
    #[error("missing or invalid API key: send it in X-API-Key or Authorization: Bearer")]
    Unauthorized,
    #[error(
        "environment '{0}' does not implement score_group (its tools listing does not set \
         supports_score_group)"
    )]
    ScoreGroupUnsupported(String),
    #[error("{0}")]
    Internal(String),
}

/// The longest `detail` an error answer has.
pub(crate) const MAX_DETAIL_CHARS: usize = 1000;

impl ApiError {
    /// The status code of each error: its code's ([`ErrorCode::status`]), except a setup
    /// that failed on its task, which is the client's mistake (400).
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::SetupFailed(f) if f.bad_task => StatusCode::BAD_REQUEST,
            _ => StatusCode::from_u16(self.code().status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }

    /// The machine-readable code of each error: the one place they are decided. Most have the
    /// code of their name; the others are listed with theirs.
    pub(crate) fn code(&self) -> ErrorCode {
        macro_rules! codes {
            ($($same:ident)*; $($($other:ident)|+ => $code:ident,)*) => {
                match self {
                    $(Self::$same { .. } => ErrorCode::$same,)*
                    $($(Self::$other { .. })|+ => ErrorCode::$code,)*
                }
            };
        }
        codes! {
            MethodNotAllowed UnknownEnvironment SessionNotFound SessionDeleted SessionTimedOut
            SessionExists UnknownSessionId NoEpisodeYet SetupFailed Overloaded TooManySessions
            TooManyCalls ShuttingDown SessionStarting Unauthorized Internal;
            // The environment has no such route: what clients read as "unsupported".
            NoRoute | ScoreGroupUnsupported => NoRoute,
            MissingSessionId | InvalidSessionId | BadRequest => InvalidRequest,
            PayloadTooLarge | GroupTooLarge => PayloadTooLarge,
            BodyTimeout => RequestTimeout,
        }
    }

    /// The message, for the answer and the log: at most [`MAX_DETAIL_CHARS`] characters,
    /// whatever a client's value (or a parser quoting it) made of it.
    pub(crate) fn detail(&self) -> String {
        let detail = self.to_string();
        if detail.chars().nth(MAX_DETAIL_CHARS).is_none() {
            return detail;
        }
        format!(
            "{} ({} bytes in all)",
            ors_core::text::preview(&detail, MAX_DETAIL_CHARS),
            detail.len()
        )
    }

    /// The response: status, `{"detail": ..., "code": ...}`, and the headers some statuses
    /// require.
    pub(crate) fn to_response(&self) -> Resp {
        let body = ErrorBody::new(self.code(), self.detail());
        let bytes = to_json(&body).unwrap_or_else(|_| {
            Bytes::from_static(b"{\"detail\":\"error\",\"code\":\"internal\"}")
        });
        let mut resp = json_status(self.status(), bytes);
        let headers = resp.headers_mut();
        let mut set = |name, value: &'static str| {
            headers.insert(name, HeaderValue::from_static(value));
        };
        // `connection: close` where the request body may not have been read to its end, and
        // what is left of it would be read as the next request.
        match self {
            Self::MethodNotAllowed { allow, .. } => set(ALLOW, allow),
            Self::TooManySessions { .. } | Self::ShuttingDown => set(RETRY_AFTER, "5"),
            Self::TooManyCalls { .. } => set(RETRY_AFTER, "1"),
            Self::Overloaded(_) => {
                set(RETRY_AFTER, "1");
                set(CONNECTION, "close");
            }
            Self::PayloadTooLarge { .. } | Self::BodyTimeout { .. } => set(CONNECTION, "close"),
            Self::Unauthorized => set(WWW_AUTHENTICATE, "Bearer"),
            Self::SessionStarting(_) => {
                set(RETRY_AFTER, "2");
                let state = HeaderName::from_static(protocol::HEADER_BACKEND_STATE);
                set(state, protocol::BACKEND_STARTING);
            }
            _ => {}
        }
        resp
    }

    /// Why the request was refused, for `ors_requests_rejected_total{reason}`: limits,
    /// authentication and draining; `None` for errors that are the client's mistake or ours.
    pub(crate) fn rejection(&self) -> Option<&'static str> {
        Some(match self {
            Self::PayloadTooLarge { .. } | Self::GroupTooLarge { .. } => "body_too_large",
            Self::BodyTimeout { .. } => "body_timeout",
            Self::Overloaded(_) => "overloaded",
            Self::TooManySessions { .. } => "too_many_sessions",
            Self::TooManyCalls { .. } => "too_many_calls",
            Self::Unauthorized => "auth",
            Self::UnknownSessionId(_) => "unknown_session_id",
            Self::ShuttingDown => "draining",
            _ => return None,
        })
    }
}

impl From<TaskError> for ApiError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::UnknownSplit { .. }
            | TaskError::InvalidIndex { .. }
            | TaskError::TooMany { .. }
            | TaskError::Env(EnvError::Unsupported(_) | EnvError::InvalidTask(_)) => {
                ApiError::BadRequest(e.to_string())
            }
            TaskError::Json(_) | TaskError::Env(_) => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<&TaskError> for SetupFailure {
    fn from(e: &TaskError) -> Self {
        SetupFailure {
            bad_task: matches!(
                e,
                TaskError::UnknownSplit { .. }
                    | TaskError::InvalidIndex { .. }
                    | TaskError::Env(EnvError::InvalidTask(_))
            ),
            message: e.to_string().into(),
        }
    }
}

/// Why a server could not be built, bound, or run.
///
/// Its `Debug` form is its message (as `anyhow`'s is), so `main` returning
/// `Result<(), ServerError>` (or a boxed error holding one) prints a sentence, not a struct
/// dump: `Error: could not listen on 0.0.0.0:8080: Address in use (os error 98); port 8080 is
/// taken (another server running?): set ORS_PORT to another port, or 0 for any free one`.
#[derive(thiserror::Error)]
pub enum ServerError {
    /// `Server::environment` was never called.
    #[error("no environment registered: call Server::environment::<E>() at least once")]
    NoEnvironments,
    /// Two environments have the same name (compared without case).
    #[error(
        "two environments are named '{0}'; environment names must be unique (serve a type twice \
         with Server::environment_named)"
    )]
    DuplicateEnvironment(String),
    /// An environment name cannot be a URL path segment.
    #[error(
        "invalid environment name '{0}': it is a URL path segment, 1 to 64 characters from \
         `A-Z a-z 0-9 _ -`"
    )]
    InvalidEnvironmentName(String),
    /// An environment's tool table has problems (duplicate tool names, bad schemas).
    #[error("environment '{env}' has invalid tools: {problems}")]
    ToolTable {
        /// The environment.
        env: String,
        /// The problems, joined.
        problems: String,
    },
    /// A setting is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address could not be bound.
    #[error("could not listen on {addr}: {source}{}", bind_hint(addr, source))]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another I/O error (signal handlers).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl std::fmt::Debug for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// What to do about a failed bind, for the two causes a newcomer meets.
fn bind_hint(addr: &str, source: &std::io::Error) -> String {
    let port = addr.rsplit(':').next().unwrap_or(addr);
    match source.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "; port {port} is taken (another server running?): set ORS_PORT to another port, \
             or 0 for any free one"
        ),
        std::io::ErrorKind::PermissionDenied => {
            format!("; port {port} needs privileges: set ORS_PORT to a port above 1023")
        }
        _ => String::new(),
    }
}

/// A 200 response with a value rendered as JSON.
pub(crate) fn json<T: Serialize + ?Sized>(value: &T) -> Result<Resp, ApiError> {
    Ok(json_bytes(to_json(value)?))
}

/// A value rendered as JSON bytes.
pub(crate) fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<Bytes, ApiError> {
    // Most answers are a few hundred bytes: room for them up front, not three regrowths.
    let mut out = Vec::with_capacity(256);
    serde_json::to_writer(&mut out, value)
        .map(|()| Bytes::from(out))
        .map_err(|e| ApiError::Internal(format!("could not encode the response: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    #[test]
    fn an_error_echoes_at_most_a_prefix_of_what_the_client_sent() {
        let name = "e".repeat(2 << 20);
        let unknown = ApiError::UnknownEnvironment {
            name: name.clone(),
            known: "lab".into(),
        }
        .detail();
        assert!(unknown.len() < 200, "{}", unknown.len());
        assert!(
            unknown.contains(&format!("({} bytes)", name.len())),
            "{unknown}"
        );
        // A parser's message quoting a value whole, capped where the answer is made.
        let quoted = ApiError::BadRequest(format!("invalid type: string \"{name}\"")).detail();
        assert!(
            quoted.chars().count() < MAX_DETAIL_CHARS + 40,
            "{}",
            quoted.len()
        );
        assert!(
            quoted.ends_with(&format!("... ({} bytes in all)", name.len() + 23)),
            "{quoted}"
        );
        let short = ApiError::BadRequest("short".into()).detail();
        assert_eq!(short, "short");
    }

    /// Every error with its status and code, as the table in the report lists them.
    fn every_error() -> Vec<(ApiError, u16, ErrorCode)> {
        let sid: Arc<str> = "s".into();
        let failure = |bad_task| {
            ApiError::SetupFailed(SetupFailure {
                bad_task,
                message: "no".into(),
            })
        };
        vec![
            (ApiError::MissingSessionId, 400, ErrorCode::InvalidRequest),
            (
                ApiError::InvalidSessionId("too long"),
                400,
                ErrorCode::InvalidRequest,
            ),
            (
                ApiError::BadRequest("x".into()),
                400,
                ErrorCode::InvalidRequest,
            ),
            (
                ApiError::SessionExists(sid.clone()),
                400,
                ErrorCode::SessionExists,
            ),
            (failure(true), 400, ErrorCode::SetupFailed),
            (
                ApiError::UnknownSessionId(sid.clone()),
                400,
                ErrorCode::UnknownSessionId,
            ),
            (
                ApiError::NoEpisodeYet(sid.clone()),
                404,
                ErrorCode::NoEpisodeYet,
            ),
            (
                ApiError::BodyTimeout {
                    after: Duration::from_secs(30),
                },
                408,
                ErrorCode::RequestTimeout,
            ),
            (
                ApiError::Overloaded("busy".into()),
                503,
                ErrorCode::Overloaded,
            ),
            (ApiError::Unauthorized, 401, ErrorCode::Unauthorized),
            (
                ApiError::SessionNotFound(sid.clone()),
                404,
                ErrorCode::SessionNotFound,
            ),
            (
                ApiError::SessionTimedOut {
                    sid: sid.clone(),
                    after: Duration::from_secs(900),
                },
                404,
                ErrorCode::SessionTimedOut,
            ),
            (
                ApiError::UnknownEnvironment {
                    name: "x".into(),
                    known: "lab".into(),
                },
                404,
                ErrorCode::UnknownEnvironment,
            ),
            (
                ApiError::NoRoute {
                    method: "GET".into(),
                    path: "/x".into(),
                },
                404,
                ErrorCode::NoRoute,
            ),
            (
                ApiError::MethodNotAllowed {
                    method: "GET".into(),
                    path: "/call".into(),
                    allow: "POST",
                },
                405,
                ErrorCode::MethodNotAllowed,
            ),
            (
                ApiError::SessionDeleted(sid),
                410,
                ErrorCode::SessionDeleted,
            ),
            (
                ApiError::PayloadTooLarge { limit: 1 },
                413,
                ErrorCode::PayloadTooLarge,
            ),
            (
                ApiError::GroupTooLarge {
                    parsed: 2,
                    limit: 1,
                },
                413,
                ErrorCode::PayloadTooLarge,
            ),
            (
                ApiError::TooManyCalls {
                    sid: "s".into(),
                    max: 1,
                },
                429,
                ErrorCode::TooManyCalls,
            ),
            (ApiError::Internal("x".into()), 500, ErrorCode::Internal),
            (failure(false), 500, ErrorCode::SetupFailed),
            (
                ApiError::TooManySessions { max: 1 },
                503,
                ErrorCode::TooManySessions,
            ),
            (ApiError::ShuttingDown, 503, ErrorCode::ShuttingDown),
        ]
    }

    #[test]
    fn statuses_and_codes_follow_the_notes() {
        for (err, status, code) in every_error() {
            assert_eq!(err.status().as_u16(), status, "{err}");
            assert_eq!(err.code(), code, "{err}");
        }
    }

    #[tokio::test]
    async fn bodies_carry_detail_and_code() {
        for (err, _, code) in every_error() {
            let resp = err.to_response();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            let body: ErrorBody = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(body.detail, err.to_string());
            assert_eq!(body.error_code(), Some(code), "{err}");
        }
    }

    #[test]
    fn the_timed_out_detail_names_the_idle_limit() {
        let err = |after| ApiError::SessionTimedOut {
            sid: "s1".into(),
            after,
        };
        assert_eq!(
            err(Duration::from_secs(900)).to_string(),
            "session 's1' timed out after 900 s of inactivity"
        );
        assert_eq!(
            err(Duration::from_millis(1500)).to_string(),
            "session 's1' timed out after 1.5 s of inactivity"
        );
    }

    #[test]
    fn task_errors_map_to_400_or_500() {
        let e: ApiError = TaskError::UnknownSplit {
            split: "x".into(),
            known: Vec::new(),
        }
        .into();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(e.code(), ErrorCode::InvalidRequest);
        assert!(e.to_string().starts_with("Invalid split"));
        let e: ApiError = TaskError::Env(EnvError::msg("disk on fire")).into();
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.code(), ErrorCode::Internal);
    }

    #[test]
    fn responses_carry_the_required_headers() {
        let resp = ApiError::MethodNotAllowed {
            method: "GET".into(),
            path: "/call".into(),
            allow: "POST",
        }
        .to_response();
        assert_eq!(resp.headers()[ALLOW], "POST");
        let resp = ApiError::TooManySessions { max: 3 }.to_response();
        assert!(resp.headers().contains_key(RETRY_AFTER));
        assert_eq!(resp.headers()["content-type"], "application/json");
        assert!(!resp.headers().contains_key(CONNECTION));
        for unread in [
            ApiError::PayloadTooLarge { limit: 1 },
            ApiError::BodyTimeout {
                after: Duration::from_secs(1),
            },
            ApiError::Overloaded("busy".into()),
        ] {
            assert_eq!(
                unread.to_response().headers()[CONNECTION],
                "close",
                "{unread}"
            );
        }
    }
}
