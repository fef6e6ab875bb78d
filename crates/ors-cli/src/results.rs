//! What a run's episodes add up to, task by task (the summary of `ors eval` and of
//! `ors report`), and how two runs compare on the tasks they share.
//!
//! Tasks are the unit: each weighs the same whatever its number of samples, intervals
//! resample tasks (samples of one task are not independent draws), and a run's mean reward
//! is the mean over tasks of each task's mean over its samples (mean@K).

use std::collections::BTreeMap;

use ors_client::Episode;
use serde::Serialize;

use crate::stats::{self, Difference, Interval};

/// A task: the environment, its split and its index there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TaskKey {
    /// The environment.
    pub env: String,
    /// The split.
    pub split: String,
    /// The index in the split.
    pub index: i64,
}

impl std::fmt::Display for TaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.env, self.split, self.index)
    }
}

/// One episode as the statistics see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// Its task.
    pub task: TaskKey,
    /// Its total reward.
    pub reward: f64,
    /// Whether it [succeeded](Episode::success).
    pub success: bool,
    /// Whether it ended in an error.
    pub error: bool,
}

impl Scored {
    /// What the statistics need of `episode`.
    pub fn of(episode: &Episode) -> Self {
        Self {
            task: TaskKey {
                env: episode.env.clone(),
                split: episode.split.clone(),
                index: episode.index,
            },
            reward: episode.total_reward,
            success: episode.success(),
            error: episode.error.is_some(),
        }
    }
}

/// How a task did over its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every sample succeeded.
    Passed,
    /// No sample succeeded.
    Failed,
    /// Some did.
    Mixed,
}

/// One task's samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskStats {
    /// The task.
    #[serde(flatten)]
    pub task: TaskKey,
    /// Episodes of it.
    pub samples: usize,
    /// The mean total reward over them.
    pub mean: f64,
    /// Their rewards' sample standard deviation (0 for one sample).
    pub std: f64,
    /// How many succeeded.
    pub successes: usize,
    /// How many ended in an error.
    pub errors: usize,
}

impl TaskStats {
    /// The fraction of its samples that succeeded.
    pub fn rate(&self) -> f64 {
        self.successes as f64 / self.samples.max(1) as f64
    }

    /// Passed (every sample succeeded), failed (none did) or mixed.
    pub fn verdict(&self) -> Verdict {
        match self.successes {
            0 => Verdict::Failed,
            s if s == self.samples => Verdict::Passed,
            _ => Verdict::Mixed,
        }
    }
}

/// A figure and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The figure.
    pub value: f64,
    /// Its interval (`None` without tasks).
    pub interval: Option<Interval>,
}

impl Estimate {
    /// `0.6667 (95% CI 0.5200 to 0.8000)` with `label` `95% CI `, or as percentages.
    pub fn show(&self, as_percent: bool, label: &str) -> String {
        let f = |x| number(x, as_percent, false);
        with_interval(self.value, self.interval, label, f)
    }
}

/// `value (lo to hi)`, `label` before `lo`, each number shown by `f`.
pub fn with_interval(
    value: f64,
    interval: Option<Interval>,
    label: &str,
    f: impl Fn(f64) -> String,
) -> String {
    match interval {
        Some(i) => format!("{} ({label}{} to {})", f(value), f(i.lo), f(i.hi)),
        None => f(value),
    }
}

/// `0.6667`, `66.7%`, or with a sign: `+0.1000`, `−3.3 pp`.
pub fn number(x: f64, as_percent: bool, signed: bool) -> String {
    let sign = match (signed, x >= 0.0) {
        (false, _) => "",
        (true, true) => "+",
        (true, false) => "−",
    };
    let x = if signed { x.abs() } else { x };
    match (as_percent, signed) {
        (true, true) => format!("{sign}{:.1} pp", 100.0 * x),
        (true, false) => percent(x),
        (false, _) => format!("{sign}{x:.4}"),
    }
}

/// `66.7%`.
pub fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// pass@k over the tasks with at least `k` samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PassAt {
    /// k.
    pub k: u64,
    /// The mean over those tasks of the unbiased estimate.
    pub value: f64,
    /// How many tasks it is over.
    pub tasks: usize,
}

/// One split's share of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitStats {
    /// Its episodes.
    pub episodes: usize,
    /// Its tasks.
    pub tasks: usize,
    /// Their mean reward (mean over tasks).
    pub mean_reward: f64,
    /// Their success rate (mean over tasks).
    pub success_rate: f64,
}

