//! `cargo xtask scale`: replicas of the conformance example behind a real nginx running the
//! shipped `deploy/nginx/ors.conf`, driven through nginx only with our client: episodes
//! spread over the replicas, long calls and reconnects, a replica added, one killed, one
//! drained. Prints a table and `N passed, M failed`.

mod deploy;
mod episodes;
mod nginx;
mod steps;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use ors_client::Client;

use self::episodes::Step;
use self::steps::{deploy_files, drain_one, kill_one, long_calls, scale_up, spread};
use crate::procs::ServerProcess;

/// Arguments of `cargo xtask scale`.
#[derive(clap::Args)]
pub struct ScaleArgs {
    /// Fewer episodes per step (what `cargo xtask test` runs).
    #[arg(long)]
    pub quick: bool,
}

/// The key every replica shares, so each accepts the others' ids (only the replica an id
/// names ever sees it, through nginx; the key is what a deployment must share anyway).
const SESSION_KEY: &str = "cargo xtask scale: one key for all replicas";
/// An episode that takes longer than this has hung.
const EPISODE_LIMIT: Duration = Duration::from_secs(60);

/// How big each step is.
struct Plan {
    episodes: usize,
    concurrency: usize,
    /// Episodes of the steps that change replicas mid-run.
    churn: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
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
struct Replica {
    n: u32,
    port: u16,
    process: Option<ServerProcess>,
}

/// The replicas and the nginx in front of them.
struct Cluster {
    bin: PathBuf,
    nginx_bin: PathBuf,
    dir: PathBuf,
    template: String,
    port: u16,
    replicas: Vec<Replica>,
    nginx: Option<nginx::Nginx>,
}

impl Cluster {
    fn start_replica(&mut self, n: u32) -> Result<(), String> {
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
    fn conf(&self) -> Result<String, String> {
        let live: Vec<(u32, u16)> = self
            .replicas
            .iter()
            .filter(|r| r.process.is_some())
            .map(|r| (r.n, r.port))
            .collect();
        nginx::render(&self.template, &live, self.port)
    }

    fn start_nginx(&mut self) -> Result<(), String> {
        let conf = self.conf()?;
        self.nginx = Some(nginx::Nginx::start(
            &self.nginx_bin,
            &self.dir.join("nginx"),
            &conf,
            self.port,
        )?);
        Ok(())
    }

    fn reload(&self) -> Result<(), String> {
        let nginx = self.nginx.as_ref().ok_or("nginx is not running")?;
        nginx.reload(&self.conf()?)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn replica(&mut self, n: u32) -> Result<&mut Replica, String> {
        self.replicas
            .iter_mut()
            .find(|r| r.n == n)
            .ok_or_else(|| format!("no replica {n}"))
    }
}

async fn scenarios(cluster: &mut Cluster, plan: &Plan) -> Result<Vec<Step>, String> {
    let client = Client::new(cluster.url()).map_err(|e| e.to_string())?;
    let env = client.environment("conformance");
    let mut steps = vec![spread(cluster, &env, plan).await];
    steps.last().map(Step::print);
    steps.push(long_calls(cluster, &env, &client).await);
    steps.last().map(Step::print);
    steps.push(scale_up(cluster, &env, plan).await);
    steps.last().map(Step::print);
    steps.push(kill_one(cluster, &env, plan).await);
    steps.last().map(Step::print);
    steps.push(drain_one(cluster, &env, plan).await);
    steps.last().map(Step::print);
    Ok(steps)
}

/// A free local port (closed again before nginx takes it).
fn free_port() -> Result<u16, String> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    probe
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// Run every step.
pub fn run(args: ScaleArgs) -> Result<ExitCode, String> {
    let plan = Plan::new(args.quick);
    let nginx_bin = nginx::ensure_nginx()?;
    let bin = crate::procs::cargo_build(&["-p", "ors-examples", "--bin", "conformance"], true)?
        .join("conformance");
    let root = crate::workspace::workspace_root();
    let template = std::fs::read_to_string(root.join(nginx::ORS_CONF))
        .map_err(|e| format!("{}: {e}", nginx::ORS_CONF))?;
    let dir = root.join("target/xtask-scale");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut cluster = Cluster {
        bin,
        nginx_bin,
        dir: dir.clone(),
        template,
        port: free_port()?,
        replicas: Vec::new(),
        nginx: None,
    };
    for n in 0..3 {
        cluster.start_replica(n)?;
    }
    cluster.start_nginx()?;
    println!(
        "xtask: scale: 3 replicas of the conformance example behind nginx ({}) on {}; logs in {}",
        nginx_version(&cluster.nginx_bin),
        cluster.url(),
        dir.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let first = deploy_files(&cluster, &root);
    first.print();
    let mut steps = vec![first];
    steps.extend(rt.block_on(scenarios(&mut cluster, &plan))?);
    drop(cluster);
    let failed = steps.iter().filter(|s| !s.failures.is_empty()).count();
    println!("{} passed, {failed} failed", steps.len() - failed);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn nginx_version(bin: &Path) -> String {
    Command::new(bin)
        .arg("-v")
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stderr)
                .trim()
                .replace("nginx version: ", "")
        })
        .unwrap_or_else(|| "nginx".to_owned())
}
