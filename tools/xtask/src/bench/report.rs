//! The benchmark's table (ours, reference, limit and the ratios), its targets from the
//! benchmark issue, and their JSON form.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};

use super::load::{error_count, num};
use super::measured::Measured;
use super::plan::{Plan, TARGET_P99_MS, TARGET_SESSIONS};

/// The row of the agent workload (where ours and the reference are clients).
const AGENT_ROW: &str = "agent episodes (client), 16 at once";

/// Column order of the three servers.
const SERVERS: [&str; 3] = ["ours", "reference", "limit"];

/// One table row: a metric and its value on each server (if measured).
struct Row {
    metric: String,
    unit: &'static str,
    values: [Option<f64>; 3],
    /// Whether the servers were measured under the same conditions (ratios make sense).
    comparable: bool,
}

impl Row {
    fn ratio(&self, other: usize) -> Option<f64> {
        if !self.comparable {
            return None;
        }
        match (self.values[0], self.values[other]) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        }
    }
}

/// One target of the issue and whether this run met it (`None`: not measured).
struct Target {
    name: String,
    met: Option<bool>,
    detail: String,
}

/// The rows and the targets of one run.
pub struct Report {
    rows: Vec<Row>,
    targets: Vec<Target>,
    /// A `--quick` run: its windows are too short to judge targets by, so none is printed.
    quick: bool,
}

fn workload(m: Option<&Measured>, key: &str, field: &str) -> Option<f64> {
    m?.workloads.get(key)?.get(field)?.as_f64()
}

fn idle_field(m: Option<&Measured>, field: &str) -> Option<f64> {
    m?.idle.as_ref()?.get(field)?.as_f64()
}

/// The idle step of `m` at exactly `n` sessions requested.
fn idle_step(m: Option<&Measured>, n: usize) -> Option<&Value> {
    m?.idle.as_ref()?["steps"]
        .as_array()?
        .iter()
        .find(|s| s["target"].as_u64() == Some(n as u64))
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), num)
}

fn times(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{}x", num(x)))
}

