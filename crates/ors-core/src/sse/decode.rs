//! Decoding: the incremental `text/event-stream` decoder (the call-stream decoder built on it is
//! in `call_stream.rs`). Both are bounded by [`DecodeLimits`]: a stream from a broken or hostile
//! peer (a line that never ends, `chunk`s that never reach their `end`) fails with an error
//! naming the bound instead of growing the decoder without end.

use memchr::memchr2;

/// The default bound on one call's result (its `chunk`s and `end` reassembled), and so on one
/// line and one event of any stream: 256 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 256 * 1024 * 1024;

/// What a line may add to its data for the field name (`data: `) and still fit.
pub(super) const FIELD_ROOM: usize = 64;

/// How many bytes a decoder may hold. Past a bound decoding stops with an error: the stream is
/// broken (or hostile) and waiting for more of it cannot help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The longest line, field name included, kept while its line break has not arrived.
    pub max_line_bytes: usize,
    /// The largest event: its `data:` lines joined.
    pub max_event_bytes: usize,
    /// The largest call result: the `chunk` data and the `end` data joined
    /// ([`super::CallStreamDecoder`] only).
    pub max_result_bytes: usize,
}

impl DecodeLimits {
    /// The bounds of [`SseDecoder::new`] and [`super::CallStreamDecoder::new`]: everything bounded by
    /// [`DEFAULT_MAX_RESULT_BYTES`].
    pub const DEFAULT: Self = Self::bounded(DEFAULT_MAX_RESULT_BYTES);

    /// No bounds, for bytes that are already in memory.
    // Every bound is `usize::MAX`: the line's room for its field name saturates.
    pub const UNLIMITED: Self = Self::bounded(usize::MAX);

    /// Results, events and lines of at most `max_bytes` of data each (a line may carry its
    /// field name on top).
    pub const fn bounded(max_bytes: usize) -> Self {
        Self {
            max_line_bytes: max_bytes.saturating_add(FIELD_ROOM),
            max_event_bytes: max_bytes,
            max_result_bytes: max_bytes,
        }
    }
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a stream could not be decoded as `text/event-stream`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line grew past [`DecodeLimits::max_line_bytes`] without a line break.
    #[error("an SSE line is longer than {limit} bytes")]
    LineTooLong {
        /// The bound that was hit.
        limit: usize,
    },
    /// An event's data grew past [`DecodeLimits::max_event_bytes`].
    #[error("an SSE event's data is larger than {limit} bytes")]
    EventTooLarge {
        /// The bound that was hit.
        limit: usize,
    },
    /// An event's name or data is not UTF-8 (only the checked `try_push` reports it, once the
    /// line carrying it is complete; `push` replaces such bytes with U+FFFD as the WHATWG rules
    /// say, and they count at their replaced size against the bounds).
    #[error("an SSE event is not valid UTF-8")]
    InvalidUtf8,
}

impl SseError {
    /// Whether this is a size bound being hit (and not a malformed stream).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            SseError::LineTooLong { .. } | SseError::EventTooLarge { .. }
        )
    }
}