/// A run's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStats {
    /// Episodes counted.
    pub episodes: usize,
    /// The samples every task has (K; the fewest any task has).
    pub samples: usize,
    /// The most samples a task has.
    pub max_samples: usize,
    /// The mean over tasks of each task's mean reward (mean@K), with a bootstrap interval
    /// over tasks.
    pub mean_reward: Estimate,
    /// The mean over tasks of each task's success rate, with a Wilson interval over tasks.
    /// With one sample per task that is the binomial case Wilson is made for; with several,
    /// a task's rate lies in 0..=1, so its variance is at most p(1 − p) and the interval is
    /// conservative.
    pub success_rate: Estimate,
    /// pass@1, and pass@K when tasks have K > 1 samples.
    pub pass_at: Vec<PassAt>,
    /// The mean over tasks of the standard deviation of a task's rewards: how much sampling
    /// alone moves a task's score (0 with one sample per task).
    pub task_std: f64,
    /// Each split's figures, by its name (`env/split` when the run has several environments).
    pub splits: BTreeMap<String, SplitStats>,
    /// Each task's figures, by task.
    pub tasks: Vec<TaskStats>,
}

impl RunStats {
    /// The figures of `episodes` (one entry per episode).
    pub fn of(episodes: impl IntoIterator<Item = Scored>) -> Self {
        let mut by_task: BTreeMap<TaskKey, Vec<Scored>> = BTreeMap::new();
        for e in episodes {
            by_task.entry(e.task.clone()).or_default().push(e);
        }
        let mut tasks = Vec::new();
        for (task, eps) in by_task {
            let rewards: Vec<f64> = eps.iter().map(|e| e.reward).collect();
            tasks.push(TaskStats {
                task,
                samples: eps.len(),
                mean: stats::mean(&rewards),
                std: stats::std_dev(&rewards),
                successes: eps.iter().filter(|e| e.success).count(),
                errors: eps.iter().filter(|e| e.error).count(),
            });
        }
        let samples = tasks.iter().map(|t| t.samples).min().unwrap_or(0);
        let max_samples = tasks.iter().map(|t| t.samples).max().unwrap_or(0);
        let means: Vec<f64> = tasks.iter().map(|t| t.mean).collect();
        let rates: Vec<f64> = tasks.iter().map(TaskStats::rate).collect();
        let rate = stats::mean(&rates);
        let mut pass_at = Vec::new();
        // pass@1, and pass@K when tasks have K > 1 samples.
        let ks = [Some(1), (samples > 1).then_some(samples as u64)];
        for k in ks.into_iter().flatten() {
            let pass = |t: &TaskStats| stats::pass_at_k(t.samples as u64, t.successes as u64, k);
            let per_task: Vec<f64> = tasks.iter().filter_map(pass).collect();
            pass_at.push(PassAt {
                k,
                value: stats::mean(&per_task),
                tasks: per_task.len(),
            });
        }
        let stds: Vec<f64> = tasks.iter().map(|t| t.std).collect();
        Self {
            episodes: tasks.iter().map(|t| t.samples).sum(),
            samples,
            max_samples,
            mean_reward: Estimate {
                value: stats::mean(&means),
                interval: stats::bootstrap_mean(&means, stats::RESAMPLES, stats::SEED),
            },
            success_rate: Estimate {
                value: rate,
                interval: (!tasks.is_empty())
                    .then(|| stats::wilson(rate, tasks.len() as f64, stats::Z95)),
            },
            pass_at,
            task_std: stats::mean(&stds),
            splits: splits(&tasks),
            tasks,
        }
    }

    /// `3`, or `2–3` when tasks have different numbers of samples.
    pub fn samples_shown(&self) -> String {
        if self.samples == self.max_samples {
            self.samples.to_string()
        } else {
            format!("{}–{}", self.samples, self.max_samples)
        }
    }
}

fn splits(tasks: &[TaskStats]) -> BTreeMap<String, SplitStats> {
    // Two environments' `test` splits are not one split.
    let one_env = tasks.windows(2).all(|w| w[0].task.env == w[1].task.env);
    let mut by: BTreeMap<String, Vec<&TaskStats>> = BTreeMap::new();
    for t in tasks {
        let name = if one_env {
            t.task.split.clone()
        } else {
            format!("{}/{}", t.task.env, t.task.split)
        };
        by.entry(name).or_default().push(t);
    }
    by.into_iter()
        .map(|(split, ts)| {
            let means: Vec<f64> = ts.iter().map(|t| t.mean).collect();
            let rates: Vec<f64> = ts.iter().map(|t| t.rate()).collect();
            let stats = SplitStats {
                episodes: ts.iter().map(|t| t.samples).sum(),
                tasks: ts.len(),
                mean_reward: stats::mean(&means),
                success_rate: stats::mean(&rates),
            };
            (split, stats)
        })
        .collect()
}