impl Report {
    /// Compute the rows and check the targets.
    pub fn new(results: &BTreeMap<&str, Measured>, plan: &Plan) -> Self {
        let mut rows: Vec<Row> = Vec::new();
        let mut row =
            |metric: String, unit: &'static str, f: &dyn Fn(Option<&Measured>) -> Option<f64>| {
                let values = SERVERS.map(|s| f(results.get(s)));
                rows.push(Row {
                    metric,
                    unit,
                    values,
                    comparable: true,
                });
            };
        row("start-up to ready line".into(), "ms", &|m| {
            median(&m?.startup_ms)
        });
        for (key, what, unit) in [
            ("calls_16", "echo calls, 16 sessions", "calls/s"),
            ("calls_256", "echo calls, 256 sessions", "calls/s"),
            ("episodes_16", "episodes, 16 at once", "episodes/s"),
            ("episodes_256", "episodes, 256 at once", "episodes/s"),
        ] {
            row(what.into(), unit, &|m| workload(m, key, "rate"));
            for p in ["p50", "p90", "p99", "max"] {
                let field = format!("{p}_ms");
                row(format!("  latency {p}"), "ms", &|m| {
                    workload(m, key, &field)
                });
            }
        }
        row("1 MiB result through SSE".into(), "MB/s", &|m| {
            workload(m, "big", "mb_per_s")
        });
        row("  latency p50".into(), "ms", &|m| {
            workload(m, "big", "p50_ms")
        });
        // Clients, not servers: our Agent and the reference client's loop, same server.
        row(AGENT_ROW.into(), "episodes/s", &|m| {
            workload(m, super::agent::KEY, "rate")
        });
        for p in ["p50", "p99"] {
            let field = format!("{p}_ms");
            row(format!("  latency {p}"), "ms", &|m| {
                workload(m, super::agent::KEY, &field)
            });
        }
        for &n in &plan.idle_ours {
            row(format!("idle sessions: memory at {n}"), "B/session", &|m| {
                idle_step(m, n)?["bytes_per_session"].as_f64()
            });
        }
        let mib = |m: Option<&Measured>, f: &str| idle_field(m, f).map(|k| k / 1024.0);
        let most = plan.idle_ours.last().copied().unwrap_or(0);
        let most_ref = plan.idle_ref.last().copied().unwrap_or(0);
        let other = if most == most_ref {
            String::new()
        } else {
            format!(" (reference: {most_ref})")
        };
        row("  server RSS before".into(), "MiB", &|m| {
            mib(m, "baseline_kib")
        });
        row(format!("  server RSS with {most}{other}"), "MiB", &|m| {
            mib(m, "peak_kib")
        });
        row(
            format!("  server RSS after deleting them{other}"),
            "MiB",
            &|m| mib(m, "after_delete_kib"),
        );
        row("errors".into(), "count", &|m| m.map(|m| m.errors() as f64));
        if most != most_ref {
            // Ours and the reference held different numbers of sessions: no ratio.
            let n = rows.len();
            for r in &mut rows[n - 3..n - 1] {
                r.comparable = false;
            }
        }
        let targets = targets(&rows, results, plan);
        Self {
            rows,
            targets,
            quick: plan.quick,
        }
    }

    /// The table, the targets and the error details, as printed.
    pub fn render(
        &self,
        results: &BTreeMap<&str, Measured>,
        context: &str,
        elapsed: Duration,
    ) -> String {
        let mut out = String::new();
        let errors: Vec<String> = SERVERS
            .iter()
            .filter_map(|s| results.get(s).map(|m| (s, m.errors())))
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        if !errors.is_empty() {
            let _ = writeln!(
                out,
                "!! THIS RUN HAD ERRORS ({}); the figures below are not trustworthy. Details at the end.\n",
                errors.join(", ")
            );
        }
        let _ = writeln!(out, "{context}\n");
        let header = [
            "metric",
            "unit",
            "ours",
            "reference",
            "limit",
            "ours/ref",
            "ours/limit",
        ];
        // Rows nothing was measured for (a run with --only) are left out.
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .filter(|r| r.values.iter().any(Option::is_some))
            .map(|r| {
                [
                    r.metric.clone(),
                    r.unit.to_owned(),
                    opt(r.values[0]),
                    opt(r.values[1]),
                    opt(r.values[2]),
                    times(r.ratio(1)),
                    times(r.ratio(2)),
                ]
            })
            .collect();
        let mut width = header.map(str::len);
        for c in &cells {
            for (w, s) in width.iter_mut().zip(c) {
                *w = (*w).max(s.chars().count());
            }
        }
        let line = |cols: &[String]| -> String {
            let mut s = String::new();
            for (i, (c, w)) in cols.iter().zip(width).enumerate() {
                if i < 2 {
                    let _ = write!(s, "{c:<w$}  ");
                } else {
                    let _ = write!(s, "{c:>w$}  ");
                }
            }
            s.trim_end().to_owned()
        };
        let _ = writeln!(out, "{}", line(&header.map(str::to_owned)));
        let _ = writeln!(out, "{}", "-".repeat(width.iter().sum::<usize>() + 12));
        for c in &cells {
            let _ = writeln!(out, "{}", line(c));
        }
        let met = self.targets.iter().filter(|t| t.met == Some(true)).count();
        if self.quick {
            // A second per workload proves the benchmark runs; judging targets on it would
            // print alarming "NOT met" lines that mean nothing.
            let _ = writeln!(
                out,
                "\nTargets (issues 6, 12, 13): not judged in a --quick run (windows too short); \
                 run `cargo xtask bench` for them"
            );
        } else {
            let _ = writeln!(
                out,
                "\nTargets (issues 6, 12, 13): {met} of {} met",
                self.targets.len()
            );
        }
        for t in self.targets.iter().filter(|_| !self.quick) {
            let mark = match t.met {
                Some(true) => "met    ",
                Some(false) => "NOT met",
                None => "n/a    ",
            };
            let _ = writeln!(out, "  [{mark}] {}: {}", t.name, t.detail);
        }
        for s in SERVERS {
            let Some(m) = results.get(s) else { continue };
            if m.errors() == 0 {
                continue;
            }
            let _ = writeln!(out, "\nErrors on {s}:");
            for f in &m.failures {
                let _ = writeln!(out, "  {f}");
            }
            let idle = m.idle.iter().map(|v| ("idle".to_owned(), v));
            let concurrency = m
                .concurrency
                .iter()
                .map(|(n, v)| (format!("concurrency {n}"), v));
            let workloads = m.workloads.iter().map(|(k, v)| (k.clone(), v));
            for (key, v) in workloads.chain(idle).chain(concurrency) {
                let n = v["errors"]["count"].as_u64().unwrap_or(0);
                if n == 0 {
                    continue;
                }
                let _ = writeln!(out, "  {key}: {n} errors {}", v["errors"]["by_kind"]);
                for sample in v["errors"]["samples"].as_array().into_iter().flatten() {
                    let _ = writeln!(out, "    {}", sample.as_str().unwrap_or(""));
                }
            }
        }
        let _ = writeln!(out, "\nbench took {:.0} s", elapsed.as_secs_f64());
        out
    }

    /// The rows as JSON.
    pub fn rows_json(&self) -> Value {
        self.rows
            .iter()
            .map(|r| {
                json!({
                    "metric": r.metric.trim(),
                    "unit": r.unit,
                    "ours": r.values[0],
                    "reference": r.values[1],
                    "limit": r.values[2],
                    "ours_over_reference": r.ratio(1),
                    "ours_over_limit": r.ratio(2),
                })
            })
            .collect()
    }

    /// The targets as JSON.
    pub fn targets_json(&self) -> Value {
        self.targets
            .iter()
            .map(|t| json!({"target": t.name, "met": t.met, "detail": t.detail}))
            .collect()
    }
}

