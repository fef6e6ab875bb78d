//! `cargo xtask bench --against REV`: the guard against speed regressions. REV's `conformance`
//! server is built in a git worktree, and the same workloads run on it and on this tree's,
//! driven by this tree's load generator, in alternating rounds (old/new, then new/old, ...),
//! so a change in the machine's load falls on both sides alike. Each figure is printed as its
//! ratio new ÷ old with the spread of the rounds' own ratios; nothing is judged.
//!
//! The worktree lives at `<target>/against/tree` and builds into the same target directory,
//! so every dependency at the same version and features is compiled once for both trees. Its
//! own crates would not be told apart from this tree's: cargo names artifacts by a hash of
//! the package's path *relative to its workspace*, its version and its dependencies, which two
//! nearby revisions share, and the second build would then take the first one's artifacts
//! for its own. So the worktree's manifests have `+against` added to their versions (build
//! metadata, which version requirements ignore), which gives its crates artifacts of their
//! own. The binary is kept as `<target>/against/conformance-<commit>`, so a revision is built
//! only once.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::args::{BenchArgs, Only};
use super::load::num;
use super::plan::Plan;
use super::servers::{Kind, Launcher};
use crate::procs::ServerProcess;

/// Sessions of the calls workload and concurrent episodes (the figures).
const SESSIONS: usize = 16;

/// How long, how big and how many rounds.
pub(crate) struct RoundsPlan {
    rounds: usize,
    /// Window and warm-up of the calls and episodes rounds, seconds.
    window: (f64, f64),
    idle_sessions: usize,
    concurrency_sessions: usize,
    concurrency_window: (f64, f64),
}

impl RoundsPlan {
    pub(crate) fn new(args: &BenchArgs) -> Self {
        let quick = args.quick;
        let window = if quick { (1.0, 0.2) } else { (5.0, 0.5) };
        let concurrency_window = if quick { (3.0, 1.0) } else { (30.0, 2.0) };
        Self {
            rounds: args.rounds.unwrap_or(if quick { 2 } else { 3 }).max(1),
            window: args.duration.map_or(window, |d| (d, window.1)),
            idle_sessions: if quick { 5_000 } else { 100_000 },
            concurrency_sessions: if quick {
                256
            } else {
                super::plan::TARGET_SESSIONS
            },
            concurrency_window: args
                .duration
                .map_or(concurrency_window, |d| (d, concurrency_window.1)),
        }
    }
}

/// One figure of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Figure {
    CallsPerS,
    CpuPerCall,
    EpisodesPerS,
    CpuPerEpisode,
    IdleBytes,
    ConcurrencySuccess,
    ConcurrencyP99,
}

impl Figure {
    const ALL: [Figure; 7] = [
        Figure::CallsPerS,
        Figure::CpuPerCall,
        Figure::EpisodesPerS,
        Figure::CpuPerEpisode,
        Figure::IdleBytes,
        Figure::ConcurrencySuccess,
        Figure::ConcurrencyP99,
    ];

    fn key(self) -> &'static str {
        match self {
            Figure::CallsPerS => "calls_per_s",
            Figure::CpuPerCall => "server_cpu_us_per_call",
            Figure::EpisodesPerS => "episodes_per_s",
            Figure::CpuPerEpisode => "server_cpu_us_per_episode",
            Figure::IdleBytes => "bytes_per_idle_session",
            Figure::ConcurrencySuccess => "concurrency_success_rate",
            Figure::ConcurrencyP99 => "concurrency_p99_ms",
        }
    }

    fn label(self, plan: &RoundsPlan) -> String {
        match self {
            Figure::CallsPerS => format!("echo calls/s, {SESSIONS} sessions"),
            Figure::CpuPerCall => "  server CPU per call, us".into(),
            Figure::EpisodesPerS => format!("episodes/s, {SESSIONS} at once"),
            Figure::CpuPerEpisode => "  server CPU per episode, us".into(),
            Figure::IdleBytes => format!("bytes per idle session, {}", plan.idle_sessions),
            Figure::ConcurrencySuccess => format!(
                "{} sessions calling a 1 s tool: success",
                plan.concurrency_sessions
            ),
            Figure::ConcurrencyP99 => "  p99 ms".into(),
        }
    }

    /// Whether a larger value is the better one (the ratio's direction).
    fn higher_is_better(self) -> bool {
        matches!(
            self,
            Figure::CallsPerS | Figure::EpisodesPerS | Figure::ConcurrencySuccess
        )
    }
}

