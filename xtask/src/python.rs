//! The Python reference SDK (ors-sdk 0.1.0) and the official Python MCP SDK (`mcp`) in a
//! virtualenv under `target/`, created on demand so a clean clone needs nothing installed by
//! hand. The two share the venv: their dependencies (httpx, pydantic, starlette) agree.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned reference version every interop check and benchmark uses.
pub const ORS_SDK: &str = "ors-sdk==0.1.0";

/// The pinned official Python MCP SDK the MCP interop checks use.
pub const MCP_SDK: &str = "mcp==2.3.0";

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The venv's python, creating the venv and installing ors-sdk and mcp if needed (again when
/// the pins changed).
pub fn ensure_venv() -> Result<PathBuf, String> {
    let venv = workspace_root().join("target").join("pyref");
    let python = venv.join("bin").join("python");
    let marker = venv.join(".ors-sdk-installed");
    let pins = format!("{ORS_SDK} {MCP_SDK}");
    let installed = std::fs::read_to_string(&marker).unwrap_or_default();
    if python.exists() && installed.trim() == pins {
        return Ok(python);
    }
    let host_python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    eprintln!(
        "xtask: creating the reference virtualenv at {}",
        venv.display()
    );
    if !python.exists() {
        run(Command::new(&host_python).arg("-m").arg("venv").arg(&venv))?;
    }
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args([ORS_SDK, MCP_SDK]))?;
    std::fs::write(&marker, &pins).map_err(|e| format!("writing {}: {e}", marker.display()))?;
    Ok(python)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let what = format!("{cmd:?}");
    crate::procs::run_to_success(cmd, &what)
}
