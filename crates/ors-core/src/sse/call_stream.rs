//! The call-stream decoder: a tool call's `task_id`, `progress`, `chunk`s and `end` (or
//! `error`) reassembled into [`CallEvent`]s, on top of the bounded [`SseDecoder`].

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::decode::{DecodeLimits, SseDecoder, SseError, SseEvent, FIELD_ROOM};
use super::{EVENT_CHUNK, EVENT_END, EVENT_ERROR, EVENT_PROGRESS, EVENT_TASK_ID};
use crate::types::RunToolOutput;

/// What a tool-call stream says, once reassembled. `T` is what the `end` data holds: a
/// [`RunToolOutput`] for `/call`, a `ScoreGroupOutput` for `/score_group` (PROTOCOL_NOTES row
/// `score-group`), which streams the same way.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent<T = RunToolOutput> {
    /// The call id (first event); reconnect with it if the connection drops.
    TaskId(String),
    /// A progress report from the running tool.
    Progress(Value),
    /// The final result (`end`, after any `chunk`s).
    Result(T),
    /// The tool crashed or the task id was unknown; no result follows.
    Error(String),
}

/// Why a call stream could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallStreamError {
    /// The reassembled `end` data was not a valid result. A non-finite number (`NaN`,
    /// `Infinity`, or one too large for an `f64`) is named, with [`NON_FINITE_NOTE`].
    #[error("the result is not valid ORS JSON: {0}")]
    BadResult(String),
    /// A `progress` event did not carry JSON.
    #[error("a progress event is not JSON: {0}")]
    BadProgress(String),
    /// The stream is not valid `text/event-stream` or hit a line or event bound.
    #[error("{0}")]
    Sse(SseError),
    /// The `chunk`s (and `end`) of the result add up to more than
    /// [`DecodeLimits::max_result_bytes`].
    #[error("the result is larger than {limit} bytes")]
    ResultTooLarge {
        /// The bound that was hit.
        limit: usize,
    },
    /// A piece of the result arrived before the `task_id` event that must open the stream.
    #[error("a '{event}' event arrived before the task_id event that must open a call stream")]
    NoTaskId {
        /// The event that came first.
        event: String,
    },
    /// The `task_id` event carried no id.
    #[error("the task_id event is empty")]
    EmptyTaskId,
    /// An event arrived after the call's `end` (or `error`), which is its last event.
    #[error("a '{event}' event arrived after the call's last event")]
    AfterEnd {
        /// The extra event.
        event: String,
    },
}

impl CallStreamError {
    /// Whether this is a size bound being hit (the stream is too large, not malformed).
    pub fn is_limit(&self) -> bool {
        matches!(self, CallStreamError::ResultTooLarge { .. })
            || matches!(self, CallStreamError::Sse(e) if e.is_limit())
    }

    /// Whether decoding can go on after this error (a malformed progress report costs the
    /// call nothing; everything else ends it).
    pub fn is_fatal(&self) -> bool {
        !matches!(self, CallStreamError::BadProgress(_))
    }
}

/// Decodes a `POST /{env}/call` stream into [`CallEvent`]s, joining `chunk`s with their `end`.
/// Unknown events and comments are ignored, so new event kinds stay compatible. The stream's
/// order is checked: `task_id` first (an `error` may come alone), nothing after `end` or
/// `error`. Everything it holds (unfinished line, event and result together) stays within
/// [`DecodeLimits::max_result_bytes`].
#[derive(Debug)]
pub struct CallStreamDecoder<T = RunToolOutput> {
    sse: SseDecoder,
    pending: String,
    limits: DecodeLimits,
    saw_task_id: bool,
    finished: bool,
    high_water: usize,
    failed: Option<CallStreamError>,
    result: PhantomData<fn() -> T>,
}

impl Default for CallStreamDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl CallStreamDecoder {
    /// A decoder of a tool call's stream at its start, with the [`DecodeLimits::DEFAULT`]
    /// bounds.
    pub fn new() -> Self {
        Self::with_limits(DecodeLimits::DEFAULT)
    }

    /// A decoder of a tool call's stream with the given bounds.
    pub fn with_limits(limits: DecodeLimits) -> Self {
        Self::for_result(limits)
    }
}

