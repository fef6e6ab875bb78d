//! Client settings and their builder.

use std::fmt;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};

/// Environment variable holding the default API key.
pub const API_KEY_ENV: &str = "ORS_API_KEY";
/// Environment variable holding the default server URL (read by [`ClientBuilder::from_env`]).
pub const URL_ENV: &str = "ORS_URL";
/// The URL used when none is given.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// Where secrets go when a session is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretsMode {
    /// In the `secrets` field of the `/create` body, as the spec says.
    #[default]
    Body,
    /// In the `X-Secrets` header (base64 of `{"KEY": {"value": "V"}}`), the form the Python
    /// reference client sends.
    Header,
    /// Both, for servers of either kind.
    Both,
}

/// The settings a [`Client`] runs with; built by [`ClientBuilder`].
#[derive(Clone)]
pub struct Config {
    /// Server base URL without a trailing slash.
    pub url: String,
    /// Value of the `X-API-Key` header, if any.
    pub api_key: Option<String>,
    /// Limit on one ordinary request (head and body) and on the head of a call stream.
    pub request_timeout: Duration,
    /// Limit on opening a TCP connection.
    pub connect_timeout: Duration,
    /// A call stream with no byte at all (not even a keep-alive) for this long is a dropped
    /// connection.
    pub heartbeat_timeout: Duration,
    /// Limit on a whole tool call including reconnects; `None` waits as long as the server
    /// keeps the stream alive.
    pub call_timeout: Option<Duration>,
    /// How often a session pings the server; `None` disables the background ping.
    pub ping_interval: Option<Duration>,
    /// Retries of a request that is safe to repeat (so up to `max_retries + 1` attempts).
    pub max_retries: u32,
    /// Reconnects of a call stream that dropped after its `task_id` arrived.
    pub reconnect_attempts: u32,
    /// First backoff delay; doubled per attempt, with jitter.
    pub backoff_base: Duration,
    /// Largest backoff delay (also caps a server's `Retry-After`).
    pub backoff_max: Duration,
    /// Where secrets are sent.
    pub secrets_mode: SecretsMode,
    /// The `User-Agent` header.
    pub user_agent: String,
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
            .field("ping_interval", &self.ping_interval)
            .field("max_retries", &self.max_retries)
            .field("reconnect_attempts", &self.reconnect_attempts)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("secrets_mode", &self.secrets_mode)
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

/// Builds a [`Client`]: `Client::builder("http://127.0.0.1:8080").api_key("k").build()`.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    cfg: Config,
}

impl ClientBuilder {
    /// A builder for the server at `url`, with the API key from `ORS_API_KEY` if set.
    pub fn new(url: impl Into<String>) -> Self {
        let api_key = std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty());
        Self {
            cfg: Config {
                url: url.into(),
                api_key,
                request_timeout: Duration::from_secs(60),
                connect_timeout: Duration::from_secs(10),
                heartbeat_timeout: Duration::from_secs(30),
                call_timeout: None,
                ping_interval: Some(Duration::from_secs(10)),
                max_retries: 3,
                reconnect_attempts: 5,
                backoff_base: Duration::from_millis(250),
                backoff_max: Duration::from_secs(10),
                secrets_mode: SecretsMode::Body,
                user_agent: concat!("ors-rs/", env!("CARGO_PKG_VERSION")).to_owned(),
            },
        }
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

    /// Limit on a whole tool call (default none).
    pub fn call_timeout(mut self, d: Option<Duration>) -> Self {
        self.cfg.call_timeout = d;
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

    /// The `User-Agent` header.
    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.cfg.user_agent = ua.into();
        self
    }

    /// The settings so far.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Check the URL and build the client (no connection is made yet).
    pub fn build(self) -> Result<Client> {
        let mut cfg = self.cfg;
        cfg.url = normalize_url(&cfg.url)?;
        Ok(Client::from_config(cfg))
    }
}

/// Check that `url` is a plain-HTTP URL with a host, and strip its trailing slash.
fn normalize_url(url: &str) -> Result<String> {
    let url = url.trim();
    let uri: http::Uri = url
        .parse()
        .map_err(|e| Error::InvalidArgument(format!("bad server URL {url:?}: {e}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(Error::InvalidArgument(format!(
                "{url}: https is not supported (this client speaks plain HTTP; put a \
                 TLS-terminating proxy in front or use http://)"
            )))
        }
        _ => {
            return Err(Error::InvalidArgument(format!(
                "bad server URL {url:?}: it must start with http://"
            )))
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(Error::InvalidArgument(format!(
            "bad server URL {url:?}: no host"
        )));
    }
    if uri.query().is_some() {
        return Err(Error::InvalidArgument(format!(
            "bad server URL {url:?}: a query string is not allowed"
        )));
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
        assert!(matches!(
            normalize_url("https://host"),
            Err(Error::InvalidArgument(m)) if m.contains("https")
        ));
        assert!(normalize_url("localhost:8080").is_err());
        assert!(normalize_url("not a url").is_err());
    }

    #[test]
    fn debug_never_shows_the_api_key() {
        let b = ClientBuilder::new("http://h").api_key("sekrit-value");
        assert!(!format!("{b:?}").contains("sekrit-value"));
    }
}
