//! The shared server state and the request entry point: route, authenticate, dispatch to
//! a handler, turn any error into its response, and trace the request.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use http::{Request, Response};
use hyper::body::Incoming;
use ors_core::types::{ListToolsOutput, ToolSpec};
use ors_runtime::env::DynEnvironment;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::Instrument as _;

use crate::body::Resp;
use crate::call::CallShared;
use crate::config::ServerConfig;
use crate::connection::{Answering, Tracked};
use crate::error::{self, ApiError, ServerError};
use crate::metrics::Metrics;
use crate::request;
use crate::request_body::{BodyBudget, BodyLimits};
use crate::results::ResultStore;
use crate::router::{self, Endpoint, RouteMatch};
use crate::session::SessionStore;
use crate::sid::SessionIds;
use crate::stats::ServerStats;

const X_CLIENT_TASK_IDS: HeaderName =
    HeaderName::from_static(ors_core::protocol::HEADER_CLIENT_TASK_IDS);

/// One hosted environment with the replies that never change rendered once.
pub(crate) struct HostedEnv {
    pub(crate) name: String,
    pub(crate) env: Arc<dyn DynEnvironment>,
    pub(crate) tools_json: Bytes,
    pub(crate) splits_json: Bytes,
    /// Each split's task list as a JSON array, rendered on first use.
    tasks_json: HashMap<String, OnceCell<Bytes>>,
}

impl HostedEnv {
    fn new(env: Arc<dyn DynEnvironment>) -> Result<Self, ServerError> {
        let name = env.name().to_owned();
        if !ors_runtime::env::valid_tool_name(&name) {
            return Err(ServerError::InvalidEnvironmentName(name));
        }
        if let Some(first) = env.table_errors().first() {
            let problems: Vec<String> = env.table_errors().iter().map(|e| e.to_string()).collect();
            tracing::debug!(env = %name, error = %first, "invalid tool table");
            return Err(ServerError::ToolTable {
                env: name,
                problems: problems.join("; "),
            });
        }
        if env.tools().is_empty() {
            tracing::warn!(env = %name, "environment has no shared tools");
        }
        if env.splits().is_empty() {
            tracing::warn!(env = %name, "environment has no splits");
        }
        let render = |v: serde_json::Result<Vec<u8>>| {
            v.map(Bytes::from).map_err(|e| ServerError::ToolTable {
                env: name.clone(),
                problems: format!("tool specs cannot be encoded: {e}"),
            })
        };
        Ok(Self {
            tools_json: render(serde_json::to_vec(&listing(&*env, env.tools().to_vec())))?,
            splits_json: render(serde_json::to_vec(env.splits()))?,
            tasks_json: env
                .splits()
                .iter()
                .map(|s| (s.name.clone(), OnceCell::new()))
                .collect(),
            name,
            env,
        })
    }

    /// The tasks of a split as a JSON array, rendered once (tasks are cached by the
    /// environment handle for the life of the server anyway).
    pub(crate) async fn tasks_json(&self, split: &str) -> Result<Bytes, ApiError> {
        let Some(cell) = self.tasks_json.get(split) else {
            return Err(
                ors_runtime::env::TaskError::unknown_split(split, self.env.splits()).into(),
            );
        };
        cell.get_or_try_init(|| async { error::to_json(&self.env.tasks(split).await?) })
            .await
            .cloned()
    }
}

/// A tools listing: `tools`, the terminal tool when the environment has one (PROTOCOL_NOTES
/// row `terminal-tool`), and `supports_score_group: true` when it scores groups (row
/// `score-group`; absent otherwise, which clients read as false).
pub(crate) fn listing(env: &dyn DynEnvironment, tools: Vec<ToolSpec>) -> ListToolsOutput {
    ListToolsOutput {
        tools,
        terminal_tool: env.terminal_tool().cloned(),
        supports_score_group: env.supports_score_group().then_some(true),
    }
}

