//! Reading response bodies within bounds: the one place the client takes bytes off a
//! response, so every caller (JSON requests, call streams, and model servers reached through
//! the same transport) gets the same protections: a size limit checked against the
//! `Content-Length` before anything is read and against the bytes as they arrive (decided by
//! [`ors_core::body::BoundedBody`]), a body cut short of its `Content-Length` named as such,
//! and a high-water mark of what was held.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Bytes, BytesMut};
use http::header::CONTENT_LENGTH;
use http::HeaderMap;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use ors_core::body::{content_length, truncated, BodyError, BoundedBody};

use crate::config::SizeLimit;
use crate::error::{human_bytes, Error};

/// The most bytes any one response of a client has held in its buffers at once.
#[derive(Debug, Default)]
pub(crate) struct Meter(AtomicUsize);

impl Meter {
    /// Record that a response holds `bytes` now.
    pub fn note(&self, bytes: usize) {
        self.0.fetch_max(bytes, Ordering::Relaxed);
    }

    /// The peak so far.
    pub fn peak(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// How reading a body failed: a bound of [`ors_core::body`], or the connection broke.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Too large, or cut short of its `Content-Length`.
    Body(BodyError),
    /// The connection broke.
    Transport(hyper::Error),
}

impl From<BodyError> for ReadError {
    fn from(e: BodyError) -> Self {
        ReadError::Body(e)
    }
}

impl ReadError {
    /// The client error for a body of `what` read with the `kind` limit of `limit` bytes.
    pub fn into_error(self, what: &str, limit: usize, kind: SizeLimit) -> Error {
        match self {
            ReadError::Body(BodyError::TooLarge { announced }) => Error::ResponseTooLarge {
                what: match announced {
                    Some(n) => format!("{what} (Content-Length: {})", human_bytes(clamp(n))),
                    None => what.to_owned(),
                },
                limit,
                kind,
            },
            ReadError::Body(BodyError::Truncated {
                received,
                announced,
            }) => Error::Protocol(format!(
                "{what} ended after {received} of the {announced} bytes its Content-Length \
                 announced"
            )),
            ReadError::Transport(e) => Error::transport(&e),
        }
    }
}

fn clamp(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// One response body, read piece by piece with its `Content-Length` checked (the bounds
/// are [`ors_core::body`]'s, shared with the environment runtime's HTTP client).
pub(crate) struct BodyReader {
    body: Incoming,
    announced: Option<u64>,
    received: u64,
}

impl BodyReader {
    /// A reader of `body`, whose response had `headers`.
    pub fn new(headers: &HeaderMap, body: Incoming) -> Self {
        let announced = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| content_length(v.as_bytes()));
        Self {
            body,
            announced,
            received: 0,
        }
    }

    /// The next piece of data, or `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<Bytes>, ReadError> {
        while let Some(frame) = self.body.frame().await {
            let frame = frame.map_err(|e| {
                let cut = truncated(self.received, self.announced);
                cut.map_or(ReadError::Transport(e), ReadError::Body)
            })?;
            // Trailers carry nothing ORS uses.
            if let Ok(data) = frame.into_data() {
                self.received += data.len() as u64;
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    /// The whole body, failing as soon as it would exceed `max` bytes: before reading when
    /// the `Content-Length` says so, else at the piece that crosses the limit (never held).
    pub async fn read_all(mut self, max: usize, meter: &Meter) -> Result<Bytes, ReadError> {
        let mut bounded = BoundedBody::new(self.announced, max)?;
        while let Some(piece) = self.next().await? {
            bounded.push(&piece)?;
            meter.note(clamp(bounded.received()));
        }
        Ok(Bytes::from(bounded.finish()))
    }

    /// At most `max` bytes from the start of the body (for an error's detail); the rest is
    /// left unread and a broken connection just ends the prefix.
    pub async fn read_prefix(mut self, max: usize) -> Bytes {
        let mut out = BytesMut::new();
        while out.len() < max {
            let Ok(Some(piece)) = self.next().await else {
                break;
            };
            let take = piece.len().min(max - out.len());
            out.extend_from_slice(&piece[..take]);
        }
        out.freeze()
    }
}
