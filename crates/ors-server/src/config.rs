//! Server settings: defaults, the builder-facing struct, and the `ORS_*` environment variables.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// The default time limit of one tool call.
const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything a server can be tuned with. Build it with [`Default`], [`ServerConfig::from_env`]
/// or the setters of [`crate::Server`].
#[derive(Clone)]
pub struct ServerConfig {
    /// Address to listen on (`ORS_HOST`, default `127.0.0.1`; use `0.0.0.0` to serve others).
    pub host: String,
    /// Port to listen on (`ORS_PORT`, default 8080; 0 picks a free port).
    pub port: u16,
    /// Idle time after which the reaper deletes a session (`ORS_SESSION_TIMEOUT_SECS`, 15 min).
    pub session_timeout: Duration,
    /// How often the reaper looks for idle sessions (5 s).
    pub reaper_interval: Duration,
    /// How long a finished call's result stays available for reconnects (`ORS_LINGER_SECS`, 60 s).
    pub linger: Duration,
    /// Bytes of finished results the whole server keeps for reconnects
    /// (`ORS_MAX_LINGER_BYTES`, 512 MiB); past it the oldest go first, and a reconnect to one
    /// is told it expired.
    pub max_lingering_bytes: usize,
    /// Bytes of finished results one session keeps (`ORS_MAX_LINGER_BYTES_PER_SESSION`,
    /// 128 MiB); past it its oldest go first. A result larger than this is sent, not kept.
    pub max_lingering_bytes_per_session: usize,
    /// Interval of SSE keep-alive comments on open call streams (`ORS_KEEPALIVE_SECS`, 10 s).
    pub keepalive: Duration,
    /// How long a request on a session waits for its setup (`ORS_SETUP_WAIT_SECS`, 25 s) before
    /// it is answered 503 with `X-Backend-State: starting` and `Retry-After: 2`, for the client
    /// to ask again (PROTOCOL_NOTES row `slow-setup`).
    pub setup_wait: Duration,
    /// Largest accepted request body (`ORS_MAX_BODY_BYTES`, 10 MiB); larger is 413.
    pub max_body_bytes: usize,
    /// Largest tool result, as JSON text (`ORS_MAX_RESULT_BYTES`, 64 MiB); a larger one is
    /// sent as `ok: false` with its size and the limit.
    pub max_result_bytes: usize,
    /// Time a request body may take to arrive in full (`ORS_BODY_TIMEOUT_SECS`, 30 s); a slower
    /// one is answered 408 and its connection closed.
    pub body_timeout: Duration,
    /// Request-body bytes the whole server holds in memory at once (`ORS_MAX_BODY_BYTES_IN_FLIGHT`,
    /// 256 MiB): bodies being read, and call inputs not yet handed to their tool. A request
    /// that would go beyond is answered 503 `overloaded`. At least `max_body_bytes`.
    pub max_body_bytes_in_flight: usize,
    /// Largest accepted request head, start line and headers (64 KiB); larger is 431.
    pub max_header_bytes: usize,
    /// Most open client connections (`ORS_MAX_CONNECTIONS`; by default the process's limit of
    /// open files less a tenth, and less at least 128, kept for everything else). A connection
    /// beyond it is answered 503 `overloaded` and closed, so the server keeps the file
    /// descriptors to serve the others.
    pub max_connections: usize,
    /// Most live sessions (`ORS_MAX_SESSIONS`, 100 000); beyond it `create` is 503.
    pub max_sessions: usize,
    /// Most calls of one session started and not finished (running or waiting their turn;
    /// 256); beyond it `call` is 429, so one client cannot queue unbounded work and memory.
    pub max_queued_calls: usize,
    /// When set, every route but `/health` needs this key (`ORS_API_KEY`).
    pub api_key: Option<String>,
    /// The key of the tags in issued session ids (`ORS_SESSION_KEY`; random per process by
    /// default, `off` to accept any id at `/create`).
    pub session_key: SessionKey,
    /// Default time limit of one tool call (`ORS_TOOL_TIMEOUT_SECS`, 600 s; `0` or `off` for
    /// none). A tool past it is dropped, its cancellation token fires, and the call ends
    /// `ok: false`; without a limit a hung tool would hold its session forever.
    pub tool_timeout: Option<Duration>,
    /// Per-tool time limits by tool name; they override `tool_timeout`.
    pub tool_timeouts: HashMap<String, Duration>,
    /// How long in-flight calls may run on shutdown before sessions are torn down, and how
    /// long a call may go on after its session is deleted (it sees its cancellation token at
    /// once); also the limit of one `teardown` (10 s).
    pub shutdown_grace: Duration,
    /// Whether `/metrics` is served and counted (`ORS_METRICS`, on; `off` turns it off).
    pub metrics: bool,
    /// How long [`crate::Server::serve`] drains after SIGTERM before it shuts down
    /// (`ORS_DRAIN_SECS`, 30 s; `0` shuts down at once): new sessions are refused with 503 and
    /// `/ready` answers 503 while existing episodes go on; it stops sooner when the last
    /// session ends, or at a second SIGTERM or SIGINT.
    pub drain: Duration,
    /// This replica's number, the first group of the session ids it issues (`ORS_REPLICA_ID`;
    /// else the `N` of a host name ending in `-N`, as a Kubernetes StatefulSet's pods are
    /// named, when [`ServerConfig::from_env`] reads the environment). A proxy routes each
    /// request to the replica its id names. `None`: the first group is random.
    pub replica_id: Option<u32>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            port: 8080,
            session_timeout: Duration::from_secs(15 * 60),
            reaper_interval: Duration::from_secs(5),
            linger: ors_core::protocol::RESULT_LINGER,
            max_lingering_bytes: 512 * 1024 * 1024,
            max_lingering_bytes_per_session: 128 * 1024 * 1024,
            keepalive: ors_core::protocol::KEEPALIVE_INTERVAL,
            setup_wait: Duration::from_secs(25),
            max_body_bytes: 10 * 1024 * 1024,
            max_result_bytes: 64 * 1024 * 1024,
            body_timeout: Duration::from_secs(30),
            max_body_bytes_in_flight: 256 * 1024 * 1024,
            max_header_bytes: 64 * 1024,
            max_connections: default_max_connections(open_files_limit()),
            max_sessions: 100_000,
            max_queued_calls: 256,
            api_key: None,
            session_key: SessionKey::Random,
            tool_timeout: Some(DEFAULT_TOOL_TIMEOUT),
            tool_timeouts: HashMap::new(),
            shutdown_grace: Duration::from_secs(10),
            metrics: true,
            drain: Duration::from_secs(30),
            replica_id: None,
        }
    }
}

