//! The cost of metrics on the hot path (issue 12: calls/s must not drop by more than 3% with
//! metrics on). Two servers from the same binary, one with `ORS_METRICS=off` and one with
//! `on`, take the `echo` calls workload in turns: pairs of rounds, each pair in the opposite
//! order of the last (off/on, on/off, ...), so a change in the machine's load during the run
//! falls on both sides alike. Each round's calls/s, the server's CPU per call over the same
//! window, and the load average before it are kept; the cost is the drop of the median
//! calls/s, with the spread of the pairs' own drops beside it.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::load::{brief, error_count, load_average, run_load, timed_args};
use super::plan::Plan;
use super::servers::{Kind, Launcher};
use crate::procs::ServerProcess;

/// The drop of calls/s with metrics on that the issue allows, in percent.
pub const LIMIT_PCT: f64 = 3.0;

/// Sessions calling `echo` at once (the table's `echo calls, 16 sessions`).
pub const SESSIONS: usize = 16;

/// One round: which server took it, the load generator's report and the 1-minute load average
/// just before it.
#[derive(Debug, Clone)]
pub struct Round {
    /// Whether the server had metrics on.
    pub metrics_on: bool,
    /// The `calls` workload's report.
    pub report: Value,
    /// `/proc/loadavg`'s first figure before the round.
    pub load: Option<f64>,
}

impl Round {
    fn rate(&self) -> Option<f64> {
        self.report["rate"].as_f64().filter(|r| *r > 0.0)
    }

    fn cpu_us_per_call(&self) -> Option<f64> {
        self.report["server_cpu_us_per_call"].as_f64()
    }

    fn side(&self) -> &'static str {
        if self.metrics_on {
            "on"
        } else {
            "off"
        }
    }
}

/// The rounds of one run, in the order they ran.
#[derive(Debug, Clone, Default)]
pub struct MetricsCost {
    /// Every round that produced a report.
    pub rounds: Vec<Round>,
    /// The measurement window of each round, seconds.
    pub round_s: f64,
    /// A `--quick` run: figures are shown, the 3% is not judged.
    pub quick: bool,
}

/// What the rounds add up to.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Median calls/s with metrics off.
    pub off: f64,
    /// Median calls/s with metrics on.
    pub on: f64,
    /// How much lower the median with metrics on is, in percent of the one with them off
    /// (negative: higher).
    pub cost_pct: f64,
    /// Each pair's own drop, in percent, sorted.
    pub paired_pct: Vec<f64>,
    /// Median server CPU per call (µs) off and on, and the rise with metrics on in percent.
    pub cpu_us: Option<(f64, f64, f64)>,
}

/// The value at quantile `p` of sorted `v`, interpolating between neighbours.
fn quantile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let at = p.clamp(0.0, 1.0) * last as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64))
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.5)
}

impl MetricsCost {
    /// The medians, the cost and the pairs' spread; `None` until both sides have a rate.
    pub fn summary(&self) -> Option<Summary> {
        let side = |on: bool| self.rounds.iter().filter(move |r| r.metrics_on == on);
        let off = median(side(false).filter_map(Round::rate))?;
        let on = median(side(true).filter_map(Round::rate))?;
        // Rounds run in pairs; a pair missing a side (a failed round) is left out.
        let mut paired_pct: Vec<f64> = self
            .rounds
            .chunks(2)
            .filter_map(|pair| {
                let rate = |want: bool| pair.iter().find(|r| r.metrics_on == want)?.rate();
                let (off, on) = (rate(false)?, rate(true)?);
                Some((off - on) / off * 100.0)
            })
            .collect();
        paired_pct.sort_by(f64::total_cmp);
        let cpu = |on: bool| median(side(on).filter_map(Round::cpu_us_per_call));
        let cpu_us = match (cpu(false), cpu(true)) {
            (Some(a), Some(b)) if a > 0.0 => Some((a, b, (b - a) / a * 100.0)),
            _ => None,
        };
        Some(Summary {
            off,
            on,
            cost_pct: (off - on) / off * 100.0,
            paired_pct,
            cpu_us,
        })
    }

    /// Whether the cost is within [`LIMIT_PCT`]; `None` in a quick run or without figures.
    pub fn within_limit(&self) -> Option<bool> {
        if self.quick {
            return None;
        }
        self.summary().map(|s| s.cost_pct <= LIMIT_PCT)
    }

    /// Errors of the load generator over every round.
    pub fn errors(&self) -> u64 {
        self.rounds.iter().map(|r| error_count(&r.report)).sum()
    }

