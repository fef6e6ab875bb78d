//! What a clause is: one rule of the protocol, its group and its check.

use crate::support::{Check, Ctx};

/// The four groups of the report, in run order: a clause's group is the first part of its id.
pub const GROUPS: [&str; 4] = ["discovery", "sessions", "calls", "robustness"];

/// One rule of the protocol and its check.
pub struct Clause {
    /// Stable id (`group.topic.detail`), used in expected-failure files.
    pub id: &'static str,
    /// One line saying what the server must do.
    pub description: &'static str,
    /// Only run with `--slow`.
    pub slow: bool,
    /// The check.
    pub check: fn(&Ctx) -> Check,
}

impl Clause {
    /// The group it belongs to (one of [`GROUPS`]), named by its id.
    pub fn group(&self) -> &'static str {
        self.id.split('.').next().unwrap_or_default()
    }
}

/// A clause (not slow).
pub const fn clause(
    id: &'static str,
    description: &'static str,
    check: fn(&Ctx) -> Check,
) -> Clause {
    Clause {
        id,
        description,
        slow: false,
        check,
    }
}
