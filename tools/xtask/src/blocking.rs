//! `cargo xtask blocking`: does a CPU-bound tool stall other sessions? Starts this binary as a
//! server (`blocking --serve`, release build) hosting a tiny environment with a 2 s busy loop
//! as `#[tool(blocking)]` (`spin`), the same loop as a plain sync tool (`spin_inline`), and
//! `echo`. Eight sessions run the loop at once while a ninth measures `/health` and `echo`
//! every 20 ms; the same is measured with nothing running, and with the plain sync tool.

use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ors_client::Client;
use ors_server::prelude::*;
use serde_json::json;

use crate::procs::ServerProcess;

/// Arguments of `cargo xtask blocking`.
#[derive(clap::Args)]
pub struct BlockingArgs {
    /// Run the server (used by the measurement itself).
    #[arg(long, hide = true)]
    pub serve: bool,
    /// Sessions running the busy loop at once.
    #[arg(long, default_value_t = 8)]
    pub sessions: usize,
    /// Seconds each busy loop runs.
    #[arg(long, default_value_t = 2.0)]
    pub secs: f64,
}

#[wire]
struct Spin {
    secs: f64,
}

#[wire]
struct Text {
    text: String,
}

/// The measured environment.
struct Stall;

fn busy(secs: f64) -> String {
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut n: u64 = 0;
    while Instant::now() < until {
        n = n.wrapping_add(1);
        std::hint::black_box(n);
    }
    format!("spun {n} times")
}

#[environment(name = "stall")]
impl Environment for Stall {
    type Task = JsonObject;
    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }
    async fn tasks(_split: &str) -> Result<Vec<JsonObject>, EnvError> {
        Ok(vec![JsonObject::new()])
    }
    async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Stall)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("stall")])
    }

    /// Busy-loop on the blocking pool.
    #[tool(blocking)]
    fn spin(&self, input: Spin) -> String {
        busy(input.secs)
    }

    /// Busy-loop on the runtime's worker thread (what a sync tool without `blocking` does).
    #[tool]
    fn spin_inline(&self, input: Spin) -> String {
        busy(input.secs)
    }

    /// Echo the text.
    #[tool]
    fn echo(&self, input: Text) -> String {
        input.text
    }
}

/// Latencies in milliseconds: p50, p99, max, count.
fn summary(mut ms: Vec<f64>) -> String {
    if ms.is_empty() {
        return "no samples".to_owned();
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
        at(0.5),
        at(0.99),
        ms[ms.len() - 1],
        ms.len()
    )
}

/// Probe `/health` and `echo` every 20 ms until `done` is set; returns both latency lists.
async fn probe(
    client: &Client,
    session: &ors_client::Session,
    done: Arc<std::sync::atomic::AtomicBool>,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (mut health, mut echo) = (Vec::new(), Vec::new());
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let t0 = Instant::now();
        client.health().await.map_err(|e| e.to_string())?;
        health.push(t0.elapsed().as_secs_f64() * 1000.0);
        let t0 = Instant::now();
        session
            .call("echo", json!({"text": "hi"}))
            .await
            .map_err(|e| e.to_string())?;
        echo.push(t0.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((health, echo))
}

/// Run `tool` in `n` sessions at once while probing; `None` runs nothing (the baseline).
async fn scenario(
    url: &str,
    tool: Option<&str>,
    n: usize,
    secs: f64,
) -> Result<(String, String, f64), String> {
    let client = Client::new(url).map_err(|e| e.to_string())?;
    let env = client.environment("stall");
    let prober = env
        .session_at("train", 0)
        .await
        .map_err(|e| e.to_string())?;
    let mut spinners = Vec::new();
    for _ in 0..n {
        spinners.push(
            env.session_at("train", 0)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let t0 = Instant::now();
    let work = async {
        match tool {
            Some(tool) => {
                let calls = spinners.iter().map(|s| s.call(tool, json!({"secs": secs})));
                for r in futures_util::future::join_all(calls).await {
                    r.map_err(|e| e.to_string())?;
                }
            }
            None => tokio::time::sleep(Duration::from_secs_f64(secs)).await,
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok::<_, String>(t0.elapsed().as_secs_f64())
    };
    let (work, probed) = tokio::join!(work, probe(&client, &prober, Arc::clone(&done)));
    let wall = work?;
    let (health, echo) = probed?;
    for s in spinners {
        let _ = s.close().await;
    }
    let _ = prober.close().await;
    Ok((summary(health), summary(echo), wall))
}

/// Run the measurement, or (with `--serve`) the server it measures.
pub fn run(args: BlockingArgs) -> Result<ExitCode, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    if args.serve {
        return rt.block_on(async {
            let mut config = ors_server::ServerConfig::from_env().map_err(|e| e.to_string())?;
            config.port = 0;
            ors_server::Server::with_config(config)
                .environment::<Stall>()
                .serve()
                .await
                .map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        });
    }
    let target = crate::procs::cargo_build(&["-p", "xtask"], true)?;
    let mut cmd = Command::new(target.join("xtask"));
    cmd.args(["blocking", "--serve"])
        .env_remove("RUST_LOG")
        .env("ORS_HOST", "127.0.0.1")
        .stderr(Stdio::null());
    let server = ServerProcess::start(cmd, Duration::from_secs(60))?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "{} sessions each running a {:.1} s CPU-bound tool; a ninth session probes /health and \
         echo every 20 ms ({} cores, release build)",
        args.sessions, args.secs, cores
    );
    println!("| scenario | /health | echo | wall s |");
    println!("|---|---|---|---|");
    for (label, tool) in [
        ("idle", None),
        ("#[tool(blocking)] spin", Some("spin")),
        ("plain sync spin_inline", Some("spin_inline")),
    ] {
        let (health, echo, wall) =
            rt.block_on(scenario(&server.url, tool, args.sessions, args.secs))?;
        println!("| {label} | {health} | {echo} | {wall:.2} |");
    }
    Ok(ExitCode::SUCCESS)
}
