//! Client settings, each declared once (field, default, kind, `ORS_*` variable, doc), read
//! from the environment and set on a builder (which [`crate::Client`] is made from, in
//! `client.rs`).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use ors_core::settings::{
    Invalid, Kind, BYTES, LIMIT_SECS, MIB, NUMBER, PATH, POSITIVE_SECS, SECRET, SECS, TEXT,
};

/// The URL used when none is given.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";
/// The default bound on a call's result (and on one SSE line or event).
pub const DEFAULT_MAX_RESULT_BYTES: usize = ors_core::sse::DEFAULT_MAX_RESULT_BYTES;
/// The default bound on a JSON response body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * MIB;

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
    /// An agent's model server's answer to one request:
    /// [`crate::agent::ModelOptions::max_response_bytes`].
    ModelResponse,
}

impl SizeLimit {
    /// How to raise it, for an error message: the setter, and the variable or flag.
    pub fn how_to_raise(self) -> String {
        let (setter, or) = match self {
            SizeLimit::Result => ("ClientBuilder::max_result_bytes", MAX_RESULT_BYTES_ENV),
            SizeLimit::Body => ("ClientBuilder::max_body_bytes", MAX_BODY_BYTES_ENV),
            SizeLimit::ModelResponse => (
                "ModelOptions::max_response_bytes",
                "ors eval --max-response-bytes",
            ),
        };
        format!("{setter} or {or}")
    }
}

ors_core::wire_enum! {
    /// Which root certificates the client trusts for `https://`; its name is what [`FromStr`]
    /// accepts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum TlsRoots {
        /// Mozilla's roots, built into the binary (`webpki-roots`): the same trust on every
        /// machine, container or not.
        #[default]
        Mozilla = "mozilla",
        /// The operating system's store (`rustls-native-certs`): what a company's
        /// TLS-inspecting proxy or a private CA installed system-wide needs.
        System = "system",
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

ors_core::settings! {
    /// The settings a [`crate::Client`] runs with; built by [`ClientBuilder`], which reads the
    /// variables (an empty one counts as unset).
    #[derive(Clone)]
    pub struct Config {
        /// Server base URL (the variable is read by `ClientBuilder::from_env`).
        url: String = DEFAULT_URL.to_owned(), TEXT, env URL_ENV = "ORS_URL";
        /// Value of the `X-API-Key` header, if any.
        api_key: Option<String> = None, SECRET, env API_KEY_ENV = "ORS_API_KEY";
        /// Limit on one ordinary request (head and body, redirects included) and on the head
        /// of a call stream: a server that accepts the connection and says nothing fails
        /// after it.
        request_timeout: Duration = Duration::from_secs(60), POSITIVE_SECS;
        /// Limit on opening a TCP connection.
        connect_timeout: Duration = Duration::from_secs(10), POSITIVE_SECS;
        /// A call stream with no complete line (no event, not even a keep-alive comment) for
        /// this long is a dropped connection; a trickle of bytes without line breaks does not
        /// count.
        heartbeat_timeout: Duration = Duration::from_secs(30), POSITIVE_SECS;
        /// Limit on a whole tool call including reconnects; none waits as long as the server
        /// keeps the stream alive.
        call_timeout: Option<Duration> = None, LIMIT_SECS,
            env CALL_TIMEOUT_ENV = "ORS_CLIENT_CALL_TIMEOUT";
        /// The largest call result (its `chunk`s and `end` reassembled), and so the longest
        /// SSE line or event the client holds.
        max_result_bytes: usize = DEFAULT_MAX_RESULT_BYTES, BYTES,
            env MAX_RESULT_BYTES_ENV = "ORS_CLIENT_MAX_RESULT_BYTES";
        /// The largest JSON response body (discovery, prompt, create, error details).
        max_body_bytes: usize = DEFAULT_MAX_BODY_BYTES, BYTES,
            env MAX_BODY_BYTES_ENV = "ORS_CLIENT_MAX_BODY_BYTES";
        /// How often a session pings the server; none disables the background ping.
        ping_interval: Option<Duration> = Some(Duration::from_secs(10)), LIMIT_SECS;
        /// Retries of a request that is safe to repeat (so up to `max_retries + 1` attempts).
        max_retries: u32 = 3, NUMBER;
        /// Reconnects of a call stream that dropped once it had a `task_id` (the server's, or
        /// the client's own where the server takes client ids).
        reconnect_attempts: u32 = 5, NUMBER;
        /// How long to keep asking a server that answers 503 with `X-Backend-State: starting`
        /// (the session's setup is still running, PROTOCOL_NOTES row `slow-setup`), at the
        /// pace of its `Retry-After`; these answers do not count as failed attempts (as the
        /// `openreward` client).
        starting_wait: Duration = Duration::from_secs(600), SECS;
        /// First backoff delay; doubled per attempt, with jitter.
        backoff_base: Duration = Duration::from_millis(250), SECS;
        /// Largest backoff delay (also caps a server's `Retry-After`).
        backoff_max: Duration = Duration::from_secs(10), SECS;
        /// Where secrets are sent.
        secrets_mode: SecretsMode = SecretsMode::Auto, SECRETS_MODE;
        /// The `User-Agent` header.
        user_agent: String = concat!("ors-rs/", env!("CARGO_PKG_VERSION")).to_owned(), TEXT,
            shown "ors-rs/ plus the version";
        /// The root certificates trusted for `https://`: `mozilla` (built in, the same on
        /// every machine) or `system` (the operating system's store).
        tls_roots: TlsRoots = TlsRoots::Mozilla, TLS_ROOTS,
            env TLS_ROOTS_ENV = "ORS_CLIENT_TLS_ROOTS";
        /// A PEM file of CA certificates trusted in addition to the roots (for a self-signed
        /// or private deployment).
        ca_cert: Option<PathBuf> = None, PATH, env CA_CERT_ENV = "ORS_CA_CERT";
    }
}

const SECRETS_MODE: Kind<SecretsMode> = Kind::new(
    "auto, body, header or both",
    |_| None,
    |m| format!("{m:?}").to_ascii_lowercase(),
);

const TLS_ROOTS: Kind<TlsRoots> = Kind::parsed("mozilla or system");

/// Builds a [`crate::Client`]: `Client::builder("http://127.0.0.1:8080").api_key("k").build()`.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    cfg: Config,
    /// Environment variables that could not be read, reported by `build` unless a setter
    /// overrode them.
    env_errors: Vec<Invalid>,
}