// The API key must never reach logs, so Debug is written by hand.
impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("session_timeout", &self.session_timeout)
            .field("reaper_interval", &self.reaper_interval)
            .field("linger", &self.linger)
            .field("max_lingering_bytes", &self.max_lingering_bytes)
            .field(
                "max_lingering_bytes_per_session",
                &self.max_lingering_bytes_per_session,
            )
            .field("keepalive", &self.keepalive)
            .field("setup_wait", &self.setup_wait)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_result_bytes", &self.max_result_bytes)
            .field("body_timeout", &self.body_timeout)
            .field("max_body_bytes_in_flight", &self.max_body_bytes_in_flight)
            .field("max_header_bytes", &self.max_header_bytes)
            .field("max_connections", &self.max_connections)
            .field("max_sessions", &self.max_sessions)
            .field("max_queued_calls", &self.max_queued_calls)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("session_key", &self.session_key)
            .field("tool_timeout", &self.tool_timeout)
            .field("tool_timeouts", &self.tool_timeouts)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("metrics", &self.metrics)
            .field("drain", &self.drain)
            .field("replica_id", &self.replica_id)
            .finish()
    }
}

/// How session ids are issued and checked (`ORS_SESSION_KEY`). `/create_session` hands out
/// ids carrying a tag made with this key, and `/create` refuses ids without a valid tag
/// (400 `unknown_session_id`), so clients cannot invent ids.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum SessionKey {
    /// A key drawn at random when the server starts (when `ORS_SESSION_KEY` is unset): only
    /// this process recognises its ids.
    #[default]
    Random,
    /// A secret shared by the replicas behind one proxy, so an id issued by one is accepted by
    /// all (at least 16 bytes).
    Shared(String),
    /// No tags: `/create` takes any id (`ORS_SESSION_KEY=off`), for peers that choose their
    /// own ids.
    Off,
}

