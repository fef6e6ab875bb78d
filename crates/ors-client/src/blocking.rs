//! A blocking facade over the async client, for scripts and programs without an async runtime
//! (the counterpart of the reference SDK's synchronous `ORS` client).
//!
//! Each [`Client`] owns a small tokio runtime (one worker thread) that carries its connections
//! and the sessions' background pings between calls. Do not call these methods from inside an
//! async runtime: use the async API there.
//!
//! ```no_run
//! use ors_client::blocking::Client;
//! use serde_json::json;
//!
//! # fn run() -> Result<(), ors_client::Error> {
//! let client = Client::new("http://127.0.0.1:8080")?;
//! let session = client.environment("gsm8k").session_at("test", 0)?;
//! println!("{:?}", session.prompt()?);
//! let out = session.call("submit", json!({ "answer": "72" }))?;
//! println!("reward {:?}", out.reward);
//! session.close()?;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use ors_core::provider::Provider;
use ors_core::{Blocks, RunToolOutput, Secrets, Split, ToolOutput, ToolSpec};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::runtime::Runtime;

use crate::config::ClientBuilder;
use crate::error::{Error, Result};
use crate::session::TaskRef;

/// Blocking methods, each running the async method of the same name on the handle's runtime.
/// The brackets say how to reach the async handle from `self`: `[inner]`, or `[get()?]` for a
/// session (which fails once it is closed).
macro_rules! blocking {
    ([$($inner:tt)+]) => {};
    ([$($inner:tt)+] $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty;
     $($rest:tt)*) => {
        $(#[$doc])*
        pub fn $name(&self, $($arg: $ty),*) -> Result<$out> {
            self.rt.block_on(self.$($inner)+.$name($($arg),*))
        }
        blocking!([$($inner)+] $($rest)*);
    };
}

/// A blocking client: the async [`crate::Client`] plus the runtime that drives it.
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
    rt: Arc<Runtime>,
}

fn runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("ors-client")
        .enable_all()
        .build()
        .map_err(|e| Error::Transport(format!("cannot start the client's runtime: {e}")))
}

impl Client {
    /// A client for the server at `url`, with the key from `ORS_API_KEY`.
    pub fn new(url: impl Into<String>) -> Result<Self> {
        Self::from_builder(ClientBuilder::new(url))
    }

    /// A client for `ORS_URL` (default `http://127.0.0.1:8080`) and `ORS_API_KEY`.
    pub fn from_env() -> Result<Self> {
        Self::from_builder(ClientBuilder::from_env())
    }

    /// A client with the settings of `builder`.
    pub fn from_builder(builder: ClientBuilder) -> Result<Self> {
        Ok(Self {
            inner: builder.build()?,
            rt: Arc::new(runtime()?),
        })
    }

    /// The async client underneath.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    blocking! { [inner]
        /// `GET /health`.
        fn health() -> ();
        /// The environments the server hosts.
        fn environments() -> Vec<String>;
    }

    /// A handle on the environment `name`.
    pub fn environment(&self, name: impl Into<String>) -> Environment {
        Environment {
            inner: self.inner.environment(name),
            rt: Arc::clone(&self.rt),
        }
    }
}

/// A blocking handle on one environment.
#[derive(Clone, Debug)]
pub struct Environment {
    inner: crate::Environment,
    rt: Arc<Runtime>,
}

impl Environment {
    /// The environment's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    blocking! { [inner]
        /// The shared tools.
        fn tools() -> Vec<ToolSpec>;
        /// The shared tools in a provider's format.
        fn tools_for(provider: Provider) -> Vec<Value>;
        /// The splits.
        fn splits() -> Vec<Split>;
        /// Every task of a split.
        fn tasks(split: &str) -> Vec<Value>;
        /// The number of tasks in a split.
        fn num_tasks(split: &str) -> u64;
        /// The task at `index` of `split`.
        fn task(split: &str, index: i64) -> Value;
        /// The tasks in `start..stop` (Python slice rules).
        fn task_range(split: &str, start: Option<i64>, stop: Option<i64>) -> Vec<Value>;
    }

    /// Every task of a split, typed.
    pub fn tasks_as<T: DeserializeOwned>(&self, split: &str) -> Result<Vec<T>> {
        self.rt.block_on(self.inner.tasks_as(split))
    }

    /// Open a session on a task, with secrets.
    pub fn session(&self, task: impl Into<TaskRef>, secrets: Secrets) -> Result<Session> {
        let builder = self.inner.session(task.into()).secrets(secrets);
        let session = self.rt.block_on(builder.open())?;
        Ok(Session {
            inner: Some(session),
            rt: Arc::clone(&self.rt),
        })
    }

    /// Open a session on the task at `index` of `split`.
    pub fn session_at(&self, split: &str, index: i64) -> Result<Session> {
        self.session(TaskRef::at(split, index), Secrets::default())
    }

    /// Open a session on a task given inline (typed or JSON).
    pub fn session_for<T: Serialize + ?Sized>(&self, task: &T) -> Result<Session> {
        self.session(TaskRef::spec(task)?, Secrets::default())
    }
}

/// A blocking session; deleted by [`Session::close`] or when dropped.
#[derive(Debug)]
pub struct Session {
    inner: Option<crate::Session>,
    rt: Arc<Runtime>,
}

impl Session {
    fn get(&self) -> Result<&crate::Session> {
        // `inner` is only taken by `close` and `drop`, which consume the session.
        self.inner
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("the session is closed".into()))
    }

    /// The session id.
    pub fn sid(&self) -> &str {
        self.inner.as_ref().map_or("", |s| s.sid())
    }

    /// Whether the session is known to be dead.
    pub fn is_terminated(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(crate::Session::is_terminated)
    }

    blocking! { [get()?]
        /// The episode's prompt.
        fn prompt() -> Blocks;
        /// The episode's tools (task-specific ones included).
        fn tools() -> Vec<ToolSpec>;
        /// Call a tool; `ok: false` is [`Error::ToolError`].
        fn call(name: &str, input: Value) -> ToolOutput;
        /// Call a tool and get `ok: false` as a value.
        fn call_raw(name: &str, input: Value) -> RunToolOutput;
    }

    /// Call a tool with a typed input.
    pub fn call_as<I: Serialize + ?Sized>(&self, name: &str, input: &I) -> Result<ToolOutput> {
        self.rt.block_on(self.get()?.call_as(name, input))
    }

    /// Delete the session.
    pub fn close(mut self) -> Result<()> {
        self.inner
            .take()
            .map_or(Ok(()), |s| self.rt.block_on(s.close()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(s) = self.inner.take() {
            if let Err(e) = self.rt.block_on(s.close()) {
                tracing::debug!(error = %e, "delete on drop failed");
            }
        }
    }
}
