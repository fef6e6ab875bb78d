//! `ors report`: trajectory files of `ors eval --out`, one run each, as one self-contained
//! HTML page (summary with intervals, plots, a task table, a trajectory viewer and, with two
//! or more runs, a comparison) or as a Markdown summary.

mod html;
mod markdown;
mod runs;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use runs::read_runs;

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

/// Run `ors report`.
pub fn run(args: &ReportArgs) -> Result<ExitCode, String> {
    if args.format == Format::Html && args.out.is_none() {
        let how = "add -o report.html (or --format markdown for text on stdout)";
        return Err(format!("the HTML report goes to a file: {how}"));
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
            let (shown, n, bytes) = (path.display(), runs.len(), text.len());
            std::fs::write(path, text.as_bytes())
                .map_err(|e| format!("cannot write {shown}: {e}"))?;
            let episodes: usize = runs.iter().map(|r| r.episodes.len()).sum();
            eprintln!("ors report: {shown} ({n} run(s), {episodes} episodes, {bytes} bytes)");
        }
        None => {
            use std::io::Write;
            // `ors report --format markdown | head` closes the pipe early: not an error.
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
    }
    Ok(ExitCode::SUCCESS)
}
