//! Language models behind an HTTP API: the [`ChatModel`] trait, its settings, and the
//! transport both implementations (`openai.rs`, `anthropic.rs`) send through: the client's
//! own, so the same connection pool, TLS roots, body limits, same-origin redirects and retry
//! rules as the ORS requests.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use http::header::{HeaderName, HeaderValue};
use ors_core::provider::Provider;
use ors_core::JsonObject;
use serde::de::DeserializeOwned;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::client::Client;
use crate::config::{normalize_url, SizeLimit};
use crate::error::{Error, Result};
use crate::http::{preview, Backoff, Http, Req, Retry};
use crate::rollout::trace::{Message, ModelCall, Sampling, ToolCall};

ors_core::wire_enum! {
    /// The HTTP API a model server speaks; its name (what [`FromStr`] accepts) is its tool
    /// format's.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Api {
        /// OpenAI Chat Completions, `POST {base}/chat/completions`: OpenAI, vLLM, SGLang,
        /// llama.cpp's server, Ollama and every compatible server.
        OpenAi = "openai",
        /// Anthropic Messages, `POST {base}/v1/messages`.
        Anthropic = "anthropic",
    }
}

impl Api {
    /// The environment variable the API key is read from when none is given.
    pub fn key_env(self) -> &'static str {
        match self {
            Api::OpenAi => "OPENAI_API_KEY",
            Api::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The tool format of this API.
    pub fn provider(self) -> Provider {
        match self {
            Api::OpenAi => Provider::OpenAi,
            Api::Anthropic => Provider::Anthropic,
        }
    }
}

impl FromStr for Api {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let name = s.trim().to_ascii_lowercase();
        let names = Api::ALL.map(Api::as_str);
        Api::ALL
            .into_iter()
            .find(|a| a.as_str() == name)
            .ok_or_else(|| format!("unknown API {name:?} (use {})", names.join(" or ")))
    }
}

/// The default bound on one answer of a model server: far above a completion's size (even
/// with logprobs and token ids for thousands of tokens), small enough that `--concurrency`
/// episodes reading at once stay within memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 << 20;

/// Which model to ask, where, and how.
#[derive(Clone)]
pub struct ModelOptions {
    /// The API.
    pub api: Api,
    /// The server's base URL: `https://api.openai.com/v1`, `http://localhost:8000/v1` (vLLM),
    /// `https://api.anthropic.com`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The API key; `None` reads [`Api::key_env`] (a local server may need none).
    pub api_key: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Completion token limit (`max_tokens`; Anthropic requires one: 4096 when unset).
    pub max_tokens: Option<u32>,
    /// Other body fields, sent as given (`top_p`, `seed`, vLLM's `logprobs`,
    /// `return_token_ids`, ...); they override the fields above.
    pub extra: JsonObject,
    /// Limit on one step's request: the whole answer, every retry included.
    pub timeout: Duration,
    /// The most bytes one answer may have; past it the episode ends with
    /// [`Error::ResponseTooLarge`] (the answer is not read further, nor asked for again).
    pub max_response_bytes: usize,
    /// Retries after a 429, a 5xx, a timeout or a broken connection.
    pub max_retries: u32,
    /// Longest wait between attempts, and cap on a server's `Retry-After`.
    pub max_backoff: Duration,
}

impl fmt::Debug for ModelOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelOptions")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("extra", &self.extra)
            .field("timeout", &self.timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("max_retries", &self.max_retries)
            .field("max_backoff", &self.max_backoff)
            .finish()
    }
}

impl ModelOptions {
    /// `model` at `base_url` speaking `api`, with the key from the API's variable.
    pub fn new(api: Api, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api,
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            temperature: None,
            max_tokens: None,
            extra: JsonObject::new(),
            timeout: Duration::from_secs(600),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_retries: 6,
            max_backoff: Duration::from_secs(60),
        }
    }

    /// Send these body fields too.
    pub fn extra(mut self, fields: JsonObject) -> Self {
        self.extra.extend(fields);
        self
    }

    setters! { []
        /// Use this API key.
        api_key: Some(impl Into<String>);
        /// Sample at this temperature.
        temperature: Some(f64);
        /// Write at most this many tokens per completion.
        max_tokens: Some(u32);
        /// Limit one step's request, retries included, to this.
        timeout: Duration;
        /// Read at most this many bytes of one answer (default [`DEFAULT_MAX_RESPONSE_BYTES`]).
        max_response_bytes: usize;
        /// Retry up to this many times.
        max_retries: u32;
    }

    /// The sampling options, as recorded.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            extra: self.extra.clone(),
        }
    }
}

/// What an agent sends the model: the conversation and the tools, in the model API's tool
/// format (see [`ChatModel::provider`]).
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The conversation so far.
    pub messages: &'a [Message],
    /// The tools.
    pub tools: &'a [Value],
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// What it wrote, if anything.
    pub content: Option<String>,
    /// The tools it called, in order.
    pub tool_calls: Vec<ToolCall>,
    /// The record of the request (step and latency are filled in by the agent).
    pub record: ModelCall,
}

