//! Every conformance clause: one documented rule each, with a stable id.

mod auth;
mod calls;
mod chunking;
mod discovery;
mod robustness;
mod score_group;
mod sessions;

use super::support::Check;
use super::support::Ctx;

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

/// Every clause, in run order.
pub fn all() -> Vec<&'static Clause> {
    discovery::CLAUSES
        .iter()
        .chain(sessions::CLAUSES)
        .chain(calls::CLAUSES)
        .chain(score_group::CLAUSES)
        .chain(chunking::CLAUSES)
        .chain(auth::CLAUSES)
        .chain(robustness::CLAUSES)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_well_formed_and_grouped() {
        let all = all();
        assert!(all.len() >= 80, "only {} clauses", all.len());
        let mut seen = HashSet::new();
        for c in &all {
            assert!(seen.insert(c.id), "duplicate id {}", c.id);
            assert!(
                c.id.starts_with(&format!("{}.", c.group.name())),
                "{} is not in group {}",
                c.id,
                c.group.name()
            );
            assert!(
                c.id.chars().all(|ch| ch.is_ascii_lowercase()
                    || ch.is_ascii_digit()
                    || matches!(ch, '.' | '-' | '_')),
                "id {} has characters outside [a-z0-9._-]",
                c.id
            );
            assert!(!c.description.is_empty() && !c.description.contains('\n'));
        }
    }
}
