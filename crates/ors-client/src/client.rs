//! The client handle, built from a [`ClientBuilder`]'s settings, and discovery: environments,
//! tools, splits and tasks. (Sessions are opened on an [`Environment`] by `session.rs`.)

use std::fmt;
use std::sync::Arc;

use ors_core::protocol::routes;
use ors_core::{
    GetTask, GetTaskRange, ListTasks, ListToolsOutput, NumTasks, NumTasksResponse, Split,
    TaskRangeResponse, TaskResponse, TasksResponse, ToolSpec, VersionInfo,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::config::{ClientBuilder, Config};
use crate::error::{Error, Result};
use crate::http::{segment, Http, Req, Retry};

/// A connection to one ORS server: cheap to clone, `Send + Sync`, one pool of keep-alive
/// connections shared by every clone, environment handle and session.
#[derive(Clone)]
pub struct Client {
    pub(crate) http: Arc<Http>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.http.cfg.url)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the server at `url` (`http://` or `https://`), with the key from
    /// `ORS_API_KEY`.
    pub fn new(url: impl Into<String>) -> Result<Self> {
        ClientBuilder::new(url).build()
    }

    /// A client for `ORS_URL` (default `http://127.0.0.1:8080`) and `ORS_API_KEY`.
    pub fn from_env() -> Result<Self> {
        ClientBuilder::from_env().build()
    }

    /// A builder to set the API key, timeouts, retries and ping period.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// The settings this client runs with.
    pub fn config(&self) -> &Config {
        &self.http.cfg
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.http.cfg.url
    }

    /// The most bytes one response (a JSON body, or a call stream's unfinished line, event
    /// and result) has held in this client's buffers at once, since the client was built:
    /// a diagnostic, and how tests prove the size limits hold.
    pub fn peak_buffered_bytes(&self) -> usize {
        self.http.meter.peak()
    }

    /// `GET /health`: succeeds when the server answers `{"status": "ok"}`.
    pub async fn health(&self) -> Result<()> {
        let ors_core::Status { status } = self.http.get(routes::HEALTH).await?;
        if status != "ok" {
            return Err(Error::Protocol(format!(
                "/health answered status {status:?}"
            )));
        }
        Ok(())
    }

    /// `GET /version`: the server's version (PROTOCOL_NOTES row `version-route`; servers
    /// without the route answer 404).
    pub async fn version(&self) -> Result<VersionInfo> {
        self.http.get(routes::VERSION).await
    }

    /// `GET /list_environments`: the names of the environments the server hosts.
    pub async fn environments(&self) -> Result<Vec<String>> {
        self.http.get(routes::LIST_ENVIRONMENTS).await
    }

    /// A handle on the environment `name` (no request is made).
    pub fn environment(&self, name: impl Into<String>) -> Environment {
        Environment {
            client: self.clone(),
            name: Arc::from(name.into()),
        }
    }
}

impl ClientBuilder {
    /// Check the URL and the limits, load the TLS roots and CA file, and build the client (no
    /// connection is made yet).
    pub fn build(self) -> Result<Client> {
        let cfg = self.checked().map_err(Error::InvalidArgument)?;
        let tls = crate::tls::client_config(cfg.tls_roots, cfg.ca_cert.as_deref())?;
        Ok(Client {
            http: Arc::new(Http::new(cfg, tls)),
        })
    }
}

/// One environment of a server: discovery and sessions. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Environment {
    client: Client,
    name: Arc<str>,
}

impl Environment {
    /// The environment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client this handle belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The path `/{env}{suffix}`.
    pub(crate) fn path(&self, suffix: &str) -> String {
        format!("/{}{suffix}", segment(&self.name))
    }

    /// `GET /{env}/tools`: the shared tools (task-specific ones need a session, see
    /// [`crate::Session::tools`]).
    pub async fn tools(&self) -> Result<Vec<ToolSpec>> {
        Ok(self.listing().await?.tools)
    }

    /// `GET /{env}/tools` as sent: the tools, and the terminal tool and group scoring when the
    /// environment has them (PROTOCOL_NOTES rows `terminal-tool`, `score-group`).
    pub async fn listing(&self) -> Result<ListToolsOutput> {
        self.client.http.get(self.path(routes::TOOLS)).await
    }

    /// The shared tools in the function-calling format of an LLM provider.
    pub async fn tools_for(&self, provider: crate::Provider) -> Result<Vec<Value>> {
        Ok(provider.tools(&self.tools().await?))
    }

    /// `GET /{env}/splits`: the splits and their types.
    pub async fn splits(&self) -> Result<Vec<Split>> {
        self.client.http.get(self.path(routes::SPLITS)).await
    }

    async fn post<B: Serialize, T: DeserializeOwned>(&self, suffix: &str, body: &B) -> Result<T> {
        let req = Req::post(self.path(suffix)).json(body)?;
        // Reading tasks changes nothing on the server, so every failure may be retried.
        self.client.http.json(&req, Retry::Idempotent).await
    }

    /// `POST /{env}/tasks`: every task of a split, as JSON.
    pub async fn tasks(&self, split: &str) -> Result<Vec<Value>> {
        let split = split.to_owned();
        let out: TasksResponse = self.post(routes::TASKS, &ListTasks { split }).await?;
        Ok(out.tasks)
    }

    /// Every task of a split, decoded into the environment's task type.
    pub async fn tasks_as<T: DeserializeOwned>(&self, split: &str) -> Result<Vec<T>> {
        self.tasks(split)
            .await?
            .into_iter()
            .map(decode_task)
            .collect()
    }

    /// `POST /{env}/num_tasks`: how many tasks a split has.
    pub async fn num_tasks(&self, split: &str) -> Result<u64> {
        let split = split.to_owned();
        let out: NumTasksResponse = self.post(routes::NUM_TASKS, &NumTasks { split }).await?;
        Ok(out.num_tasks)
    }

    /// `POST /{env}/task`: the task at `index` of `split`.
    pub async fn task(&self, split: &str, index: i64) -> Result<Value> {
        let split = split.to_owned();
        let out: TaskResponse = self.post(routes::TASK, &GetTask { split, index }).await?;
        Ok(out.task)
    }

    /// The task at `index` of `split`, decoded into the environment's task type.
    pub async fn task_as<T: DeserializeOwned>(&self, split: &str, index: i64) -> Result<T> {
        decode_task(self.task(split, index).await?)
    }

    /// `POST /{env}/task_range`: the tasks in `start..stop` (Python slice rules: either bound
    /// may be omitted or negative).
    pub async fn task_range(
        &self,
        split: &str,
        start: Option<i64>,
        stop: Option<i64>,
    ) -> Result<Vec<Value>> {
        let body = GetTaskRange {
            split: split.to_owned(),
            start,
            stop,
        };
        let out: TaskRangeResponse = self.post(routes::TASK_RANGE, &body).await?;
        Ok(out.tasks)
    }
}

fn decode_task<T: DeserializeOwned>(v: Value) -> Result<T> {
    serde_json::from_value(v)
        .map_err(|e| Error::Protocol(format!("a task does not have the expected shape: {e}")))
}
