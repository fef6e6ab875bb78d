//! Server settings: each declared once (field, default, kind, `ORS_*` variable, doc), from
//! which the struct, its defaults, the environment overlay and the table of `docs/serving.md`
//! follow.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use ors_core::settings::{
    Invalid, Kind, BYTES, COUNT, KIB, LIMIT_SECS, MIB, PORT, POSITIVE_SECS, SECRET, SECS, SWITCH,
    TEXT,
};

ors_core::settings! {
    /// Everything a server can be tuned with. Build it with [`Default`], [`ServerConfig::from_env`]
    /// or the setters of [`crate::Server`]; the table of `docs/serving.md` lists every setting.
    #[derive(Clone)]
    pub struct ServerConfig {
        /// Address to listen on; `0.0.0.0` serves others.
        host: String = "127.0.0.1".to_owned(), TEXT, env "ORS_HOST";
        /// Port to listen on; 0 picks a free port.
        port: u16 = 8080, PORT, env "ORS_PORT";
        /// Idle time after which the reaper deletes a session, unless a client listens to one
        /// of its calls.
        session_timeout: Duration = Duration::from_secs(15 * 60), POSITIVE_SECS,
            env "ORS_SESSION_TIMEOUT_SECS";
        /// How often the reaper looks for idle sessions.
        reaper_interval: Duration = Duration::from_secs(5), POSITIVE_SECS;
        /// How long a finished call's result stays available for reconnects.
        linger: Duration = ors_core::protocol::RESULT_LINGER, SECS, env "ORS_LINGER_SECS";
        /// Bytes of finished results the whole server keeps for reconnects; past it the oldest
        /// go first, and a reconnect to one is told it expired.
        max_lingering_bytes: usize = 512 * MIB, BYTES, env "ORS_MAX_LINGER_BYTES";
        /// Bytes of finished results one session keeps; past it its oldest go first. A result
        /// larger than this is sent, not kept.
        max_lingering_bytes_per_session: usize = 128 * MIB, BYTES,
            env "ORS_MAX_LINGER_BYTES_PER_SESSION";
        /// Interval of SSE keep-alive comments on open call streams.
        keepalive: Duration = ors_core::protocol::KEEPALIVE_INTERVAL, POSITIVE_SECS,
            env "ORS_KEEPALIVE_SECS";
        /// How long a request on a session waits for its setup before it is answered 503 with
        /// `X-Backend-State: starting` and `Retry-After: 2`, for the client to ask again
        /// (PROTOCOL_NOTES row `slow-setup`).
        setup_wait: Duration = Duration::from_secs(25), POSITIVE_SECS, env "ORS_SETUP_WAIT_SECS";
        /// Largest accepted request body; larger is 413 `payload_too_large`.
        max_body_bytes: usize = 10 * MIB, BYTES, env "ORS_MAX_BODY_BYTES";
        /// Largest tool result, as JSON text; a larger one is sent as `ok: false` with its size
        /// and the limit.
        max_result_bytes: usize = 64 * MIB, BYTES, env "ORS_MAX_RESULT_BYTES";
        /// Time a request body may take to arrive in full; a slower one is answered 408
        /// `request_timeout` and its connection closed.
        body_timeout: Duration = Duration::from_secs(30), POSITIVE_SECS,
            env "ORS_BODY_TIMEOUT_SECS";
        /// Time a connection may go without a request, from when it opens or its last answer
        /// ends until the next request head has arrived in full; past it (checked every half of
        /// it, so after at most one and a half times it) the connection is closed.
        head_timeout: Duration = Duration::from_secs(30), POSITIVE_SECS,
            env "ORS_HEAD_TIMEOUT_SECS";
        /// Request-body bytes the whole server holds at once (bodies being read, call inputs
        /// not yet handed to their tool, group scorings waiting their turn with their parsed
        /// candidates), at least `max_body_bytes`; a request that would go beyond is answered
        /// 503 `overloaded`.
        max_body_bytes_in_flight: usize = 256 * MIB, BYTES, env "ORS_MAX_BODY_BYTES_IN_FLIGHT";
        /// Largest accepted request head, start line and headers; larger is 431.
        max_header_bytes: usize = 64 * KIB, HEADER_BYTES;
        /// Most open client connections; one beyond it is answered 503 `overloaded` and
        /// closed, so the server keeps the file descriptors to serve the others.
        max_connections: usize = default_max_connections(open_files_limit()), COUNT,
            env "ORS_MAX_CONNECTIONS", shown "open-files limit less a tenth (at least 128 kept back)";
        /// Most live sessions; beyond it `create_session` is 503 `too_many_sessions`.
        max_sessions: usize = 100_000, COUNT, env "ORS_MAX_SESSIONS";
        /// Most calls of one session started and not finished (running or waiting their
        /// turn); beyond it `call` is 429, so one client cannot queue unbounded work.
        max_queued_calls: usize = 256, COUNT;
        /// When set, every route but `/health`, `/ready` and `/version` needs this key.
        api_key: Option<String> = None, SECRET, env "ORS_API_KEY";
        /// The key of the tags in issued session ids: random per process, a key the replicas
        /// behind one proxy share, or `off` to accept any id at `/create`.
        session_key: SessionKey = SessionKey::Random, SESSION_KEY, env "ORS_SESSION_KEY";
        /// Default time limit of one tool call. A tool past it is dropped, its cancellation
        /// token fires, and the call ends `ok: false`; without a limit a hung tool would hold
        /// its session forever.
        tool_timeout: Option<Duration> = Some(Duration::from_secs(600)), LIMIT_SECS,
            env "ORS_TOOL_TIMEOUT_SECS";
        /// Per-tool time limits by tool name; they override `tool_timeout`.
        tool_timeouts: HashMap<String, Duration> = HashMap::new(), PER_TOOL;
        /// How long running calls may go on at shutdown before sessions are torn down, and
        /// after their session is deleted (they see their cancellation token at once); also
        /// the limit of one `teardown`.
        shutdown_grace: Duration = Duration::from_secs(10), SECS;
        /// Whether `/metrics` is served and counted.
        metrics: bool = true, SWITCH, env "ORS_METRICS";
        /// How long `Server::serve` drains after SIGTERM before it shuts down (0: at once):
        /// new sessions are refused with 503 and `/ready` answers 503 while existing episodes
        /// go on; it stops sooner when the last session ends, or at a second SIGTERM or SIGINT.
        drain: Duration = Duration::from_secs(30), SECS, env "ORS_DRAIN_SECS";
        /// This replica's number, the first group of the session ids it issues, by which a
        /// proxy routes each request to its replica. Unset, `from_env` takes the `N` of a host
        /// name ending in `-N` (as a Kubernetes StatefulSet names its pods); else the first
        /// group is random.
        replica_id: Option<u32> = None, REPLICA_ID, env "ORS_REPLICA_ID",
            shown "the host name's `-N`, else none";
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
        f.write_str(&(SESSION_KEY.show)(self))
    }
}