impl ClientBuilder {
    /// A builder for the server at `url`, with the other settings' variables (the API key
    /// from `ORS_API_KEY`, the limits from `ORS_CLIENT_*`, ...) where set.
    pub fn new(url: impl Into<String>) -> Self {
        let mut b = Self::from_env();
        b.cfg.url = url.into();
        b.overridden(URL_ENV);
        b
    }

    /// A builder for `ORS_URL` (or [`DEFAULT_URL`]) and the other settings' variables.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// A builder with the variables read through `var` (the environment, or a map in tests).
    fn from_vars(var: impl Fn(&'static str) -> Option<String>) -> Self {
        let mut cfg = Config::default();
        let env_errors = cfg.overlay(var);
        Self { cfg, env_errors }
    }

    /// Forget a bad value of `var`: a setter has replaced it.
    fn overridden(&mut self, var: &str) {
        self.env_errors.retain(|e| e.name != var);
    }

    /// Send no API key, even if `ORS_API_KEY` is set.
    pub fn no_api_key(mut self) -> Self {
        self.cfg.api_key = None;
        self
    }

    setters! { [cfg]
        /// Send this API key in `X-API-Key` (overrides `ORS_API_KEY`).
        api_key: Some(impl Into<String>);
        /// Limit on one ordinary request ([`Config::request_timeout`]).
        request_timeout: Duration;
        /// Limit on opening a connection ([`Config::connect_timeout`]).
        connect_timeout: Duration;
        /// Silence on a call stream after which it counts as dropped
        /// ([`Config::heartbeat_timeout`]).
        heartbeat_timeout: Duration;
        /// Limit on a whole tool call, reconnects included ([`Config::call_timeout`]). Keep-alives
        /// and progress keep a call alive only until then.
        call_timeout: Option<Duration>, CALL_TIMEOUT_ENV;
        /// The largest call result, SSE line or event the client holds
        /// ([`Config::max_result_bytes`]). A larger one fails the call with
        /// [`crate::Error::ResponseTooLarge`] and drops its connection.
        max_result_bytes: usize, MAX_RESULT_BYTES_ENV;
        /// The largest JSON response body ([`Config::max_body_bytes`]).
        max_body_bytes: usize, MAX_BODY_BYTES_ENV;
        /// Background ping period of sessions ([`Config::ping_interval`]); `None` disables pinging.
        ping_interval: Option<Duration>;
        /// Retries of safe-to-repeat requests ([`Config::max_retries`]).
        max_retries: u32;
        /// Reconnects of a dropped call stream ([`Config::reconnect_attempts`]).
        reconnect_attempts: u32;
        /// How long to keep asking a session whose setup is still running
        /// ([`Config::starting_wait`]).
        starting_wait: Duration;
        /// Where secrets are sent ([`Config::secrets_mode`]).
        secrets_mode: SecretsMode;
        /// The root certificates to trust for `https://` ([`Config::tls_roots`]).
        tls_roots: TlsRoots, TLS_ROOTS_ENV;
        /// Trust the CA certificates of this PEM file for `https://`, on top of the roots
        /// ([`Config::ca_cert`]): how a client reaches a deployment with a self-signed
        /// certificate.
        ca_cert: Some(impl Into<PathBuf>);
        /// The `User-Agent` header.
        user_agent: impl Into<String>;
    }

    /// Backoff between attempts: first delay and cap ([`Config::backoff_base`],
    /// [`Config::backoff_max`]).
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.cfg.backoff_base = base;
        self.cfg.backoff_max = max.max(base);
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
        if let Some(e) = self.env_errors.first() {
            return Err(e.to_string());
        }
        self.cfg.check_kinds().map_err(|e| e.to_string())?;
        let url = normalize_url(&self.cfg.url)?;
        Ok(Config { url, ..self.cfg })
    }
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
        let b = ClientBuilder::from_vars(env(&[]));
        assert_eq!(b.cfg.max_result_bytes, DEFAULT_MAX_RESULT_BYTES);
        assert_eq!(b.cfg.call_timeout, None);

