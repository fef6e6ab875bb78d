//! `ors mcp`: one episode of an ORS environment served to an MCP client (Claude Code, Codex,
//! IDE agents) through the official Rust MCP SDK, over stdio or streamable HTTP.
//!
//! The ORS session is created when the MCP session starts (`initialize`, or the first request
//! of a client that skips the handshake) and deleted when it ends: stdin closed, the HTTP
//! session deleted or gone idle, SIGTERM or SIGINT. Its pings run in the background meanwhile.
//! Nothing but MCP goes to stdout.
//!
//! Over HTTP a request needs the bearer token and, from a browser, an allowed `Origin`; at
//! most `--max-sessions` MCP sessions are open at once (an `initialize` beyond is a JSON-RPC
//! error, and no ORS session is opened for it).

mod access;
mod episode;
mod handler;
mod http;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ors_client::{Environment, Error, Secrets};
use rmcp::ServiceExt;

pub use access::TOKEN_ENV;
pub use episode::{Episode, EpisodeSpec, Slots};
pub use handler::{EpisodeServer, Eras};

/// The variable holding secrets for `ors mcp` when no `--secret` is given: a JSON object of
/// strings, `{"OPENAI_API_KEY": "sk-..."}`.
pub const SECRETS_ENV: &str = "ORS_SECRETS";

/// Arguments of `ors mcp`.
#[derive(Args, Debug)]
pub struct McpArgs {
    /// Environment name.
    pub env: String,
    #[command(flatten)]
    pub task: crate::args::TaskArgs,
    /// Serve MCP over streamable HTTP on this address (endpoint `/mcp`), one episode per MCP
    /// session, instead of one episode over stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Over HTTP, the bearer token every request must carry (`Authorization: Bearer TOKEN`);
    /// when neither this nor $ORS_MCP_TOKEN is given, one is generated and printed on stderr.
    #[arg(long, env = TOKEN_ENV, hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Over HTTP, a browser origin allowed to send requests (`https://app.example`); repeat
    /// for several. A request with any other `Origin` is refused (403); by default, all are.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http",
          value_parser = access::normalize_origin)]
    pub allow_origins: Vec<String>,
    /// Over HTTP, the most MCP sessions (each an ORS episode) open at once; an `initialize`
    /// beyond them is refused with a JSON-RPC error.
    #[arg(long, value_name = "N", default_value_t = 64, requires = "http",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions: u32,
    /// Over HTTP, end an MCP session (and delete its ORS session) after this many seconds
    /// without a request, none running; 0: never.
    #[arg(long, value_name = "SECS", default_value_t = 900, requires = "http")]
    pub idle_timeout: u64,
    /// A secret for the environment, `KEY=VALUE`; repeat for several. Replaces $ORS_SECRETS
    /// (a JSON object of strings).
    #[arg(long = "secret", value_name = "KEY=VALUE", value_parser = parse_secret)]
    pub secrets: Vec<(String, String)>,
}

fn parse_secret(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err("expected KEY=VALUE".to_owned()),
    }
}

/// The secrets: `--secret` flags, else `ORS_SECRETS`, else none.
fn secrets(flags: &[(String, String)], env: Option<&str>) -> Result<Secrets, Error> {
    if !flags.is_empty() {
        return Ok(flags.iter().cloned().collect());
    }
    // No variable (or a blank one): no secrets, as an empty object.
    let raw = env.filter(|s| !s.trim().is_empty()).unwrap_or("{}");
    let map = serde_json::from_str::<std::collections::BTreeMap<String, String>>(raw);
    let map = map.map_err(|e| {
        let what = "must be a JSON object of strings, like {\"KEY\": \"value\"}";
        Error::InvalidArgument(format!("{SECRETS_ENV} {what}: {e}"))
    })?;
    Ok(map.into_iter().collect())
}

/// Run `ors mcp` until the MCP client leaves or a signal arrives.
pub async fn run(env: Environment, args: McpArgs) -> Result<ExitCode, Error> {
    let spec = EpisodeSpec {
        env,
        task: args.task.task_ref()?,
        secrets: secrets(&args.secrets, std::env::var(SECRETS_ENV).ok().as_deref())?,
        // Over stdio the one connection is the one episode; over HTTP --max-sessions bounds them.
        slots: args.http.map(|_| Slots::new(args.max_sessions as usize)),
    };
    let Some(addr) = args.http else {
        return stdio(spec).await;
    };
    let token = match args.token.filter(|t| !t.trim().is_empty()) {
        Some(token) => token.trim().to_owned(),
        None => {
            let token = access::generate_token().map_err(Error::InvalidArgument)?;
            // Printed once, where only the operator sees it; stdout carries the ready line.
            eprintln!(
                "ors mcp: MCP clients must send `Authorization: Bearer {token}` (a token \
                 generated for this run; choose one with --token or ${TOKEN_ENV})"
            );
            token
        }
    };
    let access = access::Access::new(token, args.allow_origins);
    let idle_timeout = (args.idle_timeout > 0).then(|| Duration::from_secs(args.idle_timeout));
    http::serve(spec, addr, access, idle_timeout).await
}

/// One episode over stdin/stdout.
async fn stdio(spec: EpisodeSpec) -> Result<ExitCode, Error> {
    let episode = Arc::new(Episode::new(spec));
    let server = EpisodeServer::new(Arc::clone(&episode), Eras::All);
    let served = tokio::select! {
        served = server.serve(rmcp::transport::stdio()) => served,
        () = crate::shutdown::signal() => {
            episode.close().await;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let code = match served {
        Ok(running) => {
            let token = running.cancellation_token();
            tokio::select! {
                quit = running.waiting() => {
                    if let Err(e) = quit {
                        tracing::warn!(error = %e, "the MCP service ended with an error");
                    }
                }
                () = crate::shutdown::signal() => token.cancel(),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // stdin closed before the handshake ended (a probe): nothing was opened.
            eprintln!("ors: mcp: {e}");
            ExitCode::FAILURE
        }
    };
    episode.close().await;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_come_from_flags_else_the_variable() {
        let flags = vec![("A".to_owned(), "1".to_owned())];
        let s = secrets(&flags, Some(r#"{"B": "2"}"#)).unwrap();
        assert_eq!(s.get("A"), Some("1"));
        assert_eq!(s.get("B"), None);
        let s = secrets(&[], Some(r#"{"B": "2"}"#)).unwrap();
        assert_eq!(s.get("B"), Some("2"));
        assert!(secrets(&[], None).unwrap().is_empty());
        let e = secrets(&[], Some("B=2")).unwrap_err().to_string();
        assert!(e.contains(SECRETS_ENV), "{e}");
    }

    #[test]
    fn a_secret_flag_is_key_equals_value() {
        assert_eq!(parse_secret("K=v=w"), Ok(("K".into(), "v=w".into())));
        assert!(parse_secret("=v").is_err());
        assert!(parse_secret("K").is_err());
    }
}