fn find<'a>(rows: &'a [Row], metric: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.metric == metric)
}

/// A ratio target: `ours / other >= min` on the row named `metric`.
fn ratio_target(rows: &[Row], metric: &str, other: usize, min: f64) -> Target {
    let r = find(rows, metric).and_then(|r| r.ratio(other));
    Target {
        name: format!("{metric}: >= {min}x the {}", SERVERS[other]),
        met: r.map(|r| r >= min),
        detail: times(r),
    }
}

fn targets(rows: &[Row], results: &BTreeMap<&str, Measured>, plan: &Plan) -> Vec<Target> {
    let mut t = Vec::new();
    for metric in ["echo calls, 16 sessions", "echo calls, 256 sessions"] {
        t.push(ratio_target(rows, metric, 1, 50.0));
        t.push(ratio_target(rows, metric, 2, 0.6));
    }
    let p99 = rows
        .iter()
        .skip_while(|r| r.metric != "echo calls, 16 sessions")
        .find(|r| r.metric.trim() == "latency p99")
        .and_then(|r| r.values[0]);
    t.push(Target {
        name: "echo calls, 16 sessions: p99 <= 2 ms".into(),
        met: p99.map(|v| v <= 2.0),
        detail: p99.map_or("-".into(), |v| format!("{} ms", num(v))),
    });
    for metric in ["episodes, 16 at once", "episodes, 256 at once"] {
        t.push(ratio_target(rows, metric, 1, 30.0));
        t.push(ratio_target(rows, metric, 2, 0.5));
    }
    let ours = results.get("ours");
    let last = plan.idle_ours.last().copied().unwrap_or(0);
    let step = idle_step(ours, last);
    let per = step.and_then(|s| s["bytes_per_session"].as_f64());
    let all_made = step.and_then(|s| s["sessions"].as_u64()) == Some(last as u64);
    let idle_errors = ours.and_then(|m| m.idle.as_ref()).map_or(0, error_count);
    t.push(Target {
        name: format!("idle: <= 2 KiB per session at {last}, all created without errors"),
        met: per.map(|b| b <= 2048.0 && all_made && idle_errors == 0),
        detail: format!(
            "{} B/session, {} created, {idle_errors} errors",
            opt(per),
            step.map_or("-".into(), |s| s["sessions"].to_string())
        ),
    });
    let (base, peak, after) = (
        idle_field(ours, "baseline_kib"),
        idle_field(ours, "peak_kib"),
        idle_field(ours, "after_delete_kib"),
    );
    let returned = match (base, peak, after) {
        (Some(b), Some(p), Some(a)) if p > b => Some((p - a) / (p - b)),
        _ => None,
    };
    t.push(Target {
        name: "idle: memory returned after deleting them (>= 75% of the growth)".into(),
        met: returned.map(|r| r >= 0.75),
        detail: returned.map_or("-".into(), |r| format!("{:.0}% returned", r * 100.0)),
    });
    t.push(ratio_target(rows, AGENT_ROW, 1, 20.0));
    let mbs = find(rows, "1 MiB result through SSE").and_then(|r| r.values[0]);
    t.push(Target {
        name: "1 MiB result: >= 200 MB/s".into(),
        met: mbs.map(|v| v >= 200.0),
        detail: mbs.map_or("-".into(), |v| format!("{} MB/s", num(v))),
    });
    let (met, detail) = super::concurrency::target(results);
    t.push(Target {
        name: format!(
            "concurrency: {} sessions calling sleep, 100% success and p99 <= {} ms",
            TARGET_SESSIONS, TARGET_P99_MS
        ),
        met,
        detail,
    });
    let (met, detail) =
        super::metrics::target(results.get("ours").and_then(|m| m.metrics.as_ref()));
    t.push(Target {
        name: format!(
            "metrics on: echo calls/s at most {}% below metrics off (interleaved rounds)",
            super::metrics::LIMIT_PCT
        ),
        met,
        detail,
    });
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::Plan;

    fn plan() -> Plan {
        Plan {
            quick: true,
            duration: 1.0,
            warmup: 0.2,
            ref_duration: 1.0,
            ref_warmup: 0.2,
            idle_ours: vec![1_000, 5_000],
            idle_ref: vec![1_000],
            launches: 1,
            client_threads: 1,
            concurrency_ours: vec![256],
            concurrency_ref: vec![256],
            concurrency_duration: 3.0,
            concurrency_warmup: 1.0,
            metrics_pairs: 2,
            metrics_round: 1.0,
            metrics_warmup: 0.2,
            sandbox_rounds: 10,
            sandbox_later: 5,
            sandbox_sessions: vec![20],
            sandbox_window: 3.0,
            sandbox_warmup: 1.0,
        }
    }

    fn calls(rate: f64, p99: f64, errors: u64) -> Measured {
        let mut m = Measured::default();
        m.workloads.insert(
            "calls_16".into(),
            json!({"rate": rate, "p99_ms": p99, "errors": {"count": errors}}),
        );
        m
    }

    fn target<'a>(r: &'a Report, name: &str) -> &'a Target {
        r.targets
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no target {name}"))
    }

    #[test]
    fn ratio_targets_compare_ours_with_the_others() {
        let mut results = BTreeMap::new();
        results.insert("ours", calls(60_000.0, 1.5, 0));
        results.insert("reference", calls(1_000.0, 150.0, 0));
        results.insert("limit", calls(120_000.0, 1.0, 0));
        let r = Report::new(&results, &plan());
        let vs_ref = target(&r, "echo calls, 16 sessions: >= 50x the reference");
        assert_eq!(vs_ref.met, Some(true));
        assert_eq!(vs_ref.detail, "60.0x");
        let vs_limit = target(&r, "echo calls, 16 sessions: >= 0.6x the limit");
        assert_eq!(vs_limit.met, Some(false));
        let p99 = target(&r, "echo calls, 16 sessions: p99 <= 2 ms");
        assert_eq!(p99.met, Some(true));
        // Nothing measured: not applicable rather than failed.
        let big = target(&r, "1 MiB result: >= 200 MB/s");
        assert_eq!(big.met, None);
    }

    #[test]
    fn a_run_with_errors_says_so_first() {
        let mut results = BTreeMap::new();
        results.insert("ours", calls(60_000.0, 1.5, 3));
        let r = Report::new(&results, &plan());
        let text = r.render(&results, "context", Duration::from_secs(1));
        assert!(
            text.starts_with("!! THIS RUN HAD ERRORS (ours: 3)"),
            "{text}"
        );
        let clean = BTreeMap::from([("ours", calls(60_000.0, 1.5, 0))]);
        let text = Report::new(&clean, &plan()).render(&clean, "context", Duration::ZERO);
        assert!(text.starts_with("context"), "{text}");
    }

    #[test]
    fn a_quick_run_judges_no_target() {
        // 60k calls/s against a limit of 1M: "NOT met" in a full run.
        let mut results = BTreeMap::new();
        results.insert("ours", calls(60_000.0, 1.5, 0));
        results.insert("limit", calls(1_000_000.0, 1.0, 0));
        let full = Plan {
            quick: false,
            ..plan()
        };
        let text = Report::new(&results, &full).render(&results, "context", Duration::ZERO);
        assert!(text.contains("[NOT met]"), "{text}");
        let text = Report::new(&results, &plan()).render(&results, "context", Duration::ZERO);
        assert!(!text.contains("met]"), "{text}");
        assert!(text.contains("not judged in a --quick run"), "{text}");
    }

    #[test]
    fn rss_rows_of_different_session_counts_have_no_ratio() {
        let idle = json!({"baseline_kib": 1024, "peak_kib": 4096, "after_delete_kib": 2048,
            "steps": [], "errors": {"count": 0}});
        let ours = Measured {
            idle: Some(idle.clone()),
            ..Measured::default()
        };
        let reference = Measured {
            idle: Some(idle),
            ..Measured::default()
        };
        let results = BTreeMap::from([("ours", ours), ("reference", reference)]);
        let r = Report::new(&results, &plan());
        let rows = r.rows_json();
        let row = |name: &str| {
            rows.as_array()
                .and_then(|a| a.iter().find(|x| x["metric"] == name))
                .cloned()
                .unwrap_or_else(|| panic!("no row {name}"))
        };
        assert_eq!(row("server RSS before")["ours_over_reference"], 1.0);
        let with = row("server RSS with 5000 (reference: 1000)");
        assert_eq!(with["ours"], 4.0);
        assert!(with["ours_over_reference"].is_null());
        let returned = target(
            &r,
            "idle: memory returned after deleting them (>= 75% of the growth)",
        );
        assert_eq!(returned.met, Some(false));
        assert_eq!(returned.detail, "67% returned");
    }

    #[test]
    fn numbers_keep_sensible_precision() {
        assert_eq!(num(65_432.1), "65432");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(1.2345), "1.23");
        assert_eq!(num(0.01234), "0.012");
        assert_eq!(num(0.0), "0");
    }
}