/// `off`, or a shared key of at least 16 bytes.
const SESSION_KEY: Kind<SessionKey> = Kind {
    valid: |k| !matches!(k, SessionKey::Shared(key) if key.len() < 16),
    secret: true,
    ..Kind::new(
        "off, or a key of at least 16 bytes shared by the replicas",
        |t| {
            Some(if t.eq_ignore_ascii_case("off") {
                SessionKey::Off
            } else {
                SessionKey::Shared(t.to_owned())
            })
        },
        |k| {
            match k {
                SessionKey::Random => "random per process",
                SessionKey::Shared(_) => "<redacted>",
                SessionKey::Off => "off",
            }
            .to_owned()
        },
    )
};

/// The largest replica number: the first group of an id holds it as eight decimal digits.
pub(crate) const MAX_REPLICA_ID: u32 = 99_999_999;

const REPLICA_ID: Kind<Option<u32>> = Kind {
    valid: |n| n.is_none_or(|n| n <= MAX_REPLICA_ID),
    ..Kind::new(
        "a replica number (0 to 99999999)",
        |t| t.parse().ok().map(Some),
        |n| n.map_or_else(|| "none".to_owned(), |n| n.to_string()),
    )
};

/// At least 1 KiB, which any real request head needs.
const HEADER_BYTES: Kind<usize> = Kind {
    expected: "a number of bytes of at least 1 KiB",
    valid: |n| *n >= KIB,
    ..BYTES
};

/// Set in code only.
const PER_TOOL: Kind<HashMap<String, Duration>> = Kind {
    valid: |limits| limits.values().all(|d| !d.is_zero()),
    ..Kind::new(
        "time limits greater than 0",
        |_| None,
        |limits| {
            if limits.is_empty() {
                "none".to_owned()
            } else {
                format!("{limits:?}")
            }
        },
    )
};

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