/// Run `b` against run `a` on the tasks both have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Tasks both runs have.
    pub shared: usize,
    /// The mean per-task difference of mean reward, `b − a`, with a paired bootstrap interval.
    pub reward: Difference,
    /// The same for the success rate.
    pub success: Difference,
    /// Shared tasks whose mean reward is higher in `b`.
    pub better: usize,
    /// Shared tasks whose mean reward is lower in `b`.
    pub worse: usize,
    /// Tasks that failed in every sample of `a` and passed in every sample of `b`.
    #[serde(serialize_with = "names")]
    pub fixed: Vec<TaskKey>,
    /// Tasks that passed in every sample of `a` and failed in every sample of `b`.
    #[serde(serialize_with = "names")]
    pub broken: Vec<TaskKey>,
}

/// Tasks as their names, `env/split/index`: the report lists them as such.
fn names<S: serde::Serializer>(tasks: &[TaskKey], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(tasks.iter().map(TaskKey::to_string))
}

/// Compare `b` with `a` (the baseline).
pub fn compare(a: &RunStats, b: &RunStats) -> Comparison {
    let of_a: BTreeMap<&TaskKey, &TaskStats> = a.tasks.iter().map(|t| (&t.task, t)).collect();
    let shared: Vec<(&TaskStats, &TaskStats)> = b
        .tasks
        .iter()
        .filter_map(|tb| of_a.get(&tb.task).map(|ta| (*ta, tb)))
        .collect();
    let rewards: Vec<(f64, f64)> = shared.iter().map(|(x, y)| (x.mean, y.mean)).collect();
    let rates: Vec<(f64, f64)> = shared.iter().map(|(x, y)| (x.rate(), y.rate())).collect();
    // Differences below this are rounding, not a change.
    const EPS: f64 = 1e-9;
    let flipped = |from: Verdict, to: Verdict| -> Vec<TaskKey> {
        shared
            .iter()
            .filter(|(x, y)| x.verdict() == from && y.verdict() == to)
            .map(|(_, y)| y.task.clone())
            .collect()
    };
    Comparison {
        shared: shared.len(),
        reward: stats::paired_difference(&rewards, stats::RESAMPLES, stats::SEED),
        success: stats::paired_difference(&rates, stats::RESAMPLES, stats::SEED),
        better: rewards.iter().filter(|(x, y)| y - x > EPS).count(),
        worse: rewards.iter().filter(|(x, y)| x - y > EPS).count(),
        fixed: flipped(Verdict::Failed, Verdict::Passed),
        broken: flipped(Verdict::Passed, Verdict::Failed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(index: i64, reward: f64, success: bool) -> Scored {
        Scored {
            task: TaskKey {
                env: "e".into(),
                split: if index < 10 { "train" } else { "test" }.into(),
                index,
            },
            reward,
            success,
            error: false,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn tasks_weigh_the_same_and_pass_at_k_uses_every_sample() {
        // Task 0: 1, 1, 0 (two of three passed); task 1: 0, 0, 0; task 2: 1, 1, 1.
        let mut eps = vec![ep(0, 1.0, true), ep(0, 1.0, true), ep(0, 0.0, false)];
        eps.extend((0..3).map(|_| ep(1, 0.0, false)));
        eps.extend((0..3).map(|_| ep(2, 1.0, true)));
        let s = RunStats::of(eps);
        assert_eq!((s.episodes, s.samples, s.max_samples), (9, 3, 3));
        assert_eq!(s.tasks.len(), 3);
        // Means 2/3, 0, 1: mean@3 is 5/9.
        assert!(close(s.mean_reward.value, 5.0 / 9.0));
        assert!(close(s.tasks[0].mean, 2.0 / 3.0));
        // Task 0's rewards 1, 1, 0: std √(1/3); the others 0.
        assert!(close(s.tasks[0].std, (1.0f64 / 3.0).sqrt()));
        assert!(close(s.task_std, (1.0f64 / 3.0).sqrt() / 3.0));
        // pass@1 = mean of c/n = (2/3 + 0 + 1) / 3; pass@3 = (1 + 0 + 1) / 3.
        assert_eq!(s.pass_at.len(), 2);
        assert_eq!((s.pass_at[0].k, s.pass_at[0].tasks), (1, 3));
        assert!(close(s.pass_at[0].value, 5.0 / 9.0));
        assert_eq!(s.pass_at[1].k, 3);
        assert!(close(s.pass_at[1].value, 2.0 / 3.0));
        // Success over tasks 5/9 with a Wilson interval for 3 tasks.
        assert!(close(s.success_rate.value, 5.0 / 9.0));
        let w = stats::wilson(s.success_rate.value, 3.0, stats::Z95);
        assert_eq!(s.success_rate.interval, Some(w));
        let ci = s.mean_reward.interval.unwrap();
        assert!(ci.lo <= 5.0 / 9.0 && 5.0 / 9.0 <= ci.hi && ci.lo >= 0.0 && ci.hi <= 1.0);
        let v: Vec<Verdict> = s.tasks.iter().map(TaskStats::verdict).collect();
        assert_eq!(v, [Verdict::Mixed, Verdict::Failed, Verdict::Passed]);
    }

    #[test]
    fn one_sample_per_task_reports_pass_at_1_only_and_splits_apart() {
        let s = RunStats::of(vec![
            ep(0, 1.0, true),
            ep(1, 0.5, false),
            ep(10, 0.0, false),
        ]);
        assert_eq!(s.samples, 1);
        assert_eq!(s.pass_at.len(), 1);
        assert!(close(s.pass_at[0].value, 1.0 / 3.0));
        assert!(close(s.mean_reward.value, 0.5));
        assert_eq!(s.task_std, 0.0);
        let train = &s.splits["train"];
        assert_eq!((train.episodes, train.tasks), (2, 2));
        assert!(close(train.mean_reward, 0.75) && close(train.success_rate, 0.5));
        assert_eq!(s.splits["test"].success_rate, 0.0);
        // Another environment's split of the same name is apart.
        let mut other = ep(3, 1.0, true);
        other.task.env = "f".into();
        let s = RunStats::of(vec![ep(0, 1.0, true), ep(1, 0.5, false), other]);
        let names: Vec<&str> = s.splits.keys().map(String::as_str).collect();
        assert_eq!(names, ["e/train", "f/train"]);
        assert_eq!(s.splits["e/train"].tasks, 2);
    }

    #[test]
    fn uneven_samples_count_pass_at_k_over_the_tasks_that_have_k() {
        // Task 0 has 3 samples, task 1 only 2 (a run stopped early): K = 2.
        let eps = vec![
            ep(0, 1.0, true),
            ep(0, 0.0, false),
            ep(0, 0.0, false),
            ep(1, 0.0, false),
            ep(1, 1.0, true),
        ];
        let s = RunStats::of(eps);
        assert_eq!((s.samples, s.max_samples), (2, 3));
        let p2 = s.pass_at[1];
        // Task 0: 1 − C(2,2)/C(3,2) = 2/3; task 1: 1 − C(1,2)/C(2,2) = 1.
        assert_eq!((p2.k, p2.tasks), (2, 2));
        assert!(close(p2.value, (2.0 / 3.0 + 1.0) / 2.0));
    }

    #[test]
    fn comparisons_pair_shared_tasks_and_list_the_flips() {
        // A: tasks 0..4 pass, 4..8 fail. B: task 0 fails, task 4 passes, task 5 gets 0.5
        // without success, task 8 only in B.
        let a: Vec<Scored> = (0..8).map(|i| ep(i, f64::from(i < 4), i < 4)).collect();
        let mut b: Vec<Scored> = (0..8)
            .map(|i| match i {
                0 => ep(0, 0.0, false),
                4 => ep(4, 1.0, true),
                5 => ep(5, 0.5, false),
                i => ep(i, f64::from(i < 4), i < 4),
            })
            .collect();
        b.push(ep(8, 1.0, true));
        let c = compare(&RunStats::of(a), &RunStats::of(b));
        assert_eq!(c.shared, 8);
        // Differences −1, +1, +0.5 and five zeros: mean 0.5/8.
        assert!(close(c.reward.mean, 0.0625));
        assert!(close(c.success.mean, 0.0));
        assert_eq!((c.better, c.worse), (2, 1));
        let idx = |v: &[TaskKey]| v.iter().map(|k| k.index).collect::<Vec<_>>();
        assert_eq!(idx(&c.fixed), [4]);
        assert_eq!(idx(&c.broken), [0]);
        assert!(!c.reward.significant());
    }
}