// The key must never reach logs.
impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SessionKey::Random => "Random",
            SessionKey::Shared(_) => "Shared(<redacted>)",
            SessionKey::Off => "Off",
        })
    }
}

/// The shortest shared session key accepted.
const MIN_SESSION_KEY_BYTES: usize = 16;

/// A setting that cannot be used; names the variable (or field) and says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {name}: {reason}")]
pub struct ConfigError {
    /// The environment variable or config field.
    pub name: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl ConfigError {
    pub(crate) fn new(name: &'static str, reason: impl Into<String>) -> Self {
        Self {
            name,
            reason: reason.into(),
        }
    }
}

impl ServerConfig {
    /// The defaults overlaid with the `ORS_*` environment variables.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut config = Self::default();
        config.apply_env()?;
        Ok(config)
    }

    /// Overlay the `ORS_*` environment variables that are set onto this config; without
    /// `ORS_REPLICA_ID`, a host name ending in `-N` (`HOSTNAME`, or the kernel's) gives the
    /// replica number.
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        self.apply_vars(|name| match name {
            "HOSTNAME" => std::env::var(name).ok().or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
            }),
            _ => std::env::var(name).ok(),
        })
    }

    /// Overlay variables looked up by `var` (the environment, or a map in tests).
    pub fn apply_vars(
        &mut self,
        var: impl Fn(&'static str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(v) = var("ORS_HOST") {
            let v = v.trim();
            if v.is_empty() {
                return Err(ConfigError::new("ORS_HOST", "must not be empty"));
            }
            self.host = v.to_owned();
        }
        if let Some(v) = var("ORS_PORT") {
            self.port = v.trim().parse().map_err(|_| {
                ConfigError::new("ORS_PORT", format!("'{v}' is not a port number (0-65535)"))
            })?;
        }
        if let Some(v) = var("ORS_SESSION_TIMEOUT_SECS") {
            self.session_timeout = positive_secs("ORS_SESSION_TIMEOUT_SECS", &v)?;
        }
        if let Some(v) = var("ORS_LINGER_SECS") {
            self.linger = secs("ORS_LINGER_SECS", &v)?;
        }
        if let Some(v) = var("ORS_MAX_LINGER_BYTES") {
            self.max_lingering_bytes = count("ORS_MAX_LINGER_BYTES", &v)?;
        }
        if let Some(v) = var("ORS_MAX_LINGER_BYTES_PER_SESSION") {
            self.max_lingering_bytes_per_session = count("ORS_MAX_LINGER_BYTES_PER_SESSION", &v)?;
        }
        if let Some(v) = var("ORS_KEEPALIVE_SECS") {
            self.keepalive = positive_secs("ORS_KEEPALIVE_SECS", &v)?;
        }
        if let Some(v) = var("ORS_SETUP_WAIT_SECS") {
            self.setup_wait = positive_secs("ORS_SETUP_WAIT_SECS", &v)?;
        }
        if let Some(v) = var("ORS_MAX_BODY_BYTES") {
            self.max_body_bytes = count("ORS_MAX_BODY_BYTES", &v)?;
        }
        if let Some(v) = var("ORS_MAX_RESULT_BYTES") {
            self.max_result_bytes = count("ORS_MAX_RESULT_BYTES", &v)?;
        }
        if let Some(v) = var("ORS_BODY_TIMEOUT_SECS") {
            self.body_timeout = positive_secs("ORS_BODY_TIMEOUT_SECS", &v)?;
        }
        if let Some(v) = var("ORS_MAX_BODY_BYTES_IN_FLIGHT") {
            self.max_body_bytes_in_flight = count("ORS_MAX_BODY_BYTES_IN_FLIGHT", &v)?;
        }
        if let Some(v) = var("ORS_MAX_CONNECTIONS") {
            self.max_connections = count("ORS_MAX_CONNECTIONS", &v)?;
        }
        if let Some(v) = var("ORS_MAX_SESSIONS") {
            self.max_sessions = count("ORS_MAX_SESSIONS", &v)?;
        }
        if let Some(v) = var("ORS_API_KEY") {
            self.api_key = Some(v).filter(|k| !k.is_empty());
        }
        if let Some(v) = var("ORS_SESSION_KEY") {
            self.session_key = if v.trim().eq_ignore_ascii_case("off") {
                SessionKey::Off
            } else {
                SessionKey::Shared(v)
            };
        }
        if let Some(v) = var("ORS_METRICS") {
            self.metrics = switch("ORS_METRICS", &v)?;
        }
        if let Some(v) = var("ORS_DRAIN_SECS") {
            self.drain = secs("ORS_DRAIN_SECS", &v)?;
        }
        if let Some(v) = var("ORS_REPLICA_ID") {
            let n = v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= MAX_REPLICA_ID);
            self.replica_id = Some(n.ok_or_else(|| {
                ConfigError::new(
                    "ORS_REPLICA_ID",
                    format!("'{v}' is not a replica number (0 to {MAX_REPLICA_ID})"),
                )
            })?);
        } else if let Some(n) = var("HOSTNAME").as_deref().and_then(replica_of_host) {
            self.replica_id = Some(n);
        }
        if let Some(v) = var("ORS_TOOL_TIMEOUT_SECS") {
            let t = v.trim();
            self.tool_timeout = if t.is_empty() || t == "0" || t.eq_ignore_ascii_case("off") {
                None
            } else {
                Some(positive_secs("ORS_TOOL_TIMEOUT_SECS", t)?)
            };
        }
        Ok(())
    }

    /// Check that the settings can run a server (called by `bind`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let nonzero = [
            ("session_timeout", self.session_timeout),
            ("reaper_interval", self.reaper_interval),
            ("keepalive", self.keepalive),
            ("setup_wait", self.setup_wait),
            ("body_timeout", self.body_timeout),
        ];
        for (name, d) in nonzero {
            if d.is_zero() {
                return Err(ConfigError::new(name, "must be greater than zero"));
            }
        }
        if let SessionKey::Shared(key) = &self.session_key {
            if key.len() < MIN_SESSION_KEY_BYTES {
                return Err(ConfigError::new(
                    "ORS_SESSION_KEY",
                    format!(
                        "a shared session key must be at least {MIN_SESSION_KEY_BYTES} bytes \
                         (or 'off' to accept any session id)"
                    ),
                ));
            }
        }
        if self.replica_id.is_some_and(|n| n > MAX_REPLICA_ID) {
            return Err(ConfigError::new(
                "replica_id",
                format!("must be at most {MAX_REPLICA_ID} (eight decimal digits)"),
            ));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::new("max_connections", "must be at least 1"));
        }
        if self.max_sessions == 0 {
            return Err(ConfigError::new("max_sessions", "must be at least 1"));
        }
        if self.max_body_bytes_in_flight < self.max_body_bytes {
            return Err(ConfigError::new(
                "max_body_bytes_in_flight",
                format!(
                    "{} is less than max_body_bytes ({}): a body of the largest size could never be read",
                    self.max_body_bytes_in_flight, self.max_body_bytes
                ),
            ));
        }
        if self.max_queued_calls == 0 {
            return Err(ConfigError::new("max_queued_calls", "must be at least 1"));
        }
        if self.max_header_bytes < 1024 {
            return Err(ConfigError::new(
                "max_header_bytes",
                "must be at least 1024",
            ));
        }
        if self.tool_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new(
                "tool_timeout",
                "must be greater than zero",
            ));
        }
        if let Some((tool, _)) = self.tool_timeouts.iter().find(|(_, d)| d.is_zero()) {
            return Err(ConfigError::new(
                "tool_timeouts",
                format!("timeout of tool '{tool}' must be greater than zero"),
            ));
        }
        Ok(())
    }

    /// The time limit of a tool: its own, else the server's, else none.
    pub fn timeout_for(&self, tool: &str) -> Option<Duration> {
        self.tool_timeouts.get(tool).copied().or(self.tool_timeout)
    }
}

