//! A scripted language-model server: real HTTP speaking the OpenAI Chat Completions API
//! (`POST /v1/chat/completions`) and the Anthropic Messages API (`POST /v1/messages`) on one
//! port, answering from a script instead of a model. It is as strict as the real APIs about
//! what it accepts (roles, `tool_call_id` / `tool_use_id` linkage, content part shapes, tool
//! schema shape, unknown fields), answers a malformed request with the API's own error shape,
//! and remembers every rejection, so a test passes only if the client speaks the API exactly.
//!
//! It lets `ors eval` run without a GPU:
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use ors_examples::scripted_model::ScriptedModel;
//!
//! // Reads "What is A+B?" and calls `submit` with the sum.
//! let model = ScriptedModel::arithmetic().bind("127.0.0.1:0").await?;
//! println!("OpenAI base URL {}, Anthropic base URL {}", model.openai_base(), model.anthropic_base());
//! # Ok(())
//! # }
//! ```

mod anthropic;
mod openai;
mod rules;
mod script;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use rules::{invalid, Rejection};
pub use script::{Api, Exchange, Reply, ToolResult};

/// The largest request body accepted.
const MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;

type Script = dyn Fn(&Exchange) -> Reply + Send + Sync;

/// A scripted model server, before it is bound.
#[derive(Clone)]
pub struct ScriptedModel {
    script: Arc<Script>,
    api_key: Option<String>,
    delay: Duration,
}