impl From<Invalid> for ConfigError {
    fn from(e: Invalid) -> Self {
        Self::new(
            e.name,
            format!("got '{}', expected {}", e.value, e.expected),
        )
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

    /// Overlay variables looked up by `var` (the environment, or a map in tests); an empty
    /// variable counts as unset.
    pub fn apply_vars(
        &mut self,
        var: impl Fn(&'static str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        self.overlay(&var).into_iter().next().map_or(Ok(()), Err)?;
        if self.replica_id.is_none() {
            self.replica_id = var("HOSTNAME").as_deref().and_then(replica_of_host);
        }
        Ok(())
    }

    /// Check that the settings can run a server (called by `bind`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_kinds()?;
        if self.max_body_bytes_in_flight < self.max_body_bytes {
            return Err(ConfigError::new(
                "max_body_bytes_in_flight",
                format!(
                    "{} is less than max_body_bytes ({}): a body of the largest size could never be read",
                    self.max_body_bytes_in_flight, self.max_body_bytes
                ),
            ));
        }
        Ok(())
    }

    /// The time limit of a tool: its own, else the server's, else none.
    pub fn timeout_for(&self, tool: &str) -> Option<Duration> {
        self.tool_timeouts.get(tool).copied().or(self.tool_timeout)
    }
}

/// The replica number of a StatefulSet pod's host name (`ors-7` is 7): the digits after the
/// last `-`, when the name has a stem before it.
fn replica_of_host(host: &str) -> Option<u32> {
    let (stem, n) = host.trim().rsplit_once('-')?;
    let digits = (1..=8).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit());
    n.parse().ok().filter(|_| digits && !stem.is_empty())
}

/// The soft limit of open files of this process, where the system says (`/proc`).
fn open_files_limit() -> Option<u64> {
    parse_open_files_limit(&std::fs::read_to_string("/proc/self/limits").ok()?)
}

/// The soft "Max open files" of a `/proc/<pid>/limits` text; `None` when unlimited or absent.
fn parse_open_files_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// Connections the server may hold with `fd_limit` open files: a tenth of them, and at least
/// 128, stay for the listener, refusals, files, pipes of child processes and logs. Without a
/// known limit, the common default of 1024 is assumed.
fn default_max_connections(fd_limit: Option<u64>) -> usize {
    let limit = usize::try_from(fd_limit.unwrap_or(1024)).unwrap_or(usize::MAX);
    limit.saturating_sub((limit / 10).max(128)).max(16)
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
    fn the_defaults_run_a_server() {
        assert_eq!(ServerConfig::default().validate(), Ok(()));
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
    fn bad_values_name_the_variable_the_value_and_what_is_valid() {
        for (name, value, valid) in [
            ("ORS_PORT", "70000", "0 to 65535"),
            ("ORS_PORT", "http", "0 to 65535"),
            ("ORS_SESSION_TIMEOUT_SECS", "0", "greater than 0"),
            ("ORS_KEEPALIVE_SECS", "-1", "seconds"),
            ("ORS_LINGER_SECS", "soon", "seconds"),
            ("ORS_MAX_BODY_BYTES", "0", "at least 1"),
            ("ORS_MAX_BODY_BYTES", "10MB", "MiB"),
            ("ORS_BODY_TIMEOUT_SECS", "0", "greater than 0"),
            ("ORS_MAX_BODY_BYTES_IN_FLIGHT", "lots", "bytes"),
            ("ORS_MAX_SESSIONS", "many", "whole number"),
            ("ORS_TOOL_TIMEOUT_SECS", "x", "or 0, off or none"),
            ("ORS_METRICS", "maybe", "on or off"),
        ] {
            let err = with(&[(name, value)]).unwrap_err();
            assert_eq!(err.name, name);
            let message = err.to_string();
            assert!(message.contains(&format!("'{value}'")), "{message}");
            assert!(message.contains(valid), "{message}");
        }
    }

    #[test]
    fn sizes_take_units_and_empty_variables_count_as_unset() {
        let c = with(&[
            ("ORS_MAX_BODY_BYTES", "2MiB"),
            ("ORS_HOST", " "),
            ("ORS_PORT", ""),
        ])
        .unwrap();
        assert_eq!(c.max_body_bytes, 2 << 20);
        assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 8080));
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
        let err = with(&[("ORS_SESSION_KEY", "short")]).unwrap_err();
        assert_eq!(err.name, "ORS_SESSION_KEY");
        assert!(err.reason.contains("16 bytes"), "{err}");
        assert!(!err.reason.contains("short"), "a key is never shown: {err}");
        let c = ServerConfig {
            session_key: SessionKey::Shared("short".into()),
            ..ServerConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.name, "session_key (ORS_SESSION_KEY)");
        assert!(!err.reason.contains("short"), "{err}");
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
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid keepalive (ORS_KEEPALIVE_SECS): got '0 s', expected a number of seconds \
             greater than 0"
        );
        let c = ServerConfig {
            max_body_bytes_in_flight: 10,
            ..ServerConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().name, "max_body_bytes_in_flight");
    }
}
