//! Which task a session runs.

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Which task a session runs: given inline, or resolved by the server from split and index.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskRef {
    /// The task itself (`task_spec`), a JSON object.
    Spec(Value),
    /// The task at `index` of `split`.
    At {
        /// The split name.
        split: String,
        /// The index in the split.
        index: i64,
    },
}

impl TaskRef {
    /// The task at `index` of `split`.
    pub fn at(split: impl Into<String>, index: i64) -> Self {
        TaskRef::At {
            split: split.into(),
            index,
        }
    }

    /// A task given inline, from any serializable value that is a JSON object.
    pub fn spec<T: Serialize + ?Sized>(task: &T) -> Result<Self> {
        let v = serde_json::to_value(task)
            .map_err(|e| Error::InvalidArgument(format!("the task is not serializable: {e}")))?;
        TaskRef::Spec(v).checked()
    }

    /// The same task, refused when given inline as anything but a JSON object.
    pub(crate) fn checked(self) -> Result<Self> {
        match self {
            TaskRef::Spec(v) if !v.is_object() => Err(Error::InvalidArgument(
                "a task given inline must be a JSON object".into(),
            )),
            task => Ok(task),
        }
    }
}

impl From<Value> for TaskRef {
    fn from(v: Value) -> Self {
        TaskRef::Spec(v)
    }
}