/// The names of the hosted environments, in order.
pub(crate) fn names(envs: &[HostedEnv]) -> Vec<&str> {
    envs.iter().map(|e| e.name.as_str()).collect()
}

/// Everything a request handler can reach.
pub(crate) struct App {
    pub(crate) config: ServerConfig,
    pub(crate) envs: Vec<HostedEnv>,
    pub(crate) list_envs_json: Bytes,
    pub(crate) sessions: SessionStore,
    pub(crate) calls: Arc<CallShared>,
    /// What bounds each request body, and the server-wide budget of body bytes.
    pub(crate) body_limits: BodyLimits,
    /// Set when shutdown starts: no new sessions.
    pub(crate) closing: AtomicBool,
    /// Set when a drain starts (SIGTERM): no new session ids, `/ready` 503.
    pub(crate) draining: AtomicBool,
    /// Open client connections.
    pub(crate) connections: AtomicUsize,
    /// Connections past the limit being answered 503.
    pub(crate) refusing: AtomicUsize,
    /// What `/metrics` reports; `None` when metrics are off (`ORS_METRICS=off`).
    pub(crate) metrics: Option<Arc<Metrics>>,
}

impl App {
    /// The state of a server with these settings (checked first) and environments.
    pub(crate) fn new(
        config: ServerConfig,
        envs: Vec<Arc<dyn DynEnvironment>>,
    ) -> Result<Self, ServerError> {
        config.validate()?;
        if envs.is_empty() {
            return Err(ServerError::NoEnvironments);
        }
        let mut hosted: Vec<HostedEnv> = Vec::with_capacity(envs.len());
        for env in envs {
            if hosted
                .iter()
                .any(|h| h.name.eq_ignore_ascii_case(env.name()))
            {
                return Err(ServerError::DuplicateEnvironment(env.name().to_owned()));
            }
            hosted.push(HostedEnv::new(env)?);
        }
        let metrics = config.metrics.then(|| {
            let envs = hosted
                .iter()
                .map(|h| {
                    let tools = h.env.tools().iter().map(|t| t.name.clone()).collect();
                    (Arc::from(h.name.as_str()), tools)
                })
                .collect();
            Arc::new(Metrics::new(envs))
        });
        Ok(Self {
            sessions: SessionStore::new(
                config.max_sessions,
                config.session_timeout,
                SessionIds::new(&config.session_key, config.replica_id)?,
            ),
            list_envs_json: Bytes::from(serde_json::to_vec(&names(&hosted)).unwrap_or_default()),
            calls: Arc::new(CallShared {
                keepalive: config.keepalive,
                results: Arc::new(ResultStore::new(
                    config.linger,
                    config.max_lingering_bytes,
                    config.max_lingering_bytes_per_session,
                )),
                abort: CancellationToken::new(),
                active: AtomicUsize::new(0),
                metrics: metrics.clone(),
            }),
            body_limits: BodyLimits {
                max: config.max_body_bytes,
                timeout: config.body_timeout,
                budget: Arc::new(BodyBudget::new(config.max_body_bytes_in_flight)),
            },
            config,
            envs: hosted,
            closing: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            refusing: AtomicUsize::new(0),
            metrics,
        })
    }

    /// The environment a path segment (or a body's `env_name`) names and its index, compared
    /// without case; none is the default (first) one.
    pub(crate) fn env(&self, name: Option<&str>) -> Result<(usize, &HostedEnv), ApiError> {
        let Some(name) = name else {
            return Ok((0, &self.envs[0]));
        };
        // The name as served first: comparing without case costs on every request.
        let mut envs = self.envs.iter().enumerate();
        envs.clone()
            .find(|(_, e)| e.name == name)
            .or_else(|| envs.find(|(_, e)| e.name.eq_ignore_ascii_case(name)))
            .ok_or_else(|| ApiError::UnknownEnvironment {
                name: name.to_owned(),
                known: names(&self.envs).join(", "),
            })
    }

