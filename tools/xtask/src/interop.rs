//! Interop with the two Python SDKs, run by `cargo xtask test`: the reference ors-sdk 0.1.0 and
//! openreward 0.1.167 (the current ORS server and client, PROTOCOL_NOTES row `openreward-sdk`).
//! For each: its client against our `conformance` and `gsm8k` servers, our client library and
//! `ors` CLI against its server hosting the conformance fixture (`interop/rust_client.rs`), and
//! the conformance runner against that server (it must fail exactly the clauses of its
//! expected-failures file). Besides: `ors check` against the reference fixture and the broken
//! environments of `tools/interop/python/broken_env.py` (`interop/check.rs`), the runner against our
//! server (no failure), and MCP both ways against the official Python MCP SDK (`interop/mcp.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::conformance::{self, ExpectedFailures, Report, RunOptions};
use crate::procs::{cargo_build, ServerProcess};
use crate::python::Peer;
use crate::workspace::workspace_root;

mod check;
mod library;
mod mcp;
mod rust_client;
pub use check::ors_check_against_reference;
pub use rust_client::rust_client_against;

/// Keep-alive interval our servers get here, so the long-call checks take seconds, not tens.
const KEEPALIVE_SECS: &str = "1";

/// How long a server may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// `interop/` in the workspace.
fn interop_dir() -> PathBuf {
    workspace_root().join("tools").join("interop")
}

/// A peer's expected failures file.
pub fn expected_failures(peer: Peer) -> PathBuf {
    interop_dir().join(match peer {
        Peer::OrsSdk => "reference-expected-failures.txt",
        Peer::OpenReward => "openreward-expected-failures.txt",
    })
}

/// Run every interop check; the first failing step ends the run with its error.
pub fn run_all() -> Result<(), String> {
    // Both venvs before any step, so a missing package fails at once; the reference venv also
    // holds the Python MCP SDK.
    let python = Peer::OrsSdk.python()?;
    Peer::OpenReward.python()?;
    let bins = build_examples()?;
    step("python client vs our servers", || {
        python_clients_against_ours(&bins)
    })?;
    step("openreward client vs our servers", || {
        openreward_clients_against_ours(&bins)
    })?;
    step("rust client and ors CLI vs the reference server", || {
        rust_client_against(Peer::OrsSdk)
    })?;
    step("rust client and ors CLI vs the openreward server", || {
        rust_client_against(Peer::OpenReward)
    })?;
    step(
        "ors check vs the reference fixture and broken reference environments",
        ors_check_against_reference,
    )?;
    step("conformance runner vs the reference server", || {
        conformance_against(Peer::OrsSdk)
    })?;
    step("conformance runner vs the openreward server", || {
        conformance_against(Peer::OpenReward)
    })?;
    step("conformance runner vs our server", || {
        conformance_against_ours(&bins)
    })?;
    step("python MCP client vs ors mcp (stdio, http)", || {
        mcp::python_mcp_client_against_ors_mcp()
    })?;
    step(
        "mcp_env wrapping a python MCP server and webhooks: reference client, ors check",
        || mcp::mcp_env_with_python_servers(&python),
    )?;
    Ok(())
}

