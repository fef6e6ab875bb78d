//! Webhook tools: a tool defined by configuration (name, description, input schema, URL,
//! secret) whose calls are `POST`ed to the URL, as Bedrock's external tools are.
//!
//! The request body is `{"tool": NAME, "input": {...}, "session_id": SID, "call_id": ID}`
//! with the secret in `X-Agent-Secret`. The whole exchange has a timeout; the request is
//! retried only when no connection could be opened (nothing was sent, so the endpoint never
//! runs twice). The answer becomes the tool's result:
//! - a non-2xx status: `ok: false` naming the status and the start of the body;
//! - JSON in the ORS result form (`{"ok": true, "output": {...}}` / `{"ok": false, "error":
//!   "..."}`) or a `ToolOutput` (`{"blocks": [...], "reward": ..., "finished": ...}`): that;
//! - other JSON: one text block of the body, and the value in `metadata.structured`;
//! - anything else: one text block of the body.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::{json, Value};

use ors_core::types::{JsonObject, RunToolOutput, ToolOutput, STRUCTURED_KEY};

use super::error::ExternalError;
use super::http::{check_url, header_text, read_body, HttpClient, SendError};
use crate::env::{DynamicTool, ToolContext};

/// The header carrying a webhook's secret.
pub const SECRET_HEADER: &str = "x-agent-secret";

/// The most bytes of a webhook's answer read (16 MiB).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

fn default_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

fn default_timeout() -> f64 {
    30.0
}

fn default_retries() -> u32 {
    2
}

/// A webhook tool's configuration, as written in a JSON file (a list of these, or `{"tools":
/// [...]}`) or built in code.
///
/// ```
/// use ors_runtime::webhook::WebhookTool;
///
/// let hooks = WebhookTool::parse_list(r#"[{
///     "name": "lookup_order",
///     "description": "Look up an order by ID",
///     "input_schema": {"type": "object", "properties": {"orderId": {"type": "string"}},
///                      "required": ["orderId"]},
///     "url": "http://127.0.0.1:9000/hooks/lookup",
///     "secret_env": "LOOKUP_SECRET",
///     "timeout_secs": 10
/// }]"#).unwrap();
/// assert_eq!(hooks[0].name, "lookup_order");
/// assert_eq!(hooks[0].retries, 2);
/// ```
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookTool {
    /// The tool's name (`[A-Za-z0-9_-]{1,64}`).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the input (an object schema), served verbatim and checked before
    /// every call; by default an object with no declared fields.
    #[serde(default = "default_schema", alias = "parameters")]
    pub input_schema: Value,
    /// Where calls are POSTed (`http://` only for now).
    pub url: String,
    /// The secret sent in `X-Agent-Secret`.
    #[serde(default)]
    pub secret: Option<String>,
    /// The environment variable holding the secret, read at start-up (instead of `secret`, to
    /// keep it out of the file).
    #[serde(default)]
    pub secret_env: Option<String>,
    /// Limit on one call, connection included (default 30 s).
    #[serde(default = "default_timeout")]
    pub timeout_secs: f64,
    /// How many times a call is retried when no connection could be opened (default 2).
    #[serde(default = "default_retries")]
    pub retries: u32,
}

