//! Session ids the server can recognise as its own without remembering them: `/create_session`
//! hands out a version-4 UUID whose bits carry a tag (an HMAC-SHA256 under the server's key),
//! and `/create` starts episodes only under ids whose tag checks out. Replicas that share the
//! key accept each other's ids.
//!
//! The 122 free bits of the UUID: the first group (32 bits, the first 8 hex digits) is kept
//! for a replica number and covered by the tag; then 56 random bits; then the 34-bit tag.
//! Forging one id takes about 2^33 tries on average, each a request; the ids stay as
//! unguessable as 56 random bits (88 while the first group is random too).
//!
//! With a replica number ([`crate::ServerConfig::replica_id`], `ORS_REPLICA_ID`), the first
//! group is that number in eight zero-padded decimal digits (`00000007-...` for replica 7),
//! still hex digits, so the id is still a version-4 UUID string: a proxy routes each request
//! to the replica its id names with no shared state (`deploy/nginx/ors.conf`), and the tag,
//! which covers the first group, keeps a client from re-addressing an id to another replica.
//!
//! What this stops: `/create` under ids the server never issued, so ids cannot be invented,
//! squatted in advance, or chosen to collide with another client's. What it does not stop: a
//! client that asks `/create_session` for as many ids as it likes; the session limit, and
//! rate limits at the proxy, bound that.

use hmac::{Hmac, Mac as _};
use sha2::Sha256;

use crate::config::{ConfigError, SessionKey};

/// Bits of the tag.
const TAG_BITS: u32 = 34;
/// Random bits besides the first group.
const NONCE_BITS: u32 = 56;

/// How ids are issued and checked, and the first group they carry.
pub(crate) struct SessionIds {
    check: Check,
    /// The replica number as the 32 bits of the first group (its decimal digits read as
    /// hex); `None`: random.
    prefix: Option<u32>,
}

enum Check {
    /// Ids carry a tag under this key, and `/create` wants it.
    Tagged(Hmac<Sha256>),
    /// Any id goes (`ORS_SESSION_KEY=off`).
    Any,
}

/// What an id is to this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Issued by this server (or a replica with the same key).
    Issued,
    /// Not issued here: invented by a client, or tagged under another key.
    Foreign,
    /// Ids are not checked.
    Unchecked,
}

impl SessionIds {
    pub(crate) fn new(key: &SessionKey, replica: Option<u32>) -> Result<Self, ConfigError> {
        let prefix = match replica {
            None => None,
            // The eight-digit decimal spelling, read as hex (replica 7 is `0x00000007`, replica
            // 12 is `0x00000012`).
            Some(n) => Some(u32::from_str_radix(&format!("{n:08}"), 16).map_err(|_| {
                ConfigError::new("replica_id", format!("{n} has more than eight digits"))
            })?),
        };
        let check = Self::check(key)?;
        Ok(Self { check, prefix })
    }