/// The largest replica number: the first group of an id holds it as eight decimal digits.
pub(crate) const MAX_REPLICA_ID: u32 = 99_999_999;

/// The replica number of a StatefulSet pod's host name (`ors-7` is 7): the digits after the
/// last `-`, when the name has a stem before it.
fn replica_of_host(host: &str) -> Option<u32> {
    let (stem, n) = host.trim().rsplit_once('-')?;
    if stem.is_empty() || n.is_empty() || n.len() > 8 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The soft limit of open files of this process, where the system says (`/proc`).
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_files_limit(&limits)
}

/// The soft "Max open files" of a `/proc/<pid>/limits` text; `None` when unlimited or absent.
fn parse_open_files_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Connections the server may hold with `fd_limit` open files: a tenth of them, and at least
/// 128, stay for the listener, refusals, files, pipes of child processes and logs. Without a
/// known limit, the common default of 1024 is assumed.
fn default_max_connections(fd_limit: Option<u64>) -> usize {
    let limit = usize::try_from(fd_limit.unwrap_or(1024)).unwrap_or(usize::MAX);
    let reserve = (limit / 10).max(128);
    limit.saturating_sub(reserve).max(16)
}

fn secs(name: &'static str, v: &str) -> Result<Duration, ConfigError> {
    let n: f64 = v
        .trim()
        .parse()
        .map_err(|_| ConfigError::new(name, format!("'{v}' is not a number of seconds")))?;
    if !n.is_finite() || !(0.0..=1e9).contains(&n) {
        return Err(ConfigError::new(name, format!("'{v}' is out of range")));
    }
    Ok(Duration::from_secs_f64(n))
}