impl<T: DeserializeOwned> CallStreamDecoder<T> {
    /// A decoder of a stream whose `end` data is a `T` (a group scoring's, say), with the
    /// given bounds.
    pub fn for_result(limits: DecodeLimits) -> Self {
        Self {
            sse: SseDecoder::with_limits(limits),
            pending: String::new(),
            limits,
            saw_task_id: false,
            finished: false,
            high_water: 0,
            failed: None,
            result: PhantomData,
        }
    }

    /// The bounds this decoder enforces.
    pub fn limits(&self) -> DecodeLimits {
        self.limits
    }

    /// Feed bytes; returns the call events they complete. After a fatal error (see
    /// [`CallStreamError::is_fatal`]) nothing more is decoded and every push repeats it.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<CallEvent<T>, CallStreamError>> {
        if let Some(e) = &self.failed {
            return vec![Err(e.clone())];
        }
        // The SSE layer may hold only what the result leaves of its budget, so the unfinished
        // line, event and result together stay within it (it never reads its own result bound).
        let limits = self.limits;
        let room = limits.max_result_bytes.saturating_sub(self.pending.len());
        let event_room = room.min(limits.max_event_bytes);
        self.sse.limits = DecodeLimits::bounded(event_room);
        self.sse.limits.max_line_bytes = self.sse.limits.max_line_bytes.min(limits.max_line_bytes);
        let mut events = Vec::new();
        let decoded = self.sse.try_push_with(bytes, |e| events.push(e));
        let peak = self.pending.len() + self.sse.take_push_peak();
        self.note(peak);

        let mut out = Vec::with_capacity(events.len());
        for e in events {
            match self.on_event(e) {
                Some(Err(e)) if e.is_fatal() => {
                    out.push(Err(e.clone()));
                    self.fail(e);
                    return out;
                }
                Some(r) => out.push(r),
                None => {}
            }
        }
        if let Err(e) = decoded {
            let by_result = event_room < limits.max_event_bytes;
            let e = if e.is_limit() && by_result {
                CallStreamError::ResultTooLarge {
                    limit: limits.max_result_bytes,
                }
            } else {
                CallStreamError::Sse(e)
            };
            out.push(Err(e.clone()));
            self.fail(e);
        }
        out
    }

    /// Whether any byte has been fed.
    pub fn saw_bytes(&self) -> bool {
        self.sse.saw_bytes()
    }

    /// Complete lines decoded so far (see [`SseDecoder::lines`]).
    pub fn lines(&self) -> u64 {
        self.sse.lines()
    }

    /// Bytes of `chunk`s received for a result whose `end` has not arrived.
    pub fn pending_result_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Whether the stream's last event (`end` or `error`) has arrived.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The most bytes this decoder has held at once: unfinished line, event and result (the
    /// events one push hands back are the caller's).
    pub fn high_water(&self) -> usize {
        self.high_water
    }

    fn note(&mut self, held: usize) {
        self.high_water = self.high_water.max(held);
    }

    fn fail(&mut self, e: CallStreamError) {
        self.pending = String::new();
        self.failed = Some(e);
    }

    fn on_event(&mut self, e: SseEvent) -> Option<Result<CallEvent<T>, CallStreamError>> {
        if self.finished {
            return Some(Err(CallStreamError::AfterEnd { event: e.event }));
        }
        let max = self.limits.max_result_bytes;
        match e.event.as_str() {
            EVENT_TASK_ID if e.data.trim().is_empty() => Some(Err(CallStreamError::EmptyTaskId)),
            EVENT_TASK_ID => {
                self.saw_task_id = true;
                Some(Ok(CallEvent::TaskId(e.data)))
            }
            EVENT_CHUNK | EVENT_END if !self.saw_task_id => {
                Some(Err(CallStreamError::NoTaskId { event: e.event }))
            }
            EVENT_CHUNK | EVENT_END if self.pending.len().saturating_add(e.data.len()) > max => {
                self.finished = e.event == EVENT_END;
                Some(Err(CallStreamError::ResultTooLarge { limit: max }))
            }
            EVENT_CHUNK => {
                self.pending.push_str(&e.data);
                self.note(self.pending.len());
                None
            }
            EVENT_END => {
                self.finished = true;
                let (held, more) = (self.pending.len(), e.data.len());
                let mut pending = std::mem::take(&mut self.pending);
                // Joining copies the end data once more; when that copy would not fit beside
                // the rest, the two pieces are parsed where they are (slower, but rare: a
                // compliant `end` is at most one 4 KiB chunk). An `end` without `chunk`s is
                // parsed where it is (no head), never copied.
                let joined = held.saturating_add(more.saturating_mul(2));
                if held > 0 && joined <= max.saturating_add(FIELD_ROOM) {
                    pending.push_str(&e.data);
                    self.note(joined);
                    Some(parse_result("", &pending))
                } else {
                    self.note(held + more);
                    Some(parse_result(&pending, &e.data))
                }
            }
            EVENT_ERROR => {
                self.finished = true;
                self.pending = String::new();
                Some(Ok(CallEvent::Error(e.data)))
            }
            EVENT_PROGRESS => Some(
                serde_json::from_str(&e.data)
                    .map(CallEvent::Progress)
                    .map_err(|err| CallStreamError::BadProgress(err.to_string())),
            ),
            _ => None,
        }
    }
}

