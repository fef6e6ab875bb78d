//! One call's record: the streams attached to it while it runs (and the progress sent before
//! any was), then its encoded result, which reconnects get from the session's [`CallTable`].
//!
//! [`CallTable`]: crate::results::CallTable

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher as _;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use ors_core::sse;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::util::lock;

/// Events buffered per stream; progress beyond this for a slow reader is dropped.
pub(crate) const STREAM_BUFFER: usize = 64;

/// A call id as the session's tables hold it: its keyed 64-bit hash (SipHash under a key
/// chosen when the server starts); the maps hash it no further. Two ids of one key (odds of
/// one in 2^64 per pair) would be taken for one call: a reconnect is checked against the
/// record's own id, so it never gets another call's result.
pub(crate) type Key = u64;

pub(crate) fn key(id: &str) -> Key {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new).hash_one(id)
}

/// A call's id with its [`Key`], hashed once when the request names the call: the lookups,
/// the insertion and the keeping of the result all use that one key.
pub(crate) struct CallId {
    text: Arc<str>,
    key: Key,
}

impl CallId {
    pub(crate) fn new(text: Arc<str>) -> Self {
        let key = key(&text);
        Self { text, key }
    }

    /// The id as the client sees it.
    pub(crate) fn text(&self) -> &Arc<str> {
        &self.text
    }

    /// Its key in the session's tables.
    pub(crate) fn key(&self) -> Key {
        self.key
    }
}

enum RecordState {
    Running {
        listeners: Vec<mpsc::Sender<Bytes>>,
        /// Progress sent before any stream attached (during the first, in-place poll).
        backlog: Vec<Bytes>,
    },
    Done {
        events: Bytes,
    },
}

/// One call: its id and either the streams waiting for it or its encoded result.
pub(crate) struct CallRecord {
    id: CallId,
    state: Mutex<RecordState>,
}

impl CallRecord {
    pub(crate) fn new(id: CallId) -> Self {
        Self {
            id,
            state: Mutex::new(RecordState::Running {
                listeners: Vec::new(),
                backlog: Vec::new(),
            }),
        }
    }

    pub(crate) fn progress(&self, value: &Value) {
        if let RecordState::Running { listeners, backlog } = &mut *lock(&self.state) {
            let event = Bytes::from(sse::encode_progress(value));
            if listeners.is_empty() {
                if backlog.len() < STREAM_BUFFER - 1 {
                    backlog.push(event);
                }
            } else {
                for tx in listeners.iter() {
                    // The last slot is the result's: progress to a stalled reader is dropped
                    // rather than ever making the result wait (see `run_job`).
                    if tx.capacity() > 1 {
                        let _ = tx.try_send(event.clone());
                    }
                }
            }
        }
    }

    /// Attach a stream to a running call (the backlog goes first); `Err` gives the result
    /// events of a call that has finished.
    pub(crate) fn attach(&self, tx: mpsc::Sender<Bytes>) -> Result<(), Bytes> {
        match &mut *lock(&self.state) {
            RecordState::Running { listeners, backlog } => {
                for event in backlog.drain(..) {
                    let _ = tx.try_send(event);
                }
                listeners.retain(|l| !l.is_closed());
                listeners.push(tx);
                Ok(())
            }
            RecordState::Done { events } => Err(events.clone()),
        }
    }

    /// The call's id.
    pub(crate) fn id(&self) -> &Arc<str> {
        self.id.text()
    }

    /// The call's id with its key in the session's tables.
    pub(crate) fn call_id(&self) -> &CallId {
        &self.id
    }

    /// `read` the finished call's events in place (`None` while it runs): the answer of a
    /// call that finished in its first poll copies them after its `task_id` event, so the
    /// kept copy is never cloned (a clone of a `Bytes` made from a `Vec` allocates).
    pub(crate) fn with_events<R>(&self, read: impl FnOnce(&Bytes) -> R) -> Option<R> {
        match &*lock(&self.state) {
            RecordState::Done { events } => Some(read(events)),
            RecordState::Running { .. } => None,
        }
    }

    /// Store the result; returns the attached streams and any progress nobody received.
    pub(crate) fn finish(&self, events: Bytes) -> (Vec<mpsc::Sender<Bytes>>, Vec<Bytes>) {
        let done = RecordState::Done { events };
        match std::mem::replace(&mut *lock(&self.state), done) {
            RecordState::Running { listeners, backlog } => (listeners, backlog),
            RecordState::Done { .. } => (Vec::new(), Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> Arc<CallRecord> {
        Arc::new(CallRecord::new(CallId::new(id.into())))
    }

    #[test]
    fn progress_before_a_listener_is_kept_then_delivered() {
        let r = record("a");
        r.progress(&serde_json::json!({"step": 0}));
        let (tx, mut rx) = mpsc::channel(4);
        r.attach(tx).unwrap();
        let got = rx.try_recv().unwrap();
        assert_eq!(&got[..], b"event: progress\ndata: {\"step\":0}\n\n");
        r.progress(&serde_json::json!(1));
        assert_eq!(&rx.try_recv().unwrap()[..], b"event: progress\ndata: 1\n\n");
        let (listeners, unheard) = r.finish(Bytes::from_static(b"end"));
        assert_eq!(listeners.len(), 1);
        assert!(unheard.is_empty());
        // Finished: progress goes nowhere, and attaching gives the result.
        r.progress(&serde_json::json!(2));
        assert!(rx.try_recv().is_err());
        let (tx, _rx) = mpsc::channel(4);
        assert_eq!(r.attach(tx).unwrap_err(), Bytes::from_static(b"end"));
    }

    #[test]
    fn progress_with_no_listener_is_returned_on_finish() {
        let r = record("a");
        r.progress(&serde_json::json!(1));
        let (listeners, unheard) = r.finish(Bytes::new());
        assert!(listeners.is_empty());
        assert_eq!(unheard.len(), 1);
    }
}
