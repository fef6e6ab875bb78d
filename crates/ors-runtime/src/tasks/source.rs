//! What every task source is ([`TaskSource`]: rows by index) and why reading one fails
//! ([`DataError`]), below the sources (JSONL, Parquet, memory) and [`super::TaskFile`] that
//! use them.

use std::path::{Path, PathBuf};

/// Why a task file could not be opened or a row read.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A row is not a task.
    #[error("{}: row {row}: {reason}", path.display())]
    Row {
        /// The file.
        path: PathBuf,
        /// The row's index (0-based, counting rows, not blank lines).
        row: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is not in the format its name says.
    #[error("{}: {reason}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A row past the end was asked for.
    #[error("{}: rows {start}..{stop} asked for, but the file has {len}", path.display())]
    OutOfRange {
        /// The file.
        path: PathBuf,
        /// First row asked for.
        start: usize,
        /// One past the last row asked for.
        stop: usize,
        /// Rows in the file.
        len: usize,
    },
    /// The reading thread failed (the runtime is shutting down).
    #[error("reading {}: {reason}", path.display())]
    Thread {
        /// The file.
        path: PathBuf,
        /// What happened.
        reason: String,
    },
}

impl DataError {
    /// The file at `path` is not in its format, for `reason`.
    pub(crate) fn format(path: &Path, reason: impl std::fmt::Display) -> Self {
        DataError::Format {
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    /// Row `row` of the file at `path` is not a task, for `reason`.
    pub(crate) fn row(path: &Path, row: usize, reason: impl std::fmt::Display) -> Self {
        DataError::Row {
            path: path.to_owned(),
            row,
            reason: reason.to_string(),
        }
    }

    /// The I/O error of reading (or writing) the file at `path`.
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        |source| DataError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// `Ok` when `start..stop` is a range of a source of `len` rows.
pub(crate) fn check_range(
    path: &Path,
    start: usize,
    stop: usize,
    len: usize,
) -> Result<(), DataError> {
    if start <= stop && stop <= len {
        Ok(())
    } else {
        Err(DataError::OutOfRange {
            path: path.to_owned(),
            start,
            stop,
            len,
        })
    }
}

/// A source of tasks by index; reads block (they run on tokio's blocking pool through
/// [`TaskFile`](super::TaskFile)).
pub trait TaskSource<T>: Send + Sync + 'static {
    /// Rows in the source.
    fn len(&self) -> usize;
    /// Whether it has no rows.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Rows `start..stop` (`start <= stop <= len`), parsed.
    fn read(&self, start: usize, stop: usize) -> Result<Vec<T>, DataError>;
}
