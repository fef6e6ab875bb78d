//! How long and how big everything is: the windows, sizes and counts of one run, and the
//! concurrency and sandbox targets whose sizes the run reaches.

use super::servers::Kind;

/// The target of the issue: every call of 16,384 sessions succeeds and p99 <= 1,250 ms.
pub const TARGET_SESSIONS: usize = 16_384;
/// The p99 latency the target allows, ms.
pub const TARGET_P99_MS: f64 = 1250.0;
/// The sandbox target of issue 23: this many episodes with live sandboxes at 100% success,
/// the largest size the sandbox run reaches.
pub const TARGET_EPISODES: usize = 1_000;

/// How long and how big everything is.
pub struct Plan {
    pub(super) quick: bool,
    /// Measurement window for ours and the limit, and its warm-up (seconds).
    pub(super) duration: f64,
    pub(super) warmup: f64,
    /// The reference is ~100x slower: shorter windows keep the run short.
    pub(super) ref_duration: f64,
    pub(super) ref_warmup: f64,
    /// Idle-session counts at which memory is read.
    pub(super) idle_ours: Vec<usize>,
    pub(super) idle_ref: Vec<usize>,
    /// Launches timed for start-up (the last one serves the workloads).
    pub(super) launches: usize,
    pub(super) client_threads: usize,
    /// Session counts of the concurrency workload (ours and the limit; the reference).
    pub(super) concurrency_ours: Vec<usize>,
    pub(super) concurrency_ref: Vec<usize>,
    /// Its window and the warm-up at its start left out of the latencies (seconds).
    pub(super) concurrency_duration: f64,
    pub(super) concurrency_warmup: f64,
    /// Pairs of metrics-off / metrics-on rounds, and each round's window and warm-up.
    pub(super) metrics_pairs: usize,
    pub(super) metrics_round: f64,
    pub(super) metrics_warmup: f64,
    /// Episodes timed by the sandbox cost, and later commands in each.
    pub(super) sandbox_rounds: usize,
    pub(super) sandbox_later: usize,
    /// Episode counts of the sandbox capacity runs, their window and warm-up (seconds).
    pub(super) sandbox_sessions: Vec<usize>,
    pub(super) sandbox_window: f64,
    pub(super) sandbox_warmup: f64,
}

impl Plan {
    /// The plan of `--quick` (or not), `--duration` and `--client-threads`.
    pub fn new(quick: bool, window: Option<f64>, client_threads: usize) -> Self {
        let (duration, warmup, ref_duration, ref_warmup) = if quick {
            (1.0, 0.2, 1.0, 0.5)
        } else {
            (10.0, 1.0, 3.0, 0.5)
        };
        let duration = window.unwrap_or(duration).max(0.1);
        Self {
            quick,
            duration,
            warmup,
            ref_duration: window.map_or(ref_duration, |d| d.min(ref_duration)),
            ref_warmup,
            idle_ours: if quick {
                vec![1_000, 5_000]
            } else {
                vec![10_000, 100_000]
            },
            idle_ref: if quick { vec![1_000] } else { vec![10_000] },
            launches: if quick { 1 } else { 3 },
            client_threads: client_threads.max(1),
            concurrency_ours: if quick {
                vec![256]
            } else {
                vec![1_024, 4_096, TARGET_SESSIONS]
            },
            concurrency_ref: if quick { vec![256] } else { vec![1_024, 4_096] },
            concurrency_duration: window.unwrap_or(if quick { 3.0 } else { 30.0 }),
            concurrency_warmup: if quick { 1.0 } else { 2.0 },
            metrics_pairs: if quick { 2 } else { 6 },
            metrics_round: window.unwrap_or(if quick { 1.0 } else { 5.0 }),
            metrics_warmup: if quick { 0.2 } else { 0.5 },
            sandbox_rounds: if quick { 10 } else { 200 },
            sandbox_later: 5,
            sandbox_sessions: if quick {
                vec![20]
            } else {
                vec![250, 500, TARGET_EPISODES]
            },
            sandbox_window: window.unwrap_or(if quick { 3.0 } else { 30.0 }),
            sandbox_warmup: if quick { 1.0 } else { 5.0 },
        }
    }

    /// The measurement window and warm-up of a server of `kind`.
    pub fn window(&self, kind: Kind) -> (f64, f64) {
        match kind {
            Kind::Reference => (self.ref_duration, self.ref_warmup),
            _ => (self.duration, self.warmup),
        }
    }
}
