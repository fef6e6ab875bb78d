//! A small seeded random number generator (xorshift64*): the fuzzer needs reproducible
//! choices from a printed seed, not cryptographic quality, so no crate is pulled in for it.

/// A seeded xorshift64* generator; the same seed gives the same sequence on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        // xorshift has the all-zero state as a fixed point; splitmix the seed away from it.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // The modulo bias is below 2^-50 for the small ranges used here.
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi` (`lo` when the range is empty).
    pub fn between(&mut self, lo: i128, hi: i128) -> i128 {
        if hi <= lo {
            return lo;
        }
        let span = (hi - lo) as u128 + 1;
        lo + (u128::from(self.next_u64()) % span) as i128
    }

    /// True with probability one half.
    pub fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// A random element of `items` (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        // `below(0)` is 0 without drawing, and an empty slice has no element 0.
        items.get(self.below(items.len()))
    }
}

/// A stable 64-bit hash of a string (FNV-1a), to give each tool its own stream of choices:
/// adding a tool to an environment does not change the inputs another tool gets.
pub fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(7);
        let b: Vec<u64> = (0..5).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        let mut other = Rng::new(8);
        assert_ne!(a[0], other.next_u64());
        // Zero is a usable seed.
        let mut zero = Rng::new(0);
        assert_ne!(zero.next_u64(), zero.next_u64());
    }

    #[test]
    fn ranges_stay_in_bounds() {
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            let v = r.between(-3, 3);
            assert!((-3..=3).contains(&v));
            assert!(r.below(5) < 5);
        }
        assert_eq!(r.between(4, 4), 4);
        assert_eq!(r.below(0), 0);
        assert_eq!(
            r.between(i128::from(u64::MAX), i128::from(u64::MAX)),
            i128::from(u64::MAX)
        );
    }
}
