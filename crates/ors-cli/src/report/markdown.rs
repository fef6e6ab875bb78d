//! `ors report --format markdown`: the runs' summaries and their comparison as Markdown
//! tables, for a pull request comment or a terminal.

use std::fmt::Write;

use crate::results::{number, percent, with_interval, Comparison, RunStats, TaskKey};
use crate::stats::Difference;

use super::runs::{comparisons, Run};

/// Flipped tasks listed by name before the rest are only counted.
const MAX_LISTED: usize = 20;

/// The report.
pub fn report(title: &str, runs: &[Run]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## {}\n", cell(title));
    let k = runs.iter().map(|r| r.stats.samples).max().unwrap_or(1);
    let pass_k = format!("pass@{k}");
    for (i, r) in runs.iter().enumerate() {
        let s = &r.stats;
        let shape = format!("{} × {}", s.tasks.len(), s.samples_shown());
        let mut columns = vec![
            ("run", cell(&r.name)),
            ("env", cell(&join(r.envs()))),
            ("model", cell(&join(r.models()))),
            ("episodes", s.episodes.to_string()),
            ("tasks × samples", shape),
            ("mean reward (95% CI)", s.mean_reward.show(false, "")),
            ("success (95% CI)", s.success_rate.show(true, "")),
            ("pass@1", pass(s, 1)),
        ];
        if k > 1 {
            columns.push((&pass_k, pass(s, k as u64)));
        }
        columns.push(("errors", r.errors().to_string()));
        // Every run has the same columns: the first one's names head the table.
        let (header, row): (Vec<&str>, Vec<String>) = columns.into_iter().unzip();
        if i == 0 {
            table_head(&mut md, &header);
        }
        table_row(&mut md, &row);
    }
    for (i, c) in comparisons(runs) {
        comparison(&mut md, &runs[0].name, &runs[i].name, &c);
    }
    md
}

fn comparison(md: &mut String, base: &str, name: &str, c: &Comparison) {
    let _ = writeln!(md, "\n### {} vs {} (baseline)\n", cell(name), cell(base));
    if c.shared == 0 {
        let _ = writeln!(md, "No tasks in common.");
        return;
    }
    let (header, row): (Vec<&str>, Vec<String>) = [
        ("shared tasks", c.shared.to_string()),
        ("Δ mean reward (95% CI)", difference(&c.reward, false)),
        ("Δ success (95% CI)", difference(&c.success, true)),
        ("better", c.better.to_string()),
        ("worse", c.worse.to_string()),
        ("fixed", c.fixed.len().to_string()),
        ("broken", c.broken.len().to_string()),
    ]
    .into_iter()
    .unzip();
    table_head(md, &header);
    table_row(md, &row);
    md.push_str(
        "\nPaired over the shared tasks (the same tasks resampled for both runs); \
         **bold**: the interval excludes 0.\n",
    );
    for (what, from, to, tasks) in [
        ("Fixed", "failed", "passed", &c.fixed),
        ("Broken", "passed", "failed", &c.broken),
    ] {
        if !tasks.is_empty() {
            let what =
                format!("{what} ({from} every sample in {base}, {to} every sample in {name})");
            let _ = writeln!(md, "\n{}: {}", cell(&what), listed(tasks));
        }
    }
}

fn listed(tasks: &[TaskKey]) -> String {
    let mut names: Vec<String> = tasks
        .iter()
        .take(MAX_LISTED)
        .map(|t| format!("`{t}`"))
        .collect();
    if tasks.len() > MAX_LISTED {
        names.push(format!("and {} more", tasks.len() - MAX_LISTED));
    }
    names.join(", ")
}

fn difference(d: &Difference, as_percent: bool) -> String {
    let text = with_interval(d.mean, d.interval, "", |x| number(x, as_percent, true));
    let bold = if d.significant() { "**" } else { "" };
    format!("{bold}{text}{bold}")
}

fn pass(s: &RunStats, k: u64) -> String {
    let p = s.pass_at.iter().find(|p| p.k == k);
    p.map_or("–".into(), |p| percent(p.value))
}

fn join<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<&str> = items.into_iter().collect();
    if v.is_empty() {
        "–".to_owned()
    } else {
        v.join(", ")
    }
}

/// Text safe in a table cell: `|` escaped, lines joined.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn table_head(md: &mut String, header: &[&str]) {
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|{}", " --- |".repeat(header.len()));
}

fn table_row(md: &mut String, row: &[String]) {
    let _ = writeln!(md, "| {} |", row.join(" | "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_differences() {
        assert_eq!(number(0.1, false, true), "+0.1000");
        assert_eq!(number(-0.0333, true, true), "−3.3 pp");
        assert_eq!(number(0.5, true, false), "50.0%");
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}
