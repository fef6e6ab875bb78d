//! `SseDecoder` on arbitrary bytes under arbitrary bounds: it never holds more than its bounds
//! allow (its high-water mark), where the stream is cut never changes what it decodes, the
//! lenient and the checked push agree on UTF-8 input, and an encoded event decodes to itself.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use ors_core::sse::{self, DecodeLimits, SseDecoder, SseError, SseEvent};
use ors_fuzz::{cuts, limits, pieces, FIELD_ROOM};

/// The events and the error of a checked decode of `bytes` fed as `pieces`.
fn decode(limits: DecodeLimits, pieces: &[&[u8]]) -> (Vec<SseEvent>, Option<SseError>, SseDecoder) {
    let mut d = SseDecoder::with_limits(limits);
    let mut events = Vec::new();
    let mut error = None;
    for piece in pieces {
        match d.try_push_with(piece, |e| events.push(e)) {
            Ok(()) => {}
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    (events, error, d)
}

fn check(mut u: Unstructured<'_>) -> Result<()> {
    let u = &mut u;
    let limits = limits(u)?;
    let cuts = cuts(u)?;
    if u.arbitrary::<bool>()? {
        // An event encoded by our encoder comes back as it was sent (a CR in the data cannot
        // be carried and arrives as LF; an empty name is `message`).
        let name: String = u.arbitrary()?;
        let data: String = u.arbitrary()?;
        let bytes = sse::encode_event(&name, &data);
        let (events, error, _) = decode(DecodeLimits::UNLIMITED, &pieces(&bytes, &cuts));
        assert_eq!(error, None);
        let name = name.replace(['\n', '\r'], " ");
        let want = SseEvent::new(
            if name.is_empty() { "message" } else { &name },
            data.replace("\r\n", "\n").replace('\r', "\n"),
        );
        assert_eq!(events, vec![want]);
        return Ok(());
    }
    let bytes = std::mem::replace(u, Unstructured::new(&[])).take_rest();
    let whole = decode(limits, &[bytes]);
    let cut = decode(limits, &pieces(bytes, &cuts));
    for (_, _, d) in [&whole, &cut] {
        let cap = limits.max_event_bytes.saturating_add(FIELD_ROOM);
        assert!(d.high_water() <= cap, "held {} of {cap}", d.high_water());
        if d.failure().is_some() {
            assert_eq!(d.buffered(), 0, "a failed decoder keeps nothing");
        }
    }
    assert_eq!(whole.0, cut.0, "the cuts changed the events");
    // Which bound is named when a line crosses two at once may depend on the cuts (a decoder
    // that has not seen a line's end cannot know how long it will be); that one was crossed
    // may not, nor may any other error.
    match (&whole.1, &cut.1) {
        (Some(a), Some(b)) if a.is_limit() && b.is_limit() => {}
        (a, b) => assert_eq!(a, b, "the cuts changed the error"),
    }
    if let Some(e) = &whole.1 {
        let mut d = whole.2;
        assert_eq!(
            d.try_push(b"\n\n").as_ref(),
            Err(e),
            "a failed decoder stays failed"
        );
    }
    // The lenient push decodes the same events as long as the checked one had no error.
    if whole.1.is_none() {
        let mut lenient = SseDecoder::with_limits(limits);
        let mut events = Vec::new();
        for piece in pieces(bytes, &cuts) {
            events.extend(lenient.push(piece));
        }
        assert_eq!(events, whole.0);
        assert!(lenient.failure().is_none());
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = check(Unstructured::new(data));
});
