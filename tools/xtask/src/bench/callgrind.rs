//! `cargo xtask bench --callgrind [--against REV]`: instructions per call and per episode,
//! counted by valgrind's callgrind, which does not depend on what else the machine runs (the
//! wall-clock figures of a shared machine do).
//!
//! Each figure comes from two runs of a fresh server under callgrind, one with few operations
//! and one with many, driven by the load generator in count mode (`--ops`): the difference of
//! their totals over the difference of the counts is what one more operation costs, with the
//! server's start-up, the sessions' set-up and the shutdown taken out. Every thread of the
//! server is counted (tokio's workers, jemalloc's background thread, the timers).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use super::args::BenchArgs;
use super::servers::{Kind, Launcher};

/// Sessions calling at once, and episodes at once (as in the wall-clock workloads).
const SESSIONS: usize = 16;

/// What is counted: the load generator's workload, and the few and many operations of its
/// two runs.
struct Workload {
    name: &'static str,
    per: &'static str,
    few: u64,
    many: u64,
}

const WORKLOADS: [Workload; 2] = [
    // Past 1,024 calls a session in both runs (1,250 and 1,875): a session keeps that many
    // results for reconnects, so from there each call pushes the oldest out, as on a server
    // that has run a while. With fewer, the count left out that work and took in part of the
    // kept results' release at shutdown instead (the first run's few, the second's many).
    Workload {
        name: "calls",
        per: "call",
        few: 20_000,
        many: 30_000,
    },
    Workload {
        name: "episodes",
        per: "episode",
        few: 200,
        many: 2_200,
    },
];

