//! The servers and scripts the interop checks run: our example binaries, the Python peers'
//! servers and client scripts in `tools/interop/python/`, and their expected-failures files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::conformance;
use crate::procs::ServerProcess;
use crate::python::Peer;
use crate::workspace::workspace_root;

/// Keep-alive interval our servers get here, so the long-call checks take seconds, not tens.
pub const KEEPALIVE_SECS: &str = "1";

/// How long a server may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// `interop/` in the workspace.
pub fn interop_dir() -> PathBuf {
    workspace_root().join("tools").join("interop")
}

/// A peer's expected failures file.
pub fn expected_failures(peer: Peer) -> PathBuf {
    interop_dir().join(match peer {
        Peer::OrsSdk => "reference-expected-failures.txt",
        Peer::OpenReward => "openreward-expected-failures.txt",
    })
}

/// Build the `conformance`, `gsm8k` and `mcp_env` example binaries; their directory.
pub fn build_examples() -> Result<PathBuf, String> {
    crate::procs::build_examples(&["conformance", "gsm8k", "mcp_env"], false)
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
pub fn our_keyed_fixture(bins: &Path) -> Result<(ServerProcess, String), String> {
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
pub fn with_envs(cmd: &mut Command, envs: &[(&str, &str)]) {
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
pub fn python_script(
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