/// What a trajectory records about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The API's name.
    pub api: String,
    /// The server's base URL.
    pub base_url: String,
    /// The model's name.
    pub model: String,
    /// The sampling options sent.
    pub sampling: Sampling,
}

/// A language model that answers a conversation, possibly with tool calls. Implemented for
/// OpenAI-compatible servers and Anthropic (made by [`ModelOptions::connect`]); implement it
/// to plug in any other inference.
pub trait ChatModel: Send + Sync {
    /// The tool format the model expects.
    fn provider(&self) -> Provider;

    /// The model's API, server, name and sampling options, for the trajectory.
    fn info(&self) -> ModelInfo;

    /// Answer the conversation. Errors are [`Error::Model`] (after any retries).
    fn complete<'a>(&'a self, req: ChatRequest<'a>) -> BoxFuture<'a, Result<ModelReply>>;
}

/// A request body: the API's own fields, the tools (borrowed: they are the same every turn),
/// then the extra fields, which win over an own field of the same name.
pub(crate) struct Body<'a> {
    /// The API's fields, in order.
    pub fields: Vec<(&'static str, Value)>,
    /// The tools, left out when empty.
    pub tools: &'a [Value],
    /// The extra fields.
    pub extra: &'a JsonObject,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (k, v) in &self.fields {
            if !self.extra.contains_key(*k) {
                map.serialize_entry(k, v)?;
            }
        }
        if !self.tools.is_empty() && !self.extra.contains_key("tools") {
            map.serialize_entry("tools", self.tools)?;
        }
        for (k, v) in self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// A model server speaking the API of its options, through the client's transport.
pub(super) struct Endpoint {
    http: Arc<Http>,
    pub(super) opts: ModelOptions,
    base: Arc<str>,
    pub(super) headers: Vec<(HeaderName, HeaderValue)>,
}

impl Endpoint {
    pub(super) fn new(client: &Client, mut opts: ModelOptions) -> Result<Self> {
        let base = normalize_url(&opts.base_url)
            .map_err(|e| Error::InvalidArgument(format!("model base URL: {e}")))?;
        opts.base_url = base.clone();
        if opts.api_key.is_none() {
            opts.api_key = std::env::var(opts.api.key_env())
                .ok()
                .filter(|k| !k.trim().is_empty());
        }
        Ok(Self {
            http: Arc::clone(&client.http),
            base: Arc::from(base),
            headers: Vec::new(),
            opts,
        })
    }

    /// POST `body` to `path`, retrying as the agent loop should (429, 5xx, timeouts, broken
    /// connections; honouring `Retry-After`), and read the answer with `read` (given the
    /// attempts made), which names what is missing from an answer it cannot use. The whole
    /// of it, retries included, within [`ModelOptions::timeout`]; the answer within
    /// [`ModelOptions::max_response_bytes`]. A timeout and an answer too large keep their
    /// kinds (`timeout`, `too_large`) in the trajectory; any other failure is
    /// [`Error::Model`].
    pub(super) async fn post<R: DeserializeOwned>(
        &self,
        path: &str,
        body: &Body<'_>,
        read: impl FnOnce(R, u32) -> std::result::Result<ModelReply, String>,
    ) -> Result<ModelReply> {
        let model_error = |status: Option<u16>, message: String| Error::Model { status, message };
        let limit = self.opts.timeout;
        let req = Req {
            extra: self.headers.clone(),
            base: Some(Arc::clone(&self.base)),
            timeout: Some(limit),
            max_body: Some((self.opts.max_response_bytes, SizeLimit::ModelResponse)),
            ..Req::post(path).json(body)?
        };
        let first = self.http.backoff().base;
        let backoff = Backoff {
            retries: self.opts.max_retries,
            base: first,
            max: self.opts.max_backoff.max(first),
        };
        let fetch = self.http.fetch_with(&req, Retry::Idempotent, backoff);
        let url = format!("{}{path}", self.base);
        let Ok((result, attempts)) = tokio::time::timeout(limit, fetch).await else {
            return Err(Error::Timeout(format!(
                "{url} gave no complete answer within the step timeout of {} (retries included; \
                 ModelOptions::timeout, ors eval --step-timeout)",
                (ors_core::settings::SECS.show)(&limit)
            )));
        };
        let tries = if attempts > 1 {
            format!(" (after {attempts} attempts)")
        } else {
            String::new()
        };
        let (_, body) = result.map_err(|e| match e {
            e @ Error::ResponseTooLarge { .. } => e,
            Error::Timeout(t) => Error::Timeout(format!("{url}{tries}: {t}")),
            e => model_error(e.status(), format!("{url}{tries}: {e}")),
        })?;
        let decoded = serde_json::from_slice(&body).map_err(|e| {
            let body = preview(&body);
            let message = format!("{url} sent a reply that is not the API's: {e} (body: {body})");
            model_error(None, message)
        })?;
        read(decoded, attempts).map_err(|message| model_error(None, format!("{url}: {message}")))
    }
}