fn step(name: &str, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    eprintln!("xtask: interop: {name}");
    let t = Instant::now();
    let result = f();
    eprintln!(
        "xtask: interop: {name}: {} in {:.1} s",
        if result.is_ok() { "ok" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    result.map_err(|e| format!("{name}: {e}"))
}

/// Build the `conformance`, `gsm8k` and `mcp_env` example binaries; their directory.
pub fn build_examples() -> Result<PathBuf, String> {
    cargo_build(
        &[
            "-p",
            "ors-examples",
            "--bin",
            "conformance",
            "--bin",
            "gsm8k",
            "--bin",
            "mcp_env",
        ],
        false,
    )
}

/// Start one of our example binaries from `bins` on a free loopback port.
pub fn our_server(bins: &Path, name: &str, envs: &[(&str, &str)]) -> Result<ServerProcess, String> {
    let mut cmd = Command::new(bins.join(name));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    with_envs(&mut cmd, envs);
    cmd.stderr(conformance::log_file(name)?);
    ServerProcess::start(cmd, START_TIMEOUT)
}

/// Our `conformance` server with a fresh API key (returned) and the short keep-alive, as the
/// interop steps that exercise auth and long calls need it.
fn our_keyed_fixture(bins: &Path) -> Result<(ServerProcess, String), String> {
    let key = conformance::throwaway_api_key();
    let server = our_server(
        bins,
        "conformance",
        &[
            ("ORS_KEEPALIVE_SECS", KEEPALIVE_SECS),
            ("ORS_API_KEY", &key),
        ],
    )?;
    Ok((server, key))
}

/// Set `envs` on `cmd`; an `ORS_API_KEY` of the caller's is not passed on unless given here,
/// so server and client always agree on the key.
fn with_envs(cmd: &mut Command, envs: &[(&str, &str)]) {
    if !envs.iter().any(|(k, _)| *k == "ORS_API_KEY") {
        cmd.env_remove("ORS_API_KEY");
    }
    cmd.envs(envs.iter().copied());
}

/// Start a peer's server hosting the conformance fixture (`tools/interop/python/conformance_env.py`
/// with ors-sdk, `openreward_conformance_env.py` with openreward) on a free loopback port.
pub fn peer_server(peer: Peer) -> Result<ServerProcess, String> {
    match peer {
        Peer::OrsSdk => python_server(peer, "conformance_env.py", "reference"),
        Peer::OpenReward => python_server(peer, "openreward_conformance_env.py", "openreward"),
    }
}

/// Start one of the Python servers of `tools/interop/python/`, written with `peer`'s SDK, on a free
/// loopback port, its log in `target/xtask-logs/{log}.log`.
pub fn python_server(peer: Peer, script: &str, log: &str) -> Result<ServerProcess, String> {
    let python = peer.python()?;
    let dir = interop_dir().join("python");
    let mut cmd = Command::new(python);
    cmd.arg(dir.join(script))
        .args(["--host", "127.0.0.1", "--port", "0"])
        .envs(peer.envs().iter().copied())
        .current_dir(&dir);
    // The reference logs every request; keep that out of the way.
    cmd.env("ORS_LOG_LEVEL", "WARNING");
    cmd.stderr(conformance::log_file(log)?);
    ServerProcess::start(cmd, START_TIMEOUT)
}

/// Run one of the Python client scripts in `tools/interop/python/` with `args` and `envs`.
fn python_script(
    peer: Peer,
    script: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Result<(), String> {
    let dir = interop_dir().join("python");
    let mut cmd = Command::new(peer.python()?);
    cmd.arg(dir.join(script)).args(args).current_dir(&dir);
    cmd.envs(peer.envs().iter().copied());
    with_envs(&mut cmd, envs);
    crate::procs::run_to_success(&mut cmd, &format!("{script} {}", args.join(" ")))
}

/// The reference Python client against our `conformance` and `gsm8k` servers. The
/// conformance server runs with an API key, which the client sends as `X-API-Key` because
/// `ORS_API_KEY` is set for it too (notes row `api-key`).
pub fn python_clients_against_ours(bins: &Path) -> Result<(), String> {
    let (server, key) = our_keyed_fixture(bins)?;
    python_script(
        Peer::OrsSdk,
        "client_conformance.py",
        &[&server.url, "--keepalive-secs", KEEPALIVE_SECS],
        &[("ORS_API_KEY", &key)],
    )?;
    drop(server);
    let server = our_server(bins, "gsm8k", &[])?;
    python_script(Peer::OrsSdk, "client_gsm8k.py", &[&server.url], &[])
}

/// The openreward client against our `conformance` (with an API key, which the client sends
/// and adds as the `api_key` secret) and `gsm8k` servers.
pub fn openreward_clients_against_ours(bins: &Path) -> Result<(), String> {
    let (server, key) = our_keyed_fixture(bins)?;
    python_script(
        Peer::OpenReward,
        "openreward_client_conformance.py",
        &[&server.url],
        &[("ORS_API_KEY", &key)],
    )?;
    drop(server);
    let server = our_server(bins, "gsm8k", &[])?;
    python_script(
        Peer::OpenReward,
        "openreward_client_gsm8k.py",
        &[&server.url],
        &[],
    )
}

/// Print the lines of a report that explain a mismatch.
fn explain(report: &Report, expected_file: Option<&Path>) {
    for o in &report.outcomes {
        if let conformance::Status::Fail(_) = &o.status {
            if o.expected.is_none() {
                println!("{}", o.line());
            }
        }
    }
    for line in report.summary(expected_file) {
        println!("{line}");
    }
}

/// The conformance runner against a peer's server: exactly its expected failures.
pub fn conformance_against(peer: Peer) -> Result<(), String> {
    let server = peer_server(peer)?;
    let file = expected_failures(peer);
    let opts = RunOptions {
        expected: ExpectedFailures::load(&file)?,
        ..RunOptions::default()
    };
    let report = conformance::run_against(&server.url, &opts)?;
    explain(&report, Some(&file));
    if report.matches_expectations() {
        Ok(())
    } else {
        Err(format!(
            "{}'s results differ from {}: unexpected failures {:?}, unexpected passes {:?}, unknown ids {:?}",
            peer.packages()[0],
            file.display(),
            report.unexpected_failures(),
            report.unexpected_passes(),
            report.unknown_expected
        ))
    }
}

/// The conformance runner, slow clauses included, against our server: no failure. The
/// server has an API key, so the auth clauses run.
pub fn conformance_against_ours(bins: &Path) -> Result<(), String> {
    let (server, key) = our_keyed_fixture(bins)?;
    let opts = RunOptions {
        slow: true,
        keepalive_secs: KEEPALIVE_SECS.parse().unwrap_or(1),
        api_key: Some(key),
        ..RunOptions::default()
    };
    let report = conformance::run_against(&server.url, &opts)?;
    explain(&report, None);
    let failed = report.unexpected_failures();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("our server fails {failed:?}"))
    }
}
