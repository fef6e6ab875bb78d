//! Reading a request body: every frame is copied into one buffer and released at once, so a
//! body trickled a byte per TCP segment costs its bytes, not one of hyper's read buffers per
//! segment; within the size limit, the time limit, and the server-wide budget of body bytes
//! in memory.

use std::future::Future as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;

use crate::error::ApiError;

/// The most a `Content-Length` header alone makes us allocate up front: the header is the
/// sender's word, and a body that never comes must not cost its announced size.
const PREALLOCATE_AT_MOST: usize = 64 * 1024;

/// The request-body bytes the whole server holds in memory (buffers being read, and bodies
/// not yet released, such as a call's input waiting for its turn), against a limit.
pub(crate) struct BodyBudget {
    used: AtomicUsize,
    max: usize,
}

impl BodyBudget {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            max,
        }
    }

    /// Bytes held now (buffer capacities, not just what has arrived).
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Hold `n` more bytes; 503 `overloaded` past the limit.
    fn take(&self, n: usize) -> Result<(), ApiError> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= self.max)
            })
            .map(drop)
            .map_err(|_| {
                ApiError::Overloaded(format!(
                    "the server holds its limit of {} bytes of request bodies; retry shortly",
                    self.max
                ))
            })
    }
}

/// The share of the budget one body buffer holds; given back when dropped.
struct Held {
    budget: Arc<BodyBudget>,
    bytes: usize,
}

impl Held {
    fn take(budget: &Arc<BodyBudget>, bytes: usize) -> Result<Self, ApiError> {
        budget.take(bytes)?;
        Ok(Self {
            budget: Arc::clone(budget),
            bytes,
        })
    }

    /// Hold `total` bytes from now on.
    fn grow_to(&mut self, total: usize) -> Result<(), ApiError> {
        if total > self.bytes {
            self.budget.take(total - self.bytes)?;
            self.bytes = total;
        }
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// What a request's work holds of the budget until it runs: the body it was parsed from and
/// the parsed form's share. A group scoring waiting behind a session's gate parses its body
/// first, and its candidates (about three times the body when made of many small blocks) must
/// count as much as a call's input waiting there.
pub(crate) struct Reserved {
    _body: Bytes,
    _parsed: Held,
}

impl Reserved {
    /// Keep `body` and `parsed` more bytes counted until dropped; 503 `overloaded` when the
    /// budget has no room for them.
    pub(crate) fn new(
        budget: &Arc<BodyBudget>,
        body: Bytes,
        parsed: usize,
    ) -> Result<Self, ApiError> {
        Ok(Self {
            _body: body,
            _parsed: Held::take(budget, parsed)?,
        })
    }
}

/// A finished body: the buffer and its share of the budget, released together when the
/// last [`Bytes`] made from it (a call's input, say) is dropped.
struct BodyBuf {
    data: Vec<u8>,
    _held: Held,
}

impl AsRef<[u8]> for BodyBuf {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// What bounds one body.
pub(crate) struct BodyLimits {
    /// Largest body (413 beyond).
    pub(crate) max: usize,
    /// Time to receive the whole body (408 beyond).
    pub(crate) timeout: Duration,
    /// The server-wide budget (503 `overloaded` beyond).
    pub(crate) budget: Arc<BodyBudget>,
}

/// Read a request body: 413 over `limits.max` (before reading when `Content-Length` already
/// says so), 408 when it has not all arrived within `limits.timeout`, 503 when the server
/// already holds its budget of body bytes.
pub(crate) async fn read_body(
    body: Incoming,
    content_length: Option<u64>,
    limits: &BodyLimits,
) -> Result<Bytes, ApiError> {
    if content_length.is_some_and(|n| n > limits.max as u64) {
        return Err(ApiError::PayloadTooLarge { limit: limits.max });
    }
    let mut read = std::pin::pin!(collect(body, content_length, limits));
    // A small body has usually arrived with the head: read in one poll, without arming a
    // timer (a timeout reads the clock and the runtime's handle: about 500 instructions).
    let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    if let Poll::Ready(read) = first {
        return read;
    }
    match tokio::time::timeout(limits.timeout, read).await {
        Ok(read) => read,
        Err(_) => Err(ApiError::BodyTimeout {
            after: limits.timeout,
        }),
    }
}

async fn collect(
    mut body: Incoming,
    content_length: Option<u64>,
    limits: &BodyLimits,
) -> Result<Bytes, ApiError> {
    // Within the limit (checked above), so it fits a usize.
    let announced = content_length.map(|n| n as usize);
    let initial = announced.map_or(0, |n| n.min(PREALLOCATE_AT_MOST));
    let mut held = Held::take(&limits.budget, initial)?;
    let mut data: Vec<u8> = Vec::with_capacity(initial);
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| ApiError::BadRequest(format!("could not read the request body: {e}")))?;
        // Trailers carry nothing we use.
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let needed = data.len() + chunk.len();
        if needed > limits.max {
            return Err(ApiError::PayloadTooLarge { limit: limits.max });
        }
        if needed > data.capacity() {
            // Doubling keeps the copies linear; never past the announced length or the limit.
            let ceiling = announced.unwrap_or(limits.max).min(limits.max);
            let target = needed.max(data.capacity().saturating_mul(2).min(ceiling));
            held.grow_to(target)?;
            data.reserve_exact(target - data.len());
            held.grow_to(data.capacity())?;
        }
        data.extend_from_slice(&chunk);
        // `chunk` (and with it hyper's read buffer) is released here, frame by frame.
    }
    Ok(Bytes::from_owner(BodyBuf { data, _held: held }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_beyond_its_limit_and_is_given_back_on_drop() {
        let budget = Arc::new(BodyBudget::new(100));
        let mut a = Held::take(&budget, 60).unwrap();
        assert_eq!(budget.used(), 60);
        let err = Held::take(&budget, 41).map(drop).unwrap_err();
        assert_eq!(err.status(), 503);
        assert!(a.grow_to(100).is_ok());
        assert!(a.grow_to(101).is_err());
        assert_eq!(budget.used(), 100);
        let bytes = Bytes::from_owner(BodyBuf {
            data: vec![1, 2, 3],
            _held: a,
        });
        let part = bytes.slice(1..);
        drop(bytes);
        // A slice still holds the buffer and its share.
        assert_eq!(budget.used(), 100);
        assert_eq!(&part[..], &[2, 3]);
        drop(part);
        assert_eq!(budget.used(), 0);
    }
}
