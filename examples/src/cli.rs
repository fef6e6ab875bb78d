//! The command line shared by the example binaries: `--host` / `--port` on top of the
//! `ORS_*` environment variables, then serve one environment.

use std::process::ExitCode;

use ors_server::prelude::Environment;
use ors_server::{Server, ServerConfig};

/// Where to listen; each flag overrides its `ORS_*` variable, every other setting comes from
/// the environment (`ORS_SESSION_TIMEOUT_SECS`, `ORS_API_KEY`, ...).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on [default: $ORS_HOST, else the server's default].
    #[arg(long)]
    pub host: Option<String>,
    /// Port to listen on; 0 picks a free port [default: $ORS_PORT, else the server's default].
    #[arg(long)]
    pub port: Option<u16>,
}

impl ServeArgs {
    /// The server configuration: `ORS_*` variables, overridden by the flags given.
    pub fn config(&self) -> Result<ServerConfig, ors_server::ConfigError> {
        let mut config = ServerConfig::from_env()?;
        if let Some(host) = &self.host {
            config.host = host.clone();
        }
        if let Some(port) = self.port {
            config.port = port;
        }
        Ok(config)
    }
}

/// Serve environment `E` with its start-up state until SIGINT/SIGTERM; the server prints its
/// ready line (`ors-server listening on http://HOST:PORT`) to stdout. Errors go to stderr.
pub async fn serve<E: Environment>(program: &str, args: &ServeArgs, state: E::State) -> ExitCode {
    ors_server::init_tracing();
    let config = match args.config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{program}: invalid configuration: {e}");
            return ExitCode::FAILURE;
        }
    };
    let server = Server::with_config(config).environment_with::<E>(state);
    match server.serve().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    }
}