/// An incremental `text/event-stream` decoder: feed it bytes split anywhere, get events.
///
/// It holds at most one unfinished line and one unfinished event, each bounded by its
/// [`DecodeLimits`]; [`SseDecoder::high_water`] says how much it ever held. Its `Default` is
/// a decoder at the start of a stream with the [`DecodeLimits::DEFAULT`] bounds.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    pending_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    bad_utf8: bool,
    saw_bytes: bool,
    bom_matched: usize,
    pub(super) limits: DecodeLimits,
    failed: Option<SseError>,
    lines: u64,
    high_water: usize,
    push_peak: usize,
}

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseDecoder {
    /// A decoder at the start of a stream, with the [`DecodeLimits::DEFAULT`] bounds.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with the given bounds.
    pub fn with_limits(limits: DecodeLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// The bounds this decoder enforces.
    pub fn limits(&self) -> DecodeLimits {
        self.limits
    }

    /// Feed bytes; returns the events they complete, in order. Bytes that are not UTF-8 become
    /// U+FFFD; once a bound is hit the rest of the stream is ignored and
    /// [`SseDecoder::failure`] says why (use [`SseDecoder::try_push`] to see it at once).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        self.push_with(bytes, |e| events.push(e));
        events
    }

    /// Feed bytes, handing each completed event to `sink` (the lenient form of
    /// [`SseDecoder::try_push_with`]).
    pub fn push_with(&mut self, bytes: &[u8], mut sink: impl FnMut(SseEvent)) {
        if self.failed.is_none() {
            if let Err(e) = self.feed_all(bytes, false, &mut sink) {
                self.fail(e);
            }
        }
    }

    /// Feed bytes, checked: the events they complete, or the first bound hit or event that is
    /// not UTF-8. After an error the decoder stays failed and every later push repeats it.
    pub fn try_push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        self.try_push_with(bytes, |e| events.push(e))?;
        Ok(events)
    }

    /// Feed bytes, checked, handing each completed event to `sink`; the events completed
    /// before an error have been handed over when it is returned.
    pub fn try_push_with(
        &mut self,
        bytes: &[u8],
        mut sink: impl FnMut(SseEvent),
    ) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.feed_all(bytes, true, &mut sink)
            .inspect_err(|e| self.fail(e.clone()))
    }

    /// Why decoding stopped, if it did.
    pub fn failure(&self) -> Option<&SseError> {
        self.failed.as_ref()
    }

    /// Whether any byte has been fed (a keep-alive counts).
    pub fn saw_bytes(&self) -> bool {
        self.saw_bytes
    }

    /// How many complete lines (events' fields, comments, blank lines) have been decoded: a
    /// peer that sends bytes but never a line break does not move it.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The bytes held now: the unfinished line and the unfinished event.
    pub fn buffered(&self) -> usize {
        self.line.len() + self.data.len() + self.event.as_ref().map_or(0, String::len)
    }

    /// The most bytes this decoder has held at once (see [`SseDecoder::buffered`]).
    pub fn high_water(&self) -> usize {
        self.high_water
    }

    /// The peak since the last call, for a decoder built on this one.
    pub(super) fn take_push_peak(&mut self) -> usize {
        std::mem::take(&mut self.push_peak)
    }

    fn fail(&mut self, e: SseError) {
        // Nothing more will be decoded: give the memory back now.
        self.line = Vec::new();
        self.data = String::new();
        self.event = None;
        self.failed = Some(e);
    }

    /// Count `extra` bytes held outside the buffers (a line being processed) into the peaks.
    fn note_held(&mut self, extra: usize) {
        let held = self.buffered() + extra;
        self.high_water = self.high_water.max(held);
        self.push_peak = self.push_peak.max(held);
    }

    fn feed_all(
        &mut self,
        mut bytes: &[u8],
        strict: bool,
        sink: &mut impl FnMut(SseEvent),
    ) -> Result<(), SseError> {
        self.saw_bytes |= !bytes.is_empty();
        // A UTF-8 byte order mark may open the stream (WHATWG) and is skipped; it may arrive
        // split across pushes, so the matched prefix is remembered and replayed on a mismatch.
        while self.bom_matched < BOM.len() && !bytes.is_empty() {
            if bytes[0] == BOM[self.bom_matched] {
                self.bom_matched += 1;
                bytes = &bytes[1..];
            } else {
                let matched = std::mem::replace(&mut self.bom_matched, BOM.len());
                self.feed(&BOM[..matched], strict, sink)?;
            }
        }
        self.feed(bytes, strict, sink)
    }

    /// Fail unless `more` bytes fit beside what is held: at most one event and the line
    /// carrying it.
    fn check_room(&self, more: usize) -> Result<(), SseError> {
        let limit = self.limits.max_event_bytes;
        if self.buffered().saturating_add(more) > limit.saturating_add(FIELD_ROOM) {
            return Err(SseError::EventTooLarge { limit });
        }
        Ok(())
    }

    fn feed(
        &mut self,
        mut bytes: &[u8],
        strict: bool,
        sink: &mut impl FnMut(SseEvent),
    ) -> Result<(), SseError> {
        let max_line = self.limits.max_line_bytes;
        while !bytes.is_empty() {
            if std::mem::take(&mut self.pending_cr) && bytes[0] == b'\n' {
                bytes = &bytes[1..]; // the LF of a CRLF
                continue;
            }
            // Whole lines at a time (memchr is vectorised): a 4 KiB `chunk` line is one copy,
            // not 4096 pushes.
            let end = memchr2(b'\n', b'\r', bytes);
            let taken = end.unwrap_or(bytes.len());
            // Checked whether or not the line was buffered, so where the stream is cut never
            // changes the outcome.
            if self.line.len().saturating_add(taken) > max_line {
                return Err(SseError::LineTooLong { limit: max_line });
            }
            // Every line must fit beside what is held, whatever its field, as it must when it
            // arrives in pieces and is buffered.
            self.check_room(taken)?;
            let Some(i) = end else {
                self.line.extend_from_slice(bytes);
                self.note_held(0);
                break;
            };
            if self.line.is_empty() {
                self.process_line(&bytes[..i], false, strict, sink)?;
            } else {
                self.line.extend_from_slice(&bytes[..i]);
                self.end_line(strict, sink)?;
            }
            self.pending_cr = bytes[i] == b'\r';
            bytes = &bytes[i + 1..];
        }
        Ok(())
    }

    fn end_line(&mut self, strict: bool, sink: &mut impl FnMut(SseEvent)) -> Result<(), SseError> {
        let mut line = std::mem::take(&mut self.line);
        if let Some(prefix) = data_prefix(&line).filter(|_| !self.has_data) {
            // The first data line of an event becomes its data in place: no second copy
            // of what may be megabytes.
            self.lines += 1;
            self.check_data(0, line.len() - prefix)?;
            line.drain(..prefix);
            self.data = match String::from_utf8(line) {
                Ok(s) => s,
                Err(e) => {
                    // Replaced, the text can be up to three times the bytes; it is made
                    // beside them, so both count.
                    let raw = e.into_bytes();
                    let len = text_len(&raw, strict)?;
                    self.check_data(0, len)?;
                    self.check_room(raw.len() + len)?;
                    let mut text = String::with_capacity(len);
                    self.bad_utf8 |= push_lossy(&mut text, &raw);
                    self.note_held(raw.len() + text.len());
                    text
                }
            };
            self.has_data = true;
            self.note_held(0);
            return Ok(());
        }
        // Other lines leave the buffer to be reused, so a long stream does not allocate once
        // per line.
        let done = self.process_line(&line, true, strict, sink);
        line.clear();
        if done.is_ok() {
            self.line = line;
        }
        done
    }

    /// One complete line; `buffered` when it sits in a buffer of ours (it counts as held while
    /// its name or data is copied out of it).
    ///
    /// The bounds count the line whether or not it is buffered: where the stream was cut
    /// decides that, and must not decide whether a line fits.
    fn process_line(
        &mut self,
        line: &[u8],
        buffered: bool,
        strict: bool,
        sink: &mut impl FnMut(SseEvent),
    ) -> Result<(), SseError> {
        let in_transit = line.len();
        let held = if buffered { in_transit } else { 0 };
        self.lines += 1;
        if line.is_empty() {
            return self.dispatch(strict, sink);
        }
        if line[0] == b':' {
            return Ok(()); // comment / keep-alive
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &[][..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            // The bytes are checked against the bounds before their UTF-8 (replaced, text
            // is never shorter), as they are when the line arrives in pieces.
            b"event" => {
                self.check_room(in_transit + value.len())?;
                let len = text_len(value, strict)?;
                self.check_room(in_transit + len)?;
                let mut name = String::with_capacity(len);
                self.bad_utf8 |= push_lossy(&mut name, value);
                self.event = Some(name);
                self.note_held(held);
            }
            b"data" => {
                let sep = usize::from(self.has_data);
                self.check_data(sep, value.len())?;
                let len = text_len(value, strict)?;
                self.check_data(sep, len)?;
                // A buffered first data line becomes the data in place (`end_line`): only
                // its text is held. A later one is copied out beside the data.
                let line_cost = if self.has_data { in_transit } else { 0 };
                self.check_room(line_cost + sep + len)?;
                if self.has_data {
                    self.data.push('\n');
                }
                self.bad_utf8 |= push_lossy(&mut self.data, value);
                self.has_data = true;
                self.note_held(held);
            }
            _ => {} // id, retry and unknown fields do not matter to ORS
        }
        Ok(())
    }

    /// Fail unless `len` more bytes of data (after `sep` for a line break) fit the event.
    fn check_data(&self, sep: usize, len: usize) -> Result<(), SseError> {
        let limit = self.limits.max_event_bytes;
        if self.data.len() + sep + len > limit {
            return Err(SseError::EventTooLarge { limit });
        }
        Ok(())
    }

    /// A blank line: hand over the event, if it has data.
    fn dispatch(&mut self, strict: bool, sink: &mut impl FnMut(SseEvent)) -> Result<(), SseError> {
        let event = self.event.take();
        let bad = std::mem::take(&mut self.bad_utf8);
        // Without data there is no event, and no data is held.
        if !std::mem::take(&mut self.has_data) {
            return Ok(());
        }
        let data = std::mem::take(&mut self.data);
        if bad && strict {
            return Err(SseError::InvalidUtf8);
        }
        let event = event.filter(|e| !e.is_empty());
        let event = event.unwrap_or_else(|| "message".to_owned());
        sink(SseEvent { event, data });
        Ok(())
    }
}

