//! The HTML report in Debian's Chromium, driven over WebDriver as a user clicks through it:
//! the task table's rows and means, filters, the trajectory viewer (tool calls, rewards,
//! images, errors), the comparison's flipped tasks, no JavaScript error and no fetch; then a
//! 10,000-episode report, timed from navigation to interactive. Screenshots of each view go to
//! `target/tmp/report-browser/` (not committed).
//!
//! Needs `chromium` and `chromedriver` (Debian's `chromium` and `chromium-driver`), which
//! `cargo xtask test` installs when missing before running this test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};

use crate::runs::{self, Key};
use crate::support::{ok, ors};
use crate::webdriver::{Driver, Session};

/// Episodes of the large report.
const LARGE: usize = 10_000;

/// `name` on the PATH or in /usr/bin.
fn program(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "{name} is not installed: `cargo xtask test` installs Debian's chromium and \
             chromium-driver (or apt-get install chromium chromium-driver)"
        )
    })
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.canonicalize().unwrap().display())
}

async fn report(out: &Path, runs: &[&Path]) {
    let mut args = vec!["report".to_owned()];
    args.extend(runs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".to_owned(), out.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&ors(&refs, "").await);
}

/// The page logged no error and fetched nothing.
async fn clean(s: &Session<'_>, page: &str) {
    let errors: Vec<(String, String)> = s
        .console()
        .await
        .unwrap()
        .into_iter()
        .filter(|(level, _)| level == "SEVERE" || level == "WARNING")
        .collect();
    assert_eq!(
        errors,
        Vec::<(String, String)>::new(),
        "{page} logged errors"
    );
    let fetched = s
        .eval(
            "return performance.getEntriesByType('resource').map(e => e.name)
                 .filter(n => !n.startsWith('data:'));",
            json!([]),
        )
        .await
        .unwrap();
    assert_eq!(fetched, json!([]), "{page} fetched something");
}

async fn shot(s: &Session<'_>, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, s.screenshot().await.unwrap()).unwrap();
    path
}

/// The `data-task` keys of the task table's rows, in order.
async fn rows(s: &Session<'_>) -> Vec<Key> {
    let v = s
        .eval(
            "return [...document.querySelectorAll('#tasks tbody tr')].map(r => r.dataset.task);",
            json!([]),
        )
        .await
        .unwrap();
    serde_json::from_value(v).unwrap()
}

async fn choose(s: &Session<'_>, select: &str, value: &str) {
    let opt = s
        .find(&format!("#{select} option[value=\"{value}\"]"))
        .await
        .unwrap();
    s.click(&opt).await.unwrap();
}

async fn click(s: &Session<'_>, selector: &str) {
    let e = s.find(selector).await.unwrap();
    s.click(&e).await.unwrap();
}

/// Open the task `key` from the table and wait for its first episode.
async fn open(s: &Session<'_>, key: &str) {
    click(s, "#tabs [data-view=tasks]").await;
    click(s, &format!("#tasks tbody tr[data-task=\"{key}\"] td.label")).await;
    s.wait_for(&format!(
        "document.getElementById('viewer').dataset.task === '{key}' && \
         document.getElementById('viewer').dataset.ready"
    ))
    .await
    .unwrap();
}

async fn texts(s: &Session<'_>, selector: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in s.find_all(selector).await.unwrap() {
        out.push(s.text(&e).await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and ChromeDriver; `cargo xtask test` installs them and runs this \
            (by hand: cargo test -p ors-cli --test report -- --ignored)"]
async fn the_report_works_in_chromium() {
    let (chromium, chromedriver) = (program("chromium"), program("chromedriver"));
    let dir = crate::scratch("report-browser");
    let r = runs::make(&dir).await;
    let (a, b) = (runs::tasks(&r.baseline), runs::tasks(&r.candidate));
    let page = dir.join("report.html");
    report(&page, &[&r.baseline, &r.candidate]).await;

    let driver = Driver::start(&chromedriver).unwrap();
    let profile = dir.join("profile");
    let _ = std::fs::remove_dir_all(&profile);
    let s = driver.session(&chromium, &profile).await.unwrap();
    s.goto(&file_url(&page)).await.unwrap();
    s.wait_for("document.body.dataset.ready === 'true'")
        .await
        .unwrap();
    let mut shots = vec![shot(&s, &dir, "1-summary").await];
    let metrics = texts(&s, "#metrics tbody tr").await;
    assert!(
        metrics
            .iter()
            .any(|m| m.starts_with("tasks × samples 11 × 3 11 × 3")),
        "{metrics:?}"
    );
    assert!(
        metrics.iter().any(|m| m.starts_with("pass@3")),
        "{metrics:?}"
    );

    // The table: a row per task of the baseline, each with its mean over its samples.
    click(&s, "#tabs [data-view=tasks]").await;
    let keys: Vec<Key> = a.keys().cloned().collect();
    let mut shown = rows(&s).await;
    shown.sort();
    assert_eq!(shown, keys);
    for (key, t) in &a {
        let cell = s
            .find(&format!("#tasks tbody tr[data-task=\"{key}\"] td.mean"))
            .await
            .unwrap();
        assert_eq!(
            s.text(&cell).await.unwrap(),
            format!("{:.4}", t.mean()),
            "{key}"
        );
    }
    shots.push(shot(&s, &dir, "2-tasks").await);

    // Filters.
    let failed: BTreeSet<Key> = a
        .iter()
        .filter(|(_, t)| t.successes == 0)
        .map(|(k, _)| k.clone())
        .collect();
    let errored: BTreeSet<Key> = a
        .iter()
        .filter(|(_, t)| t.errors > 0)
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(errored.len(), 2, "tasks 3 and 7 end in errors");
    choose(&s, "filter", "failed").await;
    assert_eq!(rows(&s).await.into_iter().collect::<BTreeSet<_>>(), failed);
    choose(&s, "filter", "errored").await;
    assert_eq!(rows(&s).await.into_iter().collect::<BTreeSet<_>>(), errored);
    shots.push(shot(&s, &dir, "3-tasks-errored").await);
    choose(&s, "filter", "all").await;
    choose(&s, "stop", "error").await;
    assert_eq!(rows(&s).await.into_iter().collect::<BTreeSet<_>>(), errored);
    choose(&s, "stop", "").await;
    let search = s.find("#search").await.unwrap();
    s.type_into(&search, "What is 6+6").await.unwrap();
    assert_eq!(rows(&s).await, ["conformance/train/6"]);
    s.eval(
        "const q = document.getElementById('search'); q.value = '';
         q.dispatchEvent(new Event('input'));",
        json!([]),
    )
    .await
    .unwrap();
    assert_eq!(rows(&s).await.len(), keys.len());

    // Sorting by mean reward puts the best first.
    click(&s, "#tasks th[data-col=\"mean reward\"]").await;
    let best = rows(&s).await;
    let means: Vec<f64> = best.iter().map(|k| a[k].mean()).collect();
    assert!(means.windows(2).all(|w| w[0] >= w[1]), "{means:?}");

    // The viewer: task 0 called `image` (a PNG, shown) and then `submit`, rewarded 1.
    open(&s, "conformance/train/0").await;
    let tabs = texts(&s, "#viewer .tabs button").await;
    assert_eq!(tabs.len(), 6, "three samples in each run: {tabs:?}");
    assert!(
        tabs[0].starts_with("baseline · sample 0 ✓ 1.00"),
        "{tabs:?}"
    );
    let image = s
        .eval(
            "const img = document.querySelector('#episode .msg.tool[data-tool=image] img');
             return img && img.complete ? [img.naturalWidth, img.naturalHeight] : null;",
            json!([]),
        )
        .await
        .unwrap();
    assert_eq!(image, json!([2, 2]), "the fixture's 2×2 PNG is decoded");
    let submit = texts(&s, "#episode .msg.tool[data-tool=submit] .reward").await;
    assert_eq!(submit.len(), 1);
    assert!(submit[0].starts_with("reward 1 · finished"), "{submit:?}");
    let prompt = texts(&s, "#episode .msg.user").await;
    assert!(prompt[0].contains("What is 0+0?"), "{prompt:?}");
    let calls = texts(&s, "#episode .msg.assistant .call").await;
    assert_eq!(calls, ["→ image({})", "→ submit({\"answer\":\"0\"})"]);
    shots.push(shot(&s, &dir, "4-viewer").await);

    // A wrong answer is rewarded 0; another sample opens from its tab.
    open(&s, "conformance/train/1").await;
    click(
        &s,
        "#viewer .tabs button[data-run=\"0\"][data-sample=\"2\"]",
    )
    .await;
    s.wait_for("document.getElementById('viewer').dataset.ready")
        .await
        .unwrap();
    let h = texts(&s, "#episode h3").await;
    assert!(h[0].contains("task 1 · sample 2 · baseline"), "{h:?}");
    let submit = texts(&s, "#episode .msg.tool[data-tool=submit] .reward").await;
    assert!(submit[0].starts_with("reward 0 · finished"), "{submit:?}");

    // An errored episode shows its error.
    open(&s, "conformance/train/3").await;
    let error = texts(&s, "#episode-error").await;
    assert!(error[0].contains("this model refuses task 3"), "{error:?}");
    assert!(error[0].starts_with("error · model"), "{error:?}");
    shots.push(shot(&s, &dir, "5-viewer-error").await);

    // The comparison lists the flipped tasks.
    click(&s, "#tabs [data-view=compare]").await;
    let listed = |class: &'static str| {
        let s = &s;
        async move {
            let v = s
                .eval(
                    &format!(
                        "return [...document.querySelectorAll('.flips.{class} button')]
                             .map(b => b.dataset.task);"
                    ),
                    json!([]),
                )
                .await
                .unwrap();
            serde_json::from_value::<BTreeSet<Key>>(v).unwrap()
        }
    };
    assert_eq!(listed("fixed").await, runs::flipped(&b, &a));
    assert_eq!(listed("broken").await, runs::flipped(&a, &b));
    shots.push(shot(&s, &dir, "6-comparison").await);
    // A flipped task opens with both runs' samples, the run it was fixed in first.
    click(&s, ".flips.fixed button[data-task=\"conformance/train/1\"]").await;
    s.wait_for("document.getElementById('viewer').dataset.ready")
        .await
        .unwrap();
    let tabs = texts(&s, "#viewer .tabs button").await;
    let selected = texts(&s, "#viewer .tabs button[aria-selected=true]").await;
    assert!(
        selected[0].starts_with("candidate · sample 0 ✓"),
        "the run it was fixed in: {selected:?}"
    );
    assert!(
        tabs.iter()
            .filter(|t| t.starts_with("candidate"))
            .all(|t| t.contains('✓')),
        "{tabs:?}"
    );
    assert!(
        tabs.iter()
            .filter(|t| t.starts_with("baseline"))
            .all(|t| t.contains('✗')),
        "{tabs:?}"
    );
    click(&s, "#viewer button.back").await;
    let back = s
        .eval(
            "return document.getElementById('view-compare').hidden;",
            json!([]),
        )
        .await
        .unwrap();
    assert_eq!(back, json!(false), "back to the comparison");
    clean(&s, "the report").await;

    // The docs' picture: the one-run page, made as a user would, next to the file.
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_ors"))
        .current_dir(&dir)
        .args(["report", "baseline.jsonl", "-o", "single.html"])
        .status()
        .unwrap();
    assert!(made.success());
    let single = dir.join("single.html");
    s.goto(&file_url(&single)).await.unwrap();
    s.wait_for("document.body.dataset.ready === 'true'")
        .await
        .unwrap();
    shots.push(shot(&s, &dir, "7-docs-summary").await);
    clean(&s, "the one-run report").await;

    // 10,000 episodes: from navigation to the first table page drawn and its rows clickable.
    let large = dir.join("large.jsonl");
    let size = write_large(&r.baseline, &large);
    let large_page = dir.join("large.html");
    report(&large_page, &[&large]).await;
    let bytes = std::fs::metadata(&large_page).unwrap().len();
    let started = Instant::now();
    s.goto(&file_url(&large_page)).await.unwrap();
    s.wait_for("document.body.dataset.ready === 'true'")
        .await
        .unwrap();
    let outside_ms = started.elapsed().as_secs_f64() * 1e3;
    let ready_ms = s
        .eval(
            "return performance.getEntriesByName('ors-ready')[0].startTime;",
            json!([]),
        )
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    click(&s, "#tabs [data-view=tasks]").await;
    let page_text = texts(&s, "#page").await;
    assert_eq!(page_text, ["1–100 of 5,000"], "{} tasks", size.0);
    let first = rows(&s).await[0].clone();
    let clicked = Instant::now();
    open(&s, &first).await;
    let open_ms = clicked.elapsed().as_secs_f64() * 1e3;
    shots.push(shot(&s, &dir, "8-large-viewer").await);
    clean(&s, "the 10,000-episode report").await;
    s.close().await.unwrap();

    let timings = format!(
        "{LARGE} episodes ({} tasks × {} samples): report {bytes} bytes ({:.1} MB); \
         interactive {ready_ms:.0} ms after navigation start (page's own mark), \
         {outside_ms:.0} ms as WebDriver saw it; a trajectory opened {open_ms:.0} ms after \
         its row was clicked",
        size.0,
        size.1,
        bytes as f64 / 1e6
    );
    std::fs::write(dir.join("timings.txt"), format!("{timings}\n")).unwrap();
    println!("report-browser: {timings}");
    for p in &shots {
        println!("report-browser: screenshot {}", p.display());
    }
}

/// A run of [`LARGE`] episodes made from the real baseline's trajectories (their shapes, sizes
/// and outcomes), renumbered over 5,000 tasks × 2 samples; returns (tasks, samples).
fn write_large(from: &Path, to: &Path) -> (usize, usize) {
    let real: Vec<Value> = std::fs::read_to_string(from)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let samples = 2;
    let tasks = LARGE / samples;
    let mut out = String::new();
    for i in 0..LARGE {
        let mut t = real[i % real.len()].clone();
        t["env"] = json!("large");
        t["split"] = json!(if (i / samples) % 10 == 0 {
            "test"
        } else {
            "train"
        });
        t["index"] = json!(i / samples);
        t["sample"] = json!(i % samples);
        out.push_str(&t.to_string());
        out.push('\n');
    }
    std::fs::write(to, out).unwrap();
    (tasks, samples)
}
