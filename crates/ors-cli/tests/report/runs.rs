//! Two real runs to report on: `ors eval` with the scripted model over the conformance fixture
//! (8 tasks) and gsm8k (3 tasks), three samples of each task, written to one file per run.
//!
//! The baseline's model, by the task's number i (the question "What is i+i?"):
//! - i % 4 = 0: calls `image` first (the result holds a PNG), then answers right;
//! - i % 4 = 1: answers wrong;
//! - i % 4 = 2: answers right the first time it sees the question, wrong after (mixed);
//! - i % 4 = 3: the model API refuses the request (HTTP 400): the episode ends in an error.
//!
//! The candidate's model answers wrong when i % 4 = 0 and right otherwise, so against the
//! baseline tasks 1, 3, 5, 7 are fixed, 0 and 4 broken, 2 and 6 neither. Both answer 0 to
//! gsm8k's word problems (wrong). Every expected figure is computed here from the files, not
//! taken from the code under test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ors_examples::scripted_model::{sum_question, Exchange, Reply, RunningModel, ScriptedModel};
use serde_json::{json, Value};

use crate::support::{ors, server, stderr, stdout};

/// Tasks of the conformance fixture in each run.
pub const CONFORMANCE_TASKS: i64 = 8;
/// Tasks of gsm8k in each run.
pub const GSM8K_TASKS: i64 = 3;
/// Samples of each task.
pub const SAMPLES: u32 = 3;

/// The two trajectory files.
pub struct Runs {
    /// The baseline run.
    pub baseline: PathBuf,
    /// The candidate run.
    pub candidate: PathBuf,
}

fn submit(answer: i64) -> Reply {
    Reply::call("submit", json!({ "answer": answer.to_string() }))
}

/// The baseline model.
fn baseline() -> ScriptedModel {
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    ScriptedModel::new(move |x: &Exchange| {
        let Some((a, b)) = sum_question(&x.first_user_text) else {
            return submit(0);
        };
        if !x.tool_results.is_empty() {
            // The image came back: now the answer.
            return submit(a + b);
        }
        let times = {
            let mut seen = seen.lock().unwrap();
            let n = seen.entry(x.first_user_text.clone()).or_default();
            *n += 1;
            *n
        };
        match a % 4 {
            0 => Reply::call("image", json!({})),
            1 => submit(a + b + 1),
            2 if times == 1 => submit(a + b),
            2 => submit(a + b + 1),
            _ => Reply::Error {
                status: 400,
                message: format!("this model refuses task {a}"),
                retry_after: None,
            },
        }
    })
}

/// The candidate model.
fn candidate() -> ScriptedModel {
    ScriptedModel::new(|x: &Exchange| match sum_question(&x.first_user_text) {
        Some((a, b)) if a % 4 == 0 => submit(a + b + 1),
        Some((a, b)) => submit(a + b),
        None => submit(0),
    })
}

async fn bound(model: ScriptedModel) -> RunningModel {
    model.bind("127.0.0.1:0").await.expect("the model binds")
}

/// Run both evaluations into `dir` (files made anew).
pub async fn make(dir: &Path) -> Runs {
    std::fs::create_dir_all(dir).unwrap();
    let srv = server().await;
    let url = srv.url();
    let runs = Runs {
        baseline: dir.join("baseline.jsonl"),
        candidate: dir.join("candidate.jsonl"),
    };
    for (model, path) in [
        (bound(baseline()).await, &runs.baseline),
        (bound(candidate()).await, &runs.candidate),
    ] {
        let _ = std::fs::remove_file(path);
        for (env, split, n) in [
            ("conformance", "train", CONFORMANCE_TASKS),
            ("gsm8k", "test", GSM8K_TASKS),
        ] {
            let o = ors(
                &[
                    "--url",
                    &url,
                    "eval",
                    env,
                    "--split",
                    split,
                    "--model",
                    "scripted",
                    "--base-url",
                    &model.openai_base(),
                    "--limit",
                    &n.to_string(),
                    "--samples",
                    &SAMPLES.to_string(),
                    "--out",
                    path.to_str().unwrap(),
                ],
                "",
            )
            .await;
            // Errored episodes make the run fail; the trajectories are all there.
            assert!(
                stdout(&o).contains(&format!("episodes      {}", n * i64::from(SAMPLES))),
                "{}{}",
                stdout(&o),
                stderr(&o)
            );
        }
        assert_eq!(model.rejections(), Vec::<String>::new());
    }
    srv.shutdown().await;
    runs
}

/// A task as the report names it: `env/split/index`.
pub type Key = String;

/// What the trajectories of one task add up to.
#[derive(Debug, Default, Clone)]
pub struct Task {
    pub rewards: Vec<f64>,
    pub successes: usize,
    pub errors: usize,
    pub stops: BTreeSet<String>,
}

impl Task {
    pub fn mean(&self) -> f64 {
        self.rewards.iter().sum::<f64>() / self.rewards.len() as f64
    }
}

/// The trajectories of `path`, task by task.
pub fn tasks(path: &Path) -> BTreeMap<Key, Task> {
    let mut tasks: BTreeMap<Key, Task> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let t: Value = serde_json::from_str(line).unwrap();
        let key = format!(
            "{}/{}/{}",
            t["env"].as_str().unwrap(),
            t["split"].as_str().unwrap(),
            t["index"]
        );
        let e = tasks.entry(key).or_default();
        let reward = t["total_reward"].as_f64().unwrap();
        e.rewards.push(reward);
        let errored = !t["error"].is_null();
        e.errors += usize::from(errored);
        e.successes += usize::from(t["finished"] == true && !errored && reward > 0.0);
        e.stops
            .insert(t["stop_reason"].as_str().unwrap().to_owned());
    }
    tasks
}

/// Tasks that succeeded in every sample of `a` and in none of `b`.
pub fn flipped(a: &BTreeMap<Key, Task>, b: &BTreeMap<Key, Task>) -> BTreeSet<Key> {
    a.iter()
        .filter(|(k, t)| {
            t.successes == t.rewards.len() && b.get(*k).is_some_and(|u| u.successes == 0)
        })
        .map(|(k, _)| k.clone())
        .collect()
}
