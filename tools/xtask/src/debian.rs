//! Debian packages that a step of `cargo xtask test` needs (nginx for the scale-out, Chromium
//! for the HTML report), installed with apt-get when missing, so a fresh machine goes from
//! clone to green with `cargo xtask test` alone.

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
