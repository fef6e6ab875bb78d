//! Response bodies (a complete buffer, or a live SSE stream with keep-alives) and the
//! response builders.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::{Response, StatusCode};
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

/// The body of every response this server sends.
pub(crate) enum RespBody {
    /// A complete body (JSON, or a finished SSE stream).
    Full(Option<Bytes>),
    /// A complete body in pieces sent as they are: a result shares its buffer with the
    /// stored copy instead of being joined to the events before it.
    Frames(VecDeque<Bytes>),
    /// A call stream: SSE events as a running call produces them.
    Sse(SseBody),
}

/// What counts a live stream as listening to it (a session, while a client waits for its
/// call): told when the stream closes. A trait, so a body need not know what a session is.
pub(crate) trait Listener: Send + Sync {
    /// A stream this listener counted (see [`Listening`]) closed.
    fn stream_closed(&self);
}

/// One open call stream, counted by its [`Listener`] (which has counted it already when
/// this is made) until this guard drops.
pub(crate) struct Listening(pub(crate) Arc<dyn Listener>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.stream_closed();
    }
}

/// A live `text/event-stream`: an optional first event, then whatever the call task sends,
/// with a keep-alive comment whenever nothing was sent for `keepalive` (PROTOCOL_NOTES row `keep-alive`).
pub(crate) struct SseBody {
    first: Option<Bytes>,
    rx: mpsc::Receiver<Bytes>,
    keepalive: Duration,
    // Created on the first idle poll only: a fast call finishes before any timer is needed.
    timer: Option<Pin<Box<Sleep>>>,
    /// Counts this stream as someone listening to the session, while it is open.
    _listening: Listening,
}

impl SseBody {
    pub(crate) fn new(
        first: Bytes,
        rx: mpsc::Receiver<Bytes>,
        keepalive: Duration,
        listening: Listening,
    ) -> Self {
        Self {
            first: Some(first),
            rx,
            keepalive,
            timer: None,
            _listening: listening,
        }
    }
}

impl Body for RespBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            RespBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            RespBody::Frames(frames) => Poll::Ready(frames.pop_front().map(|b| Ok(Frame::data(b)))),
            RespBody::Sse(sse) => {
                if let Some(first) = sse.first.take() {
                    return Poll::Ready(Some(Ok(Frame::data(first))));
                }
                match sse.rx.poll_recv(cx) {
                    Poll::Ready(Some(bytes)) => {
                        if let Some(timer) = sse.timer.as_mut() {
                            timer.as_mut().reset(Instant::now() + sse.keepalive);
                        }
                        return Poll::Ready(Some(Ok(Frame::data(bytes))));
                    }
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => {}
                }
                let keepalive = sse.keepalive;
                let timer = sse
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(keepalive)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        timer.as_mut().reset(Instant::now() + keepalive);
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                            ors_core::sse::KEEPALIVE,
                        )))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RespBody::Full(bytes) => bytes.is_none(),
            RespBody::Frames(frames) => frames.is_empty(),
            RespBody::Sse(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RespBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            RespBody::Full(None) => SizeHint::with_exact(0),
            RespBody::Frames(frames) => {
                SizeHint::with_exact(frames.iter().map(|f| f.len() as u64).sum())
            }
            RespBody::Sse(_) => SizeHint::default(),
        }
    }
}

pub(crate) type Resp = Response<RespBody>;

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const EVENT_STREAM: HeaderValue = HeaderValue::from_static(ors_core::protocol::EVENT_STREAM);
const NO_CACHE: HeaderValue = HeaderValue::from_static("no-cache");
const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

/// A 200 response with a JSON body already rendered.
pub(crate) fn json_bytes(bytes: Bytes) -> Resp {
    json_status(StatusCode::OK, bytes)
}

/// A response with a status and a rendered JSON body.
pub(crate) fn json_status(status: StatusCode, bytes: Bytes) -> Resp {
    let mut resp = Response::new(RespBody::Full(Some(bytes)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, JSON);
    resp
}

/// An SSE response, its headers in a map sized as hyper sizes a map for six headers (as a
/// JSON answer's first insert does): cloning a map holding exactly these left it no room for
/// the header the request's entry point adds, nor for the connection's next request, which
/// hyper parses into it.
fn sse(body: RespBody) -> Resp {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.reserve(6);
    h.insert(CONTENT_TYPE, EVENT_STREAM);
    h.insert(CACHE_CONTROL, NO_CACHE);
    resp
}

/// A complete SSE response (events already encoded).
pub(crate) fn sse_full(events: Bytes) -> Resp {
    sse(RespBody::Full(Some(events)))
}

/// A complete SSE response sent as these pieces, in order.
pub(crate) fn sse_frames(frames: Vec<Bytes>) -> Resp {
    sse(RespBody::Frames(frames.into()))
}

/// A live SSE response. Only a live stream tells a proxy such as nginx not to buffer it: a
/// complete body loses nothing to buffering, and the header cost every call answered at once
/// a fifth of its response-building work.
pub(crate) fn sse_stream(body: SseBody) -> Resp {
    let mut resp = sse(RespBody::Sse(body));
    resp.headers_mut()
        .insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    resp
}
