//! Reading trajectory files, the JSON lines `ors eval --out` appends: by `--resume` and by
//! `ors report`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use ors_client::Episode;

/// What identifies an episode in a file: environment, split, task index and sample.
pub type EpisodeKey = (String, String, i64, u32);

/// The key of `e`.
pub fn key(e: &Episode) -> EpisodeKey {
    (e.env.clone(), e.split.clone(), e.index, e.sample)
}

/// The trajectories of a file.
#[derive(Debug, Default)]
pub struct Trajectories {
    /// The last trajectory of each [`EpisodeKey`] (a run resumed after an error appends the
    /// retry, which replaces the failed one), where its key first appeared.
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
    let mut at: HashMap<EpisodeKey, usize> = HashMap::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(e) = serde_json::from_str::<Episode>(&line) else {
            read.unreadable += 1;
            continue;
        };
        match at.get(&key(&e)) {
            Some(&i) => read.episodes[i] = e,
            None => {
                at.insert(key(&e), read.episodes.len());
                read.episodes.push(e);
            }
        }
    }
    Ok(read)
}