/// The `end` data (after the joined `chunk`s in `head`) as a result, saying whether it was not
/// JSON at all or JSON of another shape.
fn parse_result<R: DeserializeOwned>(
    head: &str,
    tail: &str,
) -> Result<CallEvent<R>, CallStreamError> {
    fn parse<T: serde::de::DeserializeOwned>(head: &str, tail: &str) -> serde_json::Result<T> {
        if head.is_empty() {
            serde_json::from_str(tail)
        } else {
            serde_json::from_reader(std::io::Read::chain(head.as_bytes(), tail.as_bytes()))
        }
    }
    parse::<R>(head, tail)
        .map(CallEvent::Result)
        .map_err(|err| {
            // A number too large for an f64 is valid JSON to a parser that skips it, so the
            // non-finite case is told apart first.
            let why = if let Some(number) = non_finite(head, tail, &err) {
                format!("the end data holds {number} ({err}; {NON_FINITE_NOTE})")
            } else if parse::<serde::de::IgnoredAny>(head, tail).is_ok() {
                let wanted = std::any::type_name::<R>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("result");
                format!("the end data is JSON but not a {wanted} ({err})")
            } else {
                format!("the end data is not JSON ({err})")
            };
            let start = if head.is_empty() { tail } else { head };
            // At most 200 characters of the data, on one line.
            let data = crate::text::preview(start, 200);
            CallStreamError::BadResult(format!("{why}; data: {data}"))
        })
}

/// Added to a decoding error caused by a non-finite number, which JSON cannot carry (servers
/// whose encoder writes `NaN` or `Infinity`, as Python's `json.dumps` does, send invalid JSON).
pub const NON_FINITE_NOTE: &str =
    "JSON has no NaN or Infinity: a non-finite number (a reward, say) cannot be sent";

/// The non-finite number that made `head`+`tail` fail to parse with `err`, if one did: a
/// `NaN` or `Infinity` literal where serde_json stopped, or a number too large for an `f64`.
fn non_finite(head: &str, tail: &str, err: &serde_json::Error) -> Option<&'static str> {
    if err.to_string().starts_with("number out of range") {
        return Some("a number out of range");
    }
    // serde_json reports a 1-based line and a 1-based byte column; look from one byte before
    // (the `-` of `-Infinity`) at the next few bytes.
    let start = err.column().saturating_sub(2);
    let (mut line, mut col) = (1usize, 0usize);
    let mut window = Vec::with_capacity(12);
    for b in head.bytes().chain(tail.bytes()) {
        if line == err.line() && col >= start {
            window.push(b);
            if window.len() == 12 {
                break;
            }
        }
        if b == b'\n' {
            line += 1;
            col = 0;
        } else {
            col += 1;
        }
    }
    let window = String::from_utf8_lossy(&window);
    ["`NaN`", "`Infinity`"]
        .into_iter()
        .find(|lit| window.contains(lit.trim_matches('`')))
}
