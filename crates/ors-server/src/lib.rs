//! ors-server: host Open Reward Standard (ORS) environments over HTTP + SSE, on hyper.
//!
//! Write an environment with `#[environment]` and `#[tool]` (everything needed is in
//! [`prelude`]), register it on a [`Server`] (with its start-up state, if it has one:
//! [`Server::environment_with`]), and serve. The server implements the whole ORS
//! HTTP API: discovery (`/health`, `/list_environments`, `/{env}/tools`, `/{env}/splits`,
//! `/{env}/tasks`, `/{env}/num_tasks`, `/{env}/task` and `/{env}/task_range`, also under their
//! `get_` names), sessions (`/create_session`, `/create`, `/ping`, `/delete`,
//! `/delete_session`) and episodes (`/{env}/prompt`, `/{env}/task_tools`, `/{env}/call` as a
//! Server-Sent-Events stream). Errors are `{"detail": "...", "code": "..."}` bodies naming
//! the problem.
//!
//! ```no_run
//! use ors_server::prelude::*;
//! use ors_server::Server;
//!
//! #[wire]
//! struct MathTask {
//!     question: String,
//!     answer: String,
//! }
//!
//! #[wire]
//! struct Submit {
//!     /// Your final answer.
//!     answer: String,
//! }
//!
//! struct Math {
//!     task: MathTask,
//! }
//!
//! #[environment]
//! impl Environment for Math {
//!     type Task = MathTask;
//!
//!     fn splits() -> Vec<Split> {
//!         vec![Split::train("train")]
//!     }
//!     async fn tasks(_split: &str) -> Result<Vec<MathTask>, EnvError> {
//!         Ok(vec![MathTask { question: "What is 2+2?".into(), answer: "4".into() }])
//!     }
//!     async fn new(task: MathTask, _secrets: Secrets) -> Result<Self, EnvError> {
//!         Ok(Self { task })
//!     }
//!     async fn prompt(&self) -> Result<Blocks, EnvError> {
//!         Ok(vec![Block::text(&self.task.question)])
//!     }
//!
//!     /// Submit your final answer.
//!     #[tool]
//!     fn submit(&mut self, input: Submit) -> ToolOutput {
//!         let correct = input.answer.trim() == self.task.answer;
//!         let text = if correct { "Correct!" } else { "Incorrect" };
//!         ToolOutput::text(text).with_reward(if correct { 1.0 } else { 0.0 }).finish()
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), ors_server::ServerError> {
//!     ors_server::init_tracing();
//!     // Port 8080 unless ORS_PORT says otherwise; stops on Ctrl-C or SIGTERM.
//!     Server::new().environment::<Math>().serve_from_env().await
//! }
//! ```
//!
//! In tests, [`Server::bind`] on port 0 gives a [`RunningServer`] to talk to and shut down:
//!
//! ```
//! # use ors_server::prelude::*;
//! # #[wire] struct T { q: String }
//! # struct Echo;
//! # #[environment]
//! # impl Environment for Echo {
//! #     type Task = T;
//! #     fn splits() -> Vec<Split> { vec![Split::train("train")] }
//! #     async fn tasks(_s: &str) -> Result<Vec<T>, EnvError> { Ok(vec![]) }
//! #     async fn new(_t: T, _s: Secrets) -> Result<Self, EnvError> { Ok(Echo) }
//! #     async fn prompt(&self) -> Result<Blocks, EnvError> { Ok(vec![]) }
//! #     /// Say hi.
//! #     #[tool] fn hi(&self) -> String { "hi".into() }
//! # }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = ors_server::Server::new()
//!     .port(0)
//!     .environment::<Echo>()
//!     .bind()
//!     .await
//!     .expect("bind");
//! assert!(server.url().starts_with("http://127.0.0.1:"));
//! server.shutdown().await;
//! # }
//! ```
//!
//! # Behaviour worth knowing
//!
//! - **One call at a time per session.** Tool calls on one session run one after another, in
//!   the order they arrived (a tool gets `&mut self`); different sessions run in parallel. Each
//!   call runs in its own task: a client that disconnects does not cancel it, and the result
//!   stays available for [`ServerConfig::linger`] to a reconnect with its `task_id` from the
//!   same session (within byte bounds per session and server-wide, oldest first). A client
//!   may choose the `task_id` of a new call: sending the same request again never runs the
//!   tool twice. A panicking tool becomes an SSE `error` event; the session stays usable.
//! - **Setup in the background.** `create` returns at once; later requests on the session
//!   wait for the environment's `new` and get its error if it failed.
//! - **Limits.** Tool timeouts ([`ServerConfig::tool_timeout`]; the tool's future is dropped and its
//!   [`ToolContext`] cancellation fires; the result is `ok: false`), body and header sizes,
//!   the time a body may take to arrive (408), request-body bytes held server-wide and open
//!   connections (503 `overloaded` beyond), a session-id length of 128, a maximum number of
//!   live sessions (503), sessions reaped after [`ServerConfig::session_timeout`] without a
//!   request or a client listening to one of their calls (a hung call nobody waits for does
//!   not keep its session), and an optional API key ([`ServerConfig::api_key`]; `/health`,
//!   `/ready` and `/version` stay open). See [`ServerConfig`] for the defaults and the `ORS_*` environment
//!   variables, and [`RunningServer::stats`] for what a server holds.
//! - **Blocking tools.** A `#[tool(blocking)]` method runs on tokio's blocking pool with the
//!   episode moved to that thread, so a CPU-bound tool never stalls other sessions. If its
//!   time limit passes, the call is answered `ok: false` at once and the thread finishes in
//!   the background (a thread cannot be stopped); the session's next call, `prompt` and
//!   teardown wait for it to hand the episode back (`prompt` meanwhile answers an error).
//! - **Results.** A result whose JSON is larger than [`ServerConfig::max_result_bytes`]
//!   (`ORS_MAX_RESULT_BYTES`) is sent as `ok: false` with its size and the limit. In
//!   debug builds an output with no blocks is an `ok: false` error too (clients read
//!   `blocks[0]`); release builds send it unchanged.
//! - **Big splits.** A split served by index (`Environment::num_tasks` + `task`, for example
//!   from a [`tasks::TaskFile`]) is never loaded whole: `/num_tasks`, `/task`, `create` and
//!   `/task_range` read only what they need. `/tasks` on such a split of more than
//!   [`runtime::env::MAX_TASKS_PER_REQUEST`] (10 000) tasks, and a `/task_range` asking for
//!   more at once, answer 400 `invalid_request` saying to page with `/task_range` (PROTOCOL_NOTES
//!   row `additions`); streaming millions of tasks in one reply helps no client.
//! - **Routing.** The first environment registered is the default: `/tools`, `/call`, ...
//!   without an environment segment reach it. Episode routes are served by the session's
//!   environment whatever the path segment names. One environment type may be served several
//!   times, each with its own state, under names of its own ([`Server::environment_named`]).
//! - **Errors.** `{"detail": "...", "code": "..."}`: `detail` for people, a stable `code`
//!   ([`core::ErrorCode`]) for programs. A deleted session answers 410 `session_deleted` for
//!   an hour, a reaped one 404 `session_timed_out`, an unknown id 404 `session_not_found`,
//!   one issued by `/create_session` and never created 404 `no_episode_yet`.
//!   Unknown fields in request bodies are ignored; a missing or wrong field is a 400 naming it.
//! - **Session ids.** `/create_session` issues ids carrying an HMAC tag under
//!   [`ServerConfig::session_key`], and `/create` refuses others (400 `unknown_session_id`),
//!   so clients cannot invent ids to squat; replicas sharing the key accept each other's.
//! - **Operations.** `GET /metrics` (Prometheus text, behind the API key; `ORS_METRICS=off`
//!   turns it off) and `GET /ready` (200, or 503 while draining or full; open like
//!   `/health`). SIGTERM drains before [`Server::serve`] returns: no new sessions, live ones
//!   go on until they end or [`ServerConfig::drain`] passes ([`RunningServer::drain`] does
//!   the same for an embedded server). With [`ServerConfig::replica_id`] the session ids
//!   name their replica in their first group, for a proxy to route by (`deploy/` in the
//!   repository).
//! - **Output.** [`Server::bind`] prints nothing; [`Server::serve`] and
//!   [`Server::serve_from_env`], meant for binaries, print one ready line to stdout.
//! - **Logging.** `tracing`, quiet at `info`; one span and line per request at `debug`
//!   (method, path, status, latency, session, env, tool). Secrets are never logged.
//!   [`init_tracing`] (cargo feature `init_tracing`, on by default) installs a stderr
//!   subscriber, without colours unless stderr is a terminal, one JSON object per line with
//!   `ORS_LOG_FORMAT=json`; a binary with its own subscriber disables the feature.

pub use ors_core::{
    self as core, Block, Blocks, Message, RunToolOutput, Secrets, Split, SplitType, ToolError,
    ToolErrorReason, ToolOutput, ToolSpec,
};
pub use ors_macros::{environment, tool, toolset, wire};
#[cfg(feature = "mcp")]
pub use ors_runtime::mcp;
pub use ors_runtime::{
    self as runtime, tasks, DynamicTool, DynamicTools, EnvError, Environment, EnvironmentMeta,
    Json, ToolContext, Toolset,
};
#[cfg(feature = "webhooks")]
pub use ors_runtime::{external, webhook};
#[cfg(unix)]
pub use ors_runtime::{process, sandbox};

#[doc(hidden)]
pub use ors_runtime::__private;

mod app;
mod body;
mod call;
mod config;
mod connection;
mod error;
mod handlers;
mod limits;
#[cfg(feature = "init_tracing")]
mod logging;
mod metrics;
mod ops;
mod record;
mod request;
mod request_body;
mod results;
mod router;
mod scope;
mod server;
mod session;
mod sid;
mod stats;
mod tombstones;
mod util;

/// Internals the cargo-fuzz targets in `tools/fuzz/` reach (feature `fuzzing`); not a public API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use config::{ConfigError, ServerConfig, SessionKey};
pub use error::ServerError;
#[cfg(feature = "init_tracing")]
pub use logging::init_tracing;
pub use server::{RunningServer, Server};
pub use stats::ServerStats;

/// Everything an environment author needs: `use ors_server::prelude::*;`.
///
/// Types that cross the wire get `#[wire]`, which derives serde's and schemars' traits through
/// this crate; the derive macros themselves are not re-exported, as they need `serde` and
/// `schemars` as direct dependencies. The serde traits are here, without their derives, for
/// bounds.
pub mod prelude {
    pub use ors_core::{
        Block, Blocks, GroupCandidate, GroupScore, ImageBlock, Json, JsonObject, Message,
        MessageBlock, Role, RunToolOutput, Secrets, Split, SplitType, TextBlock, ToolErrorReason,
        ToolOutput, ToolSpec,
    };
    pub use ors_macros::{environment, tool, toolset, wire};
    pub use ors_runtime::__private::serde::de::{Deserialize, DeserializeOwned};
    pub use ors_runtime::__private::serde::ser::Serialize;
    pub use ors_runtime::{EnvError, Environment, EnvironmentMeta, ToolContext, Toolset, WireTask};
}
