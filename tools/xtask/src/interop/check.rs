//! `ors check` against environments written with the Python reference SDK: the conformance
//! fixture (`tools/interop/python/conformance_env.py`), where only its deliberately bad tools may be
//! problems, and `tools/interop/python/broken_env.py`, where every planted mistake must be found,
//! named, and nothing else reported.

use std::collections::BTreeSet;
use std::path::Path;

use super::rust_client::{Ors, Run};
use super::servers::python_server;
use crate::python::Peer;

/// Problems the reference fixture may show, with why they are right: its tools are meant to
/// misbehave (or are unbounded, as the contract asks).
const FIXTURE_MAY: [(&str, &str); 5] = [
    ("tool.panic.no-crash", "panic raises, by design"),
    (
        "tool.fail.error-messages",
        "fail answers ok: false with the message it is given, even \"\"",
    ),
    (
        "tool.big.no-crash",
        "big has no bound in the reference fixture: a huge count raises",
    ),
    (
        "tool.sleep.in-time",
        "sleep has no bound: a huge ms never returns",
    ),
    (
        "tool.sleep.no-crash",
        "asyncio.sleep may raise OverflowError for a huge ms",
    ),
];

/// Problems the fixture must show (the deliberately bad tools are named).
const FIXTURE_MUST: [&str; 2] = ["tool.panic.no-crash", "tool.fail.error-messages"];

/// Every mistake planted in `broken_env.py`'s `broken` environment, by check id.
const BROKEN: [&str; 10] = [
    "split.test.task",
    "split.test.task-range",
    "split.train.num-tasks",
    "tool.legacy.wire-form",
    "tool.lookup.no-crash",
    "tool.pick.rejects-invalid",
    "tool.rate.input-schema",
    "tool.score.finite-reward",
    "tool.undocumented.description",
    "tool.wait.in-time",
];

/// The step: build `ors`, then check the fixture and the broken environments.
pub fn ors_check_against_reference() -> Result<(), String> {
    let exe = crate::procs::ors_binary()?;
    let fixture = {
        let server = python_server(Peer::OrsSdk, "conformance_env.py", "reference-check")?;
        check_fixture(&exe, &server.url)
    };
    let broken = {
        let server = python_server(Peer::OrsSdk, "broken_env.py", "reference-broken")?;
        check_broken(&exe, &server.url)
    };
    let errors: Vec<String> = [fixture, broken]
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// `ors check ENV` with a fixed seed and a short call limit (the unbounded tools hang).
fn run_check(exe: &Path, url: &str, env: &str) -> Result<Run, String> {
    let ors = Ors { exe, url };
    let run = ors.run(&["check", env, "--timeout", "5", "--seed", "1"], None)?;
    println!("ors check {env} against the reference:");
    for line in run.stdout.lines() {
        println!("  {line}");
    }
    Ok(run)
}

/// The ids of the problem lines, after checking the output's shape: exit 1, only `ok` and
/// `problem` lines, and `N passed, M failed` last with the right counts.
pub(super) fn problems(run: &Run) -> Result<BTreeSet<String>, String> {
    if run.code != Some(1) || !run.stderr.trim().is_empty() {
        return Err(format!(
            "want exit 1 and no stderr, got exit {:?}, stderr {:?}",
            run.code, run.stderr
        ));
    }
    let lines: Vec<&str> = run.stdout.lines().collect();
    let Some((last, checks)) = lines.split_last() else {
        return Err("no output".to_owned());
    };
    let mut found = BTreeSet::new();
    for line in checks {
        if let Some(rest) = line.strip_prefix("problem ") {
            let id = rest.split(": ").next().unwrap_or(rest);
            found.insert(id.to_owned());
        } else if !line.starts_with("ok ") {
            return Err(format!("a line is neither ok nor problem: {line:?}"));
        }
    }
    let want = format!(
        "{} passed, {} failed",
        checks.len() - found.len(),
        found.len()
    );
    if *last != want {
        return Err(format!("last line {last:?}, want {want:?}"));
    }
    Ok(found)
}

fn check_fixture(exe: &Path, url: &str) -> Result<(), String> {
    let found = problems(&run_check(exe, url, "conformance")?)?;
    let unexpected: Vec<&String> = found
        .iter()
        .filter(|id| !FIXTURE_MAY.iter().any(|(may, _)| may == id))
        .collect();
    let missing: Vec<&str> = FIXTURE_MUST
        .into_iter()
        .filter(|id| !found.contains(*id))
        .collect();
    if unexpected.is_empty() && missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "ors check on the reference fixture: unexpected problems {unexpected:?}, missing \
             {missing:?}"
        ))
    }
}

fn check_broken(exe: &Path, url: &str) -> Result<(), String> {
    let found = problems(&run_check(exe, url, "broken")?)?;
    let want: BTreeSet<String> = BROKEN.iter().map(|s| (*s).to_owned()).collect();
    if found != want {
        return Err(format!(
            "ors check on broken_env.py: found {found:?}, want exactly {want:?}"
        ));
    }
    let run = run_check(exe, url, "badsplits")?;
    let found = problems(&run)?;
    let named = run
        .stdout
        .lines()
        .any(|l| l.starts_with("problem discovery.splits: ") && l.contains("`dev`"));
    if found.contains("discovery.splits") && named {
        Ok(())
    } else {
        Err(format!(
            "ors check on badsplits does not name the split type `dev`: {:?}",
            run.stdout
        ))
    }
}
