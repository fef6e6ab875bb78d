//! Errors: [`ApiError`] (what a request gets back, mapped to a status in one place) and
//! [`ServerError`] (why a server could not start).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, RETRY_AFTER, WWW_AUTHENTICATE};
use http::StatusCode;
use ors_core::types::ErrorBody;
use ors_runtime::env::{EnvError, TaskError};

use crate::body::{json_status, Resp};
use crate::config::ConfigError;

/// Why a session's background setup failed; later requests on the session get it back.
#[derive(Debug, Clone)]
pub(crate) struct SetupFailure {
    /// The task could not be used (400) rather than the environment failing (500).
    pub(crate) bad_task: bool,
    pub(crate) message: Arc<str>,
}

/// An error answered with a status and a `{"detail": "..."}` body.
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
    #[error("unknown environment '{0}'")]
    UnknownEnvironment(String),
    #[error("X-Session-ID header is required")]
    MissingSessionId,
    #[error("invalid X-Session-ID header: {0}")]
    InvalidSessionId(&'static str),
    #[error("session '{0}' not found")]
    SessionNotFound(Arc<str>),
    #[error("session '{0}' was deleted")]
    SessionGone(Arc<str>),
    #[error("session '{0}' already exists")]
    SessionExists(Arc<str>),
    #[error("session setup failed: {}", .0.message)]
    SetupFailed(SetupFailure),
    #[error("{0}")]
    BadRequest(String),
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the server is at its limit of {max} live sessions; retry later")]
    TooManySessions { max: usize },
    #[error("session '{sid}' already has {max} calls running or queued; retry when one ends")]
    TooManyCalls { sid: Arc<str>, max: usize },
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("missing or invalid API key: send it in X-API-Key or Authorization: Bearer")]
    Unauthorized,
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The status code of each error: the one place they are decided.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::NoRoute { .. }
            | ApiError::UnknownEnvironment(_)
            | ApiError::SessionNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::MissingSessionId
            | ApiError::InvalidSessionId(_)
            | ApiError::SessionExists(_)
            | ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::SetupFailed(f) if f.bad_task => StatusCode::BAD_REQUEST,
            ApiError::SetupFailed(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::SessionGone(_) => StatusCode::GONE,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TooManySessions { .. } | ApiError::ShuttingDown => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::TooManyCalls { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// The response: status, `{"detail": ...}`, and the headers some statuses require.
    pub(crate) fn to_response(&self) -> Resp {
        let body = ErrorBody {
            detail: self.to_string(),
        };
        let bytes = serde_json::to_vec(&body)
            .map(Bytes::from)
            .unwrap_or_else(|_| Bytes::from_static(b"{\"detail\":\"error\"}"));
        let mut resp = json_status(self.status(), bytes);
        let headers = resp.headers_mut();
        match self {
            ApiError::MethodNotAllowed { allow, .. } => {
                headers.insert(ALLOW, HeaderValue::from_static(allow));
            }
            ApiError::TooManySessions { .. } | ApiError::ShuttingDown => {
                headers.insert(RETRY_AFTER, HeaderValue::from_static("5"));
            }
            ApiError::TooManyCalls { .. } => {
                headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::Unauthorized => {
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        resp
    }
}

impl From<TaskError> for ApiError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::UnknownSplit(_) | TaskError::InvalidIndex { .. } => {
                ApiError::BadRequest(e.to_string())
            }
            TaskError::Env(EnvError::Unsupported(_)) | TaskError::Env(EnvError::InvalidTask(_)) => {
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
                TaskError::UnknownSplit(_)
                    | TaskError::InvalidIndex { .. }
                    | TaskError::Env(EnvError::InvalidTask(_))
            ),
            message: e.to_string().into(),
        }
    }
}

/// Why a server could not be built, bound, or run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `Server::environment` was never called.
    #[error("no environment registered: call Server::environment::<E>() at least once")]
    NoEnvironments,
    /// Two environments have the same name (compared without case).
    #[error("two environments are named '{0}'; environment names must be unique")]
    DuplicateEnvironment(String),
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
    #[error("could not listen on {addr}: {source}")]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_api_page() {
        let sid: Arc<str> = "s".into();
        let cases = [
            (ApiError::MissingSessionId, 400),
            (ApiError::InvalidSessionId("too long"), 400),
            (ApiError::SessionExists(sid.clone()), 400),
            (ApiError::BadRequest("x".into()), 400),
            (ApiError::Unauthorized, 401),
            (ApiError::SessionNotFound(sid.clone()), 404),
            (ApiError::UnknownEnvironment("x".into()), 404),
            (
                ApiError::NoRoute {
                    method: "GET".into(),
                    path: "/x".into(),
                },
                404,
            ),
            (
                ApiError::MethodNotAllowed {
                    method: "GET".into(),
                    path: "/call".into(),
                    allow: "POST",
                },
                405,
            ),
            (ApiError::SessionGone(sid), 410),
            (ApiError::PayloadTooLarge { limit: 1 }, 413),
            (ApiError::Internal("x".into()), 500),
            (ApiError::TooManySessions { max: 1 }, 503),
            (
                ApiError::TooManyCalls {
                    sid: "s".into(),
                    max: 1,
                },
                429,
            ),
        ];
        for (err, status) in cases {
            assert_eq!(err.status().as_u16(), status, "{err}");
        }
    }

    #[test]
    fn task_errors_map_to_400_or_500() {
        let e: ApiError = TaskError::UnknownSplit("x".into()).into();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.to_string().starts_with("Invalid split"));
        let e: ApiError = TaskError::Env(EnvError::msg("disk on fire")).into();
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn responses_carry_detail_and_required_headers() {
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
    }
}
