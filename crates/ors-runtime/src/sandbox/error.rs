//! Why a sandbox could not be made or used ([`SandboxError`]): below the backends and the
//! file preparation that fail with it.

/// Why a sandbox could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Sandboxes cannot be made on this machine (found when
    /// [`Sandboxes::new`](super::Sandboxes::new) checks).
    #[error("sandboxes cannot be made here: {cause}; fix: {fix}")]
    Unavailable {
        /// What is missing or refused.
        cause: String,
        /// How to fix it.
        fix: String,
    },
    /// The settings cannot work (an extra path that does not exist, a bad variable name).
    #[error("invalid sandbox settings: {0}")]
    Settings(String),
    /// A sandbox did not start.
    #[error("the sandbox did not start: {0}")]
    Start(String),
    /// A running sandbox stopped, or did not confirm that a command's processes stopped: its
    /// processes were killed and its workspace is lost; the next command starts a new one.
    #[error(
        "the sandbox stopped ({0}); its processes were killed and its workspace is lost (the \
         next command starts a new sandbox)"
    )]
    Broken(String),
    /// The program asks for what a sandbox does not give.
    #[error("cannot run this in a sandbox: {0}")]
    Refused(String),
    /// A file operation of the workspace failed.
    #[error("{path}: {reason}")]
    File {
        /// The path, as given.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

impl SandboxError {
    /// A file operation on `path` failed for `reason`.
    pub(crate) fn file(path: &str, reason: impl Into<String>) -> Self {
        SandboxError::File {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }
}
