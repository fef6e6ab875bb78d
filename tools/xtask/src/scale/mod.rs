//! `cargo xtask scale`: replicas of the conformance example behind a real nginx running the
//! shipped `deploy/nginx/ors.conf`, driven through nginx only with our client: episodes
//! spread over the replicas, long calls and reconnects, a replica added, one killed, one
//! drained. Prints a table and `N passed, M failed`.

mod cluster;
mod deploy;
mod episodes;
mod nginx;
mod steps;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::process::{Command, ExitCode};

use ors_client::Client;

use self::cluster::{free_port, Cluster, Plan};
use self::episodes::Step;
use self::steps::{deploy_files, drain_one, kill_one, long_calls, scale_up, spread};

/// Arguments of `cargo xtask scale`.
#[derive(clap::Args)]
pub struct ScaleArgs {
    /// Fewer episodes per step (what `cargo xtask test` runs).
    #[arg(long)]
    pub quick: bool,
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

/// Run every step.
pub fn run(args: ScaleArgs) -> Result<ExitCode, String> {
    let plan = Plan::new(args.quick);
    let nginx_bin = nginx::ensure_nginx()?;
    let bin = crate::procs::build_examples(&["conformance"], true)?.join("conformance");
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
