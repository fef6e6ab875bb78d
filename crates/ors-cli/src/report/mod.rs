//! `ors report`: trajectory files of `ors eval --out`, one run each, as one self-contained
//! HTML page (summary with intervals, plots, a task table, a trajectory viewer and, with two
//! or more runs, a comparison) or as a Markdown summary.

mod html;
mod markdown;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use ors_client::Episode;

use crate::results::{compare, Comparison, RunStats, Scored};

/// Arguments of `ors report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Trajectory files written by `ors eval --out`, one run each; the first is the baseline
    /// the others are compared with.
    #[arg(required = true, value_name = "RUN.jsonl")]
    runs: Vec<PathBuf>,
    /// Write the report to FILE (required for HTML; Markdown goes to stdout without it).
    #[arg(short, long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// What to write.
    #[arg(long, value_enum, default_value_t = Format::Html)]
    format: Format,
    /// The report's title [default: the runs' names].
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
}

/// The report's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// One self-contained HTML file: no network when viewed.
    Html,
    /// The summary and the comparison as Markdown tables (a pull request comment).
    Markdown,
}

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
    let Some((base, rest)) = runs.split_first() else {
        return Vec::new();
    };
    rest.iter()
        .enumerate()
        .map(|(i, r)| (i + 1, compare(&base.stats, &r.stats)))
        .collect()
}

/// Read each file as a run.
pub fn read_runs(paths: &[PathBuf]) -> Result<Vec<Run>, String> {
    let mut runs = Vec::with_capacity(paths.len());
    for path in paths {
        let read = crate::trajectories::read(path, false)?;
        if read.episodes.is_empty() {
            return Err(format!(
                "{} holds no trajectories (write them with `ors eval --out FILE`)",
                path.display()
            ));
        }
        if read.unreadable > 0 {
            eprintln!(
                "ors report: {}: {} line(s) are not trajectories and were skipped",
                path.display(),
                read.unreadable
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
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    name.strip_suffix(".jsonl")
        .or_else(|| name.strip_suffix(".json"))
        .unwrap_or(&name)
        .to_owned()
}

/// Run `ors report`.
pub fn run(args: &ReportArgs) -> Result<ExitCode, String> {
    if args.format == Format::Html && args.out.is_none() {
        return Err(
            "the HTML report goes to a file: add -o report.html (or --format markdown \
                    for text on stdout)"
                .to_owned(),
        );
    }
    let runs = read_runs(&args.runs)?;
    let title = args.title.clone().unwrap_or_else(|| {
        let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        format!("ors report: {}", names.join(" vs "))
    });
    let text = match args.format {
        Format::Html => html::page(&title, &runs)?,
        Format::Markdown => markdown::report(&title, &runs),
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, text.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            let episodes: usize = runs.iter().map(|r| r.episodes.len()).sum();
            eprintln!(
                "ors report: {} ({} run(s), {episodes} episodes, {} bytes)",
                path.display(),
                runs.len(),
                text.len()
            );
        }
        None => {
            use std::io::Write;
            // `ors report --format markdown | head` closes the pipe early: not an error.
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
    }
    Ok(ExitCode::SUCCESS)
}