/// The numbers of "What is A+B?" in `text`.
pub fn sum_question(text: &str) -> Option<(i64, i64)> {
    let rest = &text[text.find("What is ")? + "What is ".len()..];
    let end = rest.find('?')?;
    let (a, b) = rest[..end].split_once('+')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

impl ScriptedModel {
    /// A server answering from `script`.
    pub fn new(script: impl Fn(&Exchange) -> Reply + Send + Sync + 'static) -> Self {
        Self {
            script: Arc::new(script),
            api_key: None,
            delay: Duration::ZERO,
        }
    }

    /// The model of the conformance fixture: reads "What is A+B?" from the prompt and calls
    /// `submit` with the sum (`0` if it finds no question); once a result came back, it says
    /// it is done, without a tool call.
    pub fn arithmetic() -> Self {
        Self::new(|x| {
            if !x.tool_results.is_empty() {
                return Reply::Text("Done.".to_owned());
            }
            let answer = sum_question(&x.first_user_text).map_or(0, |(a, b)| a + b);
            Reply::call("submit", json!({ "answer": answer.to_string() }))
        })
    }

    /// Require this API key (`Authorization: Bearer KEY` or `x-api-key: KEY`).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Wait this long before each answer (a slow model).
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Listen on `addr` (`127.0.0.1:0` for a free port) and serve until shut down.
    pub async fn bind(self, addr: &str) -> std::io::Result<RunningModel> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            model: self,
            requests: AtomicUsize::new(0),
            rejections: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&state);
        let task = tokio::spawn(async move {
            // Connections end with the server: dropping the set aborts them.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                let _ = stream.set_nodelay(true);
                let s = Arc::clone(&s);
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let s = Arc::clone(&s);
                        async move { Ok::<_, Infallible>(s.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(RunningModel { addr, state, task })
    }
}

/// What the server shares between connections.
struct State {
    model: ScriptedModel,
    requests: AtomicUsize,
    rejections: Mutex<Vec<String>>,
}

impl State {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let index = self.requests.fetch_add(1, Ordering::SeqCst);
        let api = match (req.method().as_str(), req.uri().path()) {
            ("POST", "/v1/chat/completions") => Api::OpenAi,
            ("POST", "/v1/messages") => Api::Anthropic,
            (method, path) => {
                let r = Rejection {
                    status: StatusCode::NOT_FOUND,
                    kind: "not_found_error",
                    message: format!("no route {method} {path}"),
                };
                return self.reject(Api::OpenAi, r);
            }
        };
        let headers = req.headers().clone();
        if let Err(r) = self.check_headers(api, &headers) {
            return self.reject(api, r);
        }
        let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(e) => return self.reject(api, invalid(format!("cannot read the body: {e}"))),
        };
        let request_bytes = body.len();
        let body: Value = match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return self.reject(api, invalid("the body must be a JSON object")),
            Err(e) => return self.reject(api, invalid(format!("the body is not JSON: {e}"))),
        };
        let checked = match api {
            Api::OpenAi => openai::check(&body),
            Api::Anthropic => anthropic::check(&body),
        };
        let mut exchange = match checked {
            Ok(x) => x,
            Err(r) => return self.reject(api, r),
        };
        exchange.request_index = index;
        exchange.request_bytes = request_bytes;
        exchange.body = body;
        let reply = (self.model.script)(&exchange);
        if !self.model.delay.is_zero() {
            tokio::time::sleep(self.model.delay).await;
        }
        let answer = match (&reply, api) {
            (
                Reply::Error {
                    status,
                    message,
                    retry_after,
                },
                _,
            ) => {
                let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
                let mut resp = error_response(api, status, error_kind(status), message);
                if let Some(d) = retry_after {
                    let h = resp.headers_mut();
                    h.insert("retry-after", d.as_secs().into());
                    h.insert("retry-after-ms", (d.as_millis() as u64).into());
                }
                return resp;
            }
            (_, Api::OpenAi) => openai::answer(&exchange, &reply, index),
            (_, Api::Anthropic) => anthropic::answer(&exchange, &reply, index),
        };
        match answer {
            Ok(v) => json_response(StatusCode::OK, &v),
            // The script asked for something this API cannot say.
            Err(message) => error_response(
                api,
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                &format!("the script's reply cannot be sent: {message}"),
            ),
        }
    }

    fn check_headers(&self, api: Api, headers: &http::HeaderMap) -> Result<(), Rejection> {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let json = header("content-type").is_some_and(|ct| ct.starts_with("application/json"));
        if !json {
            return Err(invalid("Content-Type must be application/json"));
        }
        let key = match api {
            Api::OpenAi => header("authorization").and_then(|v| v.strip_prefix("Bearer ")),
            Api::Anthropic => {
                if header("anthropic-version").is_none() {
                    return Err(invalid("anthropic-version: header is required"));
                }
                header("x-api-key")
            }
        };
        match &self.model.api_key {
            Some(expected) if key != Some(expected.as_str()) => Err(Rejection {
                status: StatusCode::UNAUTHORIZED,
                kind: "authentication_error",
                message: "invalid x-api-key / Authorization".to_owned(),
            }),
            _ => Ok(()),
        }
    }

    fn reject(&self, api: Api, r: Rejection) -> Response<Full<Bytes>> {
        if let Ok(mut seen) = self.rejections.lock() {
            seen.push(format!("{} {}", r.status.as_u16(), r.message));
        }
        error_response(api, r.status, r.kind, &r.message)
    }
}

/// The error type the APIs use for a status.
fn error_kind(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(v.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// An error in the API's shape.
fn error_response(
    api: Api,
    status: StatusCode,
    kind: &str,
    message: &str,
) -> Response<Full<Bytes>> {
    let body = match api {
        Api::OpenAi => json!({
            "error": {"message": message, "type": kind, "param": null, "code": null}
        }),
        Api::Anthropic => json!({
            "type": "error", "error": {"type": kind, "message": message}
        }),
    };
    json_response(status, &body)
}

/// A running scripted model server; stops when dropped.
pub struct RunningModel {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningModel {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL for the OpenAI API (`http://ADDR/v1`).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL for the Anthropic API (`http://ADDR`).
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// The requests refused as malformed (status and message), oldest first.
    pub fn rejections(&self) -> Vec<String> {
        self.state
            .rejections
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

impl Drop for RunningModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_questions_are_found() {
        assert_eq!(sum_question("What is 12+12?"), Some((12, 12)));
        assert_eq!(sum_question("Q: What is 3 + 4? Answer."), Some((3, 4)));
        assert_eq!(sum_question("What is love?"), None);
    }
}
