//! Interop with the two Python SDKs, run by `cargo xtask test`: the reference ors-sdk 0.1.0 and
//! openreward 0.1.167 (the current ORS server and client, PROTOCOL_NOTES row `openreward-sdk`).
//! For each: its client against our `conformance` and `gsm8k` servers, our client library and
//! `ors` CLI against its server hosting the conformance fixture (`interop/rust_client.rs`), and
//! the conformance runner against that server (it must fail exactly the clauses of its
//! expected-failures file). Besides: `ors check` against the reference fixture and the broken
//! environments of `tools/interop/python/broken_env.py` (`interop/check.rs`), the runner against our
//! server (no failure), and MCP both ways against the official Python MCP SDK (`interop/mcp.rs`).

use std::path::Path;
use std::time::Instant;

use crate::conformance::{self, ExpectedFailures, Report, RunOptions};
use crate::python::Peer;

mod check;
mod library;
mod mcp;
mod rust_client;
mod servers;
pub use check::ors_check_against_reference;
pub use rust_client::rust_client_against;
pub use servers::{build_examples, our_server};
use servers::{expected_failures, our_keyed_fixture, peer_server, python_script, KEEPALIVE_SECS};

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
