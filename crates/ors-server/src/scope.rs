//! A call as its tool's context sees it ([`CallScope`]): where its progress goes, and its
//! cancellation token, made only when the tool asks for one.

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use ors_runtime::env::CallLink;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::record::CallRecord;
use crate::session::Session;

/// One call as its tool's context sees it: progress goes to the call's streams, and the
/// call's token, a child of the session's, is made when the tool first asks for it.
pub(crate) struct CallScope {
    record: Arc<CallRecord>,
    /// Not kept alive by work a tool left running.
    session: Weak<Session>,
    token: OnceLock<CancellationToken>,
    /// Set when the call timed out or was cancelled: a token made after that is cancelled
    /// as it is made.
    stopped: AtomicBool,
}

impl CallScope {
    /// The scope of a call of `record` on `session`; no token yet.
    pub(crate) fn new(session: &Arc<Session>, record: Arc<CallRecord>) -> Self {
        Self {
            record,
            session: Arc::downgrade(session),
            token: OnceLock::new(),
            stopped: AtomicBool::new(false),
        }
    }

    /// Stop what the tool left running. Each side (the flag here, the token in
    /// `cancellation`) writes, fences, then reads the other's, so at least one of them sees
    /// both and cancels.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if let Some(token) = self.token.get() {
            token.cancel();
        }
    }
}

impl CallLink for CallScope {
    fn progress(&self, value: Value) {
        self.record.progress(&value);
    }

    fn cancellation(&self) -> &CancellationToken {
        if let Some(token) = self.token.get() {
            return token;
        }
        let token = self.token.get_or_init(|| match self.session.upgrade() {
            Some(session) => session.cancel().child_token(),
            None => {
                // The session is gone: so is any reason to go on.
                let token = CancellationToken::new();
                token.cancel();
                token
            }
        });
        fence(Ordering::SeqCst);
        if self.stopped.load(Ordering::Relaxed) {
            token.cancel();
        }
        token
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::CallId;
    use crate::results::ResultStore;
    use std::time::Duration;

    fn scope(session: &Arc<Session>) -> CallScope {
        CallScope::new(session, Arc::new(CallRecord::new(CallId::new("c".into()))))
    }

    #[test]
    fn a_calls_token_fires_on_stop_and_on_delete_whenever_it_is_made() {
        let results = Arc::new(ResultStore::new(Duration::from_secs(60), 1 << 20, 1 << 20));
        let session = Arc::new(Session::new("s".into(), 0, Arc::clone(&results)));
        // Made before the stop: fired by it; the session's token stays as it was.
        let early = scope(&session);
        let token = early.cancellation().clone();
        assert!(!token.is_cancelled());
        early.stop();
        assert!(token.is_cancelled());
        assert!(!session.cancel().is_cancelled());
        // Made after the stop (work the tool left running asks late): fired as it is made.
        let late = scope(&session);
        late.stop();
        assert!(late.cancellation().is_cancelled());
        // A child of the session's: deleting the session fires it.
        let child = scope(&session);
        let token = child.cancellation().clone();
        session.cancel().cancel();
        assert!(token.is_cancelled());
        // Asked for after the session is gone (never deleted, only dropped): fired.
        let other = Arc::new(Session::new("t".into(), 0, Arc::clone(&results)));
        let orphan = scope(&other);
        drop((session, other));
        assert!(orphan.cancellation().is_cancelled());
    }
}
