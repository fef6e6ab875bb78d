//! `GET /metrics`: what the server does and holds, in the Prometheus (OpenMetrics) text format.
//!
//! Counters and histograms are updated where things happen, with atomic adds only: the
//! series of every route and of every tool an environment declares are made when the server
//! starts and kept at hand, and histograms are lock-free ([`Timings`]), so the hot path takes
//! no lock and allocates nothing (the counter of a status seen for the first time, and a tool
//! no table declared, go through the label maps). Gauges of what the server holds (sessions
//! per environment, calls, connections, bytes) are read when scraped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::StatusCode;
use prometheus_client::encoding::{
    EncodeLabelSet, EncodeLabelValue, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::body::Resp;
use crate::error::ApiError;
use crate::router::Endpoint;
use crate::stats::ServerStats;

/// The `route` of requests no route matched.
const NO_ROUTE: &str = "unknown";

ors_core::wire_enum! {
    /// How a tool call ended, as `ors_calls_total{outcome}` counts it (`o as usize` is its
    /// index in `ALL`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelValue)]
    #[allow(non_camel_case_types)] // The label values, as written.
    pub enum CallOutcome {
        /// The tool returned a result (`ok: true`).
        ok = "ok",
        /// The tool returned an error result (`ok: false`), or one too large to send.
        tool_error = "tool_error",
        /// The tool panicked.
        crashed = "crashed",
        /// The tool ran past its time limit.
        timed_out = "timed_out",
        /// The session was deleted, or the server shut down, before or while it ran.
        cancelled = "cancelled",
    }
}

/// The label sets of the metrics: a struct each, of its labels in the order they are written.
macro_rules! label_sets {
    ($($name:ident { $($label:ident: $ty:ty),* })*) => {$(
        #[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
        struct $name { $($label: $ty,)* }
    )*};
}

label_sets! {
    RequestLabels { route: &'static str, status: u16 }
    RouteLabels { route: &'static str }
    EnvLabels { env: Arc<str> }
    ToolLabels { env: Arc<str>, tool: String }
    CallLabels { env: Arc<str>, tool: String, outcome: CallOutcome }
    ReasonLabels { reason: &'static str }
}

/// Upper bounds of the request-latency buckets, seconds: 100 µs to about 100 s.
const REQUEST_BOUNDS: &[f64] = &[
    0.0001, 0.0004, 0.0016, 0.0064, 0.0256, 0.1024, 0.4096, 1.6384, 6.5536, 26.2144, 104.8576,
];
/// Upper bounds of the tool-duration buckets, seconds: 1 ms to about 17 min (the default
/// tool time limit is 10 min).
const CALL_BOUNDS: &[f64] = &[
    0.001, 0.004, 0.016, 0.064, 0.256, 1.024, 4.096, 16.384, 65.536, 262.144, 1048.576,
];

/// A histogram of durations without a lock: an atomic count per bucket (the last one
/// unbounded) and the sum in nanoseconds; the total count is the buckets' sum, added up
/// when scraped rather than kept by every observation. prometheus-client's own takes a
/// write lock per observation, which every request and call would contend on.
#[derive(Clone, Debug)]
pub(crate) struct Timings(Arc<TimingsInner>);

#[derive(Debug)]
struct TimingsInner {
    bounds: &'static [f64],
    buckets: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Timings {
    fn new(bounds: &'static [f64]) -> Self {
        Timings(Arc::new(TimingsInner {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }))
    }

    fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let t = &self.0;
        let i = t
            .bounds
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(t.bounds.len());
        t.buckets[i].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        t.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

impl TypedMetric for Timings {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Timings {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let t = &self.0;
        let buckets: Vec<(f64, u64)> = t
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .zip(t.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect();
        let sum = t.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

type Histograms<L> = Family<L, Timings, fn() -> Timings>;

/// The series of one tool, kept at hand.
struct ToolSeries {
    /// By [`CallOutcome`], in the order of [`CallOutcome::ALL`].
    outcomes: [Counter; CallOutcome::ALL.len()],
    seconds: Timings,
}

/// What is kept at hand for one environment.
struct EnvSeries {
    name: Arc<str>,
    tools:
        HashMap<Box<str>, ToolSeries, std::hash::BuildHasherDefault<ors_runtime::env::NameHasher>>,
    reward: Counter<f64, AtomicU64>,
    /// Its live sessions, set when scraped.
    sessions: Gauge,
}

/// Every metric of one server, and the registry that writes them out.
pub(crate) struct Metrics {
    registry: Registry,
    /// The hosted environments, by index (a session knows its environment's index).
    envs: Vec<EnvSeries>,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Histograms<RouteLabels>,
    /// `request_seconds` of each endpoint, by `Endpoint as usize`; the last: no route.
    route_seconds: Vec<Timings>,
    /// `requests` of each endpoint (indexed the same way) answered 200, the status of nearly
    /// every request: made on the first one, then kept at hand, so counting one is an atomic
    /// add, not a hash of its labels and a lock of the family.
    route_ok: Vec<OnceLock<Counter>>,
    rejected: Family<ReasonLabels, Counter>,
    // Counted where they happen.
    pub(crate) sessions_created: Counter,
    pub(crate) sessions_deleted: Counter,
    pub(crate) sessions_reaped: Counter,
    calls: Family<CallLabels, Counter>,
    call_seconds: Histograms<ToolLabels>,
    reward: Family<EnvLabels, Counter<f64, AtomicU64>>,
    pub(crate) sse_reconnects: Counter,
    // Read when scraped.
    sessions_active: Family<EnvLabels, Gauge>,
    sessions_max: Gauge,
    calls_in_flight: Gauge,
    connections: Gauge,
    body_bytes: Gauge,
    lingering_bytes: Gauge,
    draining: Gauge,
}

/// `Metrics` with the fields given before the `;`, and each metric after it made (by `Default`,
/// or by the expression in parentheses) and registered under its name and help text.
macro_rules! registered {
    ($($field:ident $(: $value:expr)?,)*;
     $($metric:ident $(($made:expr))?: $name:literal, $help:literal;)*) => {{
        let mut m = Metrics {
            $($field $(: $value)?,)*
            $($metric: registered!(@made $($made)?),)*
        };
        $(m.registry.register($name, $help, m.$metric.clone());)*
        m
    }};
    (@made) => { Default::default() };
    (@made $made:expr) => { $made };
}

impl Metrics {
    /// The metrics of a server hosting `envs` (name and declared tools, in registration
    /// order).
    pub(crate) fn new(envs: Vec<(Arc<str>, Vec<String>)>) -> Self {
        let request_seconds: Histograms<RouteLabels> =
            Family::new_with_constructor(|| Timings::new(REQUEST_BOUNDS));
        let route_seconds = Endpoint::ALL
            .iter()
            .map(|e| e.name())
            .chain(std::iter::once(NO_ROUTE))
            .map(|route| request_seconds.get_or_create_owned(&RouteLabels { route }))
            .collect();
        // The metrics kept at hand, then each registered metric with its name and help text.
        let mut m = registered!(
            registry: Registry::default(),
            envs: Vec::with_capacity(envs.len()),
            route_seconds,
            route_ok: (0..=Endpoint::ALL.len()).map(|_| OnceLock::new()).collect(),
            ;
            requests: "ors_requests", "HTTP requests answered, by route and status";
            request_seconds(request_seconds): "ors_request_duration_seconds",
                "Time to the response head, by route (a call's stream goes on after it)";
            rejected: "ors_requests_rejected",
                "Requests refused for a limit, authentication or draining, by reason";
            sessions_created: "ors_sessions_created", "Episodes started (/create)";
            sessions_deleted: "ors_sessions_deleted",
                "Episodes ended by /delete or /delete_session";
            sessions_reaped: "ors_sessions_reaped", "Episodes ended by the idle reaper";
            calls: "ors_calls", "Tool calls finished, by environment, tool and outcome";
            call_seconds(Family::new_with_constructor(|| Timings::new(CALL_BOUNDS))):
                "ors_call_duration_seconds", "Time a tool ran, by environment and tool";
            reward: "ors_reward", "Sum of the rewards tools returned, by environment";
            sse_reconnects: "ors_sse_reconnects",
                "Call requests that named a task_id the session already knew (reconnects)";
            sessions_active: "ors_sessions_active", "Live sessions, by environment";
            sessions_max: "ors_sessions_max", "The live-session limit (ORS_MAX_SESSIONS)";
            calls_in_flight: "ors_calls_in_flight", "Tool calls started and not finished";
            connections: "ors_connections", "Open client connections";
            body_bytes: "ors_request_body_bytes",
                "Request-body bytes held: bodies being read and call inputs not yet handed over";
            lingering_bytes: "ors_lingering_result_bytes",
                "Bytes of finished results kept for reconnects";
            draining: "ors_draining",
                "1 while the server drains (SIGTERM): no new sessions, /ready answers 503";
        );
        for (name, tools) in envs {
            let tools = tools
                .into_iter()
                .map(|tool| {
                    let outcomes = CallOutcome::ALL.map(|outcome| {
                        m.calls.get_or_create_owned(&CallLabels {
                            env: Arc::clone(&name),
                            tool: tool.clone(),
                            outcome,
                        })
                    });
                    let seconds = m.call_seconds.get_or_create_owned(&ToolLabels {
                        env: Arc::clone(&name),
                        tool: tool.clone(),
                    });
                    (tool.into_boxed_str(), ToolSeries { outcomes, seconds })
                })
                .collect();
            let labels = EnvLabels {
                env: Arc::clone(&name),
            };
            // Every environment shows up from the start, at zero, so dashboards and
            // autoscalers see a series before the first session.
            m.envs.push(EnvSeries {
                name,
                tools,
                reward: m.reward.get_or_create_owned(&labels),
                sessions: m.sessions_active.get_or_create_owned(&labels),
            });
        }
        m
    }

    /// Count an answered request and its latency; `None`: no route matched.
    pub(crate) fn request(&self, route: Option<Endpoint>, status: StatusCode, took: Duration) {
        let index = route.map_or(Endpoint::ALL.len(), |e| e as usize);
        if let Some(seconds) = self.route_seconds.get(index) {
            seconds.observe(took);
        }
        let labels = || RequestLabels {
            route: route.map_or(NO_ROUTE, Endpoint::name),
            status: status.as_u16(),
        };
        match self.route_ok.get(index) {
            Some(ok) if status == StatusCode::OK => ok
                .get_or_init(|| self.requests.get_or_create_owned(&labels()))
                .inc(),
            _ => self.requests.get_or_create(&labels()).inc(),
        };
    }

    /// Count a request refused for one of the reasons `ors_requests_rejected_total` tracks.
    pub(crate) fn rejected(&self, err: &ApiError) {
        if let Some(reason) = err.rejection() {
            self.rejected_for(reason);
        }
    }

    /// Count a refusal by reason (connections past the limit never reach a handler).
    pub(crate) fn rejected_for(&self, reason: &'static str) {
        self.rejected.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Count a finished call of `tool` in environment number `env`: how it ended, how long
    /// its tool ran, and its reward.
    pub(crate) fn call(
        &self,
        env: usize,
        tool: &str,
        outcome: CallOutcome,
        ran: Duration,
        reward: Option<f64>,
    ) {
        let Some(env) = self.envs.get(env) else {
            return;
        };
        // A reward of 0 (most calls' before the episode's end) adds nothing: no atomic
        // compare-and-swap on the environment's sum for it.
        if let Some(r) = reward.filter(|r| r.is_finite() && *r != 0.0) {
            env.reward.inc_by(r);
        }
        if let Some(series) = env.tools.get(tool) {
            series.outcomes[outcome as usize].inc();
            series.seconds.observe(ran);
            return;
        }
        // A tool no table declared (task-specific or dynamic): through the label maps.
        self.calls
            .get_or_create(&CallLabels {
                env: Arc::clone(&env.name),
                tool: tool.to_owned(),
                outcome,
            })
            .inc();
        self.call_seconds
            .get_or_create(&ToolLabels {
                env: Arc::clone(&env.name),
                tool: tool.to_owned(),
            })
            .observe(ran);
    }

    /// The text of a scrape: the gauges set from `stats`, `per_env` (live sessions by
    /// environment index) and `draining`, then everything encoded.
    pub(crate) fn render(
        &self,
        stats: ServerStats,
        per_env: &[usize],
        max_sessions: usize,
        draining: bool,
    ) -> Result<Resp, ApiError> {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for (env, n) in self.envs.iter().zip(per_env) {
            env.sessions.set(gauge(*n));
        }
        self.sessions_max.set(gauge(max_sessions));
        self.calls_in_flight.set(gauge(stats.running_calls));
        self.connections.set(gauge(stats.connections));
        self.body_bytes.set(gauge(stats.body_bytes));
        self.lingering_bytes
            .set(gauge(stats.lingering_result_bytes));
        self.draining.set(i64::from(draining));
        let mut text = String::with_capacity(8192);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .map_err(|e| ApiError::Internal(format!("could not encode the metrics: {e}")))?;
        // A 200 like any other answer, but for its content type.
        let mut resp = crate::body::json_bytes(Bytes::from(text));
        let openmetrics = "application/openmetrics-text; version=1.0.0; charset=utf-8";
        resp.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(openmetrics));
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    async fn scrape(m: &Metrics, per_env: &[usize]) -> String {
        let stats = ServerStats {
            connections: 3,
            running_calls: 2,
            ..ServerStats::default()
        };
        let resp = m.render(stats, per_env, 10, false).unwrap();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test]
    async fn calls_are_counted_by_env_tool_and_outcome_with_their_rewards() {
        let m = Metrics::new(vec![
            ("math".into(), vec!["submit".into()]),
            ("code".into(), vec!["run".into()]),
        ]);
        m.call(0, "submit", CallOutcome::ok, ms(3), Some(1.0));
        m.call(0, "submit", CallOutcome::ok, ms(3), Some(0.5));
        m.call(1, "run", CallOutcome::timed_out, ms(1000), None);
        // A tool the table does not declare (task-specific, dynamic) is counted too.
        m.call(1, "hint", CallOutcome::tool_error, Duration::ZERO, None);
        // An index the server does not have is ignored, not a panic.
        m.call(7, "x", CallOutcome::ok, Duration::ZERO, Some(1.0));
        let text = scrape(&m, &[4, 0]).await;
        for line in [
            r#"ors_calls_total{env="math",tool="submit",outcome="ok"} 2"#,
            r#"ors_calls_total{env="code",tool="run",outcome="timed_out"} 1"#,
            r#"ors_calls_total{env="code",tool="run",outcome="ok"} 0"#,
            r#"ors_calls_total{env="code",tool="hint",outcome="tool_error"} 1"#,
            r#"ors_reward_total{env="math"} 1.5"#,
            r#"ors_reward_total{env="code"} 0.0"#,
            r#"ors_call_duration_seconds_count{env="math",tool="submit"} 2"#,
            r#"ors_call_duration_seconds_sum{env="math",tool="submit"} 0.006"#,
            r#"ors_call_duration_seconds_bucket{le="0.001",env="math",tool="submit"} 0"#,
            r#"ors_call_duration_seconds_bucket{le="0.004",env="math",tool="submit"} 2"#,
            r#"ors_call_duration_seconds_bucket{le="+Inf",env="code",tool="run"} 1"#,
            r#"ors_sessions_active{env="math"} 4"#,
            r#"ors_sessions_active{env="code"} 0"#,
            "ors_calls_in_flight 2",
            "ors_connections 3",
            "ors_sessions_max 10",
            "ors_draining 0",
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[tokio::test]
    async fn requests_and_rejections_are_counted_by_route_status_and_reason() {
        let m = Metrics::new(vec![("math".into(), Vec::new())]);
        let health = Some(Endpoint::Health);
        m.request(health, StatusCode::OK, Duration::from_micros(50));
        // The second 200 of a route is counted through the series kept at hand.
        m.request(health, StatusCode::OK, Duration::from_micros(50));
        m.request(health, StatusCode::NOT_FOUND, Duration::from_micros(50));
        m.request(
            Some(Endpoint::Create),
            StatusCode::SERVICE_UNAVAILABLE,
            ms(1),
        );
        m.request(None, StatusCode::NOT_FOUND, Duration::ZERO);
        m.rejected(&ApiError::TooManySessions { max: 1 });
        m.rejected(&ApiError::Unauthorized);
        // Not a rejection: a client mistake.
        m.rejected(&ApiError::MissingSessionId);
        m.rejected_for("too_many_connections");
        let text = scrape(&m, &[0]).await;
        for line in [
            r#"ors_requests_total{route="health",status="200"} 2"#,
            r#"ors_requests_total{route="health",status="404"} 1"#,
            r#"ors_requests_total{route="create",status="503"} 1"#,
            r#"ors_requests_total{route="unknown",status="404"} 1"#,
            r#"ors_request_duration_seconds_count{route="health"} 3"#,
            r#"ors_request_duration_seconds_bucket{le="0.0001",route="health"} 3"#,
            r#"ors_request_duration_seconds_bucket{le="0.0016",route="create"} 1"#,
            r#"ors_request_duration_seconds_count{route="ready"} 0"#,
            r#"ors_requests_rejected_total{reason="too_many_sessions"} 1"#,
            r#"ors_requests_rejected_total{reason="auth"} 1"#,
            r#"ors_requests_rejected_total{reason="too_many_connections"} 1"#,
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
        assert_eq!(text.matches("ors_requests_rejected_total{").count(), 3);
    }
}