    /// The `metrics_cost` object of the JSON report.
    pub fn to_json(&self) -> Value {
        let summary = self.summary();
        let spread = summary.as_ref().map(|s| {
            let q = |p| quantile(&s.paired_pct, p);
            json!({"min": q(0.0), "q1": q(0.25), "median": q(0.5), "q3": q(0.75), "max": q(1.0)})
        });
        json!({
            "sessions": SESSIONS,
            "round_s": self.round_s,
            "limit_pct": LIMIT_PCT,
            "rounds": self.rounds.iter().map(|r| json!({
                "metrics": r.side(),
                "calls_per_s": r.rate(),
                "server_cpu_us_per_call": r.cpu_us_per_call(),
                "p50_ms": r.report["p50_ms"],
                "p99_ms": r.report["p99_ms"],
                "errors": error_count(&r.report),
                "load_average": r.load,
            })).collect::<Vec<_>>(),
            "median_calls_per_s_off": summary.as_ref().map(|s| s.off),
            "median_calls_per_s_on": summary.as_ref().map(|s| s.on),
            "cost_pct": summary.as_ref().map(|s| s.cost_pct),
            "paired_cost_pct": spread,
            "server_cpu_us_per_call_off": summary.as_ref().and_then(|s| s.cpu_us.map(|c| c.0)),
            "server_cpu_us_per_call_on": summary.as_ref().and_then(|s| s.cpu_us.map(|c| c.1)),
            "server_cpu_cost_pct": summary.as_ref().and_then(|s| s.cpu_us.map(|c| c.2)),
            "within_limit": self.within_limit(),
            "errors": self.errors(),
        })
    }
}

/// Ask a server's `/metrics` whether its metrics are as meant (200 on, 404 off), so the two
/// sides really differ.
fn check_switch(server: &ServerProcess, on: bool) -> Result<(), String> {
    use ors_conformance::http::{Request, Target};
    let addr = server
        .url
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| format!("the server's address {}: {e}", server.url))?;
    let r = Request::new("GET", "/metrics").send(&Target::from_addr(addr))?;
    let want = if on { 200 } else { 404 };
    if r.status() == want {
        Ok(())
    } else {
        Err(format!(
            "/metrics of the server with metrics {} answered {}, not {want}",
            if on { "on" } else { "off" },
            r.status()
        ))
    }
}

fn start(launcher: &Launcher, on: bool) -> Result<ServerProcess, String> {
    let value = if on { "on" } else { "off" };
    let (server, _) = launcher.start_with(Kind::Ours, None, &[("ORS_METRICS", value)])?;
    check_switch(&server, on)?;
    Ok(server)
}

/// Run the interleaved rounds on our server, adding what went wrong to `failures`; none when
/// the servers did not start.
pub fn measure(
    launcher: &Launcher,
    plan: &Plan,
    failures: &mut Vec<String>,
) -> Option<MetricsCost> {
    let servers = match (start(launcher, false), start(launcher, true)) {
        (Ok(off), Ok(on)) => [off, on],
        (Err(e), _) | (_, Err(e)) => {
            failures.push(format!("metrics cost: launch: {e}"));
            return None;
        }
    };
    let (duration, warmup) = (plan.metrics_round, plan.metrics_warmup);
    let mut cost = MetricsCost {
        rounds: Vec::new(),
        round_s: duration,
        quick: plan.quick,
    };
    eprintln!(
        "bench: ours: metrics cost, {} rounds of {duration} s, metrics off and on in turns ...",
        plan.metrics_pairs * 2
    );
    'pairs: for pair in 0..plan.metrics_pairs {
        let order = if pair % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for on in order {
            let server = &servers[usize::from(on)];
            if !super::servers::alive(server.pid) {
                failures.push(format!(
                    "metrics cost: the server with metrics {} died",
                    if on { "on" } else { "off" }
                ));
                break 'pairs;
            }
            let load = load_average().and_then(|l| l.parse().ok());
            let pid = server.pid.to_string();
            let args = timed_args(
                "calls",
                SESSIONS,
                (duration, warmup),
                plan,
                &["--pid", &pid],
            );
            let round = cost.rounds.len() + 1;
            match run_load(&launcher.bench, &server.url, false, &args) {
                Ok(report) => {
                    let r = Round {
                        metrics_on: on,
                        report,
                        load,
                    };
                    eprintln!(
                        "bench: ours: metrics {:>3}, round {round}: {}",
                        r.side(),
                        brief(&r.report)
                    );
                    cost.rounds.push(r);
                }
                Err(e) => failures.push(format!("metrics cost, round {round}: {e}")),
            }
        }
    }
    Some(cost)
}

fn pct(v: f64) -> String {
    format!("{v:+.1}%")
}

