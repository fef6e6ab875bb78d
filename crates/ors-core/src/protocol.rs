//! The protocol's constants, in one place for the server, the client and the conformance
//! runner: header names, route paths, SSE event names, limits both sides know, and the
//! machine-readable error codes of error replies (PROTOCOL_NOTES row `error-codes`).
//!
//! ```
//! use ors_core::protocol::{self, ErrorCode};
//!
//! assert_eq!(protocol::HEADER_SESSION_ID, "x-session-id");
//! assert_eq!(protocol::routes::CALL, "/call");
//! let code: ErrorCode = "session_deleted".parse().unwrap();
//! assert!(code.means_session_gone());
//! assert_eq!(code.as_str(), "session_deleted");
//! ```

use std::str::FromStr;
use std::time::Duration;

/// Header carrying the session id of session-scoped requests (lower case, as
/// `http::HeaderName::from_static` needs; header names compare without case).
pub const HEADER_SESSION_ID: &str = "x-session-id";
/// Header carrying secrets: base64 of JSON `{"NAME": {"value": "V"}}` (row `secrets-header`).
pub const HEADER_SECRETS: &str = "x-secrets";
/// Header carrying the API key (row `api-key`; `Authorization: Bearer` is accepted too).
pub const HEADER_API_KEY: &str = "x-api-key";
/// Response header of a server that runs a call under the `task_id` a client sends when the
/// session has never seen it (row `client-task-id`), value `1`: a client may then name each
/// call and safely resend one whose connection broke before the `task_id` event. A server
/// without it may treat any `task_id` as a reconnect only (the reference does).
pub const HEADER_CLIENT_TASK_IDS: &str = "x-ors-client-task-ids";

/// The MIME type of a call stream, and the `Accept` value that asks `create_session` for SSE
/// (row `create-session-reply`).
pub const EVENT_STREAM: &str = "text/event-stream";

/// Route paths. Root routes are whole paths; environment routes follow `/{env}` and are also
/// served without it by the default environment (row `default-env-routes`).
pub mod routes {
    /// `GET /health`: `{"status": "ok"}`, open even when an API key is required.
    pub const HEALTH: &str = "/health";
    /// `GET /list_environments`: the hosted environment names.
    pub const LIST_ENVIRONMENTS: &str = "/list_environments";
    /// `POST /create_session`: a fresh session id.
    pub const CREATE_SESSION: &str = "/create_session";
    /// `POST /create`: start an episode under the `X-Session-ID`.
    pub const CREATE: &str = "/create";
    /// `POST /ping`: keep a session alive.
    pub const PING: &str = "/ping";
    /// `POST /delete`: end an episode.
    pub const DELETE: &str = "/delete";
    /// `POST /delete_session`: release a session id (200 even when nothing is there).
    pub const DELETE_SESSION: &str = "/delete_session";

    /// `GET /{env}/tools`: the shared tools.
    pub const TOOLS: &str = "/tools";
    /// `GET /{env}/splits`: the splits.
    pub const SPLITS: &str = "/splits";
    /// `POST /{env}/tasks`: every task of a split.
    pub const TASKS: &str = "/tasks";
    /// `POST /{env}/num_tasks`: the number of tasks in a split.
    pub const NUM_TASKS: &str = "/num_tasks";
    /// `POST /{env}/task`: one task (alias [`GET_TASK`], row `get-task-aliases`).
    pub const TASK: &str = "/task";
    /// `POST /{env}/get_task`: the Tasks & Splits page's name for [`TASK`].
    pub const GET_TASK: &str = "/get_task";
    /// `POST /{env}/task_range`: a slice of a split (alias [`GET_TASK_RANGE`]).
    pub const TASK_RANGE: &str = "/task_range";
    /// `POST /{env}/get_task_range`: the Tasks & Splits page's name for [`TASK_RANGE`].
    pub const GET_TASK_RANGE: &str = "/get_task_range";
    /// `GET /{env}/task_tools`: the episode's tools, shared and task-specific.
    pub const TASK_TOOLS: &str = "/task_tools";
    /// `GET /{env}/prompt`: the blocks that start the episode.
    pub const PROMPT: &str = "/prompt";
    /// `POST /{env}/call`: a tool call, answered as an SSE stream.
    pub const CALL: &str = "/call";
    /// `GET /version`: the server's version (PROTOCOL_NOTES row `version-route`).
    pub const VERSION: &str = "/version";
    /// `GET /{env}/messages`: the prompt as a conversation (row `messages-route`).
    pub const MESSAGES: &str = "/messages";
    /// `POST /{env}/score_group`: score a group of candidate answers, over SSE (row
    /// `score-group`).
    pub const SCORE_GROUP: &str = "/score_group";
}

/// Response header of a request that waited for a session's setup past the bound: its value
/// `starting` says the session is still being set up (PROTOCOL_NOTES row `slow-setup`).
pub const HEADER_BACKEND_STATE: &str = "x-backend-state";
/// The [`HEADER_BACKEND_STATE`] value of a session whose setup is still running.
pub const BACKEND_STARTING: &str = "starting";

/// Event name of the call id, always the first event of a call stream.
pub const EVENT_TASK_ID: &str = "task_id";
/// Event name of an intermediate piece of a large result.
pub const EVENT_CHUNK: &str = "chunk";
/// Event name of the complete result, or of its last piece.
pub const EVENT_END: &str = "end";
/// Event name of a crashed tool or an unknown task id; no `end` follows.
pub const EVENT_ERROR: &str = "error";
/// Event name of a progress report from a running tool (JSON data); older clients ignore it.
pub const EVENT_PROGRESS: &str = "progress";

