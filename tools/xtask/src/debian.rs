//! Debian packages that a step of `cargo xtask test` needs (nginx for the scale-out, Chromium
//! for the HTML report, bubblewrap for the sandboxes), installed with apt-get when missing, so
//! a fresh machine goes from clone to green with `cargo xtask test` alone.

use std::path::PathBuf;
use std::process::Command;

/// Install `packages` with apt-get (fetching the package lists first if the install fails, as
/// on a fresh image that has none); `why` names the step that needs them.
pub fn install(why: &str, packages: &[&str]) -> Result<(), String> {
    eprintln!(
        "xtask: {why}: installing Debian's {} with apt-get",
        packages.join(", ")
    );
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if install() {
        return Ok(());
    }
    let _ = Command::new("apt-get").arg("update").status();
    if install() {
        Ok(())
    } else {
        Err(format!(
            "could not install {} with apt-get (run as root, or install them)",
            packages.join(", ")
        ))
    }
}

/// The program `binary` (on the `PATH` or in `/usr/sbin`, `/usr/bin`), else Debian's
/// `package` installed (for step `why`) and the program found then.
pub fn ensure(why: &str, binary: &str, package: &str) -> Result<PathBuf, String> {
    if let Some(found) = find(binary) {
        return Ok(found);
    }
    install(why, &[package])?;
    find(binary).ok_or_else(|| format!("{package} was installed but no {binary} program found"))
}

fn find(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(binary))
        .find(|p| p.is_file())
}
