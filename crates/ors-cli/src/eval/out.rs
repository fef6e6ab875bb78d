//! The trajectory file of `ors eval --out`: one JSON object per line, appended and flushed as
//! each episode ends (read back by [`crate::trajectories`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ors_client::Episode;

/// The file trajectories are appended to.
pub struct Writer {
    path: PathBuf,
    file: Mutex<File>,
}

impl Writer {
    /// Open `path` for appending (created if missing).
    pub fn append(path: &Path) -> Result<Self, String> {
        let cannot = |e| format!("cannot write {}: {e}", path.display());
        let open = OpenOptions::new().create(true).append(true).open(path);
        let mut file = open.map_err(cannot)?;
        // A line cut short by a crash must not swallow the next trajectory.
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len > 0 && !ends_with_newline(path) {
            file.write_all(b"\n").map_err(cannot)?;
        }
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Append one trajectory as a line, written through to the file at once.
    pub fn write(&self, episode: &Episode) -> Result<(), String> {
        let mut line = serde_json::to_vec(episode).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let mut file = self.file.lock().map_err(|_| "the writer panicked")?;
        // One write of the whole line: a File has no buffer to flush.
        file.write_all(&line)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

fn ends_with_newline(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else {
        return true;
    };
    let mut last = [0u8; 1];
    f.seek(SeekFrom::End(-1)).is_ok() && f.read_exact(&mut last).is_ok() && last[0] == b'\n'
}
