//! The Python peers in virtualenvs under `target/`, created on demand so a clean clone needs
//! nothing installed by hand: the reference SDK ors-sdk 0.1.0 with the official Python MCP SDK
//! (`target/pyref`; their dependencies — httpx, pydantic, starlette — agree) and the
//! `openreward` SDK, whose server and client real users run (`target/pyopenreward`;
//! PROTOCOL_NOTES row `openreward-sdk`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned reference version every interop check and benchmark uses.
pub const ORS_SDK: &str = "ors-sdk==0.1.0";

/// The pinned official Python MCP SDK the MCP interop checks use.
pub const MCP_SDK: &str = "mcp==2.3.0";

/// The pinned `openreward` version the interop checks use.
pub const OPENREWARD: &str = "openreward==0.1.167";

/// A Python SDK the interop checks run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// ors-sdk 0.1.0, the reference.
    OrsSdk,
    /// openreward 0.1.167, the current SDK.
    OpenReward,
}

impl Peer {
    /// The pip requirements of its venv.
    pub fn packages(self) -> &'static [&'static str] {
        match self {
            Peer::OrsSdk => &[ORS_SDK, MCP_SDK],
            Peer::OpenReward => &[OPENREWARD],
        }
    }

    fn venv_dir(self) -> &'static str {
        match self {
            Peer::OrsSdk => "pyref",
            Peer::OpenReward => "pyopenreward",
        }
    }

    /// The venv's python, creating the venv and installing the SDK if needed.
    pub fn python(self) -> Result<PathBuf, String> {
        ensure(
            &crate::workspace::workspace_root()
                .join("target")
                .join(self.venv_dir()),
            self.packages(),
        )
    }

    /// Environment variables every run of this SDK gets: openreward checks PyPI for a newer
    /// version on start unless told not to (and CI has no such network).
    pub fn envs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Peer::OrsSdk => &[],
            Peer::OpenReward => &[("OPENREWARD_DISABLE_UPDATE_CHECK", "1")],
        }
    }
}

/// The reference venv's python (ors-sdk and mcp), creating it if needed.
pub fn ensure_venv() -> Result<PathBuf, String> {
    Peer::OrsSdk.python()
}

/// The python of the venv at `venv` with `packages` installed, creating it if needed (the
/// marker file names the pins, so a changed pin reinstalls).
fn ensure(venv: &Path, packages: &[&str]) -> Result<PathBuf, String> {
    let python = venv.join("bin").join("python");
    let marker = venv.join(".ors-sdk-installed");
    let pins = packages.join(" ");
    let installed = std::fs::read_to_string(&marker).unwrap_or_default();
    if python.exists() && installed.trim() == pins {
        return Ok(python);
    }
    let host_python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    eprintln!(
        "xtask: creating a virtualenv with {pins} at {}",
        venv.display()
    );
    if !python.exists() {
        run(Command::new(&host_python).arg("-m").arg("venv").arg(venv))?;
    }
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(packages))?;
    std::fs::write(&marker, &pins).map_err(|e| format!("writing {}: {e}", marker.display()))?;
    Ok(python)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let what = format!("{cmd:?}");
    crate::procs::run_to_success(cmd, &what)
}
