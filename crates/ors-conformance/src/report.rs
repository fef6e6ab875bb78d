//! Results: per-clause lines as they happen, the expected-failures file, the summary whose
//! last line CI parses (`N passed, M failed`), and the JSON report.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::clauses::Clause;

/// Clause ids known to fail, each with its reason.
#[derive(Debug, Default, Clone)]
pub struct ExpectedFailures {
    reasons: BTreeMap<String, String>,
}

impl ExpectedFailures {
    /// Parse `clause-id  # reason` lines; blank lines and lines starting with `#` are ignored.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut reasons = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, reason) = line.split_once('#').unwrap_or((line, ""));
            let (id, reason) = (id.trim(), reason.trim());
            if id.contains(char::is_whitespace) {
                return Err(format!(
                    "line {}: {line:?} is not `clause-id  # reason`",
                    n + 1
                ));
            }
            if reason.is_empty() {
                return Err(format!("line {}: {id} has no `# reason`", n + 1));
            }
            reasons.insert(id.to_owned(), reason.to_owned());
        }
        Ok(Self { reasons })
    }

    /// Read and parse a file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The reason a clause is expected to fail, if it is.
    pub fn reason(&self, id: &str) -> Option<&str> {
        self.reasons.get(id).map(String::as_str)
    }

    /// Every listed id.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.reasons.keys().map(String::as_str)
    }
}

/// What happened to one clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The server did what the clause requires.
    Pass,
    /// It did not; the reason.
    Fail(String),
    /// Not run (slow clause without `--slow`), or not applicable to this server.
    Skip(String),
}

/// One clause's result.
pub struct Outcome {
    /// The clause.
    pub clause: &'static Clause,
    /// Pass, fail or skip.
    pub status: Status,
    /// Why it was expected to fail, if listed.
    pub expected: Option<String>,
    /// How long the check took.
    pub duration: Duration,
}

impl Outcome {
    /// Whether the clause failed.
    pub fn failed(&self) -> bool {
        matches!(self.status, Status::Fail(_))
    }

    /// The line printed for this outcome.
    pub fn line(&self) -> String {
        match &self.status {
            Status::Pass => format!("PASS {}", self.clause.id),
            Status::Fail(reason) => match &self.expected {
                Some(why) => format!("FAIL {}: {reason} [expected: {why}]", self.clause.id),
                None => format!("FAIL {}: {reason}", self.clause.id),
            },
            Status::Skip(why) => format!("SKIP {}: {why}", self.clause.id),
        }
    }
}

/// A whole run.
pub struct Report {
    /// The server checked.
    pub url: String,
    /// The fixture environment.
    pub env: String,
    /// Every clause's outcome, in run order.
    pub outcomes: Vec<Outcome>,
    /// Expected-failure ids that name no clause.
    pub unknown_expected: Vec<String>,
    /// Wall time of the run.
    pub duration: Duration,
}

impl Report {
    /// The ids of the clauses whose outcome `keep` selects.
    fn ids(&self, keep: impl Fn(&Outcome) -> bool) -> Vec<&'static str> {
        self.outcomes
            .iter()
            .filter(|o| keep(o))
            .map(|o| o.clause.id)
            .collect()
    }

    /// Clauses that passed.
    pub fn passed(&self) -> usize {
        self.ids(|o| o.status == Status::Pass).len()
    }

    /// Clauses that failed (expected or not).
    pub fn failed(&self) -> usize {
        self.ids(Outcome::failed).len()
    }

    /// Failed clauses not in the expected-failures file.
    pub fn unexpected_failures(&self) -> Vec<&'static str> {
        self.ids(|o| o.failed() && o.expected.is_none())
    }

    /// Failed clauses that were expected to fail.
    pub fn expected_failures(&self) -> Vec<&'static str> {
        self.ids(|o| o.failed() && o.expected.is_some())
    }

    /// Clauses listed as expected failures that passed.
    pub fn unexpected_passes(&self) -> Vec<&'static str> {
        self.ids(|o| o.status == Status::Pass && o.expected.is_some())
    }

    /// Whether the failures are exactly the expected ones (no surprise either way).
    pub fn matches_expectations(&self) -> bool {
        self.unexpected_failures().is_empty()
            && self.unexpected_passes().is_empty()
            && self.unknown_expected.is_empty()
    }

    /// The summary lines; the last is exactly `N passed, M failed`.
    pub fn summary(&self, expected_file: Option<&Path>) -> Vec<String> {
        let mut lines = Vec::new();
        for id in self.unexpected_passes() {
            lines.push(format!(
                "note: {id} passes but is listed as an expected failure"
            ));
        }
        for id in &self.unknown_expected {
            lines.push(format!(
                "note: the expected-failures file names no clause {id:?}"
            ));
        }
        let expected = self.expected_failures().len();
        if expected > 0 {
            let file = expected_file
                .map(|p| format!(" (listed in {})", p.display()))
                .unwrap_or_default();
            lines.push(format!("{expected} expected failures{file}"));
        }
        let unexpected = self.unexpected_failures();
        if !unexpected.is_empty() {
            lines.push(format!("unexpected failures: {}", unexpected.join(", ")));
        }
        let skipped = self.ids(|o| matches!(o.status, Status::Skip(_))).len();
        if skipped > 0 {
            lines.push(format!("{skipped} skipped"));
        }
        lines.push(format!(
            "checked {} in {:.1} s",
            self.url,
            self.duration.as_secs_f64()
        ));
        lines.push(format!(
            "{} passed, {} failed",
            self.passed(),
            self.failed()
        ));
        lines
    }

    /// The JSON report.
    pub fn to_json(&self) -> Value {
        let clauses: Vec<Value> = self
            .outcomes
            .iter()
            .map(|o| {
                let (status, reason) = match &o.status {
                    Status::Pass if o.expected.is_some() => ("xpass", None),
                    Status::Pass => ("pass", None),
                    Status::Fail(r) if o.expected.is_some() => ("xfail", Some(r.clone())),
                    Status::Fail(r) => ("fail", Some(r.clone())),
                    Status::Skip(r) => ("skip", Some(r.clone())),
                };
                json!({
                    "id": o.clause.id,
                    "group": o.clause.group(),
                    "description": o.clause.description,
                    "status": status,
                    "reason": reason,
                    "expected_failure": o.expected,
                    "duration_ms": o.duration.as_millis() as u64,
                })
            })
            .collect();
        json!({
            "url": self.url,
            "env": self.env,
            "passed": self.passed(),
            "failed": self.failed(),
            "expected_failures": self.expected_failures(),
            "unexpected_failures": self.unexpected_failures(),
            "unexpected_passes": self.unexpected_passes(),
            "duration_ms": self.duration.as_millis() as u64,
            "clauses": clauses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_expected_failures() {
        let e = ExpectedFailures::parse(
            "# header\n\nsessions.delete.twice-410  # answers 200\ncalls.x # why\n",
        )
        .expect("parses");
        assert_eq!(e.reason("sessions.delete.twice-410"), Some("answers 200"));
        assert_eq!(e.reason("calls.x"), Some("why"));
        assert_eq!(e.ids().count(), 2);
    }

    #[test]
    fn an_expected_failure_needs_a_reason() {
        assert!(ExpectedFailures::parse("calls.x\n").is_err());
        assert!(ExpectedFailures::parse("calls x # two words\n").is_err());
    }
}