/// Which build a figure is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Old,
    New,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Old => "old",
            Side::New => "new",
        }
    }
}

/// Every figure of every round, per side, in the order the rounds ran.
#[derive(Default)]
pub(crate) struct Rounds {
    /// (round, side, figure, value).
    values: Vec<(usize, Side, Figure, f64)>,
    /// What failed (a launch, a workload, a report without the figure).
    failures: Vec<String>,
    /// Errors the load generator counted.
    errors: u64,
}

impl Rounds {
    fn add(&mut self, round: usize, side: Side, figure: Figure, value: Option<f64>) {
        match value {
            Some(v) if v.is_finite() => self.values.push((round, side, figure, v)),
            _ => self.failures.push(format!(
                "round {}: {}: no {} in the report",
                round + 1,
                side.name(),
                figure.key()
            )),
        }
    }

    fn side(&self, side: Side, figure: Figure) -> Vec<f64> {
        self.values
            .iter()
            .filter(|(_, s, f, _)| *s == side && *f == figure)
            .map(|(_, _, _, v)| *v)
            .collect()
    }

    /// Each round's ratio new ÷ old, where both sides have the figure.
    fn ratios(&self, figure: Figure) -> Vec<f64> {
        let rounds = self
            .values
            .iter()
            .map(|(r, ..)| *r)
            .max()
            .map_or(0, |r| r + 1);
        let get = |round, side| {
            self.values
                .iter()
                .find(|(r, s, f, _)| *r == round && *s == side && *f == figure)
                .map(|(.., v)| *v)
        };
        (0..rounds)
            .filter_map(|r| match (get(r, Side::New), get(r, Side::Old)) {
                (Some(new), Some(old)) if old > 0.0 => Some(new / old),
                _ => None,
            })
            .collect()
    }
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// One row of the summary: the medians, their ratio, and the spread of the rounds' ratios.
struct Summary {
    old: Option<f64>,
    new: Option<f64>,
    ratio: Option<f64>,
    spread: Option<(f64, f64)>,
}

fn summarize(rounds: &Rounds, figure: Figure) -> Summary {
    let old = median(&rounds.side(Side::Old, figure));
    let new = median(&rounds.side(Side::New, figure));
    let ratios = rounds.ratios(figure);
    let spread = ratios
        .iter()
        .copied()
        .fold(None, |acc: Option<(f64, f64)>, r| {
            Some(acc.map_or((r, r), |(lo, hi)| (lo.min(r), hi.max(r))))
        });
    Summary {
        old,
        new,
        ratio: match (new, old) {
            (Some(n), Some(o)) if o > 0.0 => Some(n / o),
            _ => None,
        },
        spread,
    }
}

/// The comparison table as printed.
fn render(rounds: &Rounds, plan: &RoundsPlan, context: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{context}");
    let header = [
        "figure",
        "old",
        "new",
        "new/old",
        "rounds' new/old",
        "better",
    ];
    let mut rows: Vec<[String; 6]> = Vec::new();
    for figure in Figure::ALL {
        let s = summarize(rounds, figure);
        if s.old.is_none() && s.new.is_none() {
            continue;
        }
        let opt = |v: Option<f64>| v.map_or("-".to_owned(), num);
        let spread = match (s.spread, rounds.ratios(figure).len()) {
            (Some((lo, hi)), n) if n > 1 => format!("{lo:.3} .. {hi:.3} ({n})"),
            (Some((lo, _)), _) => format!("{lo:.3} (1)"),
            (None, _) => "-".to_owned(),
        };
        rows.push([
            figure.label(plan),
            opt(s.old),
            opt(s.new),
            s.ratio.map_or("-".to_owned(), |r| format!("{r:.3}x")),
            spread,
            if figure.higher_is_better() {
                "higher"
            } else {
                "lower"
            }
            .to_owned(),
        ]);
    }
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(width).enumerate() {
            if i == 0 {
                let _ = write!(s, "{c:<w$}  ");
            } else {
                let _ = write!(s, "{c:>w$}  ");
            }
        }
        s.trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", line(&header.map(str::to_owned)));
    for r in &rows {
        let _ = writeln!(out, "{}", line(r));
    }
    let _ = writeln!(
        out,
        "(medians of the rounds; the ratio is new / old, and each round's own ratio gives the \
         spread; wall-clock figures on a shared machine are noisy: `--callgrind` counts \
         instructions)"
    );
    if rounds.errors > 0 || !rounds.failures.is_empty() {
        let _ = writeln!(
            out,
            "!! {} errors counted by the load generator; failures:",
            rounds.errors
        );
        for f in &rounds.failures {
            let _ = writeln!(out, "  {f}");
        }
    }
    out
}

/// The JSON form: every round's figures and the summary.
fn to_json(rounds: &Rounds, plan: &RoundsPlan, old: &Revision, new: &str) -> Value {
    let figures: serde_json::Map<String, Value> = Figure::ALL
        .iter()
        .map(|&f| {
            let s = summarize(rounds, f);
            (
                f.key().to_owned(),
                json!({
                    "old": rounds.side(Side::Old, f),
                    "new": rounds.side(Side::New, f),
                    "median_old": s.old,
                    "median_new": s.new,
                    "ratio": s.ratio,
                    "round_ratios": rounds.ratios(f),
                    "higher_is_better": f.higher_is_better(),
                }),
            )
        })
        .collect();
    json!({
        "old": {"rev": old.rev, "commit": old.commit},
        "new": new,
        "rounds": plan.rounds,
        "window_s": plan.window.0,
        "idle_sessions": plan.idle_sessions,
        "concurrency_sessions": plan.concurrency_sessions,
        "figures": figures,
        "errors": rounds.errors,
        "failures": rounds.failures,
    })
}

/// A revision to compare with: as asked for, and its commit.
pub(crate) struct Revision {
    rev: String,
    pub(crate) commit: String,
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The commit `rev` names in this repository.
pub(crate) fn resolve(rev: &str) -> Result<Revision, String> {
    let root = crate::workspace::workspace_root();
    let commit = git(
        &root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .map_err(|_| {
        format!(
            "'{rev}' names no commit of this repository (a shallow clone may lack it: \
                 `git fetch --unshallow`)"
        )
    })?;
    Ok(Revision {
        rev: rev.to_owned(),
        commit,
    })
}

/// What `cargo xtask test` compares with: the merge base of HEAD and `main` (or
/// `origin/main`), which is the change a branch makes; when HEAD is on main already (CI on
/// main, or a branch that adds nothing), HEAD's first parent, the last step that landed.
pub(crate) fn default_base() -> Result<Revision, String> {
    let root = crate::workspace::workspace_root();
    let head = git(&root, &["rev-parse", "HEAD"])?;
    for main in ["main", "origin/main"] {
        if let Ok(base) = git(&root, &["merge-base", "HEAD", main]) {
            if base != head {
                return Ok(Revision {
                    rev: format!("merge-base HEAD {main}"),
                    commit: base,
                });
            }
            break;
        }
    }
    resolve("HEAD^1").map(|r| Revision {
        rev: "HEAD^1 (HEAD is on main)".into(),
        ..r
    })
}

/// The short form of a commit, for messages.
pub(crate) fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

/// Where the target directory is (as cargo_build finds it).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| crate::workspace::workspace_root().join("target"))
}

/// Check the worktree out at `commit`, making it first if needed.
fn checkout(root: &Path, tree: &Path, commit: &str) -> Result<(), String> {
    if tree.join(".git").exists()
        && git(
            tree,
            &["checkout", "--quiet", "--detach", "--force", commit],
        )
        .is_ok()
    {
        return Ok(());
    }
    // Not a worktree (any more): start it over.
    let _ = std::fs::remove_dir_all(tree);
    git(root, &["worktree", "prune"])?;
    let path = tree
        .to_str()
        .ok_or("the target directory's path is not UTF-8")?;
    git(
        root,
        &[
            "worktree", "add", "--quiet", "--detach", "--force", path, commit,
        ],
    )?;
    Ok(())
}

/// The suffix the worktree's package versions get (see the module's doc).
const VERSION_SUFFIX: &str = "+against";

/// `manifest` with [`VERSION_SUFFIX`] added to the version of its `[package]` or
/// `[workspace.package]` section (inherited versions, `version.workspace = true`, follow the
/// workspace's); `None` when it has nothing to change.
fn suffixed_versions(manifest: &str) -> Option<String> {
    let mut section = "";
    let mut changed = false;
    let mut out = String::with_capacity(manifest.len() + 16);
    for line in manifest.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed;
        }
        let in_package = section == "[package]" || section == "[workspace.package]";
        let version = trimmed
            .strip_prefix("version")
            .map(str::trim_start)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::trim)
            .and_then(|v| v.strip_prefix('"'))
            .and_then(|v| v.strip_suffix('"'));
        match version {
            Some(v) if in_package && !v.contains('+') => {
                let end = if line.ends_with('\n') { "\n" } else { "" };
                out.push_str(&format!("version = \"{v}{VERSION_SUFFIX}\"{end}"));
                changed = true;
            }
            _ => out.push_str(line),
        }
    }
    changed.then_some(out)
}

