//! Client settings: their names, defaults and values, read from the environment and set
//! on a builder (which [`crate::Client`] is made from, in `client.rs`).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Environment variable holding the default API key.
pub const API_KEY_ENV: &str = "ORS_API_KEY";
/// Environment variable holding the default server URL (read by [`ClientBuilder::from_env`]).
pub const URL_ENV: &str = "ORS_URL";
/// The URL used when none is given.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";
/// Environment variable overriding [`Config::max_result_bytes`] (bytes, or with a `KiB`, `MiB`
/// or `GiB` suffix).
pub const MAX_RESULT_BYTES_ENV: &str = "ORS_CLIENT_MAX_RESULT_BYTES";
/// Environment variable overriding [`Config::max_body_bytes`] (bytes, or with a `KiB`, `MiB` or
/// `GiB` suffix).
pub const MAX_BODY_BYTES_ENV: &str = "ORS_CLIENT_MAX_BODY_BYTES";
/// Environment variable setting [`Config::call_timeout`] (seconds; `none` for no limit).
pub const CALL_TIMEOUT_ENV: &str = "ORS_CLIENT_CALL_TIMEOUT";
/// Environment variable naming a PEM file of extra CA certificates to trust for `https://`
/// (a self-signed or private deployment).
pub const CA_CERT_ENV: &str = "ORS_CA_CERT";
/// Environment variable choosing the root certificates for `https://`: `mozilla` (built in,
/// the default) or `system`.
pub const TLS_ROOTS_ENV: &str = "ORS_CLIENT_TLS_ROOTS";
/// The default bound on a call's result (and on one SSE line or event): 256 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = ors_core::sse::DEFAULT_MAX_RESULT_BYTES;
/// The default bound on a JSON response body: 64 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Where secrets go when a session is created (PROTOCOL_NOTES row `secrets-forms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretsMode {
    /// The form the server reads: the body first (ors-rs and ors-sdk 0.1.0 servers read it);
    /// a server that refuses a body `secrets` field (the `openreward` server answers 422) gets
    /// the `X-Secrets` header instead, and this client remembers to send the header to it.
    #[default]
    Auto,
    /// In the `secrets` field of the `/create` body, as the spec says.
    Body,
    /// In the `X-Secrets` header (base64 of `{"KEY": {"value": "V", "allowed_domains": [...]}}`),
    /// the form the Python clients send; the only form the `openreward` server reads.
    Header,
    /// Both (an ors-sdk 0.1.0 server reads the body, ours either; the `openreward` server
    /// refuses the body field).
    Both,
}

/// The size limits of a client, named by [`crate::Error::ResponseTooLarge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeLimit {
    /// A call's result (its `chunk`s and `end` reassembled), and so one SSE line or event:
    /// [`crate::Config::max_result_bytes`].
    Result,
    /// A JSON response body (discovery, prompt, create): [`crate::Config::max_body_bytes`].
    Body,
}

impl SizeLimit {
    /// The environment variable that sets this limit.
    pub fn env_var(self) -> &'static str {
        match self {
            SizeLimit::Result => MAX_RESULT_BYTES_ENV,
            SizeLimit::Body => MAX_BODY_BYTES_ENV,
        }
    }

    /// The [`crate::ClientBuilder`] method that sets this limit.
    pub fn setter(self) -> &'static str {
        match self {
            SizeLimit::Result => "max_result_bytes",
            SizeLimit::Body => "max_body_bytes",
        }
    }
}

/// Which root certificates the client trusts for `https://`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsRoots {
    /// Mozilla's roots, built into the binary (`webpki-roots`): the same trust on every
    /// machine, container or not.
    #[default]
    Mozilla,
    /// The operating system's store (`rustls-native-certs`): what a company's TLS-inspecting
    /// proxy or a private CA installed system-wide needs.
    System,
}

