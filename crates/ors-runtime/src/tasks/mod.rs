//! Task sets of any size: a split's tasks read from a file on demand, never loaded whole.
//!
//! [`TaskFile`] opens a JSONL file (one JSON object per line; an index of line offsets is
//! built at open, 8 bytes a row, and rows are parsed when asked for) or, with the cargo feature
//! `parquet`, a Parquet file (only its footer is read at open; a request reads the row group
//! that holds its rows). Either way each row becomes the environment's typed `Task` through
//! serde: object keys, or column names, are the field names. Serve a split from one with
//! `Environment::num_tasks` and `Environment::task`:
//!
//! ```
//! use ors_runtime::tasks::TaskFile;
//!
//! #[derive(serde::Deserialize, Debug, PartialEq)]
//! struct Problem { question: String, answer: String }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = std::env::temp_dir().join(format!("doc-tasks-{}.jsonl", std::process::id()));
//! std::fs::write(&path, "{\"question\": \"1+1?\", \"answer\": \"2\"}\n\n{\"question\": \"2+2?\", \"answer\": \"4\"}\n")?;
//! let file: TaskFile<Problem> = TaskFile::open(&path)?;
//! assert_eq!(file.len(), 2); // blank lines are not rows
//! assert_eq!(file.get(1).await?.answer, "4");
//! assert_eq!(file.range(0, 2).await?.len(), 2);
//! # std::fs::remove_file(&path)?;
//! # Ok(()) }
//! ```
//!
//! In an environment, the file is its start-up state (`type State = TaskFile<Problem>;`,
//! opened in `main` and given to `Server::environment_with`):
//!
//! ```text
//! async fn num_tasks(file: &TaskFile<Problem>, split: &str) -> Result<Option<usize>, EnvError> {
//!     Ok(Some(file.len()))
//! }
//! async fn task(file: &TaskFile<Problem>, split: &str, index: usize) -> Result<Problem, EnvError> {
//!     Ok(file.get(index).await?)
//! }
//! ```

mod jsonl;
#[cfg(feature = "parquet")]
mod parquet;
mod source;

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;

pub use jsonl::JsonlTasks;
#[cfg(feature = "parquet")]
pub use parquet::{write_parquet, ParquetTasks};
use source::check_range;
pub use source::{DataError, TaskSource};

/// Tasks held in memory (a small embedded set), served through the same interface as files.
pub struct MemoryTasks<T>(Vec<T>);

impl<T: Clone + Send + Sync + 'static> TaskSource<T> for MemoryTasks<T> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn read(&self, start: usize, stop: usize) -> Result<Vec<T>, DataError> {
        Ok(self.0[start..stop].to_vec())
    }
}

/// A split's tasks from a file (or memory), read on demand on tokio's blocking pool. Cheap to
/// clone: clones share the open file and its index.
pub struct TaskFile<T> {
    source: Arc<dyn TaskSource<T>>,
    path: Arc<Path>,
}

impl<T> Clone for TaskFile<T> {
    fn clone(&self) -> Self {
        Self {
            source: Arc::clone(&self.source),
            path: Arc::clone(&self.path),
        }
    }
}

impl<T: 'static> std::fmt::Debug for TaskFile<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskFile")
            .field("path", &self.path)
            .field("len", &self.source.len())
            .finish()
    }
}

impl<T: DeserializeOwned + Send + 'static> TaskFile<T> {
    /// Open a task file by its extension: `.jsonl` (or `.ndjson`), or `.parquet` with the
    /// cargo feature `parquet`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DataError> {
        let path = path.as_ref();
        let ext = path.extension().and_then(|e| e.to_str());
        match ext.map(str::to_ascii_lowercase).as_deref() {
            Some("jsonl" | "ndjson") => Self::jsonl(path),
            #[cfg(feature = "parquet")]
            Some("parquet") => Self::parquet(path),
            #[cfg(not(feature = "parquet"))]
            Some("parquet") => Err(DataError::format(
                path,
                "reading Parquet needs the cargo feature `parquet` of ors-runtime (ors-server's \
                 `parquet` feature)",
            )),
            _ => Err(DataError::format(path, "a task file is .jsonl or .parquet")),
        }
    }

    /// Open a JSONL file: one JSON object a line, blank lines skipped.
    pub fn jsonl(path: impl AsRef<Path>) -> Result<Self, DataError> {
        let path = path.as_ref();
        Ok(Self::from_source(JsonlTasks::open(path)?, path))
    }

    /// Open a Parquet file.
    #[cfg(feature = "parquet")]
    pub fn parquet(path: impl AsRef<Path>) -> Result<Self, DataError> {
        let path = path.as_ref();
        Ok(Self::from_source(ParquetTasks::open(path)?, path))
    }
}

impl<T: Send + 'static> TaskFile<T> {
    /// Serve any [`TaskSource`]; `path` names it in errors.
    pub fn from_source(source: impl TaskSource<T>, path: impl AsRef<Path>) -> Self {
        Self {
            source: Arc::new(source),
            path: path.as_ref().into(),
        }
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows in the file.
    pub fn len(&self) -> usize {
        self.source.len()
    }

    /// Whether the file has no rows.
    pub fn is_empty(&self) -> bool {
        self.source.is_empty()
    }

    /// Row `index`, parsed into a task.
    pub async fn get(&self, index: usize) -> Result<T, DataError> {
        let mut rows = self.range(index, index.saturating_add(1)).await?;
        rows.pop().ok_or_else(|| {
            DataError::format(&self.path, format!("the source returned no row {index}"))
        })
    }

    /// Rows `start..stop`, parsed into tasks (read on tokio's blocking pool).
    pub async fn range(&self, start: usize, stop: usize) -> Result<Vec<T>, DataError> {
        check_range(&self.path, start, stop, self.len())?;
        let source = Arc::clone(&self.source);
        tokio::task::spawn_blocking(move || source.read(start, stop))
            .await
            .map_err(|e| DataError::Thread {
                path: self.path.to_path_buf(),
                reason: e.to_string(),
            })?
    }

    /// Rows `start..stop` read on this thread (outside a runtime, or in a blocking tool).
    pub fn range_blocking(&self, start: usize, stop: usize) -> Result<Vec<T>, DataError> {
        check_range(&self.path, start, stop, self.len())?;
        self.source.read(start, stop)
    }
}

impl<T: Clone + Send + Sync + 'static> TaskFile<T> {
    /// Tasks held in memory, served like a file (`name` stands for the path in errors).
    pub fn from_vec(tasks: Vec<T>, name: impl AsRef<Path>) -> Self {
        Self::from_source(MemoryTasks(tasks), name)
    }
}
