//! When a failed request is sent again: which failures may be repeated for which kind of
//! request, and how long to wait (the server's `Retry-After`, or backoff with jitter).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use crate::error::Error;

/// Which failures may be repeated for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Repeating changes nothing on the server: retry 5xx, 429, connection errors, timeouts.
    Idempotent,
    /// Repeating is only safe when the server certainly did not act: retry failed connects and
    /// the statuses that say "not processed" (429, 503).
    Refused,
}

/// How one attempt failed, for the retry decision.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection could be made: the request was never sent.
    Connect(Error),
    /// The connection broke, the server misbehaved mid-request, or the attempt ran out of
    /// time.
    Broken(Error),
    /// Repeating cannot help: the answer was too large or broke the protocol in a way that
    /// will not change (a redirect to another server, a header that never ends).
    Fatal(Error),
    /// The server answered with an error status.
    Status {
        /// The error, an [`Error::Http`].
        error: Error,
        /// The status code.
        status: u16,
        /// The server's `Retry-After`, in seconds.
        retry_after: Option<Duration>,
        /// A 503 with `X-Backend-State: starting`: the session's setup is still running.
        starting: bool,
    },
}

impl Failure {
    /// The error to give the caller.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Failure::Connect(e) | Failure::Broken(e) | Failure::Fatal(e) => e,
            Failure::Status { error, .. } => error,
        }
    }

    /// Whether a request of this kind may be sent again after this failure.
    pub(crate) fn retryable(&self, retry: Retry) -> bool {
        match (self, retry) {
            (Failure::Fatal(_), _) => false,
            (Failure::Connect(_), _) => true,
            (Failure::Status { status, .. }, Retry::Refused) => *status == 429 || *status == 503,
            (Failure::Status { status, .. }, Retry::Idempotent) => *status == 429 || *status >= 500,
            (Failure::Broken(_), retry) => retry == Retry::Idempotent,
        }
    }

    /// Whether the server said the session is still being set up (PROTOCOL_NOTES row
    /// `slow-setup`).
    pub(crate) fn starting(&self) -> bool {
        matches!(self, Failure::Status { starting: true, .. })
    }

    /// The server's requested delay, if it gave one.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// How often and how patiently a request is repeated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// Retries after the first attempt.
    pub retries: u32,
    /// First delay, doubled per retry, with jitter.
    pub base: Duration,
    /// Largest delay, and cap on a server's `Retry-After`.
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `attempt + 1`: the server's `Retry-After` (capped), or
    /// exponential backoff with jitter.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(d) => d.min(self.max),
            None => backoff(attempt, self.base, self.max),
        }
    }
}

/// Since when a server has answered "starting" (PROTOCOL_NOTES row `slow-setup`).
#[derive(Default)]
pub(crate) struct Starting(Option<Instant>);

impl Starting {
    /// Whether to ask again: the first such answer starts the clock, `wait` bounds it.
    pub(crate) fn keep_waiting(&mut self, wait: Duration) -> bool {
        self.0.get_or_insert_with(Instant::now).elapsed() < wait
    }
}

/// Exponential backoff with "equal jitter": half of `base * 2^attempt` (capped at `max`) is
/// fixed and the other half random, so many clients retrying at once spread out.
pub(crate) fn backoff(attempt: u32, base: Duration, max: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(20)).min(max);
    let half = exp / 2;
    let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(random() % span.saturating_add(1))
}

/// A pseudo-random number (no `rand` needed: this only has to differ between concurrent
/// retriers and calls, not be unpredictable). Each `RandomState` std makes has fresh keys
/// (drawn from the OS once per thread, then stepped).
pub(crate) fn random() -> u64 {
    RandomState::new().hash_one(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_stays_capped_and_jitters() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        for attempt in 0..10 {
            let exp = base.saturating_mul(1 << attempt).min(max);
            let d = backoff(attempt, base, max);
            assert!(d >= exp / 2 && d <= exp, "attempt {attempt}: {d:?}");
        }
        let samples: std::collections::HashSet<Duration> =
            (0..20).map(|_| backoff(3, base, max)).collect();
        assert!(samples.len() > 1, "backoff has no jitter");
    }

    #[test]
    fn retry_rules_never_repeat_a_4xx() {
        let st = |status| Failure::Status {
            error: Error::Http {
                status,
                code: None,
                detail: String::new(),
            },
            status,
            retry_after: None,
            starting: false,
        };
        for retry in [Retry::Idempotent, Retry::Refused] {
            assert!(!st(400).retryable(retry));
            assert!(!st(404).retryable(retry));
            assert!(!st(410).retryable(retry));
            assert!(st(429).retryable(retry));
            assert!(st(503).retryable(retry));
            assert!(Failure::Connect(Error::Transport(String::new())).retryable(retry));
        }
        assert!(st(500).retryable(Retry::Idempotent));
        assert!(!st(500).retryable(Retry::Refused));
        assert!(!Failure::Broken(Error::Transport(String::new())).retryable(Retry::Refused));
    }
}