/// Give every crate of the worktree its [`VERSION_SUFFIX`] (undone by the next checkout).
fn suffix_versions(tree: &Path) -> Result<(), String> {
    let files = git(tree, &["ls-files", "Cargo.toml", "*/Cargo.toml"])?;
    for file in files.lines() {
        let path = tree.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if let Some(text) = suffixed_versions(&text) {
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// The release `conformance` binary of `rev`, built once per commit, and how long building it
/// took (`None`: it was there already).
pub(crate) fn old_binary(rev: &Revision) -> Result<(PathBuf, Option<Duration>), String> {
    let target = target_dir();
    let dir = target.join("against");
    let bin = dir.join(format!("conformance-{}", rev.commit));
    if bin.is_file() {
        return Ok((bin, None));
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let root = crate::workspace::workspace_root();
    let tree = dir.join("tree");
    eprintln!(
        "bench: against: building {} ({}) in {}",
        rev.rev,
        short(&rev.commit),
        tree.display()
    );
    let started = Instant::now();
    checkout(&root, &tree, &rev.commit)?;
    suffix_versions(&tree)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "-p",
        "ors-examples",
        "--bin",
        "conformance",
    ])
    .arg("--target-dir")
    .arg(&target)
    .current_dir(&tree);
    // Since issue 27 jemalloc, which the servers are measured with, is a feature; before, it
    // was always on.
    let manifest = std::fs::read_to_string(tree.join("examples/Cargo.toml")).unwrap_or_default();
    if manifest.lines().any(|l| l.starts_with("jemalloc = ")) {
        cmd.args(["--features", "jemalloc"]);
    }
    crate::procs::run_to_success(&mut cmd, &format!("building {}'s server", rev.rev))?;
    // The shared target directory's `release/conformance` is whichever tree built last: the
    // old one is copied out before this tree's build links its own there again.
    let built = target.join("release").join("conformance");
    let partial = dir.join(format!("conformance-{}.partial", rev.commit));
    std::fs::copy(&built, &partial).map_err(|e| format!("copying {}: {e}", built.display()))?;
    std::fs::rename(&partial, &bin).map_err(|e| format!("keeping {}: {e}", bin.display()))?;
    Ok((bin, Some(started.elapsed())))
}

/// Both servers' launchers: the same load generator, each its own binary and logs.
struct Sides {
    old: Launcher,
    new: Launcher,
}

impl Sides {
    fn get(&self, side: Side) -> &Launcher {
        match side {
            Side::Old => &self.old,
            Side::New => &self.new,
        }
    }
}

/// The rounds: calls and episodes on one long-lived server per side (relaunched if it died),
/// idle sessions and the concurrency workload on a fresh one each time.
fn measure(sides: &Sides, args: &BenchArgs, plan: &RoundsPlan) -> Rounds {
    let base = Plan::new(args.quick, args.duration, args.client_threads);
    let mut rounds = Rounds::default();
    let mut servers: [Option<ServerProcess>; 2] = [None, None];
    let slot = |side: Side| match side {
        Side::Old => 0,
        Side::New => 1,
    };
    for round in 0..plan.rounds {
        let order = if round % 2 == 0 {
            [Side::Old, Side::New]
        } else {
            [Side::New, Side::Old]
        };
        let label = |side: Side| format!("round {}/{}: {}", round + 1, plan.rounds, side.name());
        for (workload, only) in [("calls", Only::Calls), ("episodes", Only::Episodes)] {
            if !args.runs(only) {
                continue;
            }
            for side in order {
                let server = &mut servers[slot(side)];
                if !server
                    .as_ref()
                    .is_some_and(|s| super::servers::alive(s.pid))
                {
                    match sides.get(side).start(Kind::Ours, None) {
                        Ok((s, _)) => *server = Some(s),
                        Err(e) => {
                            rounds
                                .failures
                                .push(format!("{}: launch: {e}", label(side)));
                            continue;
                        }
                    }
                }
                let Some(s) = server.as_ref() else { continue };
                let pid = s.pid.to_string();
                let load_args = super::load::timed_args(
                    workload,
                    SESSIONS,
                    plan.window,
                    &base,
                    &["--pid", &pid],
                );
                match super::load::run_load(&sides.get(side).bench, &s.url, false, &load_args) {
                    Ok(v) => {
                        eprintln!(
                            "bench: against: {}: {workload}: {}",
                            label(side),
                            super::load::brief(&v)
                        );
                        rounds.errors += super::load::error_count(&v);
                        let (rate, cpu) = if workload == "calls" {
                            (Figure::CallsPerS, Figure::CpuPerCall)
                        } else {
                            (Figure::EpisodesPerS, Figure::CpuPerEpisode)
                        };
                        rounds.add(round, side, rate, v["rate"].as_f64());
                        let per = if workload == "calls" {
                            "call"
                        } else {
                            "episode"
                        };
                        rounds.add(
                            round,
                            side,
                            cpu,
                            v[format!("server_cpu_us_per_{per}")].as_f64(),
                        );
                    }
                    Err(e) => rounds
                        .failures
                        .push(format!("{}: {workload}: {e}", label(side))),
                }
            }
        }
        if args.runs(Only::Idle) {
            for side in order {
                match super::idle::idle_once(
                    Kind::Ours,
                    sides.get(side),
                    &[plan.idle_sessions],
                    &base,
                ) {
                    Ok((v, _)) => {
                        eprintln!(
                            "bench: against: {}: idle: {}",
                            label(side),
                            super::load::brief_idle(&v)
                        );
                        rounds.errors += super::load::error_count(&v);
                        let bytes = v["steps"]
                            .as_array()
                            .and_then(|s| s.last())
                            .and_then(|s| s["bytes_per_session"].as_f64());
                        rounds.add(round, side, Figure::IdleBytes, bytes);
                    }
                    Err(e) => rounds.failures.push(format!("{}: {e}", label(side))),
                }
            }
        }
        if args.runs(Only::Concurrency) {
            for side in order {
                let n = plan.concurrency_sessions;
                let run = super::concurrency::run_once(
                    Kind::Ours,
                    sides.get(side),
                    n,
                    plan.concurrency_window,
                    base.client_threads,
                );
                match run {
                    Ok(v) => {
                        eprintln!(
                            "bench: against: {}: concurrency {n}: {}",
                            label(side),
                            super::concurrency::brief(&v)
                        );
                        rounds.errors += super::load::error_count(&v);
                        rounds.add(
                            round,
                            side,
                            Figure::ConcurrencySuccess,
                            v["success_rate"].as_f64(),
                        );
                        rounds.add(round, side, Figure::ConcurrencyP99, v["p99_ms"].as_f64());
                    }
                    Err(e) => rounds
                        .failures
                        .push(format!("{}: concurrency {n}: {e}", label(side))),
                }
            }
        }
    }
    rounds
}

/// Build both servers and the load generator; the launchers of both sides.
fn prepare(rev: &Revision) -> Result<(Sides, Option<Duration>), String> {
    // The old side first: this tree's build then links its own binary in the shared target
    // directory again.
    let (old_bin, old_build) = old_binary(rev)?;
    let built = super::build::build(&[Kind::Ours], false, false)?;
    let new_bin = match (built.ours, built.failure) {
        (Some(bin), _) => bin,
        (None, failure) => {
            return Err(failure.unwrap_or_else(|| "this tree's server did not build".into()))
        }
    };
    let logs = target_dir().join("bench-logs");
    let launcher = |bin: PathBuf, name: &str| -> Result<Launcher, String> {
        let dir = logs.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(Launcher {
            ours: Some(bin),
            model: None,
            code: None,
            bench: built.bench.clone(),
            python: None,
            fixture: PathBuf::new(),
            logs: dir,
            wrapper: Vec::new(),
        })
    };
    Ok((
        Sides {
            old: launcher(old_bin, "against-old")?,
            new: launcher(new_bin, "against-new")?,
        },
        old_build,
    ))
}

/// What this tree is: its HEAD commit, and whether files differ from it.
pub(crate) fn describe_head() -> String {
    let root = crate::workspace::workspace_root();
    let head = git(&root, &["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|_| "?".into());
    let dirty =
        git(&root, &["status", "--porcelain", "--untracked-files=no"]).is_ok_and(|s| !s.is_empty());
    format!(
        "{head}{}",
        if dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    )
}

/// Compare this tree with `rev`; the rounds, the table and the context line.
fn compare(rev: &Revision, args: &BenchArgs) -> Result<(Rounds, RoundsPlan, String), String> {
    let plan = RoundsPlan::new(args);
    let (sides, old_build) = prepare(rev)?;
    if args.runs(Only::Concurrency) {
        super::concurrency::raise_fd_limit(plan.concurrency_sessions)?;
    }
    let load_before = super::load::load_average();
    let started = Instant::now();
    let rounds = measure(&sides, args, &plan);
    let context = format!(
        "bench --against {} ({}) = old, this tree ({}) = new: {} rounds in turns, {} s windows; \
         {} s in all{}; load average {} before, {} after",
        rev.rev,
        short(&rev.commit),
        describe_head(),
        plan.rounds,
        plan.window.0,
        started.elapsed().as_secs(),
        old_build.map_or(String::new(), |d| format!(
            " (building the old server took {:.0} s more)",
            d.as_secs_f64()
        )),
        load_before.as_deref().unwrap_or("?"),
        super::load::load_average().as_deref().unwrap_or("?"),
    );
    Ok((rounds, plan, context))
}

/// `cargo xtask bench --against REV`: fails only when a workload had errors or a side could
/// not be measured; the ratios themselves are printed, never judged.
pub(crate) fn run(rev: &str, args: &BenchArgs) -> Result<ExitCode, String> {
    let rev = resolve(rev)?;
    let (rounds, plan, context) = compare(&rev, args)?;
    print!("{}", render(&rounds, &plan, &context));
    if let Some(path) = &args.json {
        let doc = to_json(&rounds, &plan, &rev, &describe_head());
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    }
    Ok(if rounds.errors == 0 && rounds.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What the conformance server is built from, relative to the workspace root: a revision
/// that differs from this tree in none of them builds the same binary.
const SERVER_SOURCES: [&str; 5] = ["crates", "examples", "Cargo.toml", "Cargo.lock", ".cargo"];

/// Whether the tree at `root` (uncommitted changes included) has the same
/// [`SERVER_SOURCES`] as `commit`.
fn server_unchanged(root: &Path, commit: &str) -> Result<bool, String> {
    let out = Command::new("git")
        .args(["diff", "--quiet", commit, "--"])
        .args(SERVER_SOURCES)
        .current_dir(root)
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!(
            "git diff {commit}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// The quick comparison `cargo xtask test` runs against `rev` (or [`default_base`]): prints
/// the ratios and judges nothing, so it never fails the run; what kept it from running is
/// said instead.
pub(crate) fn quick_in_test(rev: Option<&str>) {
    let rev = match rev.map_or_else(default_base, resolve) {
        Ok(rev) => rev,
        Err(e) => {
            eprintln!("xtask: bench --against: SKIPPED: {e}");
            return;
        }
    };
    // CI on main compares each landing with the one before it, and most change no line the
    // server is built from: building the old server (minutes of CI) would then measure the
    // same binary twice.
    let root = crate::workspace::workspace_root();
    match server_unchanged(&root, &rev.commit) {
        Ok(true) => {
            eprintln!(
                "xtask: bench --against {}: SKIPPED: nothing the server is built from ({}) \
                 differs from {}, so both sides would be the same binary",
                short(&rev.commit),
                SERVER_SOURCES.join(", "),
                rev.rev
            );
            return;
        }
        Ok(false) => {}
        Err(e) => eprintln!("xtask: bench --against: comparing the sources: {e}; measuring"),
    }
    let mut args = BenchArgs::quick();
    args.only = vec![Only::Calls, Only::Episodes, Only::Idle, Only::Concurrency];
    match compare(&rev, &args) {
        Ok((rounds, plan, context)) => print!("{}", render(&rounds, &plan, &context)),
        Err(e) => eprintln!(
            "xtask: bench --against {}: SKIPPED: {e}",
            short(&rev.commit)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(values: &[(usize, Side, f64)]) -> Rounds {
        let mut r = Rounds::default();
        for &(round, side, v) in values {
            r.add(round, side, Figure::CallsPerS, Some(v));
        }
        r
    }

    #[test]
    fn ratios_are_new_over_old_per_round_with_the_medians_ratio() {
        let r = rounds(&[
            (0, Side::Old, 100.0),
            (0, Side::New, 90.0),
            (1, Side::New, 120.0),
            (1, Side::Old, 100.0),
            (2, Side::Old, 200.0),
            (2, Side::New, 210.0),
        ]);
        let ratios = r.ratios(Figure::CallsPerS);
        assert_eq!(ratios.len(), 3);
        assert!((ratios[0] - 0.9).abs() < 1e-12 && (ratios[1] - 1.2).abs() < 1e-12);
        let s = summarize(&r, Figure::CallsPerS);
        assert_eq!((s.old, s.new), (Some(100.0), Some(120.0)));
        assert!((s.ratio.unwrap() - 1.2).abs() < 1e-12);
        assert_eq!(s.spread, Some((0.9, 1.2)));
    }

    #[test]
    fn a_round_missing_a_side_gives_no_ratio_and_a_missing_figure_is_a_failure() {
        let mut r = rounds(&[
            (0, Side::Old, 100.0),
            (1, Side::Old, 100.0),
            (1, Side::New, 50.0),
        ]);
        assert_eq!(r.ratios(Figure::CallsPerS), [0.5]);
        r.add(2, Side::New, Figure::IdleBytes, None);
        assert_eq!(r.failures.len(), 1);
        assert!(
            r.failures[0].contains("bytes_per_idle_session"),
            "{:?}",
            r.failures
        );
        let table = render(&r, &RoundsPlan::new(&BenchArgs::quick()), "ctx");
        assert!(table.contains("0.500x"), "{table}");
        assert!(table.contains("!! 0 errors"), "{table}");
    }

    #[test]
    fn the_worktree_versions_get_a_suffix_in_package_sections_only() {
        let manifest = "[workspace.package]\nversion = \"0.1.0\"\n\n[workspace.dependencies]\n\
                        ors-core = { path = \"crates/ors-core\", version = \"0.1.0\" }\n\
                        [package]\nname = \"x\"\nversion = \"1.2.3\"\n\
                        [dependencies]\nversion = \"9\"";
        let out = suffixed_versions(manifest).unwrap();
        assert!(
            out.contains("[workspace.package]\nversion = \"0.1.0+against\"\n"),
            "{out}"
        );
        assert!(
            out.contains("version = \"1.2.3+against\"\n[dependencies]"),
            "{out}"
        );
        assert!(out.contains("version = \"0.1.0\" }"), "{out}");
        assert!(out.ends_with("version = \"9\""), "{out}");
        // Inherited versions, and versions already suffixed, are left alone.
        assert_eq!(
            suffixed_versions("[package]\nversion.workspace = true\n"),
            None
        );
        assert_eq!(suffixed_versions(&out), None);
    }

    #[test]
    fn a_revision_differing_only_outside_the_servers_sources_counts_as_unchanged() {
        let dir = std::env::temp_dir().join(format!("xtask-against-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("crates/a")).unwrap();
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        run(&["init", "--quiet"]);
        std::fs::write(dir.join("crates/a/lib.rs"), "fn a() {}\n").unwrap();
        std::fs::write(dir.join("README.md"), "one\n").unwrap();
        run(&["add", "."]);
        run(&["commit", "--quiet", "-m", "one"]);
        let first = git(&dir, &["rev-parse", "HEAD"]).unwrap();
        // A change to the docs (committed, then also uncommitted) builds the same server.
        std::fs::write(dir.join("README.md"), "two\n").unwrap();
        run(&["commit", "--quiet", "-am", "two"]);
        std::fs::write(dir.join("README.md"), "three\n").unwrap();
        assert_eq!(server_unchanged(&dir, &first), Ok(true));
        // An uncommitted change to a crate does not.
        std::fs::write(dir.join("crates/a/lib.rs"), "fn b() {}\n").unwrap();
        assert_eq!(server_unchanged(&dir, &first), Ok(false));
        assert!(server_unchanged(&dir, "0123456789abcdef0123456789abcdef01234567").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn medians_of_even_counts_are_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }
}