/// How long a server under callgrind may take to exit after SIGINT (it writes its counts
/// then).
const EXIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The instruction count callgrind wrote: its `totals:` (or `summary:`) line.
fn total_instructions(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with("totals:"))
        .or_else(|| text.lines().find(|l| l.starts_with("summary:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One server of `kind` under callgrind for `ops` operations of `w`; its instruction count.
fn count_once(
    launcher: &Launcher,
    kind: Kind,
    w: &Workload,
    ops: u64,
    out: &Path,
) -> Result<u64, String> {
    let _ = std::fs::remove_file(out);
    let (mut server, _) = launcher.start(kind, None)?;
    let args: Vec<String> = [
        "--workload",
        w.name,
        "--sessions",
        &SESSIONS.to_string(),
        "--ops",
        &ops.to_string(),
        "--threads",
        "1",
        "--time-limit",
        "900",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let report = super::load::run_load(&launcher.bench, &server.url, kind == Kind::Limit, &args);
    let stopped = server.stop_with("INT", EXIT_TIMEOUT);
    let report = report?;
    let errors = super::load::error_count(&report);
    if errors > 0 {
        return Err(format!("{}: {errors} errors: {}", w.name, report["errors"]));
    }
    if report["ops"].as_u64() != Some(ops) {
        return Err(format!(
            "{}: {} operations ran, not {ops}",
            w.name, report["ops"]
        ));
    }
    stopped.map_err(|e| format!("the server under callgrind did not exit: {e}"))?;
    let text = std::fs::read_to_string(out)
        .map_err(|e| format!("reading callgrind's output {}: {e}", out.display()))?;
    total_instructions(&text).ok_or_else(|| format!("no totals in {}", out.display()))
}

/// One column of the table: a server and what it is.
struct Column {
    /// The header: `old (commit)`, `new (commit)` or `bare hyper`.
    name: String,
    /// `old`, `new` or `bare`: the output files' prefix.
    tag: &'static str,
    kind: Kind,
    launcher: Launcher,
}

/// Instructions per operation of `w` on one server, and the two runs' output files.
fn per_op(column: &Column, w: &Workload, dir: &Path) -> Result<f64, String> {
    let mut totals = [0u64; 2];
    for (i, ops) in [w.few, w.many].into_iter().enumerate() {
        let out = dir.join(format!("{}-{}-{ops}.out", column.tag, w.name));
        let wrapped = launcher_with(&column.launcher, &out);
        eprintln!("bench: callgrind: {}: {ops} {} ...", column.tag, w.name);
        totals[i] = count_once(&wrapped, column.kind, w, ops, &out)?;
    }
    let extra = totals[1].saturating_sub(totals[0]) as f64;
    Ok(extra / (w.many - w.few) as f64)
}

/// A launcher of the same binaries under callgrind, writing to `out`.
fn launcher_with(base: &Launcher, out: &Path) -> Launcher {
    let mut file = OsString::from("--callgrind-out-file=");
    file.push(out.as_os_str());
    Launcher {
        ours: base.ours.clone(),
        model: None,
        code: None,
        bench: base.bench.clone(),
        python: None,
        fixture: PathBuf::new(),
        logs: base.logs.clone(),
        wrapper: vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            "--quiet".into(),
            file,
        ],
    }
}

fn valgrind_present() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("valgrind is not installed (Debian: `apt-get install valgrind`)".into()),
    }
}

/// Count both workloads on this tree's server, on REV's with `--against`, and on the bare
/// hyper server with canned answers (the floor any server of this traffic pays: hyper,
/// tokio and the sockets), all in one run.
pub fn run(args: &BenchArgs) -> Result<ExitCode, String> {
    valgrind_present()?;
    let old = match &args.against {
        // The bare server is a column of every count already.
        Some(rev) if rev == super::against::BARE => None,
        Some(rev) => {
            let rev = super::revision::resolve(rev)?;
            let (bin, _) = super::revision::old_binary(&rev)?;
            Some((rev, bin))
        }
        None => None,
    };
    let built = super::build::build(&[Kind::Ours], false, false)?;
    let new_bin = built.ours.ok_or_else(|| {
        built
            .failure
            .unwrap_or_else(|| "our server did not build".into())
    })?;
    let target = super::revision::target_dir();
    let dir = target.join("callgrind");
    let logs = target.join("bench-logs");
    for d in [&dir, &logs] {
        std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let launcher = |bin: PathBuf| Launcher {
        ours: Some(bin),
        model: None,
        code: None,
        bench: built.bench.clone(),
        python: None,
        fixture: PathBuf::new(),
        logs: logs.clone(),
        wrapper: Vec::new(),
    };
    let mut columns: Vec<Column> = Vec::new();
    if let Some((rev, bin)) = &old {
        columns.push(Column {
            name: format!("old ({})", super::revision::short(&rev.commit)),
            tag: "old",
            kind: Kind::Ours,
            launcher: launcher(bin.clone()),
        });
    }
    columns.push(Column {
        name: format!("new ({})", super::revision::describe_head()),
        tag: "new",
        kind: Kind::Ours,
        launcher: launcher(new_bin.clone()),
    });
    columns.push(Column {
        name: "bare hyper".into(),
        tag: "bare",
        kind: Kind::Limit,
        launcher: launcher(new_bin),
    });
    let mut table: Vec<Vec<f64>> = Vec::new();
    for w in &WORKLOADS {
        let row = columns
            .iter()
            .map(|c| per_op(c, w, &dir))
            .collect::<Result<Vec<f64>, String>>()?;
        table.push(row);
    }
    print!("{}", render(&columns, &table, &dir));
    Ok(ExitCode::SUCCESS)
}

/// The table: each column's instructions per operation, then new / old (with `--against`)
/// and bare / new, the share of the floor's cost in ours (1.0 would be the bare server's).
fn render(columns: &[Column], table: &[Vec<f64>], dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncallgrind: instructions per operation, every server thread counted ({SESSIONS} \
         sessions; the difference of a run with few and one with many operations)"
    );
    let find = |tag: &str| columns.iter().position(|c| c.tag == tag);
    let (old, new, bare) = (find("old"), find("new"), find("bare"));
    let mut header = vec!["figure".to_owned()];
    header.extend(columns.iter().map(|c| c.name.clone()));
    if old.is_some() {
        header.push("new/old".into());
    }
    header.push("bare/new".into());
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (w, values) in WORKLOADS.iter().zip(table) {
        let mut row = vec![format!(
            "instructions per {} ({} - {})",
            w.per, w.many, w.few
        )];
        row.extend(values.iter().map(|x| format!("{x:.0}")));
        let ratio = |a: Option<usize>, b: Option<usize>| match (a, b) {
            (Some(a), Some(b)) if values[b] > 0.0 => format!("{:.3}x", values[a] / values[b]),
            _ => "-".to_owned(),
        };
        if old.is_some() {
            row.push(ratio(new, old));
        }
        row.push(ratio(bare, new));
        rows.push(row);
    }
    let mut width = vec![0; header.len()];
    for r in std::iter::once(&header).chain(&rows) {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(&width).enumerate() {
            if i == 0 {
                let _ = write!(line, "{c:<w$}  ");
            } else {
                let _ = write!(line, "{c:>w$}  ");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(
        out,
        "(bare/new: the bare hyper server's count over ours, the instruction form of the \
         benchmark's ours/limit; callgrind's output files, for callgrind_annotate: {})",
        dir.display()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_read_from_callgrinds_output() {
        let text = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfl=(1) a.rs\nfn=(1) f\n\
                    1 5\nsummary: 123456\n\ntotals: 123457\n";
        assert_eq!(total_instructions(text), Some(123_457));
        assert_eq!(total_instructions("summary: 99\n"), Some(99));
        assert_eq!(total_instructions("events: Ir\n"), None);
    }
}
