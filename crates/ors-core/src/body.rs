//! Bounded HTTP bodies, sans I/O: the one place the limits of a body read by ors-rs are
//! decided, whoever reads it (the client's responses, the runtime's webhook and MCP replies).
//! The caller takes pieces off its connection and hands them to a [`BoundedBody`], which
//! refuses a body whose `Content-Length` is over the limit before anything is read, refuses
//! the piece that crosses the limit (never holding it), and names a body cut short of its
//! `Content-Length`.
//!
//! ```
//! use ors_core::body::{BodyError, BoundedBody};
//!
//! let mut body = BoundedBody::new(Some(5), 16).unwrap();
//! body.push(b"hel").unwrap();
//! body.push(b"lo").unwrap();
//! assert_eq!(body.finish(), b"hello");
//!
//! assert_eq!(
//!     BoundedBody::new(Some(100), 16).unwrap_err(),
//!     BodyError::TooLarge { announced: Some(100) }
//! );
//! let mut body = BoundedBody::new(None, 4).unwrap();
//! assert_eq!(body.push(b"hello").unwrap_err(), BodyError::TooLarge { announced: None });
//! ```

/// Why a body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The body is larger than the limit: announced so by its `Content-Length`, or found so
    /// while reading.
    #[error("the body is larger than the limit")]
    TooLarge {
        /// The `Content-Length`, when that is what said so.
        announced: Option<u64>,
    },
    /// The connection ended before the `Content-Length` bytes arrived.
    #[error(
        "the body ended after {received} of the {announced} bytes its Content-Length announced"
    )]
    Truncated {
        /// Bytes that arrived.
        received: u64,
        /// Bytes the `Content-Length` announced.
        announced: u64,
    },
}

/// The value of a `Content-Length` header, if it is a number.
pub fn content_length(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// What a connection that broke after `received` bytes of a body announced as `announced`
/// bytes means: [`BodyError::Truncated`] when fewer arrived, else `None` (the break itself is
/// the error).
pub fn truncated(received: u64, announced: Option<u64>) -> Option<BodyError> {
    announced
        .filter(|&announced| received < announced)
        .map(|announced| BodyError::Truncated {
            received,
            announced,
        })
}

/// One body being read within a limit.
#[derive(Debug)]
pub struct BoundedBody {
    max: usize,
    announced: Option<u64>,
    received: u64,
    data: Vec<u8>,
}

impl BoundedBody {
    /// A body of at most `max` bytes whose response announced `announced` (its
    /// `Content-Length`); refused at once when that is over `max`.
    pub fn new(announced: Option<u64>, max: usize) -> Result<Self, BodyError> {
        if announced.is_some_and(|n| n > max as u64) {
            return Err(BodyError::TooLarge { announced });
        }
        // Reserve what was announced (it is within the limit), so the body is one allocation.
        let capacity = announced.map_or(0, |n| usize::try_from(n).unwrap_or(0));
        Ok(Self {
            max,
            announced,
            received: 0,
            data: Vec::with_capacity(capacity),
        })
    }

    /// Count bytes read (by a caller that keeps them itself, or skips them), refused past
    /// the limit.
    pub fn count(&mut self, len: usize) -> Result<(), BodyError> {
        if self.received.saturating_add(len as u64) > self.max as u64 {
            return Err(BodyError::TooLarge { announced: None });
        }
        self.received += len as u64;
        Ok(())
    }

    /// Add the next piece; refused (and not kept) when it would cross the limit.
    pub fn push(&mut self, piece: &[u8]) -> Result<(), BodyError> {
        self.count(piece.len())?;
        self.data.extend_from_slice(piece);
        Ok(())
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// What a connection that broke now means: a truncated body when fewer bytes than the
    /// `Content-Length` arrived, else `None` (the break itself is the error).
    pub fn broken(&self) -> Option<BodyError> {
        truncated(self.received, self.announced)
    }

    /// The body, once the last piece arrived.
    pub fn finish(self) -> Vec<u8> {
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_at_the_limit_is_kept() {
        let mut b = BoundedBody::new(Some(4), 4).unwrap();
        b.push(b"ab").unwrap();
        b.push(b"cd").unwrap();
        assert_eq!(b.received(), 4);
        assert_eq!(b.broken(), None);
        assert_eq!(b.finish(), b"abcd");
    }

    #[test]
    fn the_piece_crossing_the_limit_is_refused_and_not_kept() {
        let mut b = BoundedBody::new(None, 4).unwrap();
        b.push(b"abc").unwrap();
        assert_eq!(b.push(b"de"), Err(BodyError::TooLarge { announced: None }));
        assert_eq!(b.received(), 3);
        assert_eq!(b.finish(), b"abc");
    }

    #[test]
    fn a_short_body_is_truncated_only_against_its_content_length() {
        let mut b = BoundedBody::new(Some(10), 100).unwrap();
        b.push(b"abc").unwrap();
        assert_eq!(
            b.broken(),
            Some(BodyError::Truncated {
                received: 3,
                announced: 10
            })
        );
        let mut b = BoundedBody::new(None, 100).unwrap();
        b.push(b"abc").unwrap();
        assert_eq!(b.broken(), None);
    }

    #[test]
    fn content_lengths_parse_or_are_ignored() {
        assert_eq!(content_length(b" 42 "), Some(42));
        assert_eq!(content_length(b"-1"), None);
        assert_eq!(content_length(b"\xff"), None);
    }
}
