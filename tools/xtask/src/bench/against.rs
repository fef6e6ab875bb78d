//! `cargo xtask bench --against REV`: the guard against speed regressions. REV's `conformance`
//! server is built in a git worktree, and the same workloads run on it and on this tree's,
//! driven by this tree's load generator, in alternating rounds (old/new, then new/old, ...),
//! so a change in the machine's load falls on both sides alike. Each figure is printed as its
//! ratio new ÷ old with the spread of the rounds' own ratios; nothing is judged.
//!
//! REV's server is built by [`super::revision`]. `--against bare` puts the bare hyper server
//! (canned answers, the machine's limit for this traffic) on the old side instead, so the
//! issue's "≥ 0.9× the limit" is judged from alternating rounds too, not from two runs one
//! after the other.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::args::{BenchArgs, Only};
use super::load::num;
use super::plan::Plan;
use super::revision::{
    default_base, describe_head, old_binary, resolve, server_unchanged, short, target_dir,
    Revision, SERVER_SOURCES,
};
use super::servers::{Kind, Launcher};
use crate::procs::ServerProcess;

/// The `--against` value that compares with the bare hyper server instead of a revision.
pub(crate) const BARE: &str = "bare";

/// What the old side runs.
enum Baseline {
    /// Another revision's `conformance` server.
    Revision(Revision),
    /// The bare hyper server (`ors-bench bare`), which has no sessions to hold idle.
    Bare,
}

impl Baseline {
    fn describe(&self) -> String {
        match self {
            Baseline::Revision(rev) => format!("{} ({})", rev.rev, short(&rev.commit)),
            Baseline::Bare => "bare (the bare hyper server with canned answers)".into(),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Baseline::Revision(_) => Kind::Ours,
            Baseline::Bare => Kind::Limit,
        }
    }
}

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
fn to_json(rounds: &Rounds, plan: &RoundsPlan, old: &Baseline, new: &str) -> Value {
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
        "old": match old {
            Baseline::Revision(rev) => json!({"rev": rev.rev, "commit": rev.commit}),
            Baseline::Bare => json!({"rev": BARE}),
        },
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

/// Both servers' launchers: the same load generator, each its own binary and logs.
struct Sides {
    old: Launcher,
    new: Launcher,
    /// What the old side's launcher starts: our server, or the bare one.
    old_kind: Kind,
}

impl Sides {
    fn get(&self, side: Side) -> &Launcher {
        match side {
            Side::Old => &self.old,
            Side::New => &self.new,
        }
    }

    fn kind(&self, side: Side) -> Kind {
        match side {
            Side::Old => self.old_kind,
            Side::New => Kind::Ours,
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
                    match sides.get(side).start(sides.kind(side), None) {
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
                let canned = sides.kind(side) == Kind::Limit;
                match super::load::run_load(&sides.get(side).bench, &s.url, canned, &load_args) {
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
        // The bare server keeps no sessions, so it has no idle figure to compare.
        if args.runs(Only::Idle) && sides.old_kind == Kind::Ours {
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
                    sides.kind(side),
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
fn prepare(base: &Baseline) -> Result<(Sides, Option<Duration>), String> {
    // The old side first: this tree's build then links its own binary in the shared target
    // directory again.
    let (old_bin, old_build) = match base {
        Baseline::Revision(rev) => {
            let (bin, took) = old_binary(rev)?;
            (Some(bin), took)
        }
        Baseline::Bare => (None, None),
    };
    let built = super::build::build(&[Kind::Ours], false, false)?;
    let new_bin = match (built.ours, built.failure) {
        (Some(bin), _) => bin,
        (None, failure) => {
            return Err(failure.unwrap_or_else(|| "this tree's server did not build".into()))
        }
    };
    let logs = target_dir().join("bench-logs");
    let launcher = |bin: Option<PathBuf>, name: &str| -> Result<Launcher, String> {
        let dir = logs.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(Launcher {
            ours: bin,
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
            new: launcher(Some(new_bin), "against-new")?,
            old_kind: base.kind(),
        },
        old_build,
    ))
}

/// Compare this tree with `rev`; the rounds, the table and the context line.
fn compare(base: &Baseline, args: &BenchArgs) -> Result<(Rounds, RoundsPlan, String), String> {
    let plan = RoundsPlan::new(args);
    let (sides, old_build) = prepare(base)?;
    if args.runs(Only::Concurrency) {
        super::concurrency::raise_fd_limit(plan.concurrency_sessions)?;
    }
    let load_before = super::load::load_average();
    let started = Instant::now();
    let rounds = measure(&sides, args, &plan);
    let context = format!(
        "bench --against {} = old, this tree ({}) = new: {} rounds in turns, {} s windows; \
         {} s in all{}; load average {} before, {} after",
        base.describe(),
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
    let base = if rev == BARE {
        Baseline::Bare
    } else {
        Baseline::Revision(resolve(rev)?)
    };
    let (rounds, plan, context) = compare(&base, args)?;
    print!("{}", render(&rounds, &plan, &context));
    if let Some(path) = &args.json {
        let doc = to_json(&rounds, &plan, &base, &describe_head());
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
    let commit = short(&rev.commit).to_owned();
    match compare(&Baseline::Revision(rev), &args) {
        Ok((rounds, plan, context)) => print!("{}", render(&rounds, &plan, &context)),
        Err(e) => eprintln!("xtask: bench --against {commit}: SKIPPED: {e}"),
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
    fn medians_of_even_counts_are_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }
}
