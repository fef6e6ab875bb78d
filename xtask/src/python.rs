//! The Python reference SDK (ors-sdk 0.1.0) in a virtualenv under `target/`, created on demand
//! so a clean clone needs nothing installed by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned reference version every interop check and benchmark uses.
pub const ORS_SDK: &str = "ors-sdk==0.1.0";

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The venv's python, creating the venv and installing ors-sdk if needed.
pub fn ensure_venv() -> Result<PathBuf, String> {
    let venv = workspace_root().join("target").join("pyref");
    let python = venv.join("bin").join("python");
    let marker = venv.join(".ors-sdk-installed");
    if python.exists() && marker.exists() {
        return Ok(python);
    }
    let host_python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    eprintln!(
        "xtask: creating the reference virtualenv at {}",
        venv.display()
    );
    run(Command::new(&host_python).arg("-m").arg("venv").arg(&venv))?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(ORS_SDK))?;
    std::fs::write(&marker, ORS_SDK).map_err(|e| format!("writing {}: {e}", marker.display()))?;
    Ok(python)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("could not run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed with {status}"))
    }
}