impl TlsRoots {
    /// The name [`FromStr`] accepts.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsRoots::Mozilla => "mozilla",
            TlsRoots::System => "system",
        }
    }
}

impl fmt::Display for TlsRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TlsRoots {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mozilla" | "webpki" => Ok(TlsRoots::Mozilla),
            "system" | "native" => Ok(TlsRoots::System),
            other => Err(format!(
                "unknown root store {other:?} (use mozilla or system)"
            )),
        }
    }
}

/// The settings a [`crate::Client`] runs with; built by [`ClientBuilder`].
#[derive(Clone)]
pub struct Config {
    /// Server base URL without a trailing slash.
    pub url: String,
    /// Value of the `X-API-Key` header, if any.
    pub api_key: Option<String>,
    /// Limit on one ordinary request (head and body, redirects included) and on the head of a
    /// call stream: a server that accepts the connection and says nothing fails after it.
    pub request_timeout: Duration,
    /// Limit on opening a TCP connection.
    pub connect_timeout: Duration,
    /// A call stream with no complete line (no event, not even a keep-alive comment) for this
    /// long is a dropped connection; a trickle of bytes without line breaks does not count.
    pub heartbeat_timeout: Duration,
    /// Limit on a whole tool call including reconnects; `None` waits as long as the server
    /// keeps the stream alive.
    pub call_timeout: Option<Duration>,
    /// The largest call result (its `chunk`s and `end` reassembled), and so the longest SSE
    /// line or event the client holds.
    pub max_result_bytes: usize,
    /// The largest JSON response body (discovery, prompt, create, error details).
    pub max_body_bytes: usize,
    /// How often a session pings the server; `None` disables the background ping.
    pub ping_interval: Option<Duration>,
    /// Retries of a request that is safe to repeat (so up to `max_retries + 1` attempts).
    pub max_retries: u32,
    /// Reconnects of a call stream that dropped once it had a `task_id` (the server's, or the
    /// client's own where the server takes client ids).
    pub reconnect_attempts: u32,
    /// How long to keep asking a server that answers 503 with `X-Backend-State: starting` (the
    /// session's setup is still running, PROTOCOL_NOTES row `slow-setup`), at the pace of its
    /// `Retry-After`; these answers do not count as failed attempts (default 600 s, as the
    /// `openreward` client).
    pub starting_wait: Duration,
    /// First backoff delay; doubled per attempt, with jitter.
    pub backoff_base: Duration,
    /// Largest backoff delay (also caps a server's `Retry-After`).
    pub backoff_max: Duration,
    /// Where secrets are sent.
    pub secrets_mode: SecretsMode,
    /// The `User-Agent` header.
    pub user_agent: String,
    /// The root certificates trusted for `https://`.
    pub tls_roots: TlsRoots,
    /// A PEM file of CA certificates trusted in addition to the roots.
    pub ca_cert: Option<PathBuf>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("heartbeat_timeout", &self.heartbeat_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("max_result_bytes", &self.max_result_bytes)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("ping_interval", &self.ping_interval)
            .field("max_retries", &self.max_retries)
            .field("reconnect_attempts", &self.reconnect_attempts)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("secrets_mode", &self.secrets_mode)
            .field("user_agent", &self.user_agent)
            .field("tls_roots", &self.tls_roots)
            .field("ca_cert", &self.ca_cert)
            .finish()
    }
}

/// Builds a [`crate::Client`]: `Client::builder("http://127.0.0.1:8080").api_key("k").build()`.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    cfg: Config,
    /// Environment variables that could not be read, reported by `build` unless a setter
    /// overrode them: `(variable, problem)`.
    env_errors: Vec<(&'static str, String)>,
}