/// The section printed after the main table.
pub fn render(cost: &MetricsCost) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nMetrics cost: our echo calls/s, {SESSIONS} sessions, ORS_METRICS=off vs on (same \
         binary, two servers), {} interleaved rounds of {} s",
        cost.rounds.len(),
        cost.round_s
    );
    let _ = writeln!(
        out,
        "{:>5}  {:<7}  {:>9}  {:>14}  {:>7}  {:>4}",
        "round", "metrics", "calls/s", "server us/call", "p99 ms", "load"
    );
    let opt = |v: Option<f64>, decimals: usize| {
        v.map_or_else(|| "-".to_owned(), |x| format!("{x:.decimals$}"))
    };
    for (i, r) in cost.rounds.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>5}  {:<7}  {:>9}  {:>14}  {:>7}  {:>4}",
            i + 1,
            r.side(),
            opt(r.rate(), 0),
            opt(r.cpu_us_per_call(), 1),
            opt(r.report["p99_ms"].as_f64(), 2),
            opt(r.load, 2),
        );
    }
    let Some(s) = cost.summary() else {
        let _ = writeln!(out, "no figures on one side or both: no cost");
        return out;
    };
    let q = |p| quantile(&s.paired_pct, p).map_or("-".to_owned(), pct);
    let _ = writeln!(
        out,
        "median calls/s: off {:.0}, on {:.0}: cost {} (drop with metrics on; pairs: median {}, \
         IQR {} .. {}, min {}, max {})",
        s.off,
        s.on,
        pct(s.cost_pct),
        q(0.5),
        q(0.25),
        q(0.75),
        q(0.0),
        q(1.0),
    );
    if let Some((off, on, rise)) = s.cpu_us {
        let _ = writeln!(
            out,
            "median server CPU per call: off {off:.1} us, on {on:.1} us ({} with metrics on)",
            pct(rise)
        );
    }
    let verdict = match cost.within_limit() {
        None => "not judged in a --quick run".to_owned(),
        Some(true) => format!("within {LIMIT_PCT}%"),
        Some(false) => format!("NOT within {LIMIT_PCT}%"),
    };
    let _ = writeln!(out, "{verdict}");
    out
}

/// The target line: met when the cost is within [`LIMIT_PCT`], with the figures.
pub fn target(cost: Option<&MetricsCost>) -> (Option<bool>, String) {
    let Some(cost) = cost else {
        return (None, "-".into());
    };
    let detail = cost.summary().map_or("-".into(), |s| {
        format!(
            "cost {} ({:.0} vs {:.0} calls/s, {} rounds)",
            pct(s.cost_pct),
            s.on,
            s.off,
            cost.rounds.len()
        )
    });
    (cost.within_limit(), detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(on: bool, rate: f64, cpu: f64) -> Round {
        Round {
            metrics_on: on,
            report: json!({"rate": rate, "server_cpu_us_per_call": cpu, "errors": {"count": 0}}),
            load: Some(1.0),
        }
    }

    fn cost(rounds: Vec<Round>) -> MetricsCost {
        MetricsCost {
            rounds,
            round_s: 5.0,
            quick: false,
        }
    }

    #[test]
    fn the_cost_is_the_drop_of_the_median_with_the_pairs_spread() {
        let c = cost(vec![
            round(false, 1000.0, 50.0),
            round(true, 990.0, 51.0),
            round(true, 900.0, 52.0),
            round(false, 1000.0, 50.0),
            round(false, 800.0, 60.0),
            round(true, 840.0, 58.0),
        ]);
        let s = c.summary().unwrap();
        assert_eq!((s.off, s.on), (1000.0, 900.0));
        assert!((s.cost_pct - 10.0).abs() < 1e-9, "{s:?}");
        // Pairs: 1%, 10%, -5%.
        let rounded: Vec<i64> = s.paired_pct.iter().map(|p| p.round() as i64).collect();
        assert_eq!(rounded, [-5, 1, 10]);
        let (off, on, rise) = s.cpu_us.unwrap();
        assert_eq!((off, on), (50.0, 52.0));
        assert!((rise - 4.0).abs() < 1e-9);
        assert_eq!(c.within_limit(), Some(false));
        let json = c.to_json();
        assert_eq!(json["within_limit"], false);
        assert_eq!(json["rounds"][1]["metrics"], "on");
        assert_eq!(
            json["paired_cost_pct"]["median"].as_f64().map(f64::round),
            Some(1.0)
        );
    }

    #[test]
    fn a_small_cost_is_within_the_limit_and_quick_runs_are_not_judged() {
        let rounds = vec![round(false, 1000.0, 50.0), round(true, 980.0, 50.5)];
        assert_eq!(cost(rounds.clone()).within_limit(), Some(true));
        let quick = MetricsCost {
            quick: true,
            ..cost(rounds)
        };
        assert_eq!(quick.within_limit(), None);
        assert!(render(&quick).contains("not judged"), "{}", render(&quick));
    }

    #[test]
    fn a_side_without_figures_gives_no_cost() {
        let c = cost(vec![round(false, 1000.0, 50.0)]);
        assert_eq!(c.summary(), None);
        assert_eq!(c.within_limit(), None);
        assert!(render(&c).contains("no cost"));
        // A pair with a failed round is left out of the spread, not counted as a zero.
        let c = cost(vec![
            round(false, 1000.0, 50.0),
            round(true, 0.0, 50.0),
            round(true, 970.0, 50.0),
            round(false, 1000.0, 50.0),
        ]);
        let s = c.summary().unwrap();
        assert_eq!(s.paired_pct.len(), 1);
        assert_eq!(s.on, 970.0);
    }

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), Some(2.5));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(4.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
