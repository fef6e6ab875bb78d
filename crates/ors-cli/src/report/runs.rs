//! The runs a report shows: each trajectory file read as a run with its figures, and every
//! run after the first compared with the first.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ors_client::Episode;

use crate::results::{compare, Comparison, RunStats, Scored};

/// One trajectory file.
pub struct Run {
    /// What the report calls it: the file name without `.jsonl`.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// Its episodes, the last line of each (environment, split, task, sample).
    pub episodes: Vec<Episode>,
    /// Their figures.
    pub stats: RunStats,
}

impl Run {
    /// The environments it ran.
    pub fn envs(&self) -> BTreeSet<&str> {
        self.episodes.iter().map(|e| e.env.as_str()).collect()
    }

    /// The models that played (none for a policy that is not an agent).
    pub fn models(&self) -> BTreeSet<&str> {
        self.episodes
            .iter()
            .filter_map(|e| e.agent.as_ref().map(|a| a.model.as_str()))
            .collect()
    }

    /// Episodes that ended in an error.
    pub fn errors(&self) -> usize {
        self.stats.tasks.iter().map(|t| t.errors).sum()
    }
}

/// Every run after the first against the first: `(index of the run, comparison)`.
pub fn comparisons(runs: &[Run]) -> Vec<(usize, Comparison)> {
    let pair = |(i, r): (usize, &Run)| (i, compare(&runs[0].stats, &r.stats));
    runs.iter().enumerate().skip(1).map(pair).collect()
}

/// Read each file as a run.
pub fn read_runs(paths: &[PathBuf]) -> Result<Vec<Run>, String> {
    let mut runs = Vec::with_capacity(paths.len());
    for path in paths {
        let read = crate::trajectories::read(path, false)?;
        let (shown, unreadable) = (path.display(), read.unreadable);
        if read.episodes.is_empty() {
            return Err(format!(
                "{shown} holds no trajectories (write them with `ors eval --out FILE`)"
            ));
        }
        if unreadable > 0 {
            eprintln!(
                "ors report: {shown}: {unreadable} line(s) are not trajectories and were skipped"
            );
        }
        let stats = RunStats::of(read.episodes.iter().map(Scored::of));
        runs.push(Run {
            name: stem(path),
            path: path.clone(),
            episodes: read.episodes,
            stats,
        });
    }
    // Two files of one name (a/run.jsonl, b/run.jsonl) are told apart by their paths.
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    for r in &mut runs {
        if names.iter().filter(|n| **n == r.name).count() > 1 {
            r.name = r.path.display().to_string();
        }
    }
    Ok(runs)
}

fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap_or(path.as_os_str());
    let name = name.to_string_lossy();
    let stem = name.strip_suffix(".jsonl").or(name.strip_suffix(".json"));
    stem.unwrap_or(&name).to_owned()
}