/// How long a field value is as text: its length when it is UTF-8; otherwise an error when
/// `strict`, else its length with each invalid sequence replaced by U+FFFD (3 bytes), which is
/// what the bounds count, as it is what is held.
fn text_len(value: &[u8], strict: bool) -> Result<usize, SseError> {
    let mut len = 0;
    for chunk in value.utf8_chunks() {
        len += chunk.valid().len();
        if !chunk.invalid().is_empty() {
            if strict {
                return Err(SseError::InvalidUtf8);
            }
            len += char::REPLACEMENT_CHARACTER.len_utf8();
        }
    }
    Ok(len)
}

/// Append `value` as text, each invalid UTF-8 sequence replaced by U+FFFD as the WHATWG rules
/// say (without the temporary copy `String::from_utf8_lossy` makes); whether there was one.
fn push_lossy(out: &mut String, value: &[u8]) -> bool {
    let mut replaced = false;
    for chunk in value.utf8_chunks() {
        out.push_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            out.push(char::REPLACEMENT_CHARACTER);
            replaced = true;
        }
    }
    replaced
}

/// The length of the `data:` field name (and its optional space) when `line` is a data line.
fn data_prefix(line: &[u8]) -> Option<usize> {
    match line.strip_prefix(b"data") {
        Some([]) => Some(4),
        Some([b':', b' ', ..]) => Some(6),
        Some([b':', ..]) => Some(5),
        _ => None,
    }
}

/// One decoded event: its name (`message` when the stream gave none) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// An event of the given name and data.
    pub fn new(event: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            event: event.into(),
            data: data.into(),
        }
    }
}
