//! Latency samples and error counts, kept per worker and merged at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::client::{FailKind, Failure};

/// How many distinct error messages a report quotes.
const MAX_SAMPLES: usize = 8;

/// Latencies of the operations completed inside the measurement window, and bytes moved.
#[derive(Debug, Default)]
pub struct Recorder {
    latencies_ns: Vec<u64>,
    /// Payload bytes of the recorded operations (only the `big` workload counts them).
    pub bytes: u64,
}

impl Recorder {
    /// Record one operation of the given duration.
    pub fn record(&mut self, took: Duration) {
        self.latencies_ns
            .push(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Add another worker's samples.
    pub fn merge(&mut self, other: Recorder) {
        self.latencies_ns.extend(other.latencies_ns);
        self.bytes += other.bytes;
    }

    /// How many operations were recorded.
    pub fn ops(&self) -> u64 {
        self.latencies_ns.len() as u64
    }

    /// Rate, percentiles (in ms) and bytes for a window of `window` length.
    pub fn summary(&mut self, window: Duration) -> Value {
        self.latencies_ns.sort_unstable();
        let secs = window.as_secs_f64().max(1e-9);
        let ms = |p: f64| percentile(&self.latencies_ns, p) as f64 / 1e6;
        json!({
            "ops": self.ops(),
            "window_s": secs,
            "rate": self.ops() as f64 / secs,
            "p50_ms": ms(0.50),
            "p90_ms": ms(0.90),
            "p99_ms": ms(0.99),
            "max_ms": ms(1.0),
            "bytes": self.bytes,
            "mb_per_s": self.bytes as f64 / secs / 1e6,
        })
    }
}

/// The nearest-rank percentile of sorted samples (0 when there are none).
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Every failure counted, by kind, with a few distinct messages quoted.
#[derive(Debug, Default)]
pub struct Errors {
    count: u64,
    by_kind: BTreeMap<&'static str, u64>,
    samples: Vec<String>,
}

impl Errors {
    /// Count one failure.
    pub fn add(&mut self, f: &Failure) {
        self.count += 1;
        let kind = match f.kind {
            FailKind::Transport => "transport",
            FailKind::Timeout => "timeout",
            FailKind::Status => "status",
            FailKind::Check => "check",
        };
        *self.by_kind.entry(kind).or_default() += 1;
        if self.samples.len() < MAX_SAMPLES && !self.samples.contains(&f.msg) {
            self.samples.push(f.msg.clone());
        }
    }

    /// Count a failure that is not a request (a worker that never finished, a time limit).
    pub fn add_other(&mut self, msg: impl Into<String>) {
        self.add(&Failure {
            kind: FailKind::Check,
            msg: msg.into(),
        });
    }

    /// Add another worker's errors.
    pub fn merge(&mut self, other: Errors) {
        self.count += other.count;
        for (k, v) in other.by_kind {
            *self.by_kind.entry(k).or_default() += v;
        }
        for s in other.samples {
            if self.samples.len() < MAX_SAMPLES && !self.samples.contains(&s) {
                self.samples.push(s);
            }
        }
    }

    /// The count, the counts by kind and the quoted messages.
    pub fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "by_kind": self.by_kind,
            "samples": self.samples,
        })
    }
}

/// CPU time (user + system) of a process, in seconds, from `/proc/{which}/stat` (`which` is a
/// process id or `self`). Clock ticks are taken to be 100 per second, as on every mainstream
/// Linux.
pub fn cpu_secs(which: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{which}/stat")).ok()?;
    // The command name may contain spaces; the fields after it start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&[7], 0.5), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn errors_count_every_failure_but_quote_each_message_once() {
        let mut e = Errors::default();
        for _ in 0..3 {
            e.add(&Failure {
                kind: FailKind::Status,
                msg: "HTTP 503".into(),
            });
        }
        e.add_other("worker did not finish");
        let j = e.to_json();
        assert_eq!(j["count"], 4);
        assert_eq!(j["by_kind"]["status"], 3);
        assert_eq!(j["samples"].as_array().map(Vec::len), Some(2));
    }
}