impl std::fmt::Debug for WebhookTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookTool")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("secret_env", &self.secret_env)
            .field("timeout_secs", &self.timeout_secs)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl WebhookTool {
    /// A webhook tool with the defaults: no secret, 30 s, 2 retries.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        url: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            url: url.into(),
            secret: None,
            secret_env: None,
            timeout_secs: default_timeout(),
            retries: default_retries(),
        }
    }

    /// This tool sending `secret` in `X-Agent-Secret`.
    pub fn with_secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// This tool with a call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout_secs = timeout.as_secs_f64();
        self
    }

    /// Webhook tools from JSON: a list, or an object with a `tools` list.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, ExternalError> {
        let bad = |e: String| {
            ExternalError::Config(format!(
                "webhook tools: {e} (expected a list of {{\"name\", \"description\", \
                 \"input_schema\", \"url\", \"secret\" | \"secret_env\", \"timeout_secs\", \
                 \"retries\"}}, or {{\"tools\": [...]}})"
            ))
        };
        let value: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let list = match value {
            Value::Object(mut obj) if obj.contains_key("tools") => obj["tools"].take(),
            other => other,
        };
        serde_path_to_error::deserialize::<_, Vec<Self>>(list)
            .map_err(|e| bad(format!("at {}: {}", e.path(), e.inner())))
    }

    /// Webhook tools from a JSON file (see [`WebhookTool::parse_list`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Vec<Self>, ExternalError> {
        let path = path.as_ref();
        let at =
            |e: &dyn std::fmt::Display| ExternalError::Config(format!("{}: {e}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| at(&e))?;
        Self::parse_list(&text).map_err(|e| at(&e))
    }

    /// A configuration error of this tool.
    fn config(&self, what: impl std::fmt::Display) -> ExternalError {
        ExternalError::Config(format!("webhook tool '{}': {what}", self.name))
    }

    /// The secret: `secret`, else the variable `secret_env` names.
    fn resolve_secret(&self) -> Result<Option<HeaderValue>, ExternalError> {
        let secret = match (&self.secret, &self.secret_env) {
            (Some(s), _) => s.clone(),
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                self.config(format!("the variable {var} (its secret_env) is not set"))
            })?,
            (None, None) => return Ok(None),
        };
        let mut v = HeaderValue::from_str(&secret)
            .map_err(|_| self.config("the secret cannot be sent in a header"))?;
        v.set_sensitive(true);
        Ok(Some(v))
    }

    /// This webhook as a tool of an environment (checked now: name, schema, URL, secret).
    pub fn into_tool(self) -> Result<DynamicTool, ExternalError> {
        let uri = check_url(&self.url).map_err(|e| self.config(e))?;
        if !(self.timeout_secs.is_finite() && self.timeout_secs > 0.0) {
            return Err(self.config("timeout_secs must be a positive number"));
        }
        let hook = Arc::new(Hook {
            name: self.name.clone(),
            uri,
            secret: self.resolve_secret()?,
            timeout: Duration::from_secs_f64(self.timeout_secs),
            retries: self.retries,
            client: HttpClient::new(),
        });
        DynamicTool::new(
            self.name,
            self.description,
            self.input_schema,
            move |ctx: ToolContext, input: JsonObject| {
                let hook = Arc::clone(&hook);
                async move { hook.call(&ctx, input).await.into_result() }
            },
        )
        .map_err(ExternalError::Tool)
    }
}

/// A configured webhook, ready to call.
struct Hook {
    name: String,
    uri: http::Uri,
    secret: Option<HeaderValue>,
    timeout: Duration,
    retries: u32,
    client: HttpClient,
}

impl Hook {
    /// A failed call of this tool.
    fn fail(&self, what: impl std::fmt::Display) -> RunToolOutput {
        RunToolOutput::error(format!("webhook tool '{}': {what}", self.name))
    }

    fn request(&self, body: &Bytes) -> Result<Request<Full<Bytes>>, http::Error> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header(CONTENT_TYPE, "application/json");
        if let Some(secret) = &self.secret {
            req = req.header(SECRET_HEADER, secret.clone());
        }
        req.body(Full::new(body.clone()))
    }

    async fn call(&self, ctx: &ToolContext, input: JsonObject) -> RunToolOutput {
        let started = std::time::Instant::now();
        let out = tokio::select! {
            out = tokio::time::timeout(self.timeout, self.exchange(ctx, input)) => out
                .unwrap_or_else(|_| self.fail(format!("no answer within {:?}", self.timeout))),
            () = ctx.cancelled() => self.fail("the call was cancelled"),
        };
        tracing::debug!(
            tool = %self.name,
            session_id = ctx.session_id(),
            ok = out.is_ok(),
            duration_ms = started.elapsed().as_millis() as u64,
            "webhook call"
        );
        out
    }

    async fn exchange(&self, ctx: &ToolContext, input: JsonObject) -> RunToolOutput {
        let body = json!({
            "tool": self.name,
            "input": input,
            "session_id": ctx.session_id(),
            "call_id": ctx.call_id(),
        });
        let body = Bytes::from(body.to_string());
        let mut attempt = 0u32;
        let resp = loop {
            let req = match self.request(&body) {
                Ok(r) => r,
                Err(e) => return self.fail(format!("cannot build the request: {e}")),
            };
            match self.client.send(req).await {
                Ok(resp) => break resp,
                Err(SendError::Connect(e)) if attempt < self.retries => {
                    attempt += 1;
                    tracing::debug!(tool = %self.name, attempt, error = %e, "webhook: retrying");
                    tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
                }
                Err(e) => return self.fail(format!("{} ({e})", self.uri)),
            }
        };
        let status = resp.status();
        let is_json = header_text(&resp, CONTENT_TYPE)
            .is_some_and(|ct| ct.to_ascii_lowercase().contains("json"));
        let bytes = match read_body(resp, MAX_RESPONSE_BYTES).await {
            Ok(b) => b,
            Err(e) => return self.fail(format!("reading the answer (HTTP {status}): {e}")),
        };
        if !status.is_success() {
            return RunToolOutput::error(format!(
                "webhook tool '{}' answered HTTP {status}: {}",
                self.name,
                preview(&bytes)
            ));
        }
        answer(&self.name, &bytes, is_json)
    }
}

