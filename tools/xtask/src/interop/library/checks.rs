//! How a library check is written and counted: which server behaviour to expect, a check's
//! verdict and the helpers that give one, and the report that runs each under a time limit.

use std::future::Future;
use std::time::Duration;

/// Limit on one check, so a hang is a failure and not a stuck CI job.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// Which behaviour to expect where a Python server deviates from the protocol.
#[derive(Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // `Spec` is for running the checks against our own server by hand.
pub enum Expect {
    /// ors-sdk 0.1.0.
    Reference,
    /// openreward 0.1.167.
    OpenReward,
    Spec,
}

impl Expect {
    /// Index -1 is the last task (Python indexing) rather than a 400.
    pub(super) fn python_indexing(self) -> bool {
        self != Expect::Spec
    }

    /// `task_tools` lists the task-specific hint.
    pub(super) fn lists_hint(self) -> bool {
        self != Expect::Reference
    }

    /// Where the server reads secrets from: (body, header).
    pub(super) fn reads_secrets(self) -> (bool, bool) {
        match self {
            Expect::Reference => (true, false),
            Expect::OpenReward => (false, true),
            Expect::Spec => (true, true),
        }
    }
}

/// One check's verdict: the reason it failed.
pub(super) type Check = Result<(), String>;

/// `?` for client results, naming what failed.
pub(super) trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T, String>;
}

impl<T> Ctx<T> for Result<T, ors_client::Error> {
    fn ctx(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// `got` must be `want`.
pub(super) fn eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

/// `cond` must hold; `what` says what did not.
pub(super) fn ensure(cond: bool, what: impl FnOnce() -> String) -> Check {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

/// Counts and prints check results.
#[derive(Default)]
pub(super) struct Report {
    pub(super) passed: usize,
    pub(super) failed: usize,
}

impl Report {
    pub(super) async fn run(&mut self, name: &str, check: impl Future<Output = Check>) {
        self.record(name, "", check).await;
    }

    /// Like `run`, with a note on the PASS line (which behaviour was seen).
    pub(super) async fn record(
        &mut self,
        name: &str,
        note: &str,
        check: impl Future<Output = Check>,
    ) {
        let result = match tokio::time::timeout(CHECK_TIMEOUT, check).await {
            Ok(r) => r,
            Err(_) => Err(format!("no result within {CHECK_TIMEOUT:?}")),
        };
        match result {
            Ok(()) => {
                self.passed += 1;
                let note = if note.is_empty() {
                    String::new()
                } else {
                    format!(" ({note})")
                };
                println!("PASS {name}{note}");
            }
            Err(reason) => {
                self.failed += 1;
                println!("FAIL {name}: {}", reason.replace('\n', " "));
            }
        }
    }
}