        let b = ClientBuilder::from_vars(env(&[
            (MAX_RESULT_BYTES_ENV, "512MiB"),
            (MAX_BODY_BYTES_ENV, " 1000 "),
            (CALL_TIMEOUT_ENV, "2.5"),
            (URL_ENV, "http://h"),
        ]));
        assert_eq!(b.cfg.max_result_bytes, 512 << 20);
        assert_eq!(b.cfg.max_body_bytes, 1000);
        assert_eq!(b.cfg.call_timeout, Some(Duration::from_millis(2500)));
        assert!(b.build().is_ok());

        let bad = ClientBuilder::from_vars(env(&[(MAX_RESULT_BYTES_ENV, "lots")]));
        let err = bad.clone().build().unwrap_err().to_string();
        assert!(
            err.contains(MAX_RESULT_BYTES_ENV) && err.contains("lots"),
            "{err}"
        );
        assert!(
            bad.max_result_bytes(10).build().is_ok(),
            "a setter overrides a bad value"
        );
        let off = ClientBuilder::from_vars(env(&[(CALL_TIMEOUT_ENV, "none")]));
        assert_eq!(off.cfg.call_timeout, None);
        let off = ClientBuilder::from_vars(env(&[(CALL_TIMEOUT_ENV, "0")]));
        assert_eq!(off.cfg.call_timeout, None);
        // An empty variable counts as unset.
        let unset = ClientBuilder::from_vars(env(&[(MAX_BODY_BYTES_ENV, " ")]));
        assert_eq!(unset.cfg.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert!(ClientBuilder::from_vars(env(&[(CALL_TIMEOUT_ENV, "-1")]))
            .build()
            .is_err());
        assert!(ClientBuilder::new("http://h")
            .max_body_bytes(0)
            .build()
            .is_err());
    }

    #[test]
    fn debug_never_shows_the_api_key() {
        let b = ClientBuilder::new("http://h").api_key("sekrit-value");
        assert!(!format!("{b:?}").contains("sekrit-value"));
    }
}