    /// A snapshot of the gauges.
    pub(crate) fn stats(&self) -> ServerStats {
        ServerStats {
            connections: self.connections.load(Ordering::Acquire),
            body_bytes: self.body_limits.budget.used(),
            lingering_result_bytes: self.calls.results.bytes(),
            sessions: self.sessions.len(),
            running_calls: self.calls.active.load(Ordering::Acquire),
        }
    }

    /// Count something in the metrics, when they are on.
    pub(crate) fn count<R>(&self, count: impl FnOnce(&Metrics) -> R) {
        if let Some(m) = &self.metrics {
            count(m);
        }
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Serve one request; never fails (errors become their responses). The response body
    /// holds `answering` until it is dropped, so its connection is not taken for idle.
    pub(crate) async fn serve(
        self: Arc<Self>,
        req: Request<Incoming>,
        answering: Answering,
    ) -> Result<Response<Tracked>, Infallible> {
        let span = tracing::debug_span!(
            "request",
            method = %req.method(),
            path = %req.uri().path(),
            status = Empty,
            latency_us = Empty,
            session = Empty,
            env = Empty,
            tool = Empty,
        );
        let started = Instant::now();
        let mut route = None;
        // Boxed: the handlers' futures nest to 1.5 KiB, and hyper moves the future it gets
        // from us several times per request. A pointer moves for less than one allocation.
        let handled = Box::pin(self.handle(req, &mut route));
        // With debug logs off (the default) the span is disabled: entering it on every poll
        // would cost for nothing.
        let handled = if span.is_disabled() {
            handled.await
        } else {
            handled.instrument(span.clone()).await
        };
        let mut resp = handled.unwrap_or_else(|err| {
            if err.status().is_server_error() {
                tracing::warn!(parent: &span, error = %err.detail(), "request failed");
            }
            self.count(|m| m.rejected(&err));
            err.to_response()
        });
        // Row `client-task-id`: tells clients they may name their calls.
        resp.headers_mut()
            .insert(X_CLIENT_TASK_IDS, HeaderValue::from_static("1"));
        self.count(|m| m.request(route, resp.status(), started.elapsed()));
        if !span.is_disabled() {
            span.record("status", resp.status().as_u16());
            span.record("latency_us", started.elapsed().as_micros() as u64);
            tracing::debug!(parent: &span, "request");
        }
        Ok(resp.map(|body| Tracked {
            body,
            _answering: answering,
        }))
    }

    /// Route, authorize and dispatch; `route` is set to the endpoint once it is known.
    async fn handle(
        &self,
        req: Request<Incoming>,
        route: &mut Option<Endpoint>,
    ) -> Result<Resp, ApiError> {
        let (parts, body) = req.into_parts();
        let (endpoint, env) = match router::route(&parts.method, parts.uri.path()) {
            RouteMatch::Found { endpoint, env } => (endpoint, env),
            unrouted => {
                self.authorize(&parts)?;
                let (method, path) = (parts.method.to_string(), parts.uri.path().to_owned());
                return Err(match unrouted {
                    RouteMatch::MethodNotAllowed { allow } => ApiError::MethodNotAllowed {
                        method,
                        path,
                        allow,
                    },
                    _ => ApiError::NoRoute { method, path },
                });
            }
        };
        *route = Some(endpoint);
        if !endpoint.is_open() {
            self.authorize(&parts)?;
        }
        if let Some(env) = env {
            note("env", env);
        }
        self.dispatch(endpoint, env, &parts, body).await
    }

    fn authorize(&self, parts: &Parts) -> Result<(), ApiError> {
        match &self.config.api_key {
            Some(key) if !request::authorized(&parts.headers, key) => Err(ApiError::Unauthorized),
            _ => Ok(()),
        }
    }
}

/// Record a field of the request's span ([`App::serve`]). The span is a debug one: with
/// debug logs off everywhere (the default), asking for the current span would cost on every
/// request for nothing.
pub(crate) fn note(field: &str, value: &str) {
    if tracing::level_enabled!(tracing::Level::DEBUG) {
        tracing::Span::current().record(field, value);
    }
}
