//! `ors report` end to end: two real `ors eval` runs (the scripted model over the conformance
//! fixture and gsm8k, three samples per task, right, wrong and errored episodes) rendered as
//! Markdown and as HTML, and the HTML page used in Debian's Chromium (`report/browser.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

#[path = "report/browser.rs"]
mod browser;
#[path = "report/runs.rs"]
mod runs;
#[allow(dead_code)] // shared with the cli tests, which use all of it
#[path = "cli/support.rs"]
mod support;
#[path = "report/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;

use support::{ok, ors, stderr};

/// A scratch directory of this test binary's under target/.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_and_html_reports_of_real_runs() {
    let dir = scratch("report-files");
    let r = runs::make(&dir).await;
    let (a, b) = (runs::tasks(&r.baseline), runs::tasks(&r.candidate));
    let n_tasks = (runs::CONFORMANCE_TASKS + runs::GSM8K_TASKS) as usize;
    assert_eq!((a.len(), b.len()), (n_tasks, n_tasks));
    assert!(a
        .values()
        .all(|t| t.rewards.len() == runs::SAMPLES as usize));

    let md = ok(&ors(
        &[
            "report",
            r.baseline.to_str().unwrap(),
            r.candidate.to_str().unwrap(),
            "--format",
            "markdown",
        ],
        "",
    )
    .await);
    // One row per run: its episodes, tasks × samples and mean over tasks of the task means.
    for (name, tasks) in [("baseline", &a), ("candidate", &b)] {
        let mean = tasks.values().map(runs::Task::mean).sum::<f64>() / tasks.len() as f64;
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name}: {md}"));
        assert!(
            row.contains(&format!("| {} | {n_tasks} × 3 |", n_tasks * 3)),
            "{row}"
        );
        assert!(
            row.contains(&format!("| {mean:.4} (")),
            "{mean:.4} in {row}"
        );
    }
    assert!(md.contains("| conformance, gsm8k | scripted |"), "{md}");
    assert!(md.contains("### candidate vs baseline (baseline)"), "{md}");
    let listed = |title: &str| -> Vec<String> {
        let line = md.lines().find(|l| l.starts_with(title)).unwrap_or("");
        line.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let fixed: Vec<String> = runs::flipped(&b, &a).into_iter().collect();
    let broken: Vec<String> = runs::flipped(&a, &b).into_iter().collect();
    assert_eq!(
        fixed,
        [
            "conformance/train/1",
            "conformance/train/3",
            "conformance/train/5",
            "conformance/train/7"
        ]
    );
    assert_eq!(broken, ["conformance/train/0", "conformance/train/4"]);
    assert_eq!(listed("Fixed ("), fixed, "{md}");
    assert_eq!(listed("Broken ("), broken, "{md}");

    // The page: one file, nothing to fetch.
    let html = dir.join("report.html");
    let o = ors(
        &[
            "report",
            r.baseline.to_str().unwrap(),
            r.candidate.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ],
        "",
    )
    .await;
    ok(&o);
    assert!(
        stderr(&o).contains("2 run(s), 66 episodes"),
        "{}",
        stderr(&o)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    for fetch in ["<link", "<script src", "<img src=\"http", "@import", "url("] {
        assert!(!page.contains(fetch), "the page would fetch: {fetch}");
    }
    assert!(
        page.contains("default-src 'none'"),
        "a CSP forbids any fetch"
    );
    assert_eq!(
        page.matches("type=\"application/gzip\"").count(),
        2,
        "a chunk per run"
    );

    // Bad input is a clear error.
    let o = ors(&["report", r.baseline.to_str().unwrap()], "").await;
    assert!(!o.status.success());
    assert!(stderr(&o).contains("-o report.html"), "{}", stderr(&o));
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "not a trajectory\n").unwrap();
    let o = ors(
        &["report", empty.to_str().unwrap(), "--format", "markdown"],
        "",
    )
    .await;
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("holds no trajectories"),
        "{}",
        stderr(&o)
    );
}