/// The first 300 characters of a body, on one line, for an error.
fn preview(bytes: &[u8]) -> String {
    match ors_core::text::preview(&String::from_utf8_lossy(bytes), 300) {
        empty if empty.is_empty() => "(empty body)".to_owned(),
        text => text,
    }
}

/// A 2xx answer as the tool's result (see the module docs).
fn answer(tool: &str, bytes: &[u8], is_json: bool) -> RunToolOutput {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let parsed = serde_json::from_slice::<Value>(bytes).ok();
    let Some(value) = parsed.filter(|_| is_json || text.trim_start().starts_with('{')) else {
        return RunToolOutput::Success(ToolOutput::text(text));
    };
    let unparsed = |what: &str, e: serde_json::Error| {
        RunToolOutput::error(format!(
            "webhook tool '{tool}' answered {what} that does not parse: {e}"
        ))
    };
    match value.as_object() {
        Some(o) if o.contains_key("ok") => {
            serde_json::from_value(value).unwrap_or_else(|e| unparsed("an ORS result", e))
        }
        Some(o) if o.contains_key("blocks") => serde_json::from_value(value)
            .map_or_else(|e| unparsed("a ToolOutput", e), RunToolOutput::Success),
        _ => {
            let metadata = JsonObject::from_iter([(STRUCTURED_KEY.to_owned(), value)]);
            RunToolOutput::Success(ToolOutput::text(text).with_metadata(metadata))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_map_to_results() {
        let out = answer("t", br#"{"ok": false, "error": "no such order"}"#, true);
        assert_eq!(out, RunToolOutput::error("no such order"));
        let out = answer(
            "t",
            br#"{"blocks": [{"type": "text", "text": "hi"}], "reward": 1.0, "finished": true}"#,
            true,
        );
        let o = out.output().unwrap();
        assert_eq!((o.reward, o.finished), (Some(1.0), true));
        let out = answer("t", br#"{"orderId": "7", "status": "processing"}"#, true);
        let o = out.output().unwrap();
        assert_eq!(
            o.blocks[0].as_text(),
            Some(r#"{"orderId": "7", "status": "processing"}"#)
        );
        assert_eq!(
            o.metadata.as_ref().unwrap()[STRUCTURED_KEY]["status"],
            "processing"
        );
        let out = answer("t", b"plain words", false);
        assert_eq!(
            out.output().unwrap().blocks[0].as_text(),
            Some("plain words")
        );
        let out = answer("t", br#"{"ok": true}"#, true);
        assert!(
            !out.is_ok(),
            "an ORS result without output is an error naming it"
        );
    }

    #[test]
    fn a_file_is_a_list_or_an_object_with_tools_and_names_its_problems() {
        let hooks = WebhookTool::parse_list(
            r#"{"tools": [{"name": "a", "description": "d", "url": "http://127.0.0.1:1/"}]}"#,
        )
        .unwrap();
        assert_eq!(hooks[0].input_schema, default_schema());
        let e = WebhookTool::parse_list(r#"[{"name": "a", "description": "d"}]"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("url"), "{e}");
        let e = WebhookTool::parse_list(
            r#"[{"name": "a", "description": "d", "url": "http://x/", "sekret": "s"}]"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("sekret"), "{e}");
    }

    #[test]
    fn bad_configuration_is_refused_before_serving() {
        let hook = WebhookTool::new("a", "d", default_schema(), "https://example.com/");
        assert!(hook.into_tool().unwrap_err().to_string().contains("https"));
        let hook = WebhookTool::new("a b", "d", default_schema(), "http://127.0.0.1:1/");
        assert!(hook.into_tool().is_err());
        let mut hook = WebhookTool::new("a", "d", default_schema(), "http://127.0.0.1:1/");
        hook.secret_env = Some("ORS_TEST_SURELY_UNSET_VARIABLE".into());
        assert!(hook
            .into_tool()
            .unwrap_err()
            .to_string()
            .contains("ORS_TEST_SURELY_UNSET_VARIABLE"));
        let secret = WebhookTool::new("a", "d", default_schema(), "http://x/").with_secret("s3");
        assert!(
            !format!("{secret:?}").contains("s3"),
            "Debug shows no secret"
        );
    }
}
