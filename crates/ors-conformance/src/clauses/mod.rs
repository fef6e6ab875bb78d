//! Every conformance clause: one documented rule each, with a stable id.

mod auth;
mod calls;
mod chunking;
mod clause;
mod discovery;
mod robustness;
mod score_group;
mod sessions;

pub use clause::{clause, Clause, GROUPS};

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
                GROUPS.contains(&c.group()) && c.id.len() > c.group().len(),
                "{} is not in a group",
                c.id
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
