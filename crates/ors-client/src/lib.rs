//! A typed async client for Open Reward Standard (ORS) servers, and parallel rollouts. (The
//! `ors` command-line tool, built on it, is the `ors-cli` crate.)
//!
//! One [`Client`] holds a pool of keep-alive HTTP connections and is cheap to clone and share
//! across tasks. From it, an [`Environment`] lists tools, splits and tasks, and opens
//! [`Session`]s (episodes). A session pings the server in the background, notices when it has
//! died, and deletes itself on [`Session::close`]. Tool calls stream over SSE and survive a
//! dropped connection: the client reconnects with the call's `task_id`, so the tool never runs
//! twice. With a server that runs calls under ids clients choose (ors-server does; PROTOCOL_NOTES
//! row `client-task-id`), every call carries its own id from the start, so even a connection
//! that broke before the server's `task_id` event is resent safely; with one that does not
//! (the Python reference), such a call is not resent. All failures are one [`Error`] enum.
//!
//! ```no_run
//! use ors_client::{BlockText, Client, Provider};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), ors_client::Error> {
//! let client = Client::from_env()?; // ORS_URL (default http://127.0.0.1:8080), ORS_API_KEY
//! let env = client.environment("gsm8k");
//! println!("{} test tasks", env.num_tasks("test").await?);
//! let openai_tools = env.tools_for(Provider::OpenAi).await?;
//! # let _ = openai_tools;
//!
//! let session = env.session_at("test", 0).await?;
//! println!("{}", session.prompt().await?.text());
//! let out = session.call("submit", json!({ "answer": "18" })).await?;
//! println!("{}: reward {:?}, finished {}", out.text(), out.reward, out.finished);
//! session.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! A server the client does not control cannot exhaust it: results, SSE lines and JSON bodies
//! are bounded ([`ClientBuilder::max_result_bytes`], [`ClientBuilder::max_body_bytes`]), a
//! stream that breaks the protocol fails with [`Error::Protocol`] naming what it did, and
//! silence is bounded by the connect, request and heartbeat timeouts.
//!
//! Rollouts: implement [`Policy`] and hand it to [`evaluate`], which runs many episodes at
//! once and keeps each one's trajectory ([`Episode`], one JSON object). An [`Agent`] is the
//! policy of a language model behind the OpenAI Chat Completions or Anthropic Messages API
//! (see [`agent`]). `https://` servers are reached with rustls (Mozilla's roots by default,
//! [`ClientBuilder::ca_cert`] for a private CA). Code without an async runtime can use the
//! [`blocking`] facade.

#![warn(missing_docs)]

#[macro_use]
mod setters;

pub mod agent;
pub mod blocking;
mod body;
mod call;
mod client;
mod config;
mod error;
mod http;
mod rollout;
mod session;
mod tls;

pub use agent::{Agent, AgentOptions, AgentTrace, Api, ChatModel, ModelOptions, OnText};
pub use call::{Progress, ProgressFn};
pub use client::{Client, Environment};
pub use config::{
    ClientBuilder, Config, SecretsMode, SizeLimit, TlsRoots, API_KEY_ENV, CALL_TIMEOUT_ENV,
    CA_CERT_ENV, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_RESULT_BYTES, DEFAULT_URL, MAX_BODY_BYTES_ENV,
    MAX_RESULT_BYTES_ENV, TLS_ROOTS_ENV, URL_ENV,
};
pub use error::{Error, Result};
pub use ors_core::provider::Provider;
pub use ors_core::{
    Block, BlockText, Blocks, ErrorCode, GroupCandidate, GroupScore, ImageBlock, JsonObject,
    ListToolsOutput, Message, MessageBlock, Role, RunToolOutput, Secrets, Split, SplitType,
    TerminalToolSpec, TextBlock, ToolError, ToolErrorReason, ToolOutput, ToolSpec, VersionInfo,
};
pub use rollout::{
    evaluate, evaluate_samples, Action, Call, Episode, EpisodeError, EvalOptions, EvalProgress,
    EvalProgressFn, EvalReport, Observation, Outcome, Policy, PolicyError, StopHandle, StopReason,
    Summary, TaskSample, Timings, Turn,
};
pub use session::{Session, SessionBuilder, TaskRef};

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}

    #[test]
    fn handles_can_be_shared_across_tasks() {
        send_sync::<Client>();
        send_sync::<Environment>();
        send_sync::<Session>();
        send_sync::<Error>();
    }

    #[allow(dead_code, unreachable_code, clippy::diverging_sub_expression)]
    fn futures_are_send(s: &Session, e: &Environment) {
        send(&s.call("t", serde_json::Value::Null));
        send(&s.prompt());
        send(&s.tools());
        send(&e.session_at("train", 0));
        send(&e.tasks("train"));
    }
}
