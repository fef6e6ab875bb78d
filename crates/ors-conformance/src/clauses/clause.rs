//! What a clause is: one rule of the protocol, its group and its check.

use crate::support::{Check, Ctx};

/// The four groups of the report, in run order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Health, environments, tools, splits, tasks.
    Discovery,
    /// Session lifecycle and its errors.
    Sessions,
    /// Tool calls and their SSE streams.
    Calls,
    /// Malformed and abusive requests.
    Robustness,
}

impl Group {
    /// The group's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Group::Discovery => "discovery",
            Group::Sessions => "sessions",
            Group::Calls => "calls",
            Group::Robustness => "robustness",
        }
    }
}

/// One rule of the protocol and its check.
pub struct Clause {
    /// Stable id (`group.topic.detail`), used in expected-failure files.
    pub id: &'static str,
    /// The group it belongs to.
    pub group: Group,
    /// One line saying what the server must do.
    pub description: &'static str,
    /// Only run with `--slow`.
    pub slow: bool,
    /// The check.
    pub check: fn(&Ctx) -> Check,
}

/// A clause of `group` (not slow).
pub const fn clause(
    group: Group,
    id: &'static str,
    description: &'static str,
    check: fn(&Ctx) -> Check,
) -> Clause {
    Clause {
        id,
        group,
        description,
        slow: false,
        check,
    }
}