    fn check(key: &SessionKey) -> Result<Check, ConfigError> {
        let key: Vec<u8> = match key {
            SessionKey::Off => return Ok(Check::Any),
            SessionKey::Shared(key) => key.as_bytes().to_vec(),
            // 244 random bits (two version-4 UUIDs) from the OS's generator.
            SessionKey::Random => [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
                .iter()
                .flat_map(|u| *u.as_bytes())
                .collect(),
        };
        Hmac::<Sha256>::new_from_slice(&key)
            .map(Check::Tagged)
            .map_err(|e| ConfigError::new("session_key", e.to_string()))
    }

    /// A fresh id: random, with the replica number first when there is one, and the tag
    /// when ids are tagged.
    pub(crate) fn issue(&self) -> String {
        let random = random_v4();
        let prefix = self.prefix.unwrap_or((random >> 96) as u32);
        let id = match &self.check {
            Check::Any => (u128::from(prefix) << 96) | (random & ((1u128 << 96) - 1)),
            Check::Tagged(mac) => {
                let nonce = (random as u64) & mask(NONCE_BITS);
                let tag = tag(mac, prefix, nonce);
                assemble(prefix, (u128::from(nonce) << TAG_BITS) | u128::from(tag))
            }
        };
        uuid::Uuid::from_u128(id).hyphenated().to_string()
    }

    /// Whether this server issued `sid`. Only the canonical spelling (lower-case hex with
    /// hyphens) counts: each id has one, so one issued id is one session.
    pub(crate) fn origin(&self, sid: &str) -> Origin {
        let Check::Tagged(mac) = &self.check else {
            return Origin::Unchecked;
        };
        let Some(id) = parse_canonical(sid) else {
            return Origin::Foreign;
        };
        if (id >> 76) & 0xF != 4 || (id >> 62) & 0b11 != 0b10 {
            return Origin::Foreign;
        }
        let (prefix, payload) = disassemble(id);
        let nonce = (payload >> TAG_BITS) as u64;
        if u128::from(tag(mac, prefix, nonce)) == payload & u128::from(mask(TAG_BITS)) {
            Origin::Issued
        } else {
            Origin::Foreign
        }
    }
}

/// A random version-4 UUID, its bits from the OS's randomness drawn [`POOL_BYTES`] bytes at a
/// time: one system call for 32 ids instead of one each (the `getrandom` was about 1% of an
/// episode's server time). The bytes are used once each, so an id is as unpredictable as one
/// drawn on its own.
fn random_v4() -> u128 {
    thread_local! {
        static DRAWN: std::cell::RefCell<Pool> = const {
            std::cell::RefCell::new(Pool { bytes: [0; POOL_BYTES], used: POOL_BYTES })
        };
    }
    DRAWN.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.used == POOL_BYTES {
            if getrandom::fill(&mut pool.bytes).is_err() {
                // No randomness to pool now: uuid's own draw (which asks the OS again).
                return uuid::Uuid::new_v4().as_u128();
            }
            pool.used = 0;
        }
        let at = pool.used;
        pool.used += 16;
        let bits = std::array::from_fn(|i| pool.bytes[at + i]);
        uuid::Builder::from_random_bytes(bits).into_uuid().as_u128()
    })
}

/// Bytes of randomness a thread draws at once for [`random_v4`].
const POOL_BYTES: usize = 512;

struct Pool {
    bytes: [u8; POOL_BYTES],
    /// Bytes already handed out (all of them before the first draw).
    used: usize,
}

/// The replica number an id names in its first group, if it is eight decimal digits.
#[cfg(test)]
pub(crate) fn replica_of(sid: &str) -> Option<u32> {
    let group = sid.get(..8)?;
    group
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| group.parse().ok())?
}

fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// The tag of an id: the first 34 bits of HMAC-SHA256(key, prefix ‖ nonce).
fn tag(mac: &Hmac<Sha256>, prefix: u32, nonce: u64) -> u64 {
    let mut mac = mac.clone();
    mac.update(&prefix.to_be_bytes());
    mac.update(&nonce.to_be_bytes()[1..]);
    let out = mac.finalize().into_bytes();
    u64::from_be_bytes(std::array::from_fn(|i| out[i])) >> (64 - TAG_BITS)
}

/// A version-4 UUID from the first group and the 90 bits after it (nonce, then tag), which
/// go around the version nibble (bits 79..76) and the variant (bits 63..62).
fn assemble(prefix: u32, payload: u128) -> u128 {
    (u128::from(prefix) << 96)
        | (((payload >> 74) & 0xFFFF) << 80)
        | (0x4 << 76)
        | (((payload >> 62) & 0xFFF) << 64)
        | (0b10 << 62)
        | (payload & ((1u128 << 62) - 1))
}

/// The inverse of [`assemble`].
fn disassemble(id: u128) -> (u32, u128) {
    let payload =
        (((id >> 80) & 0xFFFF) << 74) | (((id >> 64) & 0xFFF) << 62) | (id & ((1u128 << 62) - 1));
    ((id >> 96) as u32, payload)
}