impl ClientBuilder {
    /// A builder for the server at `url`, with the API key from `ORS_API_KEY` and the limits
    /// from `ORS_CLIENT_MAX_RESULT_BYTES`, `ORS_CLIENT_MAX_BODY_BYTES` and
    /// `ORS_CLIENT_CALL_TIMEOUT` when set.
    pub fn new(url: impl Into<String>) -> Self {
        let mut b = Self::with_env(url, |name| std::env::var(name).ok());
        b.cfg.api_key = std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty());
        b
    }

    /// A builder with the limits read through `var` (the environment, or a map in tests).
    fn with_env(url: impl Into<String>, var: impl Fn(&str) -> Option<String>) -> Self {
        let mut b = Self {
            env_errors: Vec::new(),
            cfg: Config {
                url: url.into(),
                api_key: None,
                request_timeout: Duration::from_secs(60),
                connect_timeout: Duration::from_secs(10),
                heartbeat_timeout: Duration::from_secs(30),
                call_timeout: None,
                max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
                ping_interval: Some(Duration::from_secs(10)),
                max_retries: 3,
                reconnect_attempts: 5,
                starting_wait: Duration::from_secs(600),
                backoff_base: Duration::from_millis(250),
                backoff_max: Duration::from_secs(10),
                secrets_mode: SecretsMode::Auto,
                user_agent: concat!("ors-rs/", env!("CARGO_PKG_VERSION")).to_owned(),
                tls_roots: TlsRoots::default(),
                ca_cert: None,
            },
        };
        if let Some(n) = b.env_value(&var, MAX_RESULT_BYTES_ENV, parse_bytes) {
            b.cfg.max_result_bytes = n;
        }
        if let Some(n) = b.env_value(&var, MAX_BODY_BYTES_ENV, parse_bytes) {
            b.cfg.max_body_bytes = n;
        }
        if let Some(d) = b.env_value(&var, CALL_TIMEOUT_ENV, parse_timeout) {
            b.cfg.call_timeout = d;
        }
        if let Some(roots) = b.env_value(&var, TLS_ROOTS_ENV, str::parse) {
            b.cfg.tls_roots = roots;
        }
        b.cfg.ca_cert = var(CA_CERT_ENV)
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from);
        b
    }

    /// The value of the variable `name` (through `var`) parsed by `parse`; a bad value is
    /// remembered for `build` to report.
    fn env_value<T>(
        &mut self,
        var: impl Fn(&str) -> Option<String>,
        name: &'static str,
        parse: fn(&str) -> std::result::Result<T, String>,
    ) -> Option<T> {
        let value = var(name).filter(|v| !v.trim().is_empty())?;
        parse(&value)
            .map_err(|e| self.env_errors.push((name, format!("{value:?}: {e}"))))
            .ok()
    }

    /// Forget a bad value of `var`: a setter has replaced it.
    fn overridden(&mut self, var: &str) {
        self.env_errors.retain(|(name, _)| *name != var);
    }

    /// A builder for `ORS_URL` (or [`DEFAULT_URL`]) with the key from `ORS_API_KEY`.
    pub fn from_env() -> Self {
        let url = std::env::var(URL_ENV)
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| DEFAULT_URL.to_owned());
        Self::new(url)
    }

    /// Send this API key in `X-API-Key` (overrides `ORS_API_KEY`).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.cfg.api_key = Some(key.into());
        self
    }

    /// Send no API key, even if `ORS_API_KEY` is set.
    pub fn no_api_key(mut self) -> Self {
        self.cfg.api_key = None;
        self
    }

    /// Limit on one ordinary request (default 60 s).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.cfg.request_timeout = d;
        self
    }

    /// Limit on opening a connection (default 10 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.cfg.connect_timeout = d;
        self
    }

    /// Silence on a call stream after which it counts as dropped (default 30 s).
    pub fn heartbeat_timeout(mut self, d: Duration) -> Self {
        self.cfg.heartbeat_timeout = d;
        self
    }

    /// Limit on a whole tool call, reconnects included (default none; also
    /// `ORS_CLIENT_CALL_TIMEOUT`). Keep-alives and progress keep a call alive only until then.
    pub fn call_timeout(mut self, d: Option<Duration>) -> Self {
        self.cfg.call_timeout = d;
        self.overridden(CALL_TIMEOUT_ENV);
        self
    }

    /// The largest call result, SSE line or event the client holds (default 256 MiB; also
    /// `ORS_CLIENT_MAX_RESULT_BYTES`). A larger one fails the call with
    /// [`crate::Error::ResponseTooLarge`] and drops its connection.
    pub fn max_result_bytes(mut self, n: usize) -> Self {
        self.cfg.max_result_bytes = n;
        self.overridden(MAX_RESULT_BYTES_ENV);
        self
    }

    /// The largest JSON response body (default 64 MiB; also `ORS_CLIENT_MAX_BODY_BYTES`).
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.cfg.max_body_bytes = n;
        self.overridden(MAX_BODY_BYTES_ENV);
        self
    }

    /// Background ping period of sessions (default 10 s); `None` disables pinging.
    pub fn ping_interval(mut self, d: Option<Duration>) -> Self {
        self.cfg.ping_interval = d;
        self
    }

    /// Retries of safe-to-repeat requests (default 3).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.cfg.max_retries = n;
        self
    }

    /// Reconnects of a dropped call stream (default 5).
    pub fn reconnect_attempts(mut self, n: u32) -> Self {
        self.cfg.reconnect_attempts = n;
        self
    }

    /// How long to keep asking a session whose setup is still running (default 600 s).
    pub fn starting_wait(mut self, d: Duration) -> Self {
        self.cfg.starting_wait = d;
        self
    }

    /// Backoff between attempts: first delay and cap (defaults 250 ms and 10 s).
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.cfg.backoff_base = base;
        self.cfg.backoff_max = max.max(base);
        self
    }

    /// Where secrets are sent (default: the body).
    pub fn secrets_mode(mut self, mode: SecretsMode) -> Self {
        self.cfg.secrets_mode = mode;
        self
    }

    /// Trust the CA certificates of this PEM file for `https://`, on top of the roots (also
    /// `ORS_CA_CERT`): how a client reaches a deployment with a self-signed certificate.
    pub fn ca_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.cfg.ca_cert = Some(path.into());
        self
    }

    /// The root certificates to trust for `https://` (default: Mozilla's, built in; also
    /// `ORS_CLIENT_TLS_ROOTS`).
    pub fn tls_roots(mut self, roots: TlsRoots) -> Self {
        self.cfg.tls_roots = roots;
        self.overridden(TLS_ROOTS_ENV);
        self
    }

    /// The `User-Agent` header.
    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.cfg.user_agent = ua.into();
        self
    }

    /// The settings so far.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The settings, checked: a variable that could not be read (unless a setter replaced
    /// it), a zero limit or a bad URL is an error naming it. [`ClientBuilder::build`] makes
    /// the client of them.
    pub(crate) fn checked(self) -> std::result::Result<Config, String> {
        if let Some((var, problem)) = self.env_errors.first() {
            return Err(format!("{var}={problem}"));
        }
        if self.cfg.max_result_bytes == 0 || self.cfg.max_body_bytes == 0 {
            return Err("max_result_bytes and max_body_bytes must be at least 1".into());
        }
        let mut cfg = self.cfg;
        cfg.url = normalize_url(&cfg.url)?;
        Ok(cfg)
    }
}

