//! [`WorkDir`]: a working directory for one episode, with the model's paths confined to it.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a path from the model was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Empty, or only `.`.
    #[error("the path is empty")]
    Empty,
    /// An absolute path (`/etc/passwd`, `C:\...`).
    #[error("'{0}' is absolute; give a path relative to the working directory")]
    Absolute(String),
    /// A `..` component.
    #[error("'{0}' goes up with '..'; paths stay inside the working directory")]
    Parent(String),
    /// A symlink on the way leads outside the directory.
    #[error("'{0}' leads outside the working directory through a symbolic link")]
    Escapes(String),
    /// The file system refused to say where the path leads.
    #[error("'{path}': {reason}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        reason: String,
    },
}

/// A fresh directory for one episode: made in the environment's `new`, removed by
/// [`WorkDir::remove`] in `teardown`, or when dropped.
#[derive(Debug)]
pub struct WorkDir {
    path: PathBuf,
    /// The canonical path, what resolved paths are checked against.
    canonical: PathBuf,
    removed: bool,
}

impl WorkDir {
    /// Make a new empty directory under the system's temporary directory, its name starting
    /// with `prefix`.
    pub fn create(prefix: &str) -> std::io::Result<Self> {
        Self::create_in(std::env::temp_dir(), prefix)
    }

    /// Make a new empty directory under `parent`.
    pub fn create_in(parent: impl AsRef<Path>, prefix: &str) -> std::io::Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let parent = parent.as_ref();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = parent.join(format!("{prefix}{}-{n}-{nanos:x}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(Self {
                        canonical: path.canonicalize()?,
                        path,
                        removed: false,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where a path from the model leads inside this directory: relative, without `..`, and
    /// not through a symbolic link that leads out. The file need not exist (so it can be
    /// written), but a link at its place must point inside.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, PathError> {
        let parts = relative_parts(rel)?;
        // Walk the components that exist, following links, and check each step stays inside.
        let mut at = self.canonical.clone();
        for (i, part) in parts.iter().enumerate() {
            let next = at.join(part);
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    // A dangling link escapes too: where would it write? Refuse, not guess.
                    at = match next.canonicalize() {
                        Ok(target) if target.starts_with(&self.canonical) => target,
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            return Err(io_err(rel, e))
                        }
                        _ => return Err(PathError::Escapes(rel.to_owned())),
                    };
                }
                Ok(_) => at = next,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // The rest does not exist yet: no link can lead out from here.
                    at.extend(&parts[i..]);
                    return Ok(at);
                }
                Err(e) => return Err(io_err(rel, e)),
            }
        }
        Ok(at)
    }

    /// Remove the directory and everything in it (also done on drop; this reports errors).
    pub async fn remove(mut self) -> std::io::Result<()> {
        self.removed = true;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || std::fs::remove_dir_all(path))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let removed = (!self.removed).then(|| std::fs::remove_dir_all(&self.path));
        let failed = removed.and_then(Result::err);
        if let Some(e) = failed.filter(|e| e.kind() != std::io::ErrorKind::NotFound) {
            tracing::warn!(dir = %self.path.display(), error = %e, "could not remove a working directory");
        }
    }
}

/// The parts of a path from the model, `.` left out, or why it is refused: empty (or only
/// `.`), absolute, or going up with `..`. Shared by [`WorkDir::resolve`] and the sandbox's
/// file operations, which word the refusal each for its own directory.
pub(crate) fn relative_parts(rel: &str) -> Result<Vec<&OsStr>, PathError> {
    let mut parts = Vec::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(PathError::Parent(rel.to_owned())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(PathError::Absolute(rel.to_owned()))
            }
        }
    }
    if parts.is_empty() {
        return Err(PathError::Empty);
    }
    Ok(parts)
}

fn io_err(rel: &str, e: std::io::Error) -> PathError {
    PathError::Io {
        path: rel.to_owned(),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside() {
        let dir = WorkDir::create("ors-workdir-test-").unwrap();
        let root = dir.canonical.clone();
        assert_eq!(dir.resolve("a.py").unwrap(), root.join("a.py"));
        assert_eq!(dir.resolve("./x/y.txt").unwrap(), root.join("x/y.txt"));
        assert_eq!(dir.resolve("../a"), Err(PathError::Parent("../a".into())));
        assert_eq!(
            dir.resolve("x/../../a"),
            Err(PathError::Parent("x/../../a".into()))
        );
        assert_eq!(
            dir.resolve("/etc/passwd"),
            Err(PathError::Absolute("/etc/passwd".into()))
        );
        assert_eq!(dir.resolve(""), Err(PathError::Empty));
        assert_eq!(dir.resolve("."), Err(PathError::Empty));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", dir.path().join("out")).unwrap();
            std::os::unix::fs::symlink("/nonexistent/x", dir.path().join("dangling")).unwrap();
            std::fs::create_dir(dir.path().join("sub")).unwrap();
            std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("in")).unwrap();
            assert_eq!(
                dir.resolve("out/passwd"),
                Err(PathError::Escapes("out/passwd".into()))
            );
            assert_eq!(dir.resolve("out"), Err(PathError::Escapes("out".into())));
            assert_eq!(
                dir.resolve("dangling"),
                Err(PathError::Escapes("dangling".into()))
            );
            assert_eq!(dir.resolve("in/f").unwrap(), root.join("sub/f"));
        }
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists());
    }
}