/// The UUID of a lower-case hyphenated `8-4-4-4-12` id: the one spelling of each UUID, so
/// two different ids never parse to the same one.
pub(crate) fn parse_canonical(sid: &str) -> Option<u128> {
    let b = sid.as_bytes();
    let canonical = b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => matches!(c, b'0'..=b'9' | b'a'..=b'f'),
        });
    canonical
        .then(|| uuid::Uuid::try_parse(sid).ok())
        .flatten()
        .map(|u| u.as_u128())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(key: &str) -> SessionIds {
        SessionIds::new(&SessionKey::Shared(key.into()), None).unwrap()
    }

    #[test]
    fn issued_ids_are_version_4_uuids_that_check_out() {
        let ids = SessionIds::new(&SessionKey::Random, None).unwrap();
        let mut seen = std::collections::HashSet::new();
        // Many times the ids one draw of randomness gives: none repeats across draws.
        for _ in 0..1000 {
            let sid = ids.issue();
            let u = uuid::Uuid::parse_str(&sid).unwrap();
            assert_eq!(u.get_version_num(), 4, "{sid}");
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{sid}");
            assert_eq!(ids.origin(&sid), Origin::Issued, "{sid}");
            assert!(seen.insert(sid.clone()), "{sid} was issued twice");
        }
    }

    #[test]
    fn ids_from_elsewhere_do_not() {
        let ours = tagged("a shared key of some length");
        let theirs = tagged("another key entirely, as long");
        let sid = theirs.issue();
        assert_eq!(theirs.origin(&sid), Origin::Issued);
        assert_eq!(ours.origin(&sid), Origin::Foreign);
        // A plain random UUID, an invented name, and our own id spelt another way.
        assert_eq!(
            ours.origin(&uuid::Uuid::new_v4().to_string()),
            Origin::Foreign
        );
        assert_eq!(ours.origin("my-session"), Origin::Foreign);
        let mine = ours.issue();
        assert_eq!(ours.origin(&mine.to_uppercase()), Origin::Foreign);
        assert_eq!(ours.origin(&mine.replace('-', "")), Origin::Foreign);
        // Any change to the first group (a replica number) breaks the tag.
        let mut other_prefix = mine.clone().into_bytes();
        other_prefix[0] = if other_prefix[0] == b'0' { b'1' } else { b'0' };
        let other_prefix = String::from_utf8(other_prefix).unwrap();
        assert_eq!(ours.origin(&other_prefix), Origin::Foreign);
    }

    #[test]
    fn replicas_with_the_same_key_accept_each_others_ids() {
        let a = tagged("the key every replica is given");
        let b = tagged("the key every replica is given");
        assert_eq!(b.origin(&a.issue()), Origin::Issued);
    }

    #[test]
    fn the_layout_keeps_the_bits_it_is_given() {
        let payload = (1u128 << 90) - 12345;
        let id = assemble(0xDEAD_BEEF, payload);
        assert_eq!(disassemble(id), (0xDEAD_BEEF, payload));
        assert_eq!(format!("{:032x}", id).get(..8), Some("deadbeef"));
    }

    #[test]
    fn off_accepts_anything_and_issues_plain_uuids() {
        let ids = SessionIds::new(&SessionKey::Off, None).unwrap();
        assert_eq!(ids.origin("anything"), Origin::Unchecked);
        assert!(parse_canonical(&ids.issue()).is_some());
    }

    #[test]
    fn a_replica_number_is_the_first_group_in_decimal_and_the_tag_covers_it() {
        let key = SessionKey::Shared("the key every replica is given".into());
        let seven = SessionIds::new(&key, Some(7)).unwrap();
        let twelve = SessionIds::new(&key, Some(12)).unwrap();
        let top = SessionIds::new(&key, Some(99_999_999)).unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let sid = seven.issue();
            assert!(sid.starts_with("00000007-"), "{sid}");
            let u = uuid::Uuid::parse_str(&sid).unwrap();
            assert_eq!(u.get_version_num(), 4, "{sid}");
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{sid}");
            assert_eq!(replica_of(&sid), Some(7));
            // Any replica with the key accepts it (the proxy decides where it goes).
            assert_eq!(twelve.origin(&sid), Origin::Issued, "{sid}");
            assert!(seen.insert(sid), "ids never repeat");
        }
        assert!(twelve.issue().starts_with("00000012-"));
        assert_eq!(replica_of(&top.issue()), Some(99_999_999));
        // Re-addressing an id to another replica breaks its tag.
        let sid = seven.issue();
        let moved = format!("00000012{}", &sid[8..]);
        assert_eq!(seven.origin(&moved), Origin::Foreign);
        // Without a key the number is still there, the rest random.
        let off = SessionIds::new(&SessionKey::Off, Some(3)).unwrap();
        let sid = off.issue();
        assert!(sid.starts_with("00000003-"), "{sid}");
        assert_eq!(uuid::Uuid::parse_str(&sid).unwrap().get_version_num(), 4);
        assert!(SessionIds::new(&key, Some(100_000_000)).is_err());
    }
}
