//! The cluster a run drives: replicas of the conformance example and the nginx in front of
//! them, how big each step is, and free ports.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::nginx;
use crate::procs::ServerProcess;

/// The key every replica shares, so each accepts the others' ids (only the replica an id
/// names ever sees it, through nginx; the key is what a deployment must share anyway).
const SESSION_KEY: &str = "cargo xtask scale: one key for all replicas";
/// How big each step is.
pub(super) struct Plan {
    pub(super) episodes: usize,
    pub(super) concurrency: usize,
    /// Episodes of the steps that change replicas mid-run.
    pub(super) churn: usize,
}

impl Plan {
    pub(super) fn new(quick: bool) -> Self {
        if quick {
            Plan {
                episodes: 300,
                concurrency: 32,
                churn: 160,
            }
        } else {
            Plan {
                episodes: 2000,
                concurrency: 64,
                churn: 600,
            }
        }
    }
}

/// One replica: its number, port and process (`None` once stopped).
pub(super) struct Replica {
    pub(super) n: u32,
    pub(super) port: u16,
    pub(super) process: Option<ServerProcess>,
}

/// The replicas and the nginx in front of them.
pub(super) struct Cluster {
    pub(super) bin: PathBuf,
    pub(super) nginx_bin: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) template: String,
    pub(super) port: u16,
    pub(super) replicas: Vec<Replica>,
    pub(super) nginx: Option<nginx::Nginx>,
}

impl Cluster {
    pub(super) fn start_replica(&mut self, n: u32) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.join(format!("replica-{n}.log")))
            .map_err(|e| format!("replica log: {e}"))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--host", "127.0.0.1", "--port", "0"])
            .env("ORS_REPLICA_ID", n.to_string())
            .env("ORS_SESSION_KEY", SESSION_KEY)
            // Keep-alive comments every second, so a 3 s call shows them through nginx.
            .env("ORS_KEEPALIVE_SECS", "1")
            .env("ORS_DRAIN_SECS", "60")
            .env("RUST_LOG", "warn")
            .env_remove("ORS_API_KEY")
            .env_remove("ORS_MAX_SESSIONS")
            .stderr(Stdio::from(log));
        let process = ServerProcess::start(cmd, Duration::from_secs(60))?;
        let port = process.port();
        self.replicas.push(Replica {
            n,
            port,
            process: Some(process),
        });
        Ok(())
    }

    /// The rendered `ors.conf` for the replicas still running.
    pub(super) fn conf(&self) -> Result<String, String> {
        let live: Vec<(u32, u16)> = self
            .replicas
            .iter()
            .filter(|r| r.process.is_some())
            .map(|r| (r.n, r.port))
            .collect();
        nginx::render(&self.template, &live, self.port)
    }

    pub(super) fn start_nginx(&mut self) -> Result<(), String> {
        let conf = self.conf()?;
        self.nginx = Some(nginx::Nginx::start(
            &self.nginx_bin,
            &self.dir.join("nginx"),
            &conf,
            self.port,
        )?);
        Ok(())
    }

    pub(super) fn reload(&self) -> Result<(), String> {
        let nginx = self.nginx.as_ref().ok_or("nginx is not running")?;
        nginx.reload(&self.conf()?)
    }

    pub(super) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(super) fn replica(&mut self, n: u32) -> Result<&mut Replica, String> {
        self.replicas
            .iter_mut()
            .find(|r| r.n == n)
            .ok_or_else(|| format!("no replica {n}"))
    }
}

/// A free local port (closed again before nginx takes it).
pub(super) fn free_port() -> Result<u16, String> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    probe
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}
