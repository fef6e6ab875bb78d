//! Reading trajectory files, the JSON lines `ors eval --out` appends: by `--resume` and by
//! `ors report`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use ors_client::Episode;

/// The trajectories of a file.
#[derive(Debug, Default)]
pub struct Trajectories {
    /// The last trajectory of each episode (environment, split, task and sample: a run resumed
    /// after an error appends the retry, which replaces the failed one), where it first
    /// appeared.
    pub episodes: Vec<Episode>,
    /// Lines that are not trajectories (a line cut short by a crash, say).
    pub unreadable: usize,
}

/// Read the trajectories of `path`; a file that does not exist has none when `missing_ok`.
pub fn read(path: &Path, missing_ok: bool) -> Result<Trajectories, String> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Trajectories::default())
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut read = Trajectories::default();
    // Where each episode (environment, split, task, sample) is in `read.episodes`.
    let mut at: HashMap<(String, String, i64, u32), usize> = HashMap::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(e) = serde_json::from_str::<Episode>(&line) else {
            read.unreadable += 1;
            continue;
        };
        let key = (e.env.clone(), e.split.clone(), e.index, e.sample);
        // A new episode goes at the end; a retry replaces the one it retries.
        let n = read.episodes.len();
        match *at.entry(key).or_insert(n) {
            i if i < n => read.episodes[i] = e,
            _ => read.episodes.push(e),
        }
    }
    Ok(read)
}
