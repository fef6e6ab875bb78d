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
    // `--workspace` (ors-cli is the one package with a `report` test): the features are
    // unified as in `cargo test --workspace`, so nothing that step built is compiled again
    // (`-p ors-cli` alone would rebuild tokio and all above it with other features).
    crate::procs::cargo(&[
        "test",
        "--workspace",
        "--test",
        "report",
        "--",
        "--ignored",
        "--nocapture",
    ])
}