/// The largest `chunk`/`end` data piece, in bytes (row `chunking`).
pub const CHUNK_SIZE: usize = 4096;
/// Longest session id a server accepts, in bytes.
pub const MAX_SESSION_ID_LEN: usize = 128;
/// The server's default interval of keep-alive comments on a call stream (row
/// `keep-alive-interval`); a client's read timeout must be longer.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a finished call's result stays available to a reconnect by default.
pub const RESULT_LINGER: Duration = Duration::from_secs(60);

/// The error codes, one row each: doc, variant, wire name, HTTP status.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $code:ident = $wire:literal, $status:literal;)*) => {
        wire_enum! {
            /// The stable machine-readable `code` of an error reply `{"detail": ..., "code": ...}`
            /// (row `error-codes`). Programs decide on the code, never on the words of `detail`; a
            /// code this version does not know is kept as text by [`ErrorBody`](crate::ErrorBody)
            /// readers.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            #[non_exhaustive]
            pub enum ErrorCode {
                $($(#[doc = $doc])* #[doc = ""] #[doc = concat!("HTTP status ", $status, ".")] $code = $wire,)*
            }
        }

        impl ErrorCode {
            /// The HTTP status an answer with this code has.
            pub const fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$code => $status,)*
                }
            }
        }
    };
}

error_codes! {
    /// The session id was never seen (or was forgotten long ago).
    SessionNotFound = "session_not_found", 404;
    /// The session was deleted (within the last hour, row `gone-vs-not-found`).
    SessionDeleted = "session_deleted", 410;
    /// The inactivity reaper removed the session.
    SessionTimedOut = "session_timed_out", 404;
    /// The id came from `/create_session` but no `/create` started an episode under it.
    NoEpisodeYet = "no_episode_yet", 404;
    /// `/create` under an id that already has a live episode.
    SessionExists = "session_exists", 400;
    /// `/create` under an id this server did not issue (its tag does not check out):
    /// call `/create_session` for one.
    UnknownSessionId = "unknown_session_id", 400;
    /// The request is malformed (body, field, header, index, split...); `detail` says
    /// which part.
    InvalidRequest = "invalid_request", 400;
    /// The path or `env_name` names an environment the server does not host.
    UnknownEnvironment = "unknown_environment", 404;
    /// The server is at its limit of live sessions (`Retry-After` says when to retry).
    TooManySessions = "too_many_sessions", 503;
    /// The session already has as many calls running or queued as allowed.
    TooManyCalls = "too_many_calls", 429;
    /// The API key is missing or wrong.
    Unauthorized = "unauthorized", 401;
    /// The server is shutting down.
    ShuttingDown = "shutting_down", 503;
    /// The request body is larger than the server accepts.
    PayloadTooLarge = "payload_too_large", 413;
    /// The request body did not arrive within the server's time limit; the connection
    /// is closed.
    RequestTimeout = "request_timeout", 408;
    /// The server is at a limit of its own (connections, request bytes in flight), not
    /// of this client's making; `Retry-After` says when to retry.
    Overloaded = "overloaded", 503;
    /// No route has this path.
    NoRoute = "no_route", 404;
    /// The route exists, the method does not (`Allow` lists the right one).
    MethodNotAllowed = "method_not_allowed", 405;
    /// The environment's setup of this session failed (400 when the task was
    /// unusable); later requests on the session get the same answer.
    SetupFailed = "setup_failed", 500;
    /// The server or the environment failed.
    Internal = "internal", 500;
    /// The session's setup is still running after the server's wait (`X-Backend-State:
    /// starting`, `Retry-After`); ask again (PROTOCOL_NOTES row `slow-setup`).
    SessionStarting = "session_starting", 503;
}

impl ErrorCode {
    /// Whether the code says the session named by `X-Session-ID` has no episode to serve
    /// (deleted, timed out, never created): every later request on it fails the same way.
    pub const fn means_session_gone(self) -> bool {
        matches!(
            self,
            ErrorCode::SessionNotFound
                | ErrorCode::SessionDeleted
                | ErrorCode::SessionTimedOut
                | ErrorCode::NoEpisodeYet
        )
    }
}

/// A code this version does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error code {0:?}")]
pub struct UnknownErrorCode(pub String);

impl FromStr for ErrorCode {
    type Err = UnknownErrorCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownErrorCode(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(
                s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{s}"
            );
            assert_eq!(s.parse::<ErrorCode>(), Ok(code));
            assert_eq!(code.to_string(), s);
        }
        assert!("Session_Deleted".parse::<ErrorCode>().is_err());
        assert!(ErrorCode::ALL
            .iter()
            .all(|c| (400..600).contains(&c.status())));
    }

    #[test]
    fn only_session_codes_mean_the_session_is_gone() {
        let gone: Vec<&str> = ErrorCode::ALL
            .into_iter()
            .filter(|c| c.means_session_gone())
            .map(ErrorCode::as_str)
            .collect();
        assert_eq!(
            gone,
            [
                "session_not_found",
                "session_deleted",
                "session_timed_out",
                "no_episode_yet"
            ]
        );
    }
}
