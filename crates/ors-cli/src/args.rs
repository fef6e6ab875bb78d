//! Arguments several commands share: which task (`--split`/`--index` or `--task`), `--json`,
//! and the parser of a slice range.

use clap::Args;
use ors_client::{Error, TaskRef};

/// Which task: `--split S --index I`, or `--task JSON`.
#[derive(Args, Debug)]
#[group(required = true, multiple = true)]
pub struct TaskArgs {
    /// Split of the task (with --index).
    #[arg(long, requires = "index", conflicts_with = "task")]
    split: Option<String>,
    /// Index of the task in the split (with --split).
    #[arg(long, requires = "split", conflicts_with = "task")]
    index: Option<i64>,
    /// The task as JSON, instead of --split/--index.
    #[arg(long)]
    task: Option<String>,
}

impl TaskArgs {
    /// The task these arguments name.
    pub fn task_ref(self) -> Result<TaskRef, Error> {
        match (self.task, self.split, self.index) {
            (Some(t), _, _) => {
                let v: serde_json::Value = serde_json::from_str(&t)
                    .map_err(|e| Error::InvalidArgument(format!("--task is not JSON: {e}")))?;
                TaskRef::spec(&v)
            }
            (None, Some(split), Some(index)) => Ok(TaskRef::at(split, index)),
            _ => Err(Error::InvalidArgument(
                "give --task JSON or both --split and --index".into(),
            )),
        }
    }
}

/// `--json` of the commands that print data (`ors conformance` takes `--json FILE` instead).
#[derive(Args, Debug, Clone, Copy)]
pub struct JsonOut {
    /// Print JSON instead of tables, for scripts.
    #[arg(long)]
    pub json: bool,
}

/// `--range A:B`: Python slice bounds, either side may be empty or negative.
pub fn parse_range(s: &str) -> Result<(Option<i64>, Option<i64>), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("expected A:B, got {s:?}"))?;
    let bound = |x: &str| {
        let x = x.trim();
        let parsed = (!x.is_empty()).then(|| x.parse::<i64>());
        parsed
            .transpose()
            .map_err(|_| format!("{x:?} is not an integer"))
    };
    Ok((bound(a)?, bound(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_slice_syntax() {
        assert_eq!(parse_range("2:5"), Ok((Some(2), Some(5))));
        assert_eq!(parse_range(":5"), Ok((None, Some(5))));
        assert_eq!(parse_range("-3:"), Ok((Some(-3), None)));
        assert!(parse_range("5").is_err());
        assert!(parse_range("a:b").is_err());
    }
}