fn positive_secs(name: &'static str, v: &str) -> Result<Duration, ConfigError> {
    let d = secs(name, v)?;
    if d.is_zero() {
        return Err(ConfigError::new(name, "must be greater than zero"));
    }
    Ok(d)
}

fn switch(name: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Ok(true),
        "off" | "0" | "false" | "no" => Ok(false),
        _ => Err(ConfigError::new(name, format!("'{v}' is not on or off"))),
    }
}

fn count(name: &'static str, v: &str) -> Result<usize, ConfigError> {
    match v.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::new(
            name,
            format!("'{v}' is not a positive whole number"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&'static str, &str)]) -> Result<ServerConfig, ConfigError> {
        let map: HashMap<&str, String> = vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
        let mut c = ServerConfig::default();
        c.apply_vars(|n| map.get(n).cloned())?;
        Ok(c)
    }

    #[test]
    fn defaults_match_the_documented_values() {
        let c = ServerConfig::default();
        assert_eq!(c.port, 8080);
        assert_eq!(c.host, "127.0.0.1");
        assert_eq!(c.session_timeout, Duration::from_secs(900));
        assert_eq!(c.linger, Duration::from_secs(60));
        assert_eq!(c.max_lingering_bytes, 512 * 1024 * 1024);
        assert_eq!(c.max_lingering_bytes_per_session, 128 * 1024 * 1024);
        assert_eq!(c.keepalive, Duration::from_secs(10));
        assert_eq!(c.max_body_bytes, 10 * 1024 * 1024);
        assert_eq!(c.max_result_bytes, 64 * 1024 * 1024);
        assert_eq!(c.body_timeout, Duration::from_secs(30));
        assert_eq!(c.max_body_bytes_in_flight, 256 * 1024 * 1024);
        assert_eq!(c.tool_timeout, Some(Duration::from_secs(600)));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn variables_overlay_the_config() {
        let c = with(&[
            ("ORS_HOST", "0.0.0.0"),
            ("ORS_PORT", "0"),
            ("ORS_SESSION_TIMEOUT_SECS", "1.5"),
            ("ORS_LINGER_SECS", "0"),
            ("ORS_MAX_LINGER_BYTES", "6000"),
            ("ORS_MAX_LINGER_BYTES_PER_SESSION", "600"),
            ("ORS_KEEPALIVE_SECS", "2"),
            ("ORS_MAX_BODY_BYTES", "1000"),
            ("ORS_MAX_RESULT_BYTES", "2000"),
            ("ORS_BODY_TIMEOUT_SECS", "4"),
            ("ORS_MAX_BODY_BYTES_IN_FLIGHT", "5000"),
            ("ORS_MAX_SESSIONS", "7"),
            ("ORS_MAX_CONNECTIONS", "9"),
            ("ORS_API_KEY", "k"),
            ("ORS_TOOL_TIMEOUT_SECS", "3"),
        ])
        .unwrap();
        assert_eq!(c.host, "0.0.0.0");
        assert_eq!(c.port, 0);
        assert_eq!(c.session_timeout, Duration::from_millis(1500));
        assert_eq!(c.linger, Duration::ZERO);
        assert_eq!(c.max_lingering_bytes, 6000);
        assert_eq!(c.max_lingering_bytes_per_session, 600);
        assert_eq!(c.keepalive, Duration::from_secs(2));
        assert_eq!(c.max_body_bytes, 1000);
        assert_eq!(c.max_result_bytes, 2000);
        assert_eq!(c.body_timeout, Duration::from_secs(4));
        assert_eq!(c.max_body_bytes_in_flight, 5000);
        assert_eq!(c.max_sessions, 7);
        assert_eq!(c.max_connections, 9);
        assert_eq!(c.api_key.as_deref(), Some("k"));
        assert_eq!(c.tool_timeout, Some(Duration::from_secs(3)));
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (name, value) in [
            ("ORS_PORT", "70000"),
            ("ORS_PORT", "http"),
            ("ORS_SESSION_TIMEOUT_SECS", "0"),
            ("ORS_KEEPALIVE_SECS", "-1"),
            ("ORS_LINGER_SECS", "soon"),
            ("ORS_MAX_BODY_BYTES", "0"),
            ("ORS_BODY_TIMEOUT_SECS", "0"),
            ("ORS_MAX_BODY_BYTES_IN_FLIGHT", "lots"),
            ("ORS_MAX_SESSIONS", "many"),
            ("ORS_TOOL_TIMEOUT_SECS", "x"),
            ("ORS_HOST", " "),
        ] {
            let err = with(&[(name, value)]).unwrap_err();
            assert_eq!(err.name, name);
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[test]
    fn tool_timeout_can_be_switched_off_and_overridden_per_tool() {
        let mut c = with(&[("ORS_TOOL_TIMEOUT_SECS", "0")]).unwrap();
        assert_eq!(c.tool_timeout, None);
        c.tool_timeout = Some(Duration::from_secs(5));
        c.tool_timeouts
            .insert("slow".into(), Duration::from_secs(60));
        assert_eq!(c.timeout_for("slow"), Some(Duration::from_secs(60)));
        assert_eq!(c.timeout_for("echo"), Some(Duration::from_secs(5)));
    }

    #[test]
    fn the_connection_limit_follows_the_open_files_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            5000                 524288               files     \n";
        assert_eq!(parse_open_files_limit(limits), Some(5000));
        assert_eq!(
            parse_open_files_limit("Max open files  unlimited  unlimited  files"),
            None
        );
        assert_eq!(default_max_connections(Some(5000)), 4500);
        assert_eq!(default_max_connections(Some(1024)), 896);
        assert_eq!(default_max_connections(None), 896);
        assert_eq!(default_max_connections(Some(100)), 16);
        assert_eq!(
            default_max_connections(Some(1 << 20)),
            (1 << 20) - (1 << 20) / 10
        );
    }

    #[test]
    fn debug_never_shows_the_api_key_or_the_session_key() {
        let c = ServerConfig {
            api_key: Some("hunter2".into()),
            session_key: SessionKey::Shared("correct horse battery staple".into()),
            ..ServerConfig::default()
        };
        let debug = format!("{c:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(!debug.contains("horse"), "{debug}");
    }

    #[test]
    fn the_session_key_is_random_shared_or_off() {
        assert_eq!(ServerConfig::default().session_key, SessionKey::Random);
        let c = with(&[("ORS_SESSION_KEY", "Off")]).unwrap();
        assert_eq!(c.session_key, SessionKey::Off);
        let c = with(&[("ORS_SESSION_KEY", "sixteen bytes ok")]).unwrap();
        assert_eq!(c.session_key, SessionKey::Shared("sixteen bytes ok".into()));
        assert!(c.validate().is_ok());
        let c = with(&[("ORS_SESSION_KEY", "short")]).unwrap();
        let err = c.validate().unwrap_err();
        assert_eq!(err.name, "ORS_SESSION_KEY");
        assert!(err.reason.contains("16 bytes"), "{err}");
    }

    #[test]
    fn metrics_drain_and_the_replica_number_come_from_the_environment() {
        let c = with(&[]).unwrap();
        assert!(c.metrics);
        assert_eq!(c.drain, Duration::from_secs(30));
        assert_eq!(c.replica_id, None);
        let c = with(&[
            ("ORS_METRICS", "off"),
            ("ORS_DRAIN_SECS", "0"),
            ("ORS_REPLICA_ID", "7"),
            ("HOSTNAME", "ors-3"),
        ])
        .unwrap();
        assert!(!c.metrics);
        assert_eq!(c.drain, Duration::ZERO);
        // The variable wins over the host name.
        assert_eq!(c.replica_id, Some(7));
        assert_eq!(
            with(&[("HOSTNAME", "ors-12")]).unwrap().replica_id,
            Some(12)
        );
        for host in ["laptop", "ors-", "-3", "ors-x1", "web-123456789"] {
            assert_eq!(
                with(&[("HOSTNAME", host)]).unwrap().replica_id,
                None,
                "{host}"
            );
        }
        for (name, value) in [
            ("ORS_REPLICA_ID", "-1"),
            ("ORS_REPLICA_ID", "100000000"),
            ("ORS_REPLICA_ID", "ors-3"),
            ("ORS_METRICS", "maybe"),
            ("ORS_DRAIN_SECS", "soon"),
        ] {
            assert_eq!(with(&[(name, value)]).unwrap_err().name, name, "{value}");
        }
    }

    #[test]
    fn validate_rejects_zero_intervals() {
        let c = ServerConfig {
            keepalive: Duration::ZERO,
            ..ServerConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().name, "keepalive");
        let c = ServerConfig {
            max_body_bytes_in_flight: 10,
            ..ServerConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().name, "max_body_bytes_in_flight");
    }
}
