//! The browser step of `cargo xtask test`: `ors report`'s HTML page used in Debian's Chromium
//! over ChromeDriver (the ignored test `browser::the_report_works_in_chromium` of ors-cli's
//! `report` tests), both installed when missing. It prints the 10,000-episode report's size and
//! time to interactive, and leaves a screenshot of each view in target/tmp/report-browser/.

use std::path::Path;

/// What the test drives, where Debian's `chromium` and `chromium-driver` put them.
const PROGRAMS: [&str; 2] = ["/usr/bin/chromium", "/usr/bin/chromedriver"];

/// Install Chromium and ChromeDriver if missing, then run the browser test.
pub fn run() -> Result<(), String> {
    if !PROGRAMS.iter().all(|p| Path::new(p).is_file()) {
        crate::debian::install("browser", &["chromium", "chromium-driver"])?;
        if let Some(missing) = PROGRAMS.iter().find(|p| !Path::new(p).is_file()) {
            return Err(format!(
                "chromium-driver was installed but {missing} is missing"
            ));
        }
    }
    let test = report_test_binary()?;
    eprintln!("xtask: browser: {} --ignored --nocapture", test.display());
    let root = crate::workspace::workspace_root();
    crate::procs::run_to_success(
        std::process::Command::new(&test)
            .args(["--ignored", "--nocapture"])
            // Where cargo test runs a package's tests.
            .current_dir(root.join("crates").join("ors-cli")),
        "the browser test",
    )
}

/// The executable of ors-cli's `report` test as `cargo test --workspace` (the step before this
/// one) built it. Asked with that step's own arguments and `--no-run`, cargo builds nothing:
/// any narrower selection (`--test report`, `-p ors-cli`) resolves features and dev-dependencies
/// its own way and recompiled about seventy crates, two minutes on 2 cores.
fn report_test_binary() -> Result<std::path::PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .args(["test", "--workspace", "--no-run", "--message-format=json"])
        .args(crate::procs::WORKSPACE_FEATURES)
        .current_dir(crate::workspace::workspace_root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if !out.status.success() {
        return Err("`cargo test --workspace --no-run` failed".to_owned());
    }
    report_executable(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| "cargo built no `report` test of ors-cli".to_owned())
}

/// In cargo's JSON messages, the executable of ors-cli's test target `report`.
fn report_executable(messages: &str) -> Option<std::path::PathBuf> {
    messages.lines().find_map(|line| {
        let m: serde_json::Value = serde_json::from_str(line).ok()?;
        let target = m.get("target")?;
        let is_report = m.get("reason")?.as_str()? == "compiler-artifact"
            && target.get("name")?.as_str()? == "report"
            && target.get("kind")?.as_array()?.iter().any(|k| k == "test")
            && m.get("package_id")?.as_str()?.contains("ors-cli");
        is_report.then(|| m.get("executable")?.as_str().map(Into::into))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_test_is_found_among_cargos_messages() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/ors-cli#0.1.0","target":{"name":"report","kind":["bin"]},"executable":"/t/debug/report"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/ors-server#0.1.0","target":{"name":"report","kind":["test"]},"executable":"/t/debug/deps/report-1"}"#,
            "not json",
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/ors-cli#0.1.0","target":{"name":"report","kind":["test"]},"executable":"/t/debug/deps/report-2"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            report_executable(&messages),
            Some("/t/debug/deps/report-2".into())
        );
        assert_eq!(report_executable(r#"{"reason":"build-finished"}"#), None);
    }
}
