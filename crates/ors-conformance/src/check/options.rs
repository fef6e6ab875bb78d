//! What `ors check` checks: the options of a run, and the tasks it samples.

use std::time::Duration;

/// Inputs generated per tool unless `--fuzz` says otherwise.
pub const DEFAULT_FUZZ: usize = 20;
/// The limit on one call (and on one ordinary request) unless `--timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The environment's name.
    pub env: String,
    /// Tasks per split to open episodes on (spread evenly, first and last included); `None`:
    /// the first, a middle and the last.
    pub tasks: Option<usize>,
    /// Inputs generated per tool (0: no tool is called).
    pub fuzz: usize,
    /// The seed of the generated inputs.
    pub seed: u64,
    /// The limit on one call or request.
    pub timeout: Duration,
}

impl CheckOptions {
    /// The defaults for `env`, with a seed taken from the clock.
    pub fn new(env: impl Into<String>) -> Self {
        Self {
            env: env.into(),
            tasks: None,
            fuzz: DEFAULT_FUZZ,
            seed: clock_seed(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The `ors check` arguments that regenerate this run's inputs.
    pub(super) fn reproduce_args(&self) -> String {
        let mut args = format!("--seed {}", self.seed);
        if self.fuzz != DEFAULT_FUZZ {
            args.push_str(&format!(" --fuzz {}", self.fuzz));
        }
        args
    }
}

/// A seed that differs from run to run, so repeated checks explore different inputs.
pub fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // Keep seeds short enough to retype.
    (nanos ^ u64::from(std::process::id())) % 1_000_000
}

/// The indices checked in a split of `count` tasks: `n` spread evenly with the first and the
/// last included, or (no `n`) the first, the middle and the last.
pub(super) fn sample_indices(count: u64, n: Option<usize>) -> Vec<u64> {
    if count == 0 {
        return Vec::new();
    }
    let n = n.unwrap_or(3).max(1) as u64;
    // One sample is the first task (`max(1)`: no spread to divide by).
    let mut out: Vec<u64> = (0..n).map(|i| i * (count - 1) / (n - 1).max(1)).collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_first_middle_last_or_spread() {
        assert_eq!(sample_indices(50, None), vec![0, 24, 49]);
        assert_eq!(sample_indices(2, None), vec![0, 1]);
        assert_eq!(sample_indices(1, None), vec![0]);
        assert_eq!(sample_indices(0, None), Vec::<u64>::new());
        assert_eq!(sample_indices(100, Some(5)), vec![0, 24, 49, 74, 99]);
        assert_eq!(sample_indices(100, Some(1)), vec![0]);
        assert_eq!(sample_indices(3, Some(10)), vec![0, 1, 2]);
    }
}
