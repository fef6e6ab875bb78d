//! Tombstones: the ids of sessions that ended, how, and when, so a request naming one gets
//! the right answer (PROTOCOL_NOTES row `gone-vs-not-found`): deleted within the last hour
//! is 410 `session_deleted`, removed by the inactivity reaper is 404 `session_timed_out`.
//! Bounded in count and age; an id forgotten is simply `session_not_found`.

use std::hash::BuildHasher as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use dashmap::DashMap;

use crate::util::clock_ms;

/// How long an ended id is remembered.
pub(crate) const TOMBSTONE_TTL: Duration = Duration::from_secs(3600);
/// Most remembered ids; past it the oldest half is forgotten.
pub(crate) const TOMBSTONE_CAP: usize = 100_000;

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Burial {
    /// `/delete`, or the server's shutdown.
    Deleted,
    /// The inactivity reaper removed it.
    TimedOut,
}

/// An ended id in 16 bytes: the UUID itself for ids in the canonical form `create_session`
/// hands out, else a keyed 64-bit hash (a collision would give one never-seen id the answer
/// of an ended one).
///
/// Tombstones must not keep the ids' own allocations alive: 100k of them, scattered through
/// the memory their sessions freed, kept that memory from going back to the system.
type TombKey = [u64; 2];

/// Marks a hashed key; a canonical UUID ending in it as well is astronomically unlikely.
const HASHED: u64 = 0x7ad7_f00d_dead_beef;

fn tomb_key(sid: &str) -> TombKey {
    static HASH: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    if let Some(u) = crate::sid::parse_canonical(sid) {
        return [(u >> 64) as u64, u as u64];
    }
    let hash = HASH
        .get_or_init(std::collections::hash_map::RandomState::new)
        .hash_one(sid);
    [hash, HASHED]
}

/// A tombstone's value in 8 bytes: when (ms on [`clock_ms`]) shifted left once, and the low
/// bit set when the reaper removed the session.
fn stone(burial: Burial) -> u64 {
    (clock_ms() << 1) | u64::from(burial == Burial::TimedOut)
}

fn buried_at(stone: u64) -> u64 {
    stone >> 1
}

/// The ended ids, bounded.
pub(crate) struct Tombstones {
    /// Sized for the cap up front, so the table is one early allocation rather than
    /// reallocations among the sessions' memory.
    map: DashMap<TombKey, u64>,
    // Kept by hand: `DashMap::len` locks every shard.
    count: AtomicUsize,
    cap: usize,
}

impl Tombstones {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            map: DashMap::with_capacity(cap),
            count: AtomicUsize::new(0),
            cap,
        }
    }

    /// How the session of this id ended, if it ended within the last hour.
    pub(crate) fn get(&self, sid: &str) -> Option<Burial> {
        self.map.get(&tomb_key(sid)).map(|t| match *t & 1 {
            0 => Burial::Deleted,
            _ => Burial::TimedOut,
        })
    }

    /// Remember that `sid` ended (the latest ending wins).
    pub(crate) fn bury(&self, sid: &str, burial: Burial) {
        if self.map.insert(tomb_key(sid), stone(burial)).is_none()
            && self.count.fetch_add(1, Ordering::AcqRel) >= self.cap
        {
            self.sweep();
            if self.map.len() > self.cap {
                // Still full of recent ids: forget the older half (exactly half, even when
                // many ended in the same millisecond).
                let mut stones: Vec<(u64, TombKey)> = self
                    .map
                    .iter()
                    .map(|e| (buried_at(*e.value()), *e.key()))
                    .collect();
                let mid = stones.len() / 2;
                stones.select_nth_unstable(mid);
                for (_, key) in &stones[..mid] {
                    self.map.remove(key);
                }
                self.count.store(self.map.len(), Ordering::Release);
            }
        }
    }

    /// Forget `sid` (it is live again).
    pub(crate) fn unbury(&self, sid: &str) {
        if self.map.remove(&tomb_key(sid)).is_some() {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Forget ids that ended longer than [`TOMBSTONE_TTL`] ago.
    pub(crate) fn sweep(&self) {
        let ttl = TOMBSTONE_TTL.as_millis() as u64;
        let now = clock_ms();
        self.map
            .retain(|_, t| now.saturating_sub(buried_at(*t)) < ttl);
        self.count.store(self.map.len(), Ordering::Release);
    }

    /// How many ids are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_how_each_id_ended() {
        let t = Tombstones::new(10);
        t.bury("a", Burial::Deleted);
        t.bury("3f2b8c1e-7a4d-4e2f-9b1a-0c5d6e7f8a9b", Burial::TimedOut);
        assert_eq!(t.get("a"), Some(Burial::Deleted));
        assert_eq!(
            t.get("3f2b8c1e-7a4d-4e2f-9b1a-0c5d6e7f8a9b"),
            Some(Burial::TimedOut)
        );
        assert_eq!(t.get("b"), None);
        // The upper-case spelling is another id (hashed, not parsed as the same UUID).
        assert_eq!(t.get("3F2B8C1E-7A4D-4E2F-9B1A-0C5D6E7F8A9B"), None);
        t.unbury("a");
        assert_eq!(t.get("a"), None);
        // A later ending replaces an earlier one.
        t.bury("c", Burial::TimedOut);
        t.bury("c", Burial::Deleted);
        assert_eq!(t.get("c"), Some(Burial::Deleted));
    }

    #[test]
    fn tombstones_are_bounded_and_keep_the_newest() {
        let t = Tombstones::new(100);
        for i in 0..1000 {
            t.bury(&format!("s{i}"), Burial::Deleted);
        }
        assert!(t.len() <= 100, "{}", t.len());
        assert_eq!(t.get("s999"), Some(Burial::Deleted));
    }
}