/// A byte count: digits, optionally followed by `KiB`, `MiB` or `GiB` (any case, spaces allowed).
fn parse_bytes(text: &str) -> std::result::Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| "expected a number of bytes, like 268435456 or 256MiB".to_owned())?;
    let scale: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => return Err(format!("unknown unit {other:?} (use KiB, MiB or GiB)")),
    };
    match n.checked_mul(scale) {
        Some(0) => Err("must be at least 1 byte".into()),
        Some(bytes) => Ok(bytes),
        None => Err("too large for this machine".into()),
    }
}

/// A timeout in seconds (fractions allowed), or `none`/`off` for no limit.
fn parse_timeout(text: &str) -> std::result::Result<Option<Duration>, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") || text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let secs: f64 = text
        .parse()
        .map_err(|_| "expected seconds, like 120 or 0.5, or none".to_owned())?;
    if secs.is_nan() || secs <= 0.0 {
        return Err("must be more than 0 seconds (or none)".into());
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Check that `url` is an `http://` or `https://` URL with a host, and strip its trailing
/// slash.
pub(crate) fn normalize_url(url: &str) -> std::result::Result<String, String> {
    let url = url.trim();
    let bad = |why: &dyn fmt::Display| format!("bad server URL {url:?}: {why}");
    let uri: http::Uri = url.parse().map_err(|e| bad(&e))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad(&"it must start with http:// or https://"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad(&"no host"));
    }
    if uri.query().is_some() {
        return Err(bad(&"a query string is not allowed"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_trailing_slashes_dropped() {
        assert_eq!(
            normalize_url("http://127.0.0.1:8080/").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            normalize_url("http://host/prefix/").unwrap(),
            "http://host/prefix"
        );
        assert_eq!(normalize_url("https://host/").unwrap(), "https://host");
        assert!(matches!(
            normalize_url("ftp://host"),
            Err(m) if m.contains("https://")
        ));
        assert!(normalize_url("localhost:8080").is_err());
        assert!(normalize_url("not a url").is_err());
    }

    #[test]
    fn limits_come_from_the_environment_and_setters_win() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let b = ClientBuilder::with_env("http://h", env(&[]));
        assert_eq!(b.cfg.max_result_bytes, 256 << 20);
        assert_eq!(b.cfg.max_body_bytes, 64 << 20);
        assert_eq!(b.cfg.call_timeout, None);

        let b = ClientBuilder::with_env(
            "http://h",
            env(&[
                (MAX_RESULT_BYTES_ENV, "512MiB"),
                (MAX_BODY_BYTES_ENV, " 1000 "),
                (CALL_TIMEOUT_ENV, "2.5"),
            ]),
        );
        assert_eq!(b.cfg.max_result_bytes, 512 << 20);
        assert_eq!(b.cfg.max_body_bytes, 1000);
        assert_eq!(b.cfg.call_timeout, Some(Duration::from_millis(2500)));
        assert!(b.build().is_ok());

        let bad = ClientBuilder::with_env("http://h", env(&[(MAX_RESULT_BYTES_ENV, "lots")]));
        let err = bad.clone().build().unwrap_err().to_string();
        assert!(
            err.contains(MAX_RESULT_BYTES_ENV) && err.contains("lots"),
            "{err}"
        );
        assert!(
            bad.max_result_bytes(10).build().is_ok(),
            "a setter overrides a bad value"
        );
        let off = ClientBuilder::with_env("http://h", env(&[(CALL_TIMEOUT_ENV, "none")]));
        assert_eq!(off.cfg.call_timeout, None);
        assert!(
            ClientBuilder::with_env("http://h", env(&[(CALL_TIMEOUT_ENV, "0")]))
                .build()
                .is_err()
        );
        assert!(ClientBuilder::new("http://h")
            .max_body_bytes(0)
            .build()
            .is_err());
    }

    #[test]
    fn byte_counts_take_binary_units() {
        assert_eq!(parse_bytes("268435456"), Ok(256 << 20));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1 gib"), Ok(1 << 30));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert!(parse_bytes("4KB").is_err(), "KB is ambiguous");
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999999999GiB").is_err());
    }

    #[test]
    fn debug_never_shows_the_api_key() {
        let b = ClientBuilder::new("http://h").api_key("sekrit-value");
        assert!(!format!("{b:?}").contains("sekrit-value"));
    }
}
